"""What the bench scripts share: where things are, running a command, and
printing / saving a result."""
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("DSC_BIN", os.path.join(REPO, "build", "bin"))
PY = "/usr/bin/python3"


def run(cmd, **kw):
    """stdout of `cmd`; exits with its output when it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}")
    return r.stdout


def token_file(work):
    """The project's own text as byte tokens (models/make_tokens.py)."""
    run([PY, os.path.join(REPO, "models", "make_tokens.py"), "-o", os.path.join(work, "tok")])
    return os.path.join(work, "tok", "train.bin")


def report(text, markdown):
    """Prints the tables and, with --markdown FILE, writes them there."""
    print("\n" + text)
    if markdown:
        with open(markdown, "w") as f:
            f.write(text)
