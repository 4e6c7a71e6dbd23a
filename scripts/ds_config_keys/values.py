"""The abstract values the interpreter computes with (all hashable), and the
small helpers over them and over frames.
"""

import ast
import json
import os
import sys

from .targets import *  # noqa: F401,F403

# ----------------------------------------------------------------------------
# Abstract values (all hashable)
# ----------------------------------------------------------------------------


class V:
    __slots__ = ()


class Const(V):
    __slots__ = ("v", "_k")

    def __init__(self, v):
        self.v = v
        self._k = (type(v).__name__, repr(v))

    def __eq__(self, o):
        return isinstance(o, Const) and self._k == o._k

    def __hash__(self):
        return hash(self._k)

    def __repr__(self):
        return "Const(%r)" % (self.v, )


def _simple(name, *fields):

    class _C(V):
        __slots__ = fields

        def __init__(self, *a):
            for f, x in zip(fields, a):
                object.__setattr__(self, f, x)

        def _key(self):
            return tuple(getattr(self, f) for f in fields)

        def __eq__(self, o):
            return type(o) is type(self) and self._key() == o._key()

        def __hash__(self):
            return hash((name, self._key()))

        def __repr__(self):
            return "%s%r" % (name, self._key())

    _C.__name__ = name
    return _C


PathV = _simple("PathV", "p")  # a dict (or list) at key path p of the ds_config
WildV = _simple("WildV", "p")  # a key of the dict at path p (loop variable)
DictV = _simple("DictV", "site")  # a dict DeepSpeed builds (allocation site)
TupleV = _simple("TupleV", "items")  # tuple of frozensets
ObjV = _simple("ObjV", "cls")  # instance of an analysed class
ClassV = _simple("ClassV", "cls")
FuncV = _simple("FuncV", "fkey", "selfv")
ModV = _simple("ModV", "name")
ExtV = _simple("ExtV", "name")  # something outside the analysed tree
SuperV = _simple("SuperV", "cls", "selfv")
BMeth = _simple("BMeth", "name", "recv")  # bound dict method on PathV/DictV
LazyV = _simple("LazyV", "mod", "name")  # from mod import name (unresolved)

EMPTY = frozenset()
MISSING = object()


def fs(*vals):
    return frozenset(vals)


class Frame:

    def __init__(self, interp, module, func, selfv, env, module_level=False):
        self.module = module
        self.func = func
        self.selfv = selfv
        self.returns = set()
        self.module_level = module_level
        self.cls_info = None
        self.in_default = module_level


def _join_into(env, envs):
    keys = set()
    for e in envs:
        keys |= set(e)
    for k in keys:
        s = set()
        for e in envs:
            s |= e.get(k, EMPTY)
        env[k] = frozenset(s)


def _wild_ok(p):
    """Bound the key paths: at most one user-named/list segment, depth < 10."""
    return len(p) < 9 and sum(1 for x in p if x in ("*", "[]")) < 1


def _const_elem(x):
    return Const(x)


def _freeze(v):
    if v is MISSING:
        return MISSING
    try:
        return json.dumps(v, sort_keys=True)
    except (TypeError, ValueError):
        return MISSING


def _json_type(v):
    if v is MISSING or v is None:
        return "any"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, (list, tuple)):
        return "list"
    if isinstance(v, dict):
        return "dict"
    return "any"


def _callee_name(n):
    if isinstance(n, ast.Name):
        return n.id
    if isinstance(n, ast.Attribute):
        return n.attr
    return None


def _binop(op, a, b):
    import operator
    ops = {
        ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.BitOr: operator.or_,
        ast.BitAnd: operator.and_, ast.LShift: operator.lshift, ast.RShift: operator.rshift
    }
    if isinstance(op, ast.Mod) and isinstance(a, str):
        raise ValueError("format")
    if isinstance(op, ast.Pow) and abs(b) > 256:
        raise ValueError("big")
    return ops[type(op)](a, b)


# Every name, the underscored helpers too, for the modules that build on this one.
__all__ = [n for n in dir() if not n.startswith("__")]
