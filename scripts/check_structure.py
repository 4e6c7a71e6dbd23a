#!/usr/bin/env python3
"""Checks the structural facts of the house (issue 43) and prints each.

    scripts/check_structure.py [--require FACT ...] [REPO]

Facts, each PASS or FAIL with what was measured:
  compiler-includes  no file under dialects/, frontends/, passes/, target/ or tools/dsc
                     includes a runtime/ header; the rooms both sides use
                     (io/, plan/, config/) include neither side
  plan-no-json       plan.proto has no JSON field, and no file under runtime/
                     parses a ds_config text (its settings are typed plan
                     data; Plan.ds_config is an opaque record); only the run
                     policy (runtime/train/RunSetup.cpp) reads the user's
                     run-time --config file
  cuda-enum          at most 2 mentions of the CUDA device enum
                     (Device::Cuda) outside the CUDA backend (runtime/
                     backends/cuda, runtime/kernels/cuda)
  driver-lines       tools/dsrt/dsrt.cpp at most 400 lines, tools/dsc/dsc.cpp
                     at most 450
  file-lines         no non-test source file over 1,500 lines

(That a plan with an unknown field is refused is behaviour, held by
test/runtime/dsrt/plan-errors.test and PlanValidationTest.)

Exit status 1 when a fact named by --require fails (all of them without
--require), so a test can hold the facts reached so far while the others
are worked on.
"""
import argparse
import os
import re
import sys

SOURCE = (".cpp", ".h", ".cu", ".cuh", ".td", ".proto")


def sources(repo, folders):
    for folder in folders:
        for root, _, files in os.walk(os.path.join(repo, folder)):
            for f in files:
                if f.endswith(SOURCE):
                    yield os.path.join(root, f)


def includes(path, prefix):
    pattern = re.compile(r'#include "(%s[^"]*)"' % re.escape(prefix))
    with open(path, errors="replace") as f:
        return [m.group(1) for m in pattern.finditer(f.read())]


def rel(repo, path):
    return os.path.relpath(path, repo)


def compiler_includes(repo):
    bad = []
    for path in sources(repo, ["dialects", "frontends", "passes", "target", "tools/dsc"]):
        bad += ["%s -> %s" % (rel(repo, path), h) for h in includes(path, "runtime/")]
    for path in sources(repo, ["io", "plan", "config"]):
        for prefix in ("runtime/", "dialects/", "passes/", "frontends/", "tools/"):
            bad += ["%s -> %s" % (rel(repo, path), h) for h in includes(path, prefix)]
    return not bad, ("no compiler or room file includes the other side" if not bad
                     else "%d includes: %s" % (len(bad), "; ".join(bad[:8])))


def plan_no_json(repo):
    text = open(os.path.join(repo, "plan", "plan.proto")).read()
    fields = re.findall(r"^\s*(?:optional |repeated )?\w+\s+(\w*json\w*)\s*=", text,
                        re.MULTILINE | re.IGNORECASE)
    # The runtime takes its settings from the plan's typed messages: no
    # file under runtime/ parses a ds_config text (the plan's record), and
    # only the run policy reads the user's run-time --config file.
    parsers = []
    for path in sources(repo, ["runtime"]):
        with open(path, errors="replace") as f:
            text = f.read()
        if re.search(r"\bparseDsConfig\s*\(", text) or (
                re.search(r"\bloadDsConfig\s*\(", text)
                and rel(repo, path) != os.path.join("runtime", "train", "RunSetup.cpp")):
            parsers.append(rel(repo, path))
    ok = not fields and not parsers
    what = []
    if fields:
        what.append("JSON fields: " + ", ".join(fields))
    if parsers:
        what.append("runtime files parsing a ds_config: " + ", ".join(parsers))
    return ok, "; ".join(what) or "no JSON field; no runtime file parses a ds_config text"


def cuda_enum(repo):
    hits = []
    for path in sources(repo, ["runtime", "tools", "io", "plan", "config"]):
        if any(os.sep + os.path.join(part, "cuda") + os.sep in path
               for part in ("kernels", "backends")):
            continue
        with open(path, errors="replace") as f:
            n = len(re.findall(r"Device::Cuda\b", f.read()))
        if n:
            hits.append((rel(repo, path), n))
    total = sum(n for _, n in hits)
    return total <= 2, "%d mentions of Device::Cuda outside the CUDA backend (%s)" % (
        total, ", ".join("%s %d" % h for h in hits) or "none")


def count_lines(path):
    with open(path, errors="replace") as f:
        return sum(1 for _ in f)


def driver_lines(repo):
    dsrt = count_lines(os.path.join(repo, "tools", "dsrt", "dsrt.cpp"))
    dsc = count_lines(os.path.join(repo, "tools", "dsc", "dsc.cpp"))
    return dsrt <= 400 and dsc <= 450, "dsrt.cpp %d lines (<= 400), dsc.cpp %d (<= 450)" % (
        dsrt, dsc)


def file_lines(repo):
    big = []
    for path in sources(repo, ["dialects", "frontends", "passes", "target", "tools", "runtime",
                               "io", "plan", "config"]):
        n = count_lines(path)
        if n > 1500:
            big.append("%s %d" % (rel(repo, path), n))
    return not big, "no source file over 1,500 lines" if not big else "over 1,500: " + ", ".join(big)


FACTS = {"compiler-includes": compiler_includes, "plan-no-json": plan_no_json,
         "cuda-enum": cuda_enum, "driver-lines": driver_lines, "file-lines": file_lines}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--require", action="append", choices=sorted(FACTS))
    a = ap.parse_args()
    required = set(a.require or FACTS)
    failed = False
    for name, fact in FACTS.items():
        ok, what = fact(os.path.abspath(a.repo))
        print("%s: %s: %s" % (name, "PASS" if ok else "FAIL", what))
        failed |= not ok and name in required
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
