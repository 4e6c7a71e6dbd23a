#!/usr/bin/python3
"""Runs dsrt across the hosts of a test bed (scripts/testbed.sh) and
checks what a user of several machines relies on (docs/multi-host.md).

    multi_host.py --dsc DSC --dsrt DSRT --testbed scripts/testbed.sh
                  --model GPT.onnx --data TOKENS --work DIR

 * parity: the bundled GPT's dp 4 with ZeRO 2, pp 2 x dp 2 and tp 2 x dp 2
   plans on 2 hosts x 2 slots and on 4 hosts x 1 train 10 steps to the
   bits of the same plan on 4 local ranks (weights and every loss);
 * faults, each timed from the fault to dsrt's exit, with dsrt's last line,
   and followed by a search for what was left on every host:
   a host's ranks killed (SIGKILL), a link cut mid-step, Ctrl-C while a link
   is down, a host unreachable at start, an sshd that refuses, and a
   hostfile that names a host twice.

Prints one line per check; "multi-host: FAIL ..." for each that does not
hold (and exits 1). The bed is always taken down.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

LINK_TIMEOUT = 10   # --comm-timeout of the link cut
# dsrt's exit after a fault: the fault's own detection (--comm-timeout plus
# the ranks' 5 s of asking who is missing, or ssh's keep-alives: 3 x 5 s)
# plus the launcher's grace (10 s, then SIGTERM, 5 s, SIGKILL, 3 s for
# what mpirun left).
GRACE = 18
# After a Ctrl-C (sent 2 s after the cut): 5 s, SIGTERM, 5 s, SIGKILL, 3 s.
SIGNAL_GRACE = 17
# What a lost host runs until its daemon's keep-alives end it (10 + 3 x 5
# s) and its sshd gives the session up (3 x 5 s).
LOST_HOST_CLEAN = 60

failures = []


def fail(what):
    failures.append(what)
    print("multi-host: FAIL " + what, flush=True)


class Bed:
    def __init__(self, script, folder, hosts):
        self.script, self.folder, self.hosts = script, folder, hosts
        subprocess.run([script, "up", str(hosts), folder], check=True)
        self.ssh = ["--ssh_args", "-F " + os.path.join(folder, "ssh_config")]

    def addr(self, k):
        return "198.18.0.%d" % k

    def hostfile(self, name, lines):
        path = os.path.join(self.folder, name)
        with open(path, "w") as f:
            f.write("".join(l + "\n" for l in lines))
        return path

    def run(self, k, *cmd, **kw):
        return subprocess.run([self.script, "run", self.folder, str(k)] + list(cmd), **kw)

    def popen(self, k, cmd, out):
        return subprocess.Popen([self.script, "run", self.folder, str(k)] + cmd,
                                stdout=out, stderr=subprocess.STDOUT)

    def procs(self, k):
        r = subprocess.run([self.script, "procs", self.folder, str(k)],
                           capture_output=True, text=True)
        return [l for l in r.stdout.splitlines() if l.strip()]

    def link_up(self, k, limit=30):
        """Brings host k's link back and waits until host 1 reaches its sshd:
        the neighbour entry host 1 marked failed while the link was down
        answers "No route to host" for a while after the link is up."""
        self.run(k, "ip", "link", "set", "eth0", "up", check=True)
        self.run(1, "ip", "neigh", "flush", "dev", "eth0")
        probe = ("import socket,sys\n"
                 "try: socket.create_connection((sys.argv[1], 22), 1).close()\n"
                 "except OSError: sys.exit(1)")
        deadline = time.time() + limit
        while time.time() < deadline:
            if self.run(1, sys.executable, "-c", probe, self.addr(k)).returncode == 0:
                return True
            time.sleep(0.5)
        return False

    def leftovers(self):
        return {k: self.procs(k) for k in range(1, self.hosts + 1) if self.procs(k)}

    def down(self):
        subprocess.run([self.script, "down", self.folder])


def last_line(path):
    with open(path, errors="replace") as f:
        lines = [l.rstrip("\n") for l in f if l.strip()]
    return lines[-1] if lines else ""


def losses(run):
    with open(os.path.join(run, "metrics.csv")) as f:
        rows = f.read().splitlines()[1:]
    return [r.split(",")[1] for r in rows]


def wait_for_steps(run, n, proc, limit=60, poll=0.2):
    """Until RUN's metrics.csv has n steps (the ranks are training)."""
    t0 = time.time()
    while time.time() - t0 < limit and proc.poll() is None:
        try:
            if len(losses(run)) >= n:
                return True
        except (OSError, IndexError):
            pass
        time.sleep(poll)
    return False


def check_clean(bed, what, lost=None):
    """No process of the run on any host; a lost host gets LOST_HOST_CLEAN
    seconds to end its daemon by itself. Returns the seconds that took."""
    t0 = time.time()
    while True:
        left = bed.leftovers()
        if lost in left and len(left) == 1 and time.time() - t0 < LOST_HOST_CLEAN:
            time.sleep(1)
            continue
        break
    if left:
        for k, ps in left.items():
            fail("%s: left on host %d: %s" % (what, k, "; ".join(p[:120] for p in ps)))
    return time.time() - t0


def parity(args, bed, work):
    plans = {"dp4-zero2": ["--dp", "4", "--zero", "2"],
             "pp2-dp2": ["--pp", "2", "--dp", "2"],
             "tp2-dp2": ["--tp", "2", "--dp", "2"]}
    layouts = {"2 hosts x 2": bed.hostfile("hosts-2x2", [bed.addr(1) + " slots=2",
                                                         bed.addr(2) + " slots=2"]),
               "4 hosts x 1": bed.hostfile("hosts-4x1", [bed.addr(k) + " slots=1"
                                                        for k in range(1, 5)])}
    for name, flags in plans.items():
        plan = os.path.join(work, "plan-" + name)
        subprocess.run([args.dsc, args.model, "-o", plan] + flags, check=True,
                       stdout=subprocess.DEVNULL)
        local = os.path.join(work, "local-" + name)
        # One thread per rank on both sides: the launcher gives a rank
        # cores / ranks on its host, and oneDNN's AVX2 GEMMs round
        # differently with another thread count (its AVX-512 ones did not).
        subprocess.run([args.dsrt, plan, "--data", args.data, "--steps", "10", "--out", local,
                        "--threads", "1"], check=True, stdout=subprocess.DEVNULL)
        for layout, hostfile in layouts.items():
            run = os.path.join(work, "hosts-%s-%s" % (name, layout.replace(" ", "")))
            log = run + ".log"
            with open(log, "w") as out:
                r = bed.run(1, args.dsrt, plan, "--hostfile", hostfile, *bed.ssh, "--data",
                            args.data, "--steps", "10", "--out", run, "--threads", "1",
                            stdout=out, stderr=subprocess.STDOUT)
            if r.returncode != 0:
                fail("%s on %s: dsrt exited %d: %s" % (name, layout, r.returncode, last_line(log)))
                continue
            for line in open(log, errors="replace"):
                if line.startswith("dsrt: note: ") and "tensor-parallel" in line:
                    print("multi-host: %s on %s: %s" % (name, layout, line.strip()), flush=True)
            with open(os.path.join(run, "ranks.txt")) as f:
                hosts = sorted({l.split()[1] for l in f.read().splitlines()[1:]})
            same_weights = subprocess.run(["cmp", "-s", os.path.join(local, "weights.safetensors"),
                                           os.path.join(run, "weights.safetensors")]).returncode == 0
            same_losses = losses(local) == losses(run)
            if same_weights and same_losses and len(losses(run)) == 10:
                print("multi-host: %s on %s (%s): 10 steps, losses and weights bitwise equal "
                      "to 4 local ranks" % (name, layout, ", ".join(hosts)), flush=True)
            else:
                fail("%s on %s: weights %s, losses %s" % (
                    name, layout, "equal" if same_weights else "differ",
                    "equal" if same_losses else "differ"))
            leftover = bed.leftovers()
            if leftover:
                fail("%s on %s: left behind: %s" % (name, layout, leftover))


def fault(args, bed, work, name, hostfile, act, extra=(), steps="100000", lost=None):
    """Starts a long run from host 1, waits until it trains, calls act()
    (the fault), and times dsrt's exit from then."""
    plan = os.path.join(work, "plan-dp4-zero2")
    run = os.path.join(work, "fault-" + "".join(c if c.isalnum() else "-" for c in name))
    log = run + ".log"
    with open(log, "w") as out:
        proc = bed.popen(1, [args.dsrt, plan, "--hostfile", hostfile] + bed.ssh +
                         ["--data", args.data, "--steps", steps, "--out", run] + list(extra), out)
        if not wait_for_steps(run, 2, proc):
            proc.kill()
            proc.wait()
            fail("%s: the run did not start training: %s" % (name, last_line(log)))
            return
        t0 = time.time()
        act(proc)
        try:
            proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            fail("%s: dsrt still ran 300 s after the fault" % name)
            return
    took = time.time() - t0
    text = open(log, errors="replace").read()
    print("multi-host: %s: dsrt exited %d after %.0f s: %s" % (name, proc.returncode, took,
                                                             last_line(log)), flush=True)
    if "Segmentation fault" in text or "Process received signal" in text:
        fail("%s: mpirun's crash output reached the terminal" % name)
    clean = check_clean(bed, name, lost)
    if lost:
        print("multi-host: %s: host %d left nothing behind %.0f s after dsrt's exit" %
              (name, lost, clean), flush=True)
    return took


def kill_ranks_on(bed, k):
    def act(proc):
        r = subprocess.run(["ip", "netns", "pids", bed_ns(bed, k)], capture_output=True,
                           text=True)
        for pid in r.stdout.split():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if os.path.basename(f.read().split(b"\0")[0]) == b"dsrt":
                        os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
    return act


def bed_ns(bed, k):
    import hashlib
    real = os.path.realpath(bed.folder)
    return "dsctb-%s-h%d" % (hashlib.md5(real.encode()).hexdigest()[:8], k)


def faults(args, bed, work):
    two = bed.hostfile("hosts-2x2", [bed.addr(1) + " slots=2", bed.addr(2) + " slots=2"])
    took = fault(args, bed, work, "host 2's ranks killed", two, kill_ranks_on(bed, 2))
    if took is not None and took > GRACE:
        fail("host 2's ranks killed: %.0f s > %d s" % (took, GRACE))

    def cut(proc):
        bed.run(2, "ip", "link", "set", "eth0", "down", check=True)
    took = fault(args, bed, work, "link of host 2 cut", two, cut,
                 extra=["--comm-timeout", str(LINK_TIMEOUT)], lost=2)
    if not bed.link_up(2):
        fail("link of host 2 cut: host 1 cannot reach host 2's sshd 30 s after its link is up")
    if took is not None and took > LINK_TIMEOUT + 5 + GRACE:
        fail("link cut: %.0f s > %d s" % (took, LINK_TIMEOUT + 5 + GRACE))

    def cut_then_interrupt(proc):
        bed.run(2, "ip", "link", "set", "eth0", "down", check=True)
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
    took = fault(args, bed, work, "Ctrl-C with host 2's link down", two, cut_then_interrupt,
                 lost=2)
    if not bed.link_up(2):
        fail("Ctrl-C: host 1 cannot reach host 2's sshd 30 s after its link is up")
    if took is not None and took > SIGNAL_GRACE:
        fail("Ctrl-C: %.0f s > %d s" % (took, SIGNAL_GRACE))

    def start_fault(name, hostfile, limit):
        log = os.path.join(work, "start-%s.log" % name.replace(" ", "-"))
        t0 = time.time()
        with open(log, "w") as out:
            r = bed.run(1, args.dsrt, os.path.join(work, "plan-dp4-zero2"), "--hostfile",
                        hostfile, *bed.ssh, "--data", args.data, "--steps", "10", "--out",
                        os.path.join(work, "start-" + name.replace(" ", "-")), stdout=out,
                        stderr=subprocess.STDOUT)
        took = time.time() - t0
        print("multi-host: %s: dsrt exited %d after %.0f s: %s" % (name, r.returncode, took,
                                                                 last_line(log)), flush=True)
        if r.returncode == 0 or took > limit:
            fail("%s: status %d after %.0f s (limit %d s)" % (name, r.returncode, took, limit))
        check_clean(bed, name)

    # 198.18.0.50 is on the bed's network but no host has it.
    start_fault("host unreachable at start",
                bed.hostfile("hosts-unreachable", [bed.addr(1) + " slots=2",
                                                  "198.18.0.50 slots=2"]), 10 + GRACE)
    sshd = bed.run(3, "cat", "/run/sshd.pid", capture_output=True, text=True).stdout.strip()
    os.kill(int(sshd), signal.SIGTERM)
    time.sleep(0.5)
    start_fault("sshd refusing on host 3",
                bed.hostfile("hosts-refusing", [bed.addr(1) + " slots=2",
                                               bed.addr(3) + " slots=2"]), GRACE)
    bed.run(3, "/usr/sbin/sshd", "-f", os.path.join(bed.folder, "h3", "sshd_config"),
            "-E", os.path.join(bed.folder, "h3", "sshd.log"), check=True)
    start_fault("a host named twice",
                bed.hostfile("hosts-twice", [bed.addr(1) + " slots=2",
                                            bed.addr(2) + " slots=1",
                                            bed.addr(2) + " slots=1"]), 5)


def node_local(args, bed, work):
    """checkpoint.use_node_local_storage: each host saves its ranks' pieces
    (and a copy of the replicated state) into the same path on its own disk
    (the bed's DIR/local); a run resumes from them on the same hosts to the
    uninterrupted run's bits; the hosts' folders copied together resume on
    another layout to the bits of a checkpoint saved into one shared
    folder."""
    cfg = os.path.join(work, "node-local.json")
    with open(cfg, "w") as f:
        f.write('{"train_micro_batch_size_per_gpu": 8, '
                '"checkpoint": {"use_node_local_storage": true}}\n')
    plan = os.path.join(work, "plan-node-local")
    subprocess.run([args.dsc, args.model, "--config", cfg, "--dp", "4", "--zero", "2", "-o", plan],
                   check=True, stdout=subprocess.DEVNULL)
    two = bed.hostfile("hosts-2x2", [bed.addr(1) + " slots=2", bed.addr(2) + " slots=2"])
    local_dir = os.path.join(bed.folder, "local", "ckpt")  # each host's own disk
    def hosts_run(out, *extra):
        log = out + ".log"
        with open(log, "w") as f:
            r = bed.run(1, args.dsrt, plan, "--hostfile", two, *bed.ssh, "--data", args.data,
                        "--steps", "10", "--out", out, *extra, stdout=f, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            fail("node-local: %s: dsrt exited %d: %s" % (os.path.basename(out), r.returncode,
                                                        last_line(log)))
        return r.returncode == 0
    full = os.path.join(work, "nl-full")
    if not hosts_run(full, "--save-dir", local_dir, "--save-interval", "5"):
        return
    for k in (1, 2):
        tag = os.path.join(bed.folder, "h%d" % k, "local", "ckpt", "step-00000005")
        files = sorted(f for f in os.listdir(tag) if f.endswith(".safetensors"))
        print("multi-host: node-local: host %d's step-00000005 holds %s" % (k, ", ".join(files)),
              flush=True)
    resumed = os.path.join(work, "nl-resumed")
    if hosts_run(resumed, "--resume", os.path.join(local_dir, "step-00000005")):
        same = subprocess.run(["cmp", "-s", os.path.join(full, "weights.safetensors"),
                               os.path.join(resumed, "weights.safetensors")]).returncode == 0
        if same and losses(full)[5:] == losses(resumed):
            print("multi-host: node-local: resumed at step 5 on the same hosts, steps 6-10 "
                  "bitwise equal to the uninterrupted run", flush=True)
        else:
            fail("node-local: the resumed run differs from the uninterrupted one")
    # The hosts' folders copied together, and a checkpoint of the same
    # steps saved into one shared folder (4 local ranks): both resume on
    # dp 2 to the same bits.
    merged = os.path.join(work, "nl-merged", "step-00000005")
    os.makedirs(merged)
    for k in (1, 2):
        tag = os.path.join(bed.folder, "h%d" % k, "local", "ckpt", "step-00000005")
        for f in os.listdir(tag):
            shutil.copy(os.path.join(tag, f), merged)
    shared_plan = os.path.join(work, "plan-dp4-zero2")
    shared_dir = os.path.join(work, "nl-shared-ckpt")
    subprocess.run([args.dsrt, shared_plan, "--data", args.data, "--steps", "5", "--out",
                    os.path.join(work, "nl-shared"), "--save-dir", shared_dir], check=True,
                   stdout=subprocess.DEVNULL)
    dp2 = os.path.join(work, "plan-dp2")
    subprocess.run([args.dsc, args.model, "--dp", "2", "--zero", "1", "--micro-batches", "2",
                    "-o", dp2], check=True, stdout=subprocess.DEVNULL)
    outs = []
    for name, ckpt in (("merged", merged), ("shared", os.path.join(shared_dir, "step-00000005"))):
        out = os.path.join(work, "nl-dp2-" + name)
        r = subprocess.run([args.dsrt, dp2, "--data", args.data, "--steps", "10", "--resume", ckpt,
                            "--out", out], capture_output=True, text=True)
        if r.returncode != 0:
            fail("node-local: resume of the %s checkpoint on dp 2: %s" % (name, r.stderr.strip()))
            return
        outs.append(out)
    if subprocess.run(["cmp", "-s", os.path.join(outs[0], "weights.safetensors"),
                       os.path.join(outs[1], "weights.safetensors")]).returncode == 0:
        print("multi-host: node-local: the hosts' folders copied together resume on dp 2 "
              "(ZeRO 1, 2 micro-batches) bitwise as the same checkpoint saved to one folder",
              flush=True)
    else:
        fail("node-local: the merged checkpoint resumes differently from the shared one")


def elastic(args, bed, work):
    """dsrt --max-restarts: dp 4 over 4 hosts (an elasticity section: a
    global batch of 96 on 1 to 4 ranks), host 4's ranks killed after step
    12 with checkpoints every 5 steps; the run goes on from the newest
    checkpoint on the 3 hosts left with PLAN/elastic/dp3, and its steps
    after the restart equal a run of that plan resumed from that
    checkpoint. Nothing is left on any host."""
    cfg = os.path.join(work, "elastic.json")
    with open(cfg, "w") as f:
        f.write('{"elasticity": {"enabled": true, "max_train_batch_size": 96, '
                '"micro_batch_sizes": [8], "max_gpus": 4, "version": 0.1}, '
                '"zero_optimization": {"stage": 2}}\n')
    plan = os.path.join(work, "plan-elastic")
    subprocess.run([args.dsc, args.model, "--config", cfg, "--dp", "4", "-o", plan], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    four = bed.hostfile("hosts-4x1", [bed.addr(k) + " slots=1" for k in range(1, 5)])
    run, ckpt_dir = os.path.join(work, "el-run"), os.path.join(work, "el-ckpt")
    log = run + ".log"
    steps = 60
    with open(log, "w") as out:
        proc = bed.popen(1, [args.dsrt, plan, "--hostfile", four, *bed.ssh, "--data", args.data,
                             "--steps", str(steps), "--threads", "1", "--save-dir", ckpt_dir,
                             "--save-interval", "5", "--max-restarts", "1", "--out", run], out)
        if not wait_for_steps(run, 12, proc, poll=0.01):
            fail("elastic: the run did not reach step 12")
            proc.kill()
            return
        t0 = time.time()
        kill_ranks_on(bed, 4)(proc)
        try:
            proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail("elastic: dsrt still runs 180 s after the kill")
            return
    took = time.time() - t0
    text = open(log, errors="replace").read()
    if proc.returncode != 0:
        fail("elastic: dsrt exited %d: %s" % (proc.returncode, last_line(log)))
        return
    m = re.search(r"^dsrt: restart 1 of 1: (.*from checkpoint (\S+) \(step (\d+)\))$", text, re.M)
    lost = re.search(r"^dsrt: (rank 3 on 198\.18\.0\.4 .*?);", text, re.M)
    if not m or not lost:
        fail("elastic: no lost host or no restart line in the log:\n" + text)
        return
    ckpt, step = m.group(2), int(m.group(3))
    print("multi-host: elastic: %s" % lost.group(1), flush=True)
    print("multi-host: elastic: restart 1 of 1: %s" % m.group(1).replace(plan, "PLAN")
          .replace(ckpt_dir, "CKPT"), flush=True)
    ref = os.path.join(work, "el-ref")
    r = subprocess.run([args.dsrt, os.path.join(plan, "elastic", "dp3"), "--data", args.data,
                        "--steps", str(steps), "--threads", "1", "--resume", ckpt, "--out", ref],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("elastic: the reference run failed: " + r.stderr.strip())
        return
    after = os.path.join(run, "restart-1")
    same_losses = losses(after) == losses(ref) and len(losses(after)) == steps - step
    same_weights = subprocess.run(["cmp", "-s", os.path.join(after, "weights.safetensors"),
                                   os.path.join(ref, "weights.safetensors")]).returncode == 0
    if same_losses and same_weights:
        print("multi-host: elastic: steps %d-%d on 3 hosts bitwise equal to PLAN/elastic/dp3 "
              "resumed from step %d on 3 local ranks; the kill to the end: %.0f s" %
              (step + 1, steps, step, took), flush=True)
    else:
        fail("elastic: after the restart, losses %s, weights %s" % (
            "equal" if same_losses else "differ", "equal" if same_weights else "differ"))
    check_clean(bed, "elastic", lost=4)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsc", required=True)
    ap.add_argument("--dsrt", required=True)
    ap.add_argument("--testbed", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", choices=["parity", "node_local", "elastic", "faults"],
                    help="run one part (the bed is made either way)")
    args = ap.parse_args()
    for a in ("dsc", "dsrt"):
        setattr(args, a, subprocess.run(["sh", "-c", "command -v " + getattr(args, a)],
                                        capture_output=True, text=True).stdout.strip()
                or getattr(args, a))
    args.model, args.data, args.work = (os.path.abspath(p) for p in
                                        (args.model, args.data, args.work))
    os.makedirs(args.work, exist_ok=True)
    bed = Bed(os.path.abspath(args.testbed), os.path.join(args.work, "bed"), 4)
    try:
        for part in (parity, node_local, elastic, faults):
            if args.only in (None, part.__name__):
                part(args, bed, args.work)
    finally:
        bed.down()
    print("multi-host: %s" % ("OK" if not failures else "%d FAILED" % len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
