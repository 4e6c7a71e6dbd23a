"""gone.py SECONDS PIDFILE...: exits 0 once no process of the pid files is
running (zombies count as gone), 1 naming the survivors after SECONDS."""
import os
import sys
import time


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


deadline = time.time() + float(sys.argv[1])
pids = [int(open(p).read().split()[0]) for p in sys.argv[2:]]
while True:
    left = [p for p in pids if alive(p)]
    if not left:
        sys.exit(0)
    if time.time() > deadline:
        print("gone.py: still running: %s" % left)
        sys.exit(1)
    time.sleep(0.1)
