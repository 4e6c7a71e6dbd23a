"""Checks docs/architecture.md's "Pass order" against dsc-train-pipeline.

    check_pass_order.py ARCHITECTURE_MD DUMP...

Each DUMP is `dsc-opt --dump-pass-pipeline` output of the registered
pipeline under some options. Every pass of every dump must be in the
documented list, in its order; every documented pass must appear in some
dump (so the options cover the list). Prints what it compared.
"""
import re
import sys


def documented(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r"<!-- pass-order:begin -->(.*?)<!-- pass-order:end -->", text, re.S)
    if not m:
        sys.exit("check_pass_order: no pass-order block in " + path)
    names = re.findall(r"^\d+\. `([a-z0-9-]+)`", m.group(1), re.M)
    if len(names) != len(set(names)):
        sys.exit("check_pass_order: a pass is listed twice: %s" % names)
    return names


def dumped(path):
    text = open(path, encoding="utf-8").read()
    body = text[text.index("builtin.module(") + len("builtin.module("):]
    # One pass per line: name, then its options in braces.
    return re.findall(r"^\s*([a-z0-9-]+)(?:\{[^}]*\})?,?\s*$", body, re.M)


def main():
    doc = documented(sys.argv[1])
    seen = set()
    for path in sys.argv[2:]:
        passes = dumped(path)
        if not passes:
            sys.exit("check_pass_order: no passes in " + path)
        for name in passes:
            if name not in doc:
                sys.exit("check_pass_order: %s runs %s, which the documented order leaves out"
                         % (path, name))
        positions = [doc.index(n) for n in passes]
        if positions != sorted(positions):
            sys.exit("check_pass_order: %s runs %s, not in the documented order %s"
                     % (path, ", ".join(passes), ", ".join(doc)))
        seen.update(passes)
    missing = [n for n in doc if n not in seen]
    if missing:
        sys.exit("check_pass_order: documented but in no pipeline checked: " + ", ".join(missing))
    print("pass order: %d documented passes, %d pipelines, all in order" % (len(doc),
                                                                            len(sys.argv) - 2))


main()
