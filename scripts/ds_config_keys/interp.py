"""The abstract interpreter over DeepSpeed's sources: modules, functions and
classes, and Interp, which follows the ds_config value through them.
"""

import ast
import json
import os
import sys

from .targets import *  # noqa: F401,F403
from .values import *  # noqa: F401,F403

# ----------------------------------------------------------------------------
# Modules, functions, classes
# ----------------------------------------------------------------------------


class ModuleInfo:

    def __init__(self, name, path, is_pkg):
        self.name = name
        self.path = path
        self.is_pkg = is_pkg
        self.globals = {}
        self.assign_nodes = {}
        self.loaded = False
        self.tree = None


class FuncInfo:

    def __init__(self, key, node, module, cls, closure):
        self.key = key
        self.node = node
        self.module = module
        self.cls = cls  # class key or None
        self.closure = closure  # list of enclosing envs (dicts)
        self.decorators = set()
        for d in getattr(node, "decorator_list", []):
            if isinstance(d, ast.Name):
                self.decorators.add(d.id)
            elif isinstance(d, ast.Attribute):
                self.decorators.add(d.attr)
        self.qualname = key[1]


class ClassInfo:

    def __init__(self, key, node, module):
        self.key = key
        self.node = node
        self.module = module
        self.bases = []  # list of frozensets
        self.ns = {}
        self.ann = []  # (name, annotation node, value node) in order


class Interp:

    def __init__(self, root):
        self.root = root
        self.modules = {}
        self.funcs = {}
        self.classes = {}
        self.records = {}  # path -> list of (type, default, where)
        self.attr_store = {}  # (cls, attr) -> frozenset
        self.dict_entries = {}  # site -> {key: frozenset}
        self.dict_bases = {}  # site -> set(paths)
        self.full_classes = set()
        self.memo = {}
        self.stack = []
        self.loading = set()
        self.resolving = set()
        self.model_applied = set()
        self.model_meta = {}
        self.changed = False
        self.budget = 0

    # ---------------------------------------------------------------- modules
    def module_file(self, name):
        parts = name.split(".")
        base = os.path.join(self.root, *parts)
        if os.path.isfile(base + ".py"):
            return base + ".py", False
        if os.path.isfile(os.path.join(base, "__init__.py")):
            return os.path.join(base, "__init__.py"), True
        return None, False

    def get_module(self, name):
        if name in self.modules:
            m = self.modules[name]
            if not m.loaded and name not in self.loading:
                self.load_module(m)
            return m
        if not (name == "deepspeed" or name.startswith("deepspeed.")):
            return None
        path, is_pkg = self.module_file(name)
        if path is None:
            return None
        m = ModuleInfo(name, path, is_pkg)
        self.modules[name] = m
        self.load_module(m)
        return m

    def load_module(self, m):
        self.loading.add(m.name)
        try:
            with open(m.path, encoding="utf-8") as f:
                src = f.read()
            try:
                m.tree = ast.parse(src, m.path)
            except SyntaxError:
                m.tree = ast.Module(body=[], type_ignores=[])
            frame = Frame(self, m, None, None, m.globals, module_level=True)
            self.exec_block(m.tree.body, m.globals, frame)
        finally:
            m.loaded = True
            self.loading.discard(m.name)

    def resolve_relative(self, m, level, modname):
        if level == 0:
            return modname
        parts = m.name.split(".")
        if not m.is_pkg:
            parts = parts[:-1]
        if level > 1:
            parts = parts[:len(parts) - (level - 1)]
        base = ".".join(parts)
        return base + ("." + modname if modname else "")

    def import_name(self, modname, name):
        """Value of `from modname import name`."""
        m = self.get_module(modname)
        if m is None:
            return fs(ExtV(modname + "." + name))
        if name in m.globals:
            return self.force(m.globals[name])
        sub = self.get_module(modname + "." + name)
        if sub is not None:
            return fs(ModV(sub.name))
        return EMPTY

    def force(self, vals):
        out = set()
        for v in vals:
            if isinstance(v, LazyV):
                if v in self.resolving:
                    continue
                self.resolving.add(v)
                try:
                    out |= self.import_name(v.mod, v.name)
                finally:
                    self.resolving.discard(v)
            else:
                out.add(v)
        return frozenset(out)

    # --------------------------------------------------------------- classes
    def mro(self, ckey, seen=None):
        seen = seen if seen is not None else set()
        if ckey in seen or ckey not in self.classes:
            return []
        seen.add(ckey)
        out = [ckey]
        for bset in self.classes[ckey].bases:
            for b in self.force(bset):
                if isinstance(b, ClassV):
                    for c in self.mro(b.cls, seen):
                        if c not in out:
                            out.append(c)
        return out

    def base_ext_names(self, ckey, seen=None):
        seen = seen if seen is not None else set()
        out = set()
        if ckey in seen or ckey not in self.classes:
            return out
        seen.add(ckey)
        for bset in self.classes[ckey].bases:
            for b in self.force(bset):
                if isinstance(b, ExtV):
                    out.add(b.name)
                elif isinstance(b, ClassV):
                    out |= self.base_ext_names(b.cls, seen)
        return out

    def is_model(self, ckey):
        for c in self.mro(ckey):
            if c[1] == "DeepSpeedConfigModel":
                return True
        return False

    def is_enum(self, ckey):
        return any(n.endswith("Enum") for n in self.base_ext_names(ckey))

    def class_attr(self, ckey, name):
        for c in self.mro(ckey):
            ns = self.classes[c].ns
            if name in ns:
                return self.force(ns[name])
        return None

    def obj_attr(self, objv, name):
        out = set()
        for c in self.mro(objv.cls):
            out |= self.attr_store.get((c, name), EMPTY)
        ca = self.class_attr(objv.cls, name)
        if ca:
            for v in ca:
                if isinstance(v, FuncV) and v.selfv is None:
                    fi = self.funcs[v.fkey]
                    if "staticmethod" in fi.decorators:
                        out.add(v)
                    elif "property" in fi.decorators or "cached_property" in fi.decorators:
                        out |= self.call_function(fi, objv, [], {}, [])
                    else:
                        out.add(FuncV(v.fkey, objv))
                else:
                    out.add(v)
        return frozenset(out)

    def store_attr(self, objv, name, vals):
        k = (objv.cls, name)
        old = self.attr_store.get(k, EMPTY)
        new = old | vals
        if new != old:
            self.attr_store[k] = new
            self.changed = True

    # ----------------------------------------------------------------- dicts
    def dict_store(self, site, key, vals):
        ent = self.dict_entries.setdefault(site, {})
        old = ent.get(key, EMPTY)
        new = old | vals
        if new != old:
            ent[key] = new
            self.changed = True

    def dict_add_base(self, site, path):
        b = self.dict_bases.setdefault(site, set())
        if path not in b:
            b.add(path)
            self.changed = True
        # entries present when user keys are merged in are defaults of them
        for k, vals in list(self.dict_entries.get(site, {}).items()):
            if isinstance(k, str):
                consts = [v for v in vals if isinstance(v, Const)]
                if len(consts) == 1 and len(vals) == 1:
                    self.record(path + (k, ), default=consts[0].v)
                elif any(isinstance(v, DictV) for v in vals):
                    self.record(path + (k, ), typ="dict")

    # --------------------------------------------------------------- records
    def record(self, path, typ=None, default=MISSING, where=None):
        if not path or not all(isinstance(p, str) for p in path):
            return
        ent = (typ, _freeze(default), where or self.cur_where())
        lst = self.records.setdefault(path, [])
        if ent not in lst:
            lst.append(ent)
            self.changed = True

    def cur_where(self):
        for fk in reversed(self.stack):
            fi = self.funcs.get(fk[0])
            if fi is None:
                continue
            if fi.qualname.split(".")[-1] in ("get_scalar_param", "get_list_param", "get_dict_param"):
                continue
            return "%s:%s" % (os.path.relpath(fi.module.path, self.root), fi.qualname)
        return "?"

    # ------------------------------------------------------------ interesting
    def interesting(self, vals, depth=0):
        for v in vals:
            if isinstance(v, (PathV, WildV)):
                return True
            if isinstance(v, DictV):
                if self.dict_bases.get(v.site):
                    return True
                if depth < 2:
                    for ev in self.dict_entries.get(v.site, {}).values():
                        if self.interesting(ev, depth + 1):
                            return True
            if isinstance(v, TupleV) and depth < 3:
                for it in v.items:
                    if self.interesting(it, depth + 1):
                        return True
            if isinstance(v, ObjV) and depth < 2:
                if v.cls in self.full_classes:
                    return True
                for (c, a), av in list(self.attr_store.items()):
                    if c == v.cls and self.interesting(av, depth + 1):
                        return True
        return False

    # ----------------------------------------------------------------- calls
    def call_function(self, fi, selfv, args, kwargs, starkw):
        node = fi.node
        key = (fi.key, selfv, tuple(args), tuple(sorted(kwargs.items(), key=lambda x: x[0])), tuple(starkw))
        if key in self.memo:
            return self.memo[key]
        if key in self.stack or len(self.stack) > 40:
            return EMPTY
        self.budget += 1
        self.memo[key] = EMPTY
        self.stack.append(key)
        try:
            env = {}
            a = node.args
            params = list(a.posonlyargs) + list(a.args)
            pos = list(args)
            if selfv is not None and params and "staticmethod" not in fi.decorators:
                env[params[0].arg] = fs(selfv)
                params = params[1:]
            ndef = len(a.defaults)
            for i, p in enumerate(params):
                if i < len(pos):
                    env[p.arg] = pos[i]
                elif p.arg in kwargs:
                    env[p.arg] = kwargs[p.arg]
                else:
                    di = i - (len(params) - ndef)
                    if 0 <= di < ndef:
                        env[p.arg] = self.eval_default(fi, a.defaults[di])
                    else:
                        env[p.arg] = EMPTY
            for i, p in enumerate(a.kwonlyargs):
                if p.arg in kwargs:
                    env[p.arg] = kwargs[p.arg]
                elif a.kw_defaults[i] is not None:
                    env[p.arg] = self.eval_default(fi, a.kw_defaults[i])
                else:
                    env[p.arg] = EMPTY
            if a.vararg:
                env[a.vararg.arg] = EMPTY
            if a.kwarg:
                extra = {k: v for k, v in kwargs.items() if k not in env}
                site = ("kwargs", fi.key)
                for k, v in extra.items():
                    self.dict_store(site, k, v)
                env[a.kwarg.arg] = fs(DictV(site)) | frozenset(v for s in starkw for v in s)
            frame = Frame(self, fi.module, fi, selfv, env)
            if isinstance(node, ast.Lambda):
                res = self.eval(node.body, env, frame)
            else:
                self.exec_block(node.body, env, frame)
                res = frozenset(frame.returns)
            self.memo[key] = res
            return res
        finally:
            self.stack.pop()

    def eval_default(self, fi, node):
        frame = Frame(self, fi.module, None, None, fi.module.globals, module_level=True)
        env = fi.module.globals
        return self.eval(node, env, frame)

    def instantiate(self, ckey, args, kwargs, starkw, frame):
        bases = self.base_ext_names(ckey)
        # pp_int(5e8) and friends: subclasses of int/str/float on a constant
        for b in ("builtins.int", "builtins.float", "builtins.str"):
            if b in bases and args:
                out = set()
                for v in args[0]:
                    if isinstance(v, Const):
                        try:
                            out.add(Const({"builtins.int": int, "builtins.float": float,
                                           "builtins.str": str}[b](v.v)))
                        except Exception:
                            pass
                return frozenset(out)
        if self.is_enum(ckey):
            return EMPTY
        objv = ObjV(ckey)
        if self.is_model(ckey):
            for s in starkw:
                self.apply_model(ckey, s)
            for name, vals in kwargs.items():
                self.apply_model_kw(ckey, name, vals)
            return fs(objv)
        all_args = list(args) + list(kwargs.values()) + list(starkw)
        if any(self.interesting(a) for a in all_args):
            if ckey not in self.full_classes:
                self.full_classes.add(ckey)
                self.changed = True
        init = self.class_attr(ckey, "__init__")
        if init:
            for f in init:
                if isinstance(f, FuncV):
                    self.call_function(self.funcs[f.fkey], objv, args, kwargs, starkw)
        return fs(objv)

    # ----------------------------------------------------------------- models
    def model_fields(self, ckey):
        fields = {}
        for c in reversed(self.mro(ckey)):
            if c[1] in ("DeepSpeedConfigModel", ):
                continue
            ci = self.classes[c]
            for name, ann, value in ci.ann:
                if name.startswith("_") or name == "model_config":
                    continue
                fields[name] = self.field_info(ci, name, ann, value)
        return fields

    def field_info(self, ci, name, ann, value):
        m = ci.module
        frame = Frame(self, m, None, None, ci.ns, module_level=True)
        env = dict(m.globals)
        env.update(ci.ns)
        typ, subs, dictlike = self.ann_type(ann, m)
        aliases = []
        deprecated = False
        new_param = None
        default = MISSING
        if isinstance(value, ast.Call) and _callee_name(value.func) == "Field":
            if value.args:
                default = self.const_of(self.eval(value.args[0], env, frame))
            for kw in value.keywords:
                if kw.arg == "default":
                    default = self.const_of(self.eval(kw.value, env, frame))
                elif kw.arg == "default_factory":
                    fv = kw.value
                    if isinstance(fv, ast.Lambda):
                        default = self.const_of(self.eval(fv.body, env, frame))
                        if isinstance(fv.body, ast.Call) and _callee_name(fv.body.func) in ("list", "dict"):
                            if fv.body.args:
                                default = self.const_of(self.eval(fv.body.args[0], env, frame))
                            else:
                                default = [] if _callee_name(fv.body.func) == "list" else {}
                    elif subs:
                        default = {}
                elif kw.arg == "alias":
                    a = self.const_of(self.eval(kw.value, env, frame))
                    if isinstance(a, str):
                        aliases.append(a)
                elif kw.arg == "json_schema_extra" and isinstance(kw.value, ast.Dict):
                    for k, v in zip(kw.value.keys, kw.value.values):
                        if isinstance(k, ast.Constant) and k.value == "deprecated":
                            deprecated = bool(getattr(v, "value", False))
                        if isinstance(k, ast.Constant) and k.value == "new_param":
                            new_param = getattr(v, "value", None)
        elif value is not None:
            vals = self.eval(value, env, frame)
            default = self.const_of(vals)
            if default is MISSING and any(isinstance(v, (ObjV, DictV)) for v in vals):
                default = {}
        else:
            default = MISSING  # required field
        return dict(name=name, type=typ, subs=subs, dictlike=dictlike, aliases=aliases, default=default,
                    deprecated=deprecated, new_param=new_param, cls=ci.key)

    def const_of(self, vals):
        vals = [v for v in vals]
        if len(vals) == 1 and isinstance(vals[0], Const):
            return vals[0].v
        return MISSING

    def ann_type(self, node, m, depth=0):
        """-> (type, [submodel class keys], dictlike)"""
        if node is None or depth > 5:
            return "any", [], False
        if isinstance(node, ast.Constant):
            if node.value is None:
                return "none", [], False
            if isinstance(node.value, str):
                try:
                    return self.ann_type(ast.parse(node.value, mode="eval").body, m, depth + 1)
                except SyntaxError:
                    return "any", [], False
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.union_types([self.ann_type(node.left, m, depth + 1), self.ann_type(node.right, m, depth + 1)])
        if isinstance(node, ast.Subscript):
            head = _callee_name(node.value)
            sl = node.slice
            elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
            if head in ("Optional", "Union"):
                return self.union_types([self.ann_type(e, m, depth + 1) for e in elts])
            if head in ("List", "list", "Sequence", "Set", "set", "Tuple", "tuple", "FrozenSet", "Iterable"):
                return "list", [], False
            if head in ("Dict", "dict", "Mapping", "MutableMapping"):
                return "dict", [], True
            if head == "Literal":
                ts = set()
                for e in elts:
                    v = getattr(e, "value", None)
                    ts.add(_json_type(v))
                return (ts.pop() if len(ts) == 1 else "any"), [], False
            if head == "Annotated":
                return self.ann_type(elts[0], m, depth + 1)
            return "any", [], False
        name = _callee_name(node)
        simple = {
            "int": "int", "float": "float", "bool": "bool", "str": "str", "dict": "dict", "list": "list",
            "tuple": "list", "set": "list", "Dict": "dict", "List": "list", "Tuple": "list", "Any": "any",
            "object": "any", "Path": "str", "PositiveInt": "int", "NonNegativeInt": "int", "PositiveFloat": "float",
        }
        if isinstance(node, ast.Name):
            frame = Frame(self, m, None, None, m.globals, module_level=True)
            vals = self.force(m.globals.get(node.id, EMPTY))
            for v in vals:
                if isinstance(v, ClassV):
                    if self.is_model(v.cls):
                        return "dict", [v.cls], False
                    if self.is_enum(v.cls):
                        bases = self.base_ext_names(v.cls)
                        if "builtins.int" in bases:
                            return "int", [], False
                        if "builtins.str" in bases:
                            return "str", [], False
                        ts = set()
                        for k, cv in self.classes[v.cls].ns.items():
                            for c in self.force(cv):
                                if isinstance(c, Const):
                                    ts.add(_json_type(c.v))
                        return (ts.pop() if len(ts) == 1 else "any"), [], False
                    bases = self.base_ext_names(v.cls)
                    for b, t in (("builtins.int", "int"), ("builtins.float", "float"), ("builtins.str", "str")):
                        if b in bases:
                            return t, [], False
                    return "any", [], False
            if node.id in m.assign_nodes:
                return self.ann_type(m.assign_nodes[node.id], m, depth + 1)
            if node.id in simple:
                return simple[node.id], [], simple[node.id] == "dict"
            return "any", [], False
        if name in simple:
            return simple[name], [], simple[name] == "dict"
        return "any", [], False

    def union_types(self, parts):
        ts = set()
        subs = []
        dl = False
        for t, s, d in parts:
            if t != "none":
                ts.add(t)
            subs += [x for x in s if x not in subs]
            dl = dl or d
        if not ts:
            return "any", subs, dl
        if len(ts) == 1:
            return ts.pop(), subs, dl
        if ts == {"int", "float"}:
            return "float", subs, dl
        if "any" in ts and len(ts) == 2 and "dict" in ts:
            return "any", subs, True
        return "any", subs, dl

    def read_key(self, vals, key, typ=None, default=MISSING, record=True):
        out = set()
        for v in vals:
            if isinstance(v, PathV):
                if isinstance(key, str):
                    if len(v.p) >= 10:
                        continue
                    if record:
                        self.record(v.p + (key, ), typ, default)
                    out.add(PathV(v.p + (key, )))
                elif key is WILD:
                    if _wild_ok(v.p):
                        out.add(PathV(v.p + ("*", )))
            elif isinstance(v, DictV):
                ent = self.dict_entries.get(v.site, {})
                if key in ent:
                    out |= ent[key]
                for b in list(self.dict_bases.get(v.site, ())):
                    if isinstance(key, str):
                        if record:
                            self.record(b + (key, ), typ, default)
                        out.add(PathV(b + (key, )))
            elif isinstance(v, Const) and isinstance(v.v, dict) and key in v.v:
                out.add(Const(v.v[key]))
        return frozenset(out)

    def apply_model(self, ckey, vals):
        for v in vals:
            if isinstance(v, DictV):
                # Model(**{"tensorboard": param_dict.get("tensorboard", {}), ...})
                ent = self.dict_entries.get(v.site, {})
                for f in self.model_fields(ckey).values():
                    for name in [f["name"]] + f["aliases"]:
                        if name in ent:
                            for sub in f["subs"]:
                                self.apply_model(sub, ent[name])
            for p in self.paths_of(v):
                mk = (ckey, p)
                if mk in self.model_applied:
                    continue
                self.model_applied.add(mk)
                self.changed = True
                self.apply_model_at(ckey, p)

    def paths_of(self, v):
        if isinstance(v, PathV):
            return [v.p]
        if isinstance(v, DictV):
            return list(self.dict_bases.get(v.site, ()))
        return []

    def apply_model_kw(self, ckey, name, vals):
        fields = self.model_fields(ckey)
        for f in fields.values():
            if name == f["name"] or name in f["aliases"]:
                for sub in f["subs"]:
                    self.apply_model(sub, vals)
                if f["dictlike"] or f["type"] == "any":
                    if self.interesting(vals):
                        self.store_attr(ObjV(ckey), f["name"], frozenset(v for v in vals if isinstance(v, PathV)))

    def apply_model_at(self, ckey, p):
        fields = self.model_fields(ckey)
        for f in fields.values():
            typ = f["type"]
            if typ == "none":
                typ = "any"
            for name in [f["name"]] + f["aliases"]:
                self.record(p + (name, ), typ, f["default"],
                            "%s:%s" % (os.path.relpath(self.classes[ckey].module.path, self.root), ckey[1]))
                self.model_meta.setdefault(p + (name, ), []).append(f)
                for sub in f["subs"]:
                    self.apply_model(sub, fs(PathV(p + (name, ))))
                    self.store_attr(ObjV(ckey), f["name"], fs(ObjV(sub)))
                if f["dictlike"] or f["type"] == "any":
                    self.store_attr(ObjV(ckey), f["name"], fs(PathV(p + (name, ))))
        if ckey not in self.full_classes:
            self.full_classes.add(ckey)
            self.changed = True

    # ------------------------------------------------------------ statements
    def exec_block(self, stmts, env, frame):
        for s in stmts:
            self.exec_stmt(s, env, frame)

    def exec_stmt(self, s, env, frame):
        t = type(s)
        if t is ast.Assign:
            vals = self.eval(s.value, env, frame)
            for tg in s.targets:
                self.assign(tg, vals, env, frame)
            if frame.module_level and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                if frame.cls_info is None:
                    frame.module.assign_nodes[s.targets[0].id] = s.value
        elif t is ast.AnnAssign:
            if frame.cls_info is not None and isinstance(s.target, ast.Name):
                frame.cls_info.ann.append((s.target.id, s.annotation, s.value))
            if s.value is not None:
                vals = self.eval(s.value, env, frame)
                self.assign(s.target, vals, env, frame)
        elif t is ast.AugAssign:
            self.eval(s.value, env, frame)
        elif t is ast.Expr:
            self.eval(s.value, env, frame)
        elif t is ast.If:
            self.eval(s.test, env, frame)
            e1 = dict(env)
            self.exec_block(s.body, e1, frame)
            e2 = dict(env)
            self.exec_block(s.orelse, e2, frame)
            _join_into(env, [e1, e2])
        elif t in (ast.For, ast.AsyncFor):
            itv = self.eval(s.iter, env, frame)
            elems = self.iterate(itv)
            results = [dict(env)]
            if elems is not None:
                for e in elems[:256]:
                    ei = dict(env)
                    self.assign(s.target, e, ei, frame)
                    self.exec_block(s.body, ei, frame)
                    results.append(ei)
            else:
                ei = dict(env)
                self.assign(s.target, self.elem_of(itv), ei, frame)
                self.exec_block(s.body, ei, frame)
                self.exec_block(s.body, ei, frame)
                results.append(ei)
            self.exec_block(s.orelse, env, frame)
            _join_into(env, results)
        elif t is ast.While:
            self.eval(s.test, env, frame)
            e1 = dict(env)
            self.exec_block(s.body, e1, frame)
            self.exec_block(s.body, e1, frame)
            _join_into(env, [dict(env), e1])
        elif t is ast.Try or t.__name__ == "TryStar":
            e1 = dict(env)
            self.exec_block(s.body, e1, frame)
            self.exec_block(s.orelse, e1, frame)
            outs = [e1]
            for h in s.handlers:
                eh = dict(env)
                _join_into(eh, [dict(env), e1])
                if h.type is not None:
                    self.eval(h.type, eh, frame)
                self.exec_block(h.body, eh, frame)
                outs.append(eh)
            _join_into(env, outs)
            self.exec_block(s.finalbody, env, frame)
        elif t in (ast.With, ast.AsyncWith):
            for it in s.items:
                v = self.eval(it.context_expr, env, frame)
                if it.optional_vars is not None:
                    self.assign(it.optional_vars, EMPTY, env, frame)
            self.exec_block(s.body, env, frame)
        elif t is ast.Return:
            if s.value is not None:
                frame.returns |= self.eval(s.value, env, frame)
        elif t in (ast.FunctionDef, ast.AsyncFunctionDef):
            if frame.cls_info is not None:
                key = (frame.module.name, frame.cls_info.key[1] + "." + s.name, s.lineno)
                fi = FuncInfo(key, s, frame.module, frame.cls_info.key, [])
            elif frame.module_level:
                key = (frame.module.name, s.name, s.lineno)
                fi = FuncInfo(key, s, frame.module, None, [])
            else:
                outer = frame.func.qualname if frame.func else "?"
                key = (frame.module.name, outer + ".<locals>." + s.name, s.lineno)
                fi = FuncInfo(key, s, frame.module, frame.func.cls if frame.func else None,
                              [env] + (frame.func.closure if frame.func else []))
            self.funcs[key] = fi
            env[s.name] = fs(FuncV(key, None))
        elif t is ast.ClassDef:
            if not frame.module_level and frame.cls_info is None:
                return
            qual = s.name if frame.cls_info is None else frame.cls_info.key[1] + "." + s.name
            key = (frame.module.name, qual)
            ci = self.classes.get(key)
            if ci is None or ci.node is not s:
                ci = ClassInfo(key, s, frame.module)
                self.classes[key] = ci
                ci.bases = [self.eval(b, env, frame) for b in s.bases]
                cframe = Frame(self, frame.module, None, None, ci.ns, module_level=True)
                cframe.cls_info = ci
                cenv = ci.ns
                # class bodies see module globals on lookup through Frame
                self.exec_block(s.body, cenv, cframe)
            env[s.name] = fs(ClassV(key))
        elif t is ast.Import:
            for a in s.names:
                if a.asname:
                    m = self.get_module(a.name)
                    env[a.asname] = fs(ModV(a.name)) if m else fs(ExtV(a.name))
                else:
                    top = a.name.split(".")[0]
                    m = self.get_module(top) if top == "deepspeed" else None
                    env[top] = fs(ModV(top)) if m else fs(ExtV(top))
        elif t is ast.ImportFrom:
            modname = self.resolve_relative(frame.module, s.level, s.module or "")
            internal = modname == "deepspeed" or modname.startswith("deepspeed.")
            for a in s.names:
                if a.name == "*":
                    if not internal:
                        continue
                    m = self.get_module(modname)
                    if m is None:
                        continue
                    allv = m.globals.get("__all__")
                    names = None
                    if allv:
                        c = self.const_of(allv)
                        if isinstance(c, (list, tuple)):
                            names = list(c)
                    for n, v in list(m.globals.items()):
                        if (names is None and not n.startswith("_")) or (names is not None and n in names):
                            env[n] = v
                    continue
                bind = a.asname or a.name
                if internal:
                    if frame.module_level:
                        env[bind] = fs(LazyV(modname, a.name))
                    else:
                        env[bind] = self.import_name(modname, a.name)
                else:
                    env[bind] = fs(ExtV(modname + "." + a.name))
        elif t is ast.Assert:
            self.eval(s.test, env, frame)
        elif t is ast.Raise:
            if s.exc is not None:
                self.eval(s.exc, env, frame)
        elif t is ast.Delete:
            for tg in s.targets:
                if isinstance(tg, ast.Name):
                    env.pop(tg.id, None)
        elif t.__name__ == "Match":
            self.eval(s.subject, env, frame)
            outs = [dict(env)]
            for c in s.cases:
                ec = dict(env)
                self.exec_block(c.body, ec, frame)
                outs.append(ec)
            _join_into(env, outs)

    def assign(self, tg, vals, env, frame):
        if isinstance(tg, ast.Name):
            env[tg.id] = vals
        elif isinstance(tg, (ast.Tuple, ast.List)):
            n = len(tg.elts)
            per = [set() for _ in range(n)]
            for v in vals:
                if isinstance(v, TupleV) and len(v.items) == n:
                    for i in range(n):
                        per[i] |= v.items[i]
                elif isinstance(v, Const) and isinstance(v.v, (tuple, list)) and len(v.v) == n:
                    for i in range(n):
                        per[i].add(Const(v.v[i]))
            for i, e in enumerate(tg.elts):
                if isinstance(e, ast.Starred):
                    self.assign(e.value, EMPTY, env, frame)
                else:
                    self.assign(e, frozenset(per[i]), env, frame)
        elif isinstance(tg, ast.Attribute):
            for o in self.eval(tg.value, env, frame):
                if isinstance(o, ObjV):
                    self.store_attr(o, tg.attr, vals)
        elif isinstance(tg, ast.Subscript):
            objs = self.eval(tg.value, env, frame)
            keys = self.eval(tg.slice, env, frame)
            for o in objs:
                if isinstance(o, DictV):
                    for k in keys:
                        if isinstance(k, Const) and isinstance(k.v, (str, int)):
                            self.dict_store(o.site, k.v, vals)
                        elif isinstance(k, WildV):
                            for v in vals:
                                if isinstance(v, PathV) and v.p == k.p + ("*", ):
                                    self.dict_add_base(o.site, k.p)
        elif isinstance(tg, ast.Starred):
            self.assign(tg.value, EMPTY, env, frame)

    def iterate(self, vals):
        """Per-element value sets for constant iterables, else None."""
        if len(vals) == 1:
            v = next(iter(vals))
            if isinstance(v, Const) and isinstance(v.v, (list, tuple, set, frozenset)):
                return [fs(_const_elem(x)) for x in v.v]
            if isinstance(v, Const) and isinstance(v.v, dict):
                return [fs(Const(k)) for k in v.v]
            if isinstance(v, TupleV):
                return list(v.items)
            if isinstance(v, BMeth) and isinstance(v.recv, Const) and isinstance(v.recv.v, dict):
                d = v.recv.v
                if v.name == "items":
                    return [fs(Const((k, x))) for k, x in d.items()]
                if v.name == "keys":
                    return [fs(Const(k)) for k in d]
                if v.name == "values":
                    return [fs(_const_elem(x)) for x in d.values()]
        return None

    def elem_of(self, vals):
        out = set()
        for v in vals:
            if isinstance(v, PathV):
                if _wild_ok(v.p):
                    out.add(WildV(v.p))
                    out.add(PathV(v.p + ("[]", )))
            elif isinstance(v, DictV):
                for b in self.dict_bases.get(v.site, ()):
                    if _wild_ok(b):
                        out.add(WildV(b))
                for k in self.dict_entries.get(v.site, {}):
                    out.add(Const(k))
            elif isinstance(v, BMeth):
                recvs = fs(v.recv)
                if v.name == "keys":
                    out |= {x for x in self.elem_of(recvs) if not isinstance(x, PathV)}
                elif v.name == "values":
                    for p in self.paths_of(v.recv):
                        if _wild_ok(p):
                            out.add(PathV(p + ("*", )))
                    if isinstance(v.recv, DictV):
                        for ev in self.dict_entries.get(v.recv.site, {}).values():
                            out |= ev
                elif v.name == "items":
                    for p in self.paths_of(v.recv):
                        if _wild_ok(p):
                            out.add(TupleV((fs(WildV(p)), fs(PathV(p + ("*", ))))))
                    if isinstance(v.recv, DictV):
                        for k, ev in self.dict_entries.get(v.recv.site, {}).items():
                            out.add(TupleV((fs(Const(k)), ev)))
            elif isinstance(v, TupleV):
                for it in v.items:
                    out |= it
        return frozenset(out)

    # ------------------------------------------------------------ expressions
    def lookup(self, name, env, frame):
        if name in env:
            return self.force(env[name])
        if frame.func is not None:
            for ce in frame.func.closure:
                if name in ce:
                    return self.force(ce[name])
        g = frame.module.globals
        if name in g:
            return self.force(g[name])
        if name == "__name__":
            return fs(Const(frame.module.name))
        return fs(ExtV("builtins." + name))

    def attribute(self, vals, attr):
        out = set()
        for v in vals:
            if isinstance(v, ModV):
                m = self.get_module(v.name)
                if m is not None:
                    if attr in m.globals:
                        out |= self.force(m.globals[attr])
                    else:
                        sub = self.get_module(v.name + "." + attr)
                        if sub is not None:
                            out.add(ModV(sub.name))
            elif isinstance(v, ClassV):
                ca = self.class_attr(v.cls, attr)
                if ca:
                    for x in ca:
                        if isinstance(x, FuncV) and "classmethod" in self.funcs[x.fkey].decorators:
                            out.add(FuncV(x.fkey, v))
                        else:
                            out.add(x)
            elif isinstance(v, ObjV):
                out |= self.obj_attr(v, attr)
            elif isinstance(v, SuperV):
                mro = self.mro(v.selfv.cls) if isinstance(v.selfv, ObjV) else self.mro(v.cls)
                if v.cls in mro:
                    mro = mro[mro.index(v.cls) + 1:]
                for c in mro:
                    ns = self.classes[c].ns
                    if attr in ns:
                        for x in self.force(ns[attr]):
                            if isinstance(x, FuncV):
                                out.add(FuncV(x.fkey, v.selfv))
                        break
            elif isinstance(v, (PathV, DictV)):
                if attr in ("get", "keys", "items", "values", "pop", "copy", "setdefault", "update"):
                    out.add(BMeth(attr, v))
            elif isinstance(v, Const) and isinstance(v.v, dict):
                if attr in ("get", "keys", "items", "values", "copy"):
                    out.add(BMeth(attr, v))
            elif isinstance(v, ExtV):
                name = v.name + "." + attr
                if name in EXTERNAL_CONSTS:
                    out.add(Const(EXTERNAL_CONSTS[name]))
                else:
                    out.add(ExtV(name))
        return frozenset(out)

    def eval(self, node, env, frame):
        t = type(node)
        if t is ast.Constant:
            return fs(Const(node.value))
        if t is ast.Name:
            return self.lookup(node.id, env, frame)
        if t is ast.Attribute:
            return self.attribute(self.eval(node.value, env, frame), node.attr)
        if t is ast.Subscript:
            objs = self.eval(node.value, env, frame)
            keys = self.eval(node.slice, env, frame)
            out = set()
            for k in keys:
                if isinstance(k, Const) and isinstance(k.v, (str, int)):
                    out |= self.read_key(objs, k.v)
                elif isinstance(k, WildV):
                    out |= self.read_key(objs, WILD)
                    for o in objs:
                        if isinstance(o, DictV):
                            for b in self.dict_bases.get(o.site, ()):
                                if _wild_ok(b):
                                    out.add(PathV(b + ("*", )))
            if not any(isinstance(k, (Const, WildV)) for k in keys):
                for o in objs:
                    if isinstance(o, DictV):
                        out |= self.dict_entries.get(o.site, {}).get(ANYKEY, EMPTY)
            for o in objs:
                if isinstance(o, Const) and isinstance(o.v, (list, tuple)):
                    for k in keys:
                        if isinstance(k, Const) and isinstance(k.v, int) and -len(o.v) <= k.v < len(o.v):
                            out.add(_const_elem(o.v[k.v]))
            return frozenset(out)
        if t is ast.Call:
            return self.eval_call(node, env, frame)
        if t is ast.Compare:
            left = self.eval(node.left, env, frame)
            cur = left
            for op, c in zip(node.ops, node.comparators):
                right = self.eval(c, env, frame)
                if isinstance(op, (ast.In, ast.NotIn)):
                    for k in cur:
                        # `"." in value` on a string value is no key lookup
                        if isinstance(k, Const) and isinstance(k.v, str) and _KEYLIKE.match(k.v):
                            self.read_key(self.strip_keys(right), k.v)
                cur = right
            return EMPTY
        if t is ast.BoolOp:
            out = set()
            for v in node.values:
                out |= self.eval(v, env, frame)
            return frozenset(out)
        if t is ast.IfExp:
            self.eval(node.test, env, frame)
            return self.eval(node.body, env, frame) | self.eval(node.orelse, env, frame)
        if t is ast.Dict:
            keys = []
            vals = []
            stars = []
            for k, v in zip(node.keys, node.values):
                vv = self.eval(v, env, frame)
                if k is None:
                    stars.append(vv)
                    continue
                keys.append(self.eval(k, env, frame))
                vals.append(vv)
            if frame.module_level or frame.in_default:
                ok = all(len(k) == 1 and isinstance(next(iter(k)), Const) for k in keys) and \
                    all(len(v) == 1 and isinstance(next(iter(v)), Const) for v in vals) and not stars
                if ok:
                    return fs(Const({next(iter(k)).v: next(iter(v)).v for k, v in zip(keys, vals)}))
            site = (frame.module.name, node.lineno, node.col_offset)
            for k, v in zip(keys, vals):
                if not any(isinstance(kk, Const) for kk in k):
                    # {nn.Linear: QuantizedLinear, ...}: keep values for d[<unknown>]
                    self.dict_store(site, ANYKEY, v)
                for kk in k:
                    if isinstance(kk, Const) and isinstance(kk.v, (str, int)):
                        self.dict_store(site, kk.v, v)
            for s in stars:
                for p in set().union(*[self.paths_of(x) for x in s]) if s else ():
                    self.dict_add_base(site, p)
            return fs(DictV(site))
        if t is ast.DictComp:
            site = (frame.module.name, node.lineno, node.col_offset)
            for e in self.comp_envs(node.generators, env, frame):
                k = self.eval(node.key, e, frame)
                v = self.eval(node.value, e, frame)
                for kk in k:
                    if isinstance(kk, Const) and isinstance(kk.v, (str, int)):
                        self.dict_store(site, kk.v, v)
            return fs(DictV(site))
        if t in (ast.ListComp, ast.SetComp, ast.GeneratorExp):
            for e in self.comp_envs(node.generators, env, frame):
                self.eval(node.elt, e, frame)
            return EMPTY
        if t in (ast.List, ast.Tuple, ast.Set):
            items = [self.eval(e, env, frame) for e in node.elts]
            if all(len(i) == 1 and isinstance(next(iter(i)), Const) for i in items) and \
                    not any(isinstance(e, ast.Starred) for e in node.elts):
                py = [next(iter(i)).v for i in items]
                return fs(Const(tuple(py) if t is ast.Tuple else py))
            return fs(TupleV(tuple(items)))
        if t is ast.BinOp:
            l = self.eval(node.left, env, frame)
            r = self.eval(node.right, env, frame)
            a, b = self.const_of(l), self.const_of(r)
            if a is not MISSING and b is not MISSING:
                try:
                    return fs(Const(_binop(node.op, a, b)))
                except Exception:
                    return EMPTY
            return EMPTY
        if t is ast.UnaryOp:
            v = self.const_of(self.eval(node.operand, env, frame))
            if v is not MISSING:
                try:
                    if isinstance(node.op, ast.USub):
                        return fs(Const(-v))
                    if isinstance(node.op, ast.UAdd):
                        return fs(Const(+v))
                    if isinstance(node.op, ast.Not):
                        return fs(Const(not v))
                except Exception:
                    pass
            return EMPTY
        if t is ast.Lambda:
            key = (frame.module.name, "<lambda>@%d:%d" % (node.lineno, node.col_offset), node.lineno)
            if key not in self.funcs:
                self.funcs[key] = FuncInfo(key, node, frame.module, frame.func.cls if frame.func else None,
                                           [env] + (frame.func.closure if frame.func else []))
            return fs(FuncV(key, None))
        if t is ast.JoinedStr:
            for v in node.values:
                self.eval(v, env, frame)
            return EMPTY
        if t is ast.FormattedValue:
            self.eval(node.value, env, frame)
            return EMPTY
        if t is ast.Starred:
            return self.eval(node.value, env, frame)
        if t is ast.NamedExpr:
            v = self.eval(node.value, env, frame)
            self.assign(node.target, v, env, frame)
            return v
        if t in (ast.Await, ast.Yield, ast.YieldFrom):
            if node.value is not None:
                self.eval(node.value, env, frame)
            return EMPTY
        if t is ast.Slice:
            return EMPTY
        return EMPTY

    def strip_keys(self, vals):
        out = set()
        for v in vals:
            if isinstance(v, BMeth) and v.name == "keys":
                out.add(v.recv)
            else:
                out.add(v)
        return frozenset(out)

    def comp_envs(self, gens, env, frame):
        envs = [dict(env)]
        for g in gens:
            new = []
            for e in envs:
                itv = self.eval(g.iter, e, frame)
                elems = self.iterate(itv)
                if elems is None:
                    elems = [self.elem_of(itv)]
                for el in elems[:256]:
                    e2 = dict(e)
                    self.assign(g.target, el, e2, frame)
                    for cond in g.ifs:
                        self.eval(cond, e2, frame)
                    new.append(e2)
            envs = new
        return envs

    def eval_call(self, node, env, frame):
        funcs = self.eval(node.func, env, frame)
        args = []
        for a in node.args:
            args.append(self.eval(a, env, frame))
        kwargs = {}
        starkw = []
        for kw in node.keywords:
            v = self.eval(kw.value, env, frame)
            if kw.arg is None:
                starkw.append(v)
            else:
                kwargs[kw.arg] = v
        out = set()
        for f in funcs:
            if isinstance(f, FuncV):
                fi = self.funcs[f.fkey]
                selfv = f.selfv
                call_args = args
                if isinstance(selfv, ClassV):  # classmethod
                    pass
                if self.should_follow(selfv, args, kwargs, starkw, fi):
                    out |= self.call_function(fi, selfv, call_args, kwargs, starkw)
            elif isinstance(f, ClassV):
                out |= self.instantiate(f.cls, args, kwargs, starkw, frame)
            elif isinstance(f, BMeth):
                out |= self.dict_method(f, args, kwargs)
            elif isinstance(f, ExtV):
                n = f.name
                if n in ("copy.copy", "copy.deepcopy", "builtins.dict", "copy") and args:
                    for v in args[0]:
                        if isinstance(v, (PathV, DictV)):
                            out.add(v)
                        elif isinstance(v, BMeth) and v.name in ("items", ):
                            out.add(v.recv)
                elif n == "builtins.super":
                    if frame.func is not None and frame.func.cls is not None and frame.selfv is not None:
                        out.add(SuperV(frame.func.cls, frame.selfv))
                elif n == "builtins.getattr" and len(args) >= 2:
                    for a in args[1]:
                        if isinstance(a, Const) and isinstance(a.v, str):
                            out |= self.attribute(args[0], a.v)
                    if len(args) > 2:
                        out |= args[2]
                elif n in ("builtins.list", "builtins.tuple", "builtins.sorted") and args:
                    c = self.const_of(args[0])
                    if c is not MISSING and isinstance(c, (list, tuple, dict)):
                        out.add(Const(list(c)))
                elif n == "builtins.int" and args:
                    c = self.const_of(args[0])
                    if isinstance(c, (int, float)):
                        out.add(Const(int(c)))
                elif n == "builtins.float" and args:
                    c = self.const_of(args[0])
                    if isinstance(c, (int, float)):
                        out.add(Const(float(c)))
        return frozenset(out)

    def should_follow(self, selfv, args, kwargs, starkw, fi):
        if selfv is not None and self.interesting(fs(selfv)):
            return True
        for a in list(args) + list(kwargs.values()) + list(starkw):
            if self.interesting(a):
                return True
        # calls of plain helpers with constant args (e.g. pp_int(5e8)) are cheap
        if fi.cls is None and all(all(isinstance(x, Const) for x in a) for a in args) and not kwargs:
            if isinstance(fi.node, ast.Lambda):
                return True
        return False

    def dict_method(self, f, args, kwargs):
        recv = fs(f.recv)
        name = f.name
        if name in ("get", "pop", "setdefault"):
            if not args:
                return EMPTY
            default = MISSING
            dvals = EMPTY
            if len(args) > 1:
                dvals = args[1]
                default = self.const_of(dvals)
                if default is MISSING and any(isinstance(x, DictV) for x in dvals):
                    default = {}
            elif "default" in kwargs:
                dvals = kwargs["default"]
                default = self.const_of(dvals)
            typ = _json_type(default) if default is not MISSING else None
            out = set(dvals)
            for k in args[0]:
                if isinstance(k, Const) and isinstance(k.v, (str, int)):
                    out |= self.read_key(recv, k.v, typ, default)
                elif isinstance(k, WildV):
                    out |= self.read_key(recv, WILD)
            if isinstance(f.recv, Const):
                for k in args[0]:
                    if isinstance(k, Const) and k.v in f.recv.v:
                        out.add(_const_elem(f.recv.v[k.v]))
            return frozenset(out)
        if name in ("keys", "items", "values"):
            return fs(BMeth(name, f.recv))
        if name == "copy":
            return recv
        return EMPTY


WILD = object()
ANYKEY = "\0any"
_KEYLIKE = __import__("re").compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
