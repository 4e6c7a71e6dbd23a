#!/usr/bin/env python3
"""Checks docs/aten-ops.md against the .pt2 frontend's op table.

    check_aten_table.py OPS_LIST DOC

OPS_LIST is `dsc --list-aten-ops`; DOC's table (rows "| `aten.x.y` | ... |")
must name exactly those overloads, in order. Prints what differs and exits
1, or "aten table: N overloads" on success.
"""
import sys


def main():
    ops_path, doc_path = sys.argv[1:3]
    ops = [line.strip() for line in open(ops_path) if line.strip()]
    named = []
    for line in open(doc_path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 2:
            named.append(cells[0].strip("`"))
    if named != ops:
        print("the table differs from dsc --list-aten-ops: missing %s, not imported %s%s" %
              (sorted(set(ops) - set(named)), sorted(set(named) - set(ops)),
               "" if set(ops) != set(named) else ", order differs"))
        return 1
    print("aten table: %d overloads" % len(ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
