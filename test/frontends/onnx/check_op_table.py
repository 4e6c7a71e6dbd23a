#!/usr/bin/env python3
"""Checks docs/onnx-ops.md against the importer.

    check_op_table.py OPS_LIST DOC TESTS_DIR

OPS_LIST is `dsc --list-onnx-ops` ("Op FIRST-LAST" lines); DOC's table
(rows "| Op | opsets | ... | test |") must name exactly those operators with
those opsets, in order, each with a test file that exists under TESTS_DIR. Prints what differs and exits 1, or "op table: N
operators" on success.
"""
import os
import sys


def main():
    ops_path, doc_path, tests = sys.argv[1:4]
    listed = [line.split() for line in open(ops_path) if line.strip()]
    ops = [entry[0] for entry in listed]
    opsets = {entry[0]: entry[1] for entry in listed}
    rows = []
    for line in open(doc_path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 5 and cells[0] not in ("Operator", "---"):
            rows.append(cells)
    named = [r[0] for r in rows]
    bad = []
    if named != ops:
        missing = sorted(set(ops) - set(named))
        extra = sorted(set(named) - set(ops))
        bad.append("the table's operators differ from dsc --list-onnx-ops: missing %s, "
                   "not imported %s%s" % (missing, extra,
                                          "" if missing or extra else ", order differs"))
    for op, ops_range, _, _, test in rows:
        if op in opsets and ops_range != opsets[op]:
            bad.append("%s: the table says opsets %s, dsc --list-onnx-ops %s" %
                       (op, ops_range, opsets[op]))
        if not os.path.isfile(os.path.join(tests, test)):
            bad.append("%s: test %s does not exist" % (op, test))
    if bad:
        print("\n".join(bad))
        return 1
    print("op table: %d operators" % len(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
