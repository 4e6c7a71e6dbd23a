#!/usr/bin/env python3
"""Runs the README's "Training a model" commands as written, with fewer steps.

    readme_examples.py README.md REPO BIN WORK [--steps N]

Every indented command line of that section (up to the next "## "
heading) runs in order with bash in WORK, which gets `build/bin` (a link to
BIN, the binaries under test), `models` and `tools` (links into REPO), so
that the commands' relative paths mean what they mean in a checkout.
The only change made to a command is its step count: `--steps K` becomes
`--steps N` (default 3). A command that fails stops the script with its
output. Prints one line per command and a summary.
"""
import argparse
import os
import re
import subprocess
import sys


def commands(readme):
    text = open(readme).read()
    start = text.index("\n## Training a model\n")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end >= 0 else len(text)]
    out = []
    for line in section.splitlines():
        if line.startswith("    ") and line.strip():
            out.append(line.strip())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("readme")
    ap.add_argument("repo")
    ap.add_argument("bin")
    ap.add_argument("work")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    cmds = commands(a.readme)
    if not cmds:
        print("readme_examples: FAIL: no commands in the README's \"Training a model\"")
        return 1
    os.makedirs(os.path.join(a.work, "build"), exist_ok=True)
    links = {os.path.join("build", "bin"): os.path.abspath(a.bin),
             "models": os.path.join(os.path.abspath(a.repo), "models"),
             "tools": os.path.join(os.path.abspath(a.repo), "tools")}
    for name, target in links.items():
        path = os.path.join(a.work, name)
        if not os.path.lexists(path):
            os.symlink(target, path)
    for k, cmd in enumerate(cmds, 1):
        run = re.sub(r"--steps \d+", "--steps %d" % a.steps, cmd)
        p = subprocess.run(["bash", "-euo", "pipefail", "-c", run], cwd=a.work,
                           capture_output=True, text=True)
        shown = cmd.split("#")[0].strip()
        if p.returncode != 0:
            print("readme_examples: FAIL: command %d exited with %d: %s\n%s%s"
                  % (k, p.returncode, shown, p.stdout[-3000:], p.stderr[-3000:]))
            return 1
        print("readme_examples: ok %2d: %s" % (k, shown))
    print("readme_examples: OK: %d commands ran as written (--steps %d)" % (len(cmds), a.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
