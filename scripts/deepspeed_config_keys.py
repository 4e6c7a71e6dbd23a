#!/usr/bin/env python3
"""List every ds_config key that DeepSpeed's (training) config parsing reads.

Usage:
    deepspeed_config_keys.py [--commit SHA] [--where] DEEPSPEED_SOURCE_TREE

DEEPSPEED_SOURCE_TREE is the folder that contains ``deepspeed/``.  Output, one
key per line, sorted:

    dotted.key.path<TAB>type<TAB>default

type is one of int, float, bool, str, dict, list, any; default is JSON text, or
``-`` where DeepSpeed states none (required / presence-only / computed).
Path segments ``*`` stand for user-chosen names (e.g. curriculum metric names);
``[]`` marks the elements of a list of objects.

How it works (standard library only, nothing of DeepSpeed is imported):
a small abstract interpreter over the ``ast`` of DeepSpeed's sources.  The value
that the user passes as ds_config is modelled as the root of a key path; every
``d[K]``, ``d.get(K, default)``, ``K in d``, ``d.pop(K)``, ``get_scalar_param(d,
K, default)`` ... on such a value records ``path + K``.  Values flow through
assignments, calls (with per-argument context), returns, object attributes
(per class), dicts built by DeepSpeed (``output = {}; output[K] = ...``), loops
over constant tuples/dicts, and copies.  Pydantic models (subclasses of
DeepSpeedConfigModel) instantiated as ``Model(**d)`` contribute all their field
names, ``alias=`` names, nested models and field defaults/types.

test/config/deepspeed-keys.tsv is this script's output at DeepSpeed
edaa7221267243c7be7fb49c5d5f5c4fb97b4641 (master, 2026-08-22; the newest
release then, v0.19.5, reads four keys fewer), the commit config/KeyTable.h
names as kDeepSpeedKeysCommit.  To refresh it from a bare clone DIR:

    git --git-dir=DIR archive SHA -- deepspeed | tar -x -C /tmp/ds
    scripts/deepspeed_config_keys.py --commit SHA_SHORT /tmp/ds > test/config/deepspeed-keys.tsv

then set kDeepSpeedKeysCommit to SHA_SHORT and give config/KeyTable.cpp an
entry for each new key (KeyTableTest says which).

Entry points are listed in ENTRY_FUNCTIONS / ENTRY_CLASSES (ds_config_keys/targets.py); everything
else is reached by following the data.  Hand-maintained parts (SUPPLEMENT,
EXCLUDE, OPAQUE, FREE_FORM_NOTES, TYPE_HINTS, FORCE) each cite where DeepSpeed
reads the key.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ds_config_keys.interp import *  # noqa: E402,F401,F403
from ds_config_keys.targets import *  # noqa: E402,F401,F403
from ds_config_keys.values import *  # noqa: E402,F401,F403

# ----------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------


def analyse(root):
    it = Interp(root)
    for _ in range(12):
        it.changed = False
        it.memo = {}
        for modname, name, binds in ENTRY_FUNCTIONS:
            m = it.get_module(modname)
            if m is None:
                sys.exit("cannot find module %s under %s" % (modname, root))
            head, _, meth = name.partition(".")
            vals = it.force(m.globals.get(head, EMPTY))
            selfv = None
            if meth:
                cls = [v for v in vals if isinstance(v, ClassV)]
                selfv = ObjV(cls[0].cls) if cls else None
                vals = it.class_attr(cls[0].cls, meth) if cls else EMPTY
            for v in vals:
                kwargs = {}
                for pn, spec in binds.items():
                    if isinstance(spec, str) and spec.startswith("obj:"):
                        _, mn, cn = spec.split(":")
                        cm = it.get_module(mn)
                        kwargs[pn] = frozenset(ObjV(c.cls) for c in it.force(cm.globals.get(cn, EMPTY))
                                               if isinstance(c, ClassV))
                    else:
                        kwargs[pn] = fs(PathV(tuple(spec)))
                if isinstance(v, FuncV):
                    it.call_function(it.funcs[v.fkey], selfv, [], kwargs, [])
                elif isinstance(v, ClassV):
                    it.instantiate(v.cls, [], kwargs, [], Frame(it, m, None, None, m.globals, True))
            if not vals:
                sys.exit("cannot find %s.%s" % (modname, name))
        classes = []
        for modname, name in ENTRY_CLASSES:
            m = it.get_module(modname)
            for v in it.force(m.globals.get(name, EMPTY)) if m else ():
                if isinstance(v, ClassV):
                    classes.append(v.cls)
        for c in sorted(it.full_classes, key=str):
            if c not in classes:
                classes.append(c)
        for ckey in classes:
            objv = ObjV(ckey)
            ci = it.classes[ckey]
            for name, vals in list(ci.ns.items()):
                for f in it.force(vals):
                    if isinstance(f, FuncV) and f.selfv is None and it.funcs[f.fkey].cls == ckey:
                        fi = it.funcs[f.fkey]
                        if "staticmethod" in fi.decorators:
                            it.call_function(fi, None, [], {}, [])
                        elif "classmethod" in fi.decorators:
                            it.call_function(fi, ClassV(ckey), [], {}, [])
                        else:
                            it.call_function(fi, objv, [], {}, [])
        if os.environ.get("DSCK_DEBUG"):
            sys.stderr.write("iter %d: calls=%d memo=%d classes=%d records=%d full=%d\n" %
                             (_, it.budget, len(it.memo), len(it.classes), len(it.records), len(it.full_classes)))
            for c in sorted(it.full_classes, key=str):
                sys.stderr.write("   full %s\n" % (c, ))
        if not it.changed:
            break
    return it


def merge_entry(path, entries, meta):
    types = [t for t, d, w in entries if t]
    defaults = [d for t, d, w in entries if d is not MISSING]
    typ = None
    # pydantic field types win
    if meta:
        mt = [f["type"] for f in meta if f["type"] not in ("none", )]
        if mt:
            typ = mt[0]
    if typ is None:
        nonany = [t for t in types if t != "any"]
        if nonany:
            s = set(nonany)
            typ = "float" if s == {"int", "float"} else nonany[0]
    if typ is None:
        for d in defaults:
            t = _json_type(json.loads(d))
            if t != "any":
                typ = t
                break
    if typ is None or typ == "any":
        typ = TYPE_HINTS.get(path, typ or "any")
    uniq = []
    for d in defaults:
        if d not in uniq:
            uniq.append(d)
    if not uniq:
        default = "-"
    elif len(uniq) == 1:
        default = uniq[0]
    else:
        nonnull = [d for d in uniq if d != "null"]
        if meta:
            default = uniq[0]
        elif len(nonnull) == 1:
            default = nonnull[0]
        else:
            default = uniq[0]
    if default != "-" and typ == "float":
        v = json.loads(default)
        if isinstance(v, int) and not isinstance(v, bool):
            default = json.dumps(float(v))
    return typ, default


def build_table(it):
    rows = {}
    wheres = {}
    free = set()
    for path, entries in it.records.items():
        segs = list(path)
        # list elements: "a.b[]"
        out = []
        for s in segs:
            if s == "[]" and out:
                out[-1] = out[-1] + "[]"
            else:
                out.append(s)
        if out and out[-1] in ("*", ) or (out and out[-1].endswith("[]")):
            free.add(".".join(out[:-1]) if out[-1] == "*" else ".".join(out))
            continue
        dotted = ".".join(out)
        skip = False
        for o in OPAQUE:
            if dotted.startswith(o + "."):
                skip = True
        if skip or dotted in EXCLUDE:
            continue
        meta = it.model_meta.get(path)
        typ, default = merge_entry(dotted, entries, meta)
        rows[dotted] = (typ, default)
        wheres[dotted] = sorted(set(w for t, d, w in entries))
    for p, t, d in SUPPLEMENT:
        rows[p] = (t, d)
        wheres[p] = ["SUPPLEMENT"]
    for p, (t, d) in FORCE.items():
        if p in rows:
            rows[p] = (t if t is not None else rows[p][0], d if d is not None else rows[p][1])
    # every ancestor of a key is a section
    for dotted in list(rows):
        parts = dotted.split(".")
        for i in range(1, len(parts)):
            anc = ".".join(parts[:i])
            if anc not in rows:
                rows[anc] = ("dict", "-")
                wheres[anc] = ["(parent)"]
            elif rows[anc][0] == "any":
                rows[anc] = ("dict", rows[anc][1])
    return rows, wheres, free


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tree", help="DeepSpeed source tree (folder containing deepspeed/)")
    ap.add_argument("--commit", help="print the header comment line for this commit")
    ap.add_argument("--where", action="store_true", help="append a column saying where each key is read")
    a = ap.parse_args(argv)
    root = os.path.abspath(a.tree)
    if not os.path.isdir(os.path.join(root, "deepspeed")):
        sys.exit("%s has no deepspeed/ folder" % root)
    sys.setrecursionlimit(20000)
    it = analyse(root)
    rows, wheres, free = build_table(it)
    out = sys.stdout
    if a.commit:
        out.write(HEADER.format(sha=a.commit) + "\n")
    out.write("# columns: key<TAB>type<TAB>default (JSON; - = none/computed);"
              " '*' = a user-chosen name, '[]' = each element of a list\n")
    for k in sorted(FREE_FORM_NOTES):
        out.write("# free-form: %s (%s)\n" % (k, FREE_FORM_NOTES[k]))
    for k in sorted(free):
        if k and k not in FREE_FORM_NOTES and not any(k.startswith(o + ".") or k == o for o in OPAQUE):
            out.write("# user-named keys under: %s (written as %s.*)\n" % (k, k))
    for k in sorted(rows):
        t, d = rows[k]
        line = "%s\t%s\t%s" % (k, t, d)
        if a.where:
            line += "\t" + ", ".join(wheres.get(k, []))
        out.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
