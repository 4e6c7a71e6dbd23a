#!/usr/bin/env python3
"""csv_rows.py FILE: fails unless FILE is a CSV of complete rows (a header,
then rows with as many fields, the file ending in a newline); prints the
number of rows and the last row's first field."""
import sys

text = open(sys.argv[1]).read()
assert text.endswith("\n"), "the last row is cut"
lines = text.splitlines()
width = len(lines[0].split(","))
for n, line in enumerate(lines[1:], 2):
    assert len(line.split(",")) == width, f"line {n} has {len(line.split(','))} fields: {line!r}"
print(f"csv_rows: {len(lines) - 1} complete rows of {width} fields, the last of step "
      f"{lines[-1].split(',')[0]}")
