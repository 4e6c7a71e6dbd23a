#!/usr/bin/env python3
"""The checkpoint kill test: dsrt runs SIGKILLed at random moments while
they save, and what each kill leaves checked.

    checkpoint_kill.py --dsrt DSRT --plan PLAN [--plan PLAN2 ...]
                       --data TOKENS --work DIR [--trials 20] [--seed 1]
                       [--steps 24] [--verbose]

Each plan first trains uninterrupted (the reference metrics) and once with
a checkpoint after every step (its metrics must be the reference's; when
its first and last checkpoints appear calibrates the kills). Then each
trial (the plans in turn; --keep 2 on every other trial of a plan;
asynchronous and synchronous saving in turn) trains with `--save-dir D
--save-interval 1` and is SIGKILLed at a moment drawn from a seeded RNG
within the span of its saves: either then, or as soon as a save's partial
folder exists after it plus a random part of a step, so that kills land in
every phase of a save (the moments are reproducible; where they land
depends on the machine's timing). A plan of several ranks loses rank 0,
rank 1 (RUN/ranks/R.pid), its launcher (mpirun then stops the ranks), or
every process at once; a one-rank plan its process. Then:

  * every process of the run (dsrt is started as a session leader) is gone
    within HANG_LIMIT: no hang;
  * D holds only dsrt's names: its marker, `latest`, step-N tags, and what
    a kill may leave of a save: .step-N.partial, .step-N.deleting (a tag
    --keep was removing), latest.tmp.PID, and the marker's temporary
    .dsrt-checkpoints.tmp.PID (killed while marking a new folder);
  * every step-N tag is a complete checkpoint (check_checkpoint.py's
    checks, its index's step N, one file per rank, nothing else), `latest`
    names one, and it names the newest, or the one before it when the kill
    fell between the newest's rename (a save's commit) and the update of
    `latest`; without --keep every step up to the newest is there, with
    --keep K the K newest are;
  * `dsrt PLAN --resume D --steps N+1` resumes from the newest tag N and
    runs step N+1 with the reference's loss, lr and gradient norm, bitwise
    (the text of metrics.csv);
  * the next run into the same folder (`--resume D --save-dir D`, the way
    a crashed job is restarted) saves steps N+1 and N+2 with the
    reference's metrics, leaves none of a kill's leftovers behind, makes
    `latest` name N+2, and keeps a user's files in D (notes.txt, step-notes/);
  * nothing outside the runs' own folders was removed or changed (a file
    beside the save folders, the plans, the data).

Prints one summary line (trials, kills inside a save, resumes OK) and exits
1 on any failure, printing each.
"""
import argparse
import contextlib
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_checkpoint  # noqa: E402

TAG = re.compile(r"^step-(\d{8})$")
PARTIAL = re.compile(r"^\.step-(\d{8})\.partial$")
LATEST_TMP = re.compile(r"^latest\.tmp\.\d+$")
# The marker's temporary: a kill while the run marks a new folder.
MARKER = ".dsrt-checkpoints"
MARKER_TMP = re.compile(r"^\.dsrt-checkpoints\.tmp\.\d+$")
DELETING = re.compile(r"^\.step-(\d{8})\.deleting$")
HANG_LIMIT = 30.0  # seconds a killed run may take to stop entirely


def tag(step):
    return "step-%08d" % step


class Plan:
    def __init__(self, path):
        self.path = path
        with open(os.path.join(path, "manifest.txt")) as f:
            text = f.read()
        # dsrt's launcher starts dp ranks through mpirun when dp > 1.
        m = re.search(r"^data parallel:\s+(\d+) ranks", text, re.M)
        self.dp = int(m.group(1)) if m else 1
        self.name = os.path.basename(os.path.normpath(path))


def read_metrics(run):
    """{step: the row's text without step_time_s} of RUN/metrics.csv."""
    path = os.path.join(run, "metrics.csv")
    with open(path) as f:
        lines = f.read().splitlines()
    head = lines[0].split(",")
    keep = [i for i, h in enumerate(head) if h != "step_time_s"]
    rows = {}
    for line in lines[1:]:
        cells = line.split(",")
        rows[int(cells[0])] = ",".join(cells[i] for i in keep)
    return rows


def snapshot(paths):
    """(size, mtime_ns) of every file under `paths`."""
    seen = {}
    for top in paths:
        if os.path.isfile(top):
            st = os.stat(top)
            seen[top] = (st.st_size, st.st_mtime_ns)
            continue
        for root, _, files in os.walk(top):
            for f in files:
                p = os.path.join(root, f)
                st = os.stat(p)
                seen[p] = (st.st_size, st.st_mtime_ns)
    return seen


def session_pids(sid):
    """The live processes of session `sid` (the run's launcher, mpirun and
    the ranks: dsrt is started as a session leader)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            pids.append(int(d))
    return pids


def kill(pids):
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def check_tag(folder, ranks):
    """None if `folder` is a complete checkpoint, else why not."""
    out = io.StringIO()
    old = sys.argv
    sys.argv = ["check_checkpoint.py", folder]
    try:
        with contextlib.redirect_stdout(out):
            check_checkpoint.main()
    except SystemExit as e:
        if e.code:
            return out.getvalue().strip() or "check_checkpoint exited %s" % e.code
    except Exception as e:  # a missing or unreadable file
        return "%s: %s" % (type(e).__name__, e)
    finally:
        sys.argv = old
    index = json.load(open(os.path.join(folder, "index.json")))
    step = int(TAG.match(os.path.basename(folder)).group(1))
    if index.get("step") != step or index.get("tag") != tag(step):
        return "index.json says step %s (tag %s)" % (index.get("step"), index.get("tag"))
    files = sorted(f for f in os.listdir(folder) if f.startswith("rank-"))
    want = ["rank-%05d.safetensors" % r for r in range(ranks)]
    if files != want:
        return "rank files %s, not %s" % (files, want)
    extra = set(os.listdir(folder)) - set(want) - {"index.json"}
    if extra:
        return "unexpected files %s" % sorted(extra)
    return None


class Runner:
    def __init__(self, args):
        self.dsrt = os.path.abspath(args.dsrt)
        self.data = os.path.abspath(args.data)
        self.work = os.path.abspath(args.work)
        self.steps = args.steps

    def cmd(self, plan, *extra):
        return [self.dsrt, plan.path, "--data", self.data] + [str(x) for x in extra]

    def run(self, plan, *extra, timeout=120):
        """Runs dsrt to its end; (returncode, its output)."""
        p = subprocess.run(self.cmd(plan, *extra), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout,
                           start_new_session=True)
        return p.returncode, p.stdout


def ls(d):
    try:
        return sorted(os.listdir(d))
    except FileNotFoundError:
        return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsrt", required=True)
    ap.add_argument("--plan", action="append", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    R = Runner(args)
    plans = [Plan(os.path.abspath(p)) for p in args.plan]
    os.makedirs(R.work, exist_ok=True)
    failures = []

    def fail(where, msg):
        failures.append("%s: %s" % (where, msg))
        print("checkpoint_kill: FAIL: %s: %s" % (where, msg))

    def log(msg):
        if args.verbose:
            print(msg)

    # A file beside every save folder and the plans and data: none of them
    # is the run's to remove or change.
    sentinel = os.path.join(R.work, "keep-me.txt")
    with open(sentinel, "w") as f:
        f.write("not dsrt's\n")
    untouched = [sentinel, R.data] + [p.path for p in plans]
    before = snapshot(untouched)

    # The reference metrics (uninterrupted, no checkpoints; 3 steps longer
    # than a trial: the restarts run past it), and a run saving after every
    # step: its metrics must be the same, and the times its first and last
    # checkpoints appear calibrate the kills.
    ref, span, step_s = {}, {}, {}
    for plan in plans:
        out = os.path.join(R.work, "ref-" + plan.name)
        rc, text = R.run(plan, "--steps", R.steps + 3, "--out", out)
        if rc != 0:
            print(text)
            sys.exit("checkpoint_kill: the reference run of %s failed" % plan.name)
        ref[plan.name] = read_metrics(out)
        out = os.path.join(R.work, "cal-" + plan.name)
        ck = out + "-ck"
        first_tag, last_tag = os.path.join(ck, tag(1)), os.path.join(ck, tag(R.steps))
        t0 = time.monotonic()
        t_first = t_last = None
        with open(out + ".log", "w") as log_file:
            proc = subprocess.Popen(R.cmd(plan, "--steps", R.steps, "--save-dir", ck,
                                          "--save-interval", 1, "--out", out),
                                    stdout=log_file, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            while proc.poll() is None:
                if t_first is None and os.path.exists(first_tag):
                    t_first = time.monotonic() - t0
                if t_last is None and os.path.exists(last_tag):
                    t_last = time.monotonic() - t0
                time.sleep(0.001)
        if t_last is None and os.path.exists(last_tag):
            t_last = time.monotonic() - t0
        if t_first is None:
            t_first = t_last
        if proc.returncode != 0 or t_last is None:
            print(open(out + ".log").read())
            sys.exit("checkpoint_kill: the saving run of %s failed" % plan.name)
        for s, row in read_metrics(out).items():
            if row != ref[plan.name][s]:
                fail("saving run of " + plan.name, "step %d is '%s', the reference '%s'"
                     % (s, row, ref[plan.name][s]))
        # The saves happen between the first and the last tag's appearance
        # (a step and a save each); the kills are spread over that span and
        # a little before it.
        step_s[plan.name] = (t_last - t_first) / (R.steps - 1)
        span[plan.name] = (t_first - 2 * step_s[plan.name], t_last)
        log("calibration %s: the first checkpoint after %.3fs, the last after %.3fs, a step "
            "and a save %.4fs" % (plan.name, t_first, t_last, step_s[plan.name]))
        shutil.rmtree(out + "-ck")

    inside = in_keep = lagging = resumed = restarted = before_first = stale_tmp = 0
    t_start = time.monotonic()
    for trial in range(args.trials):
        plan = plans[trial % len(plans)]
        keep = 2 if (trial // len(plans)) % 2 else 0
        save_mode = "sync" if (trial // (2 * len(plans))) % 2 else "async"
        where = "trial %d (%s, %s%s)" % (trial, plan.name, save_mode, ", --keep 2" if keep else "")
        tdir = os.path.join(R.work, "trial-%02d" % trial)
        ck = os.path.join(tdir, "ck")
        run = os.path.join(tdir, "run")
        os.makedirs(tdir)
        # When to kill: a random moment of the saves' span, or the first
        # moment after it that a save is under way (its partial folder
        # exists) plus a random part of a step; which process.
        mode = rng.choice(["save", "time"])
        delay = rng.uniform(*span[plan.name])
        into_save = rng.uniform(0.0, 1.0) * step_s[plan.name]
        victim = rng.choice(["rank 0", "rank 1", "launcher", "all"]) if plan.dp > 1 else "all"
        extra = ["--steps", R.steps, "--save-dir", ck, "--save-interval", 1, "--save-mode",
                 save_mode, "--out", run]
        if keep:
            extra += ["--keep", keep]
        proc = subprocess.Popen(R.cmd(plan, *extra), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        t0 = time.monotonic()
        while time.monotonic() - t0 < delay and proc.poll() is None:
            time.sleep(0.001)
        if mode == "save":
            while proc.poll() is None and time.monotonic() - t0 < 2 * span[plan.name][1]:
                if any(PARTIAL.match(n) for n in ls(ck)):
                    break
                time.sleep(0.0002)
            t1 = time.monotonic()
            while time.monotonic() - t1 < into_save:
                pass
        if proc.poll() is not None:
            what = "finished before the kill"
        elif victim == "all":
            # The machine lost: every process of the run at once.
            kill([p for p in session_pids(proc.pid) if p != proc.pid] + [proc.pid])
            t1 = time.monotonic()
            while session_pids(proc.pid) and time.monotonic() - t1 < 1:
                kill(session_pids(proc.pid))  # one mpirun was starting
            what = "killed every process at %.3fs" % (time.monotonic() - t0)
        elif victim == "launcher":
            # mpirun then stops the ranks (a SIGTERM when its parent dies).
            kill([proc.pid])
            what = "killed the launcher at %.3fs" % (time.monotonic() - t0)
        else:
            pidfile = os.path.join(run, "ranks", "%s.pid" % victim.split()[1])
            while not os.path.exists(pidfile) and proc.poll() is None:
                time.sleep(0.001)
            try:
                with open(pidfile) as f:
                    pid = int(f.read().split()[0])
                if pid in session_pids(proc.pid):
                    kill([pid])
            except (OSError, ValueError, IndexError):
                pass
            what = "killed %s at %.3fs" % (victim, time.monotonic() - t0)
        # No hang: the launcher, mpirun and every rank stop. (The launcher
        # is reaped only then: until then its pid, the session's id, cannot
        # be reused.)
        t1 = time.monotonic()
        while session_pids(proc.pid) and time.monotonic() - t1 < HANG_LIMIT:
            time.sleep(0.01)
        left = session_pids(proc.pid)
        if left:
            fail(where, "processes %s still run %gs after %s" % (left, HANG_LIMIT, what))
            kill(left)
        proc.wait()

        # What the kill left.
        names = ls(ck)
        tags = sorted(int(TAG.match(n).group(1)) for n in names if TAG.match(n))
        partials = [n for n in names if PARTIAL.match(n)]
        tmps = [n for n in names if LATEST_TMP.match(n)]
        deleting = [n for n in names if DELETING.match(n)]
        odd = [n for n in names if not (TAG.match(n) or PARTIAL.match(n) or LATEST_TMP.match(n)
                                         or DELETING.match(n) or MARKER_TMP.match(n)
                                         or n in (".dsrt-checkpoints", "latest"))]
        if odd:
            fail(where, "the save folder holds names dsrt does not write: %s" % odd)
        if partials:
            inside += 1
        if tmps:
            stale_tmp += 1
        if deleting:
            in_keep += 1
        complete = []
        for s in tags:
            why = check_tag(os.path.join(ck, tag(s)), plan.dp)
            if why:
                fail(where, "%s is not a complete checkpoint (after %s): %s" % (tag(s), what, why))
            else:
                complete.append(s)
        latest = None
        if os.path.exists(os.path.join(ck, "latest")):
            with open(os.path.join(ck, "latest")) as f:
                text = f.read()
            m = TAG.match(text.rstrip("\n"))
            if not m or text != m.group(0) + "\n":
                fail(where, "latest holds %r, not one tag" % text)
            elif int(m.group(1)) not in complete:
                fail(where, "latest names %s, which is not a complete checkpoint" % m.group(0))
            else:
                latest = int(m.group(1))
        newest = max(complete) if complete else None
        if newest is not None and newest != latest:
            # Killed between the rename of the tag (the save's commit) and
            # the new `latest`: the tag is the newest checkpoint all the same.
            lagging += 1
            if newest != (latest or 0) + 1:
                fail(where, "the newest checkpoint is %s but latest names %s"
                     % (tag(newest), tag(latest) if latest else "nothing"))
        if not keep and newest is not None and tags != list(range(1, newest + 1)):
            fail(where, "without --keep the tags are %s, not steps 1-%d" % (tags, newest))
        if keep and newest is not None:
            want = set(range(max(1, newest - keep + 1), newest + 1))
            if not want <= set(tags):
                fail(where, "--keep %d removed checkpoints it keeps: tags %s" % (keep, tags))
            if len(tags) > keep + 1:
                fail(where, "--keep %d left %d tags: %s" % (keep, len(tags), tags))
        log("%s: %s; tags %s, latest %s, left %s" % (where, what, tags, latest,
                                                     partials + deleting + tmps))
        if newest is None and not partials and what.startswith("killed"):
            before_first += 1

        # The newest complete checkpoint resumes, exactly.
        ok = True
        if newest is not None:
            out = os.path.join(tdir, "resume")
            rc, text = R.run(plan, "--resume", ck, "--steps", newest + 1, "--out", out)
            if rc != 0:
                fail(where, "--resume %s (newest %s, latest %s) failed: %s"
                     % (ck, tag(newest), tag(latest) if latest else None, text.strip()))
                ok = False
            else:
                rows = read_metrics(out)
                if not re.search(r"dsrt: resuming \S*/%s after step %d " % (tag(newest), newest),
                                 text):
                    said = [l for l in text.splitlines() if "resuming" in l] or [text.strip()]
                    fail(where, "--resume %s (latest %s) did not resume %s: %s"
                         % (ck, tag(latest) if latest else None, tag(newest), said[0]))
                    ok = False
                elif list(rows) != [newest + 1] or rows[newest + 1] != ref[plan.name][newest + 1]:
                    fail(where, "resumed from %s: metrics %s, the reference's step %d '%s'"
                         % (tag(newest), rows, newest + 1, ref[plan.name][newest + 1]))
                    ok = False
            resumed += ok

        # Restarted into the same folder (with a user's files in it now),
        # the run saves again: no stale partial folder or temporary gets in
        # the way, and none is left; the user's files stay.
        if ok and os.path.isdir(ck):
            # A kill between the folder's creation and its marker leaves it
            # unmarked: a user's files put there would make it a folder
            # dsrt did not make, which it rightly refuses; so they go only
            # into a marked folder.
            users = {}
            if os.path.exists(os.path.join(ck, MARKER)):
                with open(os.path.join(ck, "notes.txt"), "w") as f:
                    f.write("a user's notes\n")
                os.makedirs(os.path.join(ck, "step-notes"))
                with open(os.path.join(ck, "step-notes", "plot.txt"), "w") as f:
                    f.write("not a checkpoint\n")
                users = snapshot([os.path.join(ck, "notes.txt"), os.path.join(ck, "step-notes")])
            first = (newest or 0) + 1
            out = os.path.join(tdir, "restart")
            extra = ["--save-dir", ck, "--save-interval", 1, "--save-mode", save_mode,
                     "--steps", first + 1, "--out", out]
            if newest is not None:
                extra += ["--resume", ck]
            if keep:
                extra += ["--keep", keep]
            rc, text = R.run(plan, *extra)
            names = ls(ck)
            if rc != 0:
                fail(where, "restarting into %s (after %s; tags %s, latest %s, partial %s) "
                     "failed: %s" % (ck, what, tags, latest, partials, text.strip()))
            else:
                rows = read_metrics(out)
                want = {s: ref[plan.name][s] for s in (first, first + 1)}
                if rows != want:
                    fail(where, "restarted run: metrics %s, the reference's %s" % (rows, want))
                left = [n for n in names if PARTIAL.match(n) or DELETING.match(n)
                        or LATEST_TMP.match(n) or MARKER_TMP.match(n)]
                if left:
                    fail(where, "after the restarted run completed, %s remain" % left)
                with open(os.path.join(ck, "latest")) as f:
                    if f.read() != tag(first + 1) + "\n":
                        fail(where, "after the restarted run latest is not %s" % tag(first + 1))
                now = sorted(int(TAG.match(n).group(1)) for n in names if TAG.match(n))
                want = [first, first + 1] if keep else list(range(1, first + 2))
                if now != want:
                    fail(where, "after the restarted run the tags are %s, not %s" % (now, want))
                for s in (first, first + 1):
                    why = check_tag(os.path.join(ck, tag(s)), plan.dp)
                    if why:
                        fail(where, "the restarted run's %s: %s" % (tag(s), why))
                restarted += 1
            if snapshot(list(users)) != users:
                fail(where, "the restarted run removed or changed a user's file in %s" % ck)
        shutil.rmtree(tdir)

    after = snapshot(untouched)
    for p, v in before.items():
        if p not in after:
            fail("files", "%s was removed" % p)
        elif after[p] != v:
            fail("files", "%s was changed" % p)
    elapsed = time.monotonic() - t_start
    print("checkpoint_kill: %d trials (%s): %d kills inside a save (its partial folder left), "
          "%d between a tag's rename and latest, %d inside --keep's removal, %d before the first "
          "save, %d left latest's temporary; %d resumes OK, %d restarts into the same folder OK; "
          "%d failures; %.1fs" % (args.trials, ", ".join(p.name for p in plans), inside, lagging,
                                  in_keep, before_first, stale_tmp, resumed, restarted,
                                  len(failures), elapsed))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
