#!/usr/bin/python3
"""Text files -> flat uint16 byte-level token files (train.bin, val.bin).

    /usr/bin/python3 models/make_tokens.py -o DIR [FILE_OR_DIR ...]

Every byte is one token (ids 0..255), so a GPT trained on it is exported
with ``--vocab 256``. Files are read in sorted path order (directories
recursively), each followed by one newline byte, and concatenated; the last
``--val-fraction`` (default 10%) of the tokens becomes val.bin, the rest
train.bin, both little-endian uint16 (numpy.fromfile(path, '<u2')).

Default sources, present on every Debian machine without downloads: this
repository's README.md, docs/*.md and source files (C++, TableGen, MLIR,
Python, CMake, shell; not build/ or runs/), plus /usr/share/common-licenses/*.
Symlinks that resolve to a file already read are skipped. Only the standard
library is used.
"""

import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_EXT = (".cpp", ".h", ".hpp", ".td", ".mlir", ".py", ".sh", ".txt", ".md",
              ".onnxtxt", ".test", ".cmake", ".in")
SKIP_DIRS = {".git", "build", "runs", "shared", "__pycache__", "node_modules"}


def default_sources():
    out = [os.path.join(REPO, "README.md")]
    docs = os.path.join(REPO, "docs")
    if os.path.isdir(docs):
        out += [os.path.join(docs, f) for f in sorted(os.listdir(docs))
                if f.endswith(".md")]
    for top in sorted(os.listdir(REPO)):
        p = os.path.join(REPO, top)
        if top in SKIP_DIRS or top.startswith(".") or top == "docs":
            continue
        if os.path.isdir(p):
            out.append(p)
        elif top.endswith(SOURCE_EXT) and top != "README.md":
            out.append(p)
    lic = "/usr/share/common-licenses"
    if os.path.isdir(lic):
        out.append(lic)
    return out


def expand(paths, source_filter):
    """Files in order: each argument in turn, directories walked sorted."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs
                                 if d not in SKIP_DIRS and not d.startswith("."))
                for n in sorted(names):
                    if source_filter and not (n.endswith(SOURCE_EXT)
                                              or n == "CMakeLists.txt"
                                              or root.startswith("/usr/share/common-licenses")):
                        continue
                    files.append(os.path.join(root, n))
        elif os.path.isfile(p):
            files.append(p)
        else:
            sys.exit("make_tokens: no such file or directory: %s" % p)
    seen, unique = set(), []
    for f in files:
        r = os.path.realpath(f)
        if r in seen or not os.path.isfile(r):
            continue
        seen.add(r)
        unique.append(f)
    return unique


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="*",
                    help="files or directories (default: the repository's docs and "
                         "sources plus /usr/share/common-licenses)")
    ap.add_argument("-o", "--output", required=True, metavar="DIR")
    ap.add_argument("--val-fraction", type=float, default=0.1)
    ap.add_argument("-v", "--verbose", action="store_true", help="list the files read")
    a = ap.parse_args(argv)
    if not 0.0 <= a.val_fraction < 1.0:
        ap.error("--val-fraction must be in [0, 1)")

    files = expand(a.sources or default_sources(), source_filter=not a.sources)
    data = bytearray()
    for f in files:
        with open(f, "rb") as fh:
            data += fh.read()
        data += b"\n"
        if a.verbose:
            print(f, file=sys.stderr)
    n = len(data)
    if n < 2:
        sys.exit("make_tokens: no text read")
    n_val = int(n * a.val_fraction)
    # byte b -> little-endian uint16 b: the byte, then a zero high byte.
    tokens = bytearray(2 * n)
    tokens[0::2] = data
    split = 2 * (n - n_val)
    os.makedirs(a.output, exist_ok=True)
    with open(os.path.join(a.output, "train.bin"), "wb") as fh:
        fh.write(tokens[:split])
    with open(os.path.join(a.output, "val.bin"), "wb") as fh:
        fh.write(tokens[split:])
    print("make_tokens: %d files, %d tokens (train %d, val %d), vocab 256 -> %s"
          % (len(files), n, n - n_val, n_val, a.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
