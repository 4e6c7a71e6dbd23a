#!/usr/bin/python3
"""dsrt's collectives across hosts against within one host, beside the
link's TCP throughput measured in the same run (issue 48).

    /usr/bin/python3 bench/multi_host.py [--markdown FILE]

As root, on a test bed of 2 hosts (scripts/testbed.sh: network namespaces
joined by a bridge, docs/multi-host.md):
- dsrt's MPI all-reduce, all-gather and a message between 2 ranks
  (dsrt_calibrate_bench comm, 4 KiB to 64 MiB), once with both ranks on
  one host (OpenMPI's shared-memory transport) and once with one rank on
  each host (TCP over the bed's link);
- the link itself: one TCP stream of 1 GiB from host 1 to host 2, and the
  same over host 1's loopback.
Each collective is fitted as time = latency + bytes / rate (nccl-tests' bus
bandwidth, as bench/calibrate.py does). The bed's link is the kernel's veth
and bridge, a memory copy: it measures dsrt and OpenMPI's TCP path, not a
real network's wire.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import BIN, report  # noqa: E402
from calibrate import fit, lscpu  # noqa: E402

TESTBED = os.path.join(HERE, "..", "scripts", "testbed.sh")
TCP_BYTES = 1 << 30

SINK = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5201)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); n = 0
while True:
    b = c.recv(1 << 20)
    if not b: break
    n += len(b)
c.sendall(str(n).encode()); c.close()
"""

SOURCE = r"""
import socket, sys, time
n = int(sys.argv[2]); chunk = b"\0" * (1 << 20)
c = socket.create_connection((sys.argv[1], 5201)); t0 = time.perf_counter()
for _ in range(n >> 20): c.sendall(chunk)
c.shutdown(socket.SHUT_WR); got = int(c.recv(64)); dt = time.perf_counter() - t0
assert got == n, got
print(dt)
"""


def on(bed, k, cmd, **kw):
    return subprocess.run([TESTBED, "run", bed, str(k)] + cmd, check=True, text=True,
                          capture_output=True, **kw).stdout


def tcp(bed, server_host, addr):
    """Seconds for one TCP stream of TCP_BYTES from host 1 to `addr`."""
    sink = subprocess.Popen([TESTBED, "run", bed, str(server_host), sys.executable, "-c", SINK,
                             addr], stdout=subprocess.PIPE, text=True)
    assert sink.stdout.readline().strip() == "ready"
    secs = float(on(bed, 1, [sys.executable, "-c", SOURCE, addr, str(TCP_BYTES)]))
    sink.wait()
    return secs


def comm(bed, hosts, ssh_config):
    cmd = ["mpirun", "--allow-run-as-root", "-np", "2", "--host", hosts,
           "--mca", "plm_rsh_agent", "ssh -F " + ssh_config, "-x", "OMP_NUM_THREADS=1",
           os.path.join(BIN, "dsrt_calibrate_bench"), "comm"]
    out = on(bed, 1, cmd)
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", help="also write the tables here")
    args = ap.parse_args()
    check = subprocess.run([TESTBED, "check"], capture_output=True, text=True)
    if check.returncode:
        sys.exit("multi_host: " + check.stdout.strip())
    work = tempfile.mkdtemp(prefix="dsc-multihost-")
    bed = os.path.join(work, "bed")
    subprocess.run([TESTBED, "up", "2", bed], check=True)
    try:
        cfg = os.path.join(bed, "ssh_config")
        print("== TCP, one stream of 1 GiB", flush=True)
        link = tcp(bed, 2, "198.18.0.2")
        loop = tcp(bed, 1, "127.0.0.1")
        print("== dsrt_calibrate_bench comm: 2 ranks on one host, then one on each", flush=True)
        within = comm(bed, "198.18.0.1:2", cfg)
        across = comm(bed, "198.18.0.1:1,198.18.0.2:1", cfg)
    finally:
        subprocess.run([TESTBED, "down", bed])
    info = lscpu()
    lines = ["Measured %s on %s (%s cores), 2 test-bed hosts, OpenMPI (TCP across hosts, "
             "shared memory within one), 1 thread per rank:" %
             (time.strftime("%Y-%m-%d"), info.get("Model name", "?"), info.get("CPU(s)", "?")),
             "",
             "| link | TCP, one stream | GB/s |",
             "|---|---|---|",
             "| host 1 -> host 2 (veth + bridge) | %.2f s for 1 GiB | %.2f |" % (link,
                                                                              TCP_BYTES / link / 1e9),
             "| host 1 loopback | %.2f s for 1 GiB | %.2f |" % (loop, TCP_BYTES / loop / 1e9),
             "",
             "| collective | bytes | within a host (us) | across hosts (us) | across / within |",
             "|---|---|---|---|---|"]
    for w, a in zip(within, across):
        assert (w["kind"], w["bytes"]) == (a["kind"], a["bytes"])
        lines.append("| %s | %d | %.1f | %.1f | %.2f |" % (
            w["kind"], w["bytes"], w["seconds"] * 1e6, a["seconds"] * 1e6,
            a["seconds"] / w["seconds"]))
    lines += ["", "| collective | within: bus GB/s, latency us | across: bus GB/s, latency us |",
              "|---|---|---|"]
    for kind, factor in (("all_reduce", 1.0), ("all_gather", 0.5), ("send", 1.0)):
        row = []
        for rows in (within, across):
            lat, rate = fit([(r["bytes"], r["seconds"]) for r in rows if r["kind"] == kind])
            row.append("%.2f, %.1f" % (factor * rate / 1e9, lat * 1e6))
        lines.append("| %s | %s | %s |" % (kind, row[0], row[1]))
    report("\n".join(lines) + "\n", args.markdown)


if __name__ == "__main__":
    main()
