//===- TorchScriptArchive.cpp - torch.jit.save archives -> aten::Program --===//
#include "frontends/torchscript/TorchScriptArchive.h"

#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/csrc/jit/passes/peephole.h>
#include <torch/csrc/jit/passes/remove_mutation.h>
#include <torch/csrc/jit/runtime/graph_iterator.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/library.h>
#include <torch/script.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <unordered_map>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

// The schemas of ATen ops newer than libtorch 1.13 that the ATen op table
// lowers, so that 1.13's loader resolves calls to them in archives PyTorch
// 2.x saved. Schema only: dsc reads the graph and never runs it.
TORCH_LIBRARY_FRAGMENT(aten, m) {
  m.def("scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, "
        "Tensor? attn_mask=None, float dropout_p=0.0, bool is_causal=False, *, "
        "float? scale=None, bool enable_gqa=False) -> Tensor");
}

namespace dsc::torchscript {

namespace {

using torch::jit::Node;
using torch::jit::Value;
namespace prim = c10::prim;

llvm::Error err(const std::string &path, const std::string &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), path + ": " + why);
}

/// The first line of a libtorch error (the rest is its C++ backtrace).
std::string firstLine(const std::string &what) { return what.substr(0, what.find('\n')); }

/// c10::ScalarType -> the torch.export numbering aten::Program uses
/// (torch/_export/serde/schema.py); 0 for a type dsc does not read.
int exportDType(c10::ScalarType t) {
  switch (t) {
  case c10::ScalarType::Byte: return int(aten::ScalarType::Byte);
  case c10::ScalarType::Char: return int(aten::ScalarType::Char);
  case c10::ScalarType::Short: return int(aten::ScalarType::Short);
  case c10::ScalarType::Int: return int(aten::ScalarType::Int);
  case c10::ScalarType::Long: return int(aten::ScalarType::Long);
  case c10::ScalarType::Half: return int(aten::ScalarType::Half);
  case c10::ScalarType::Float: return int(aten::ScalarType::Float);
  case c10::ScalarType::Double: return int(aten::ScalarType::Double);
  case c10::ScalarType::Bool: return int(aten::ScalarType::Bool);
  case c10::ScalarType::BFloat16: return int(aten::ScalarType::BFloat16);
  default: return 0;
  }
}

/// "code/__torch__/model.py:23" of a node, where the archive records it.
std::string sourceOf(const Node *n) {
  if (auto flc = n->sourceRange().file_line_col())
    return std::get<0>(*flc) + ":" + std::to_string(std::get<1>(*flc));
  return std::string();
}

/// A length in a pickle that runs past the record: libtorch's unpickler
/// allocates (and clears) what a length-prefixed opcode says before it
/// reads the bytes, so a 13 KB archive claiming a 12 GB string would take
/// the machine's memory. Walks the opcodes of protocols 0-5; "" when every
/// length fits (an opcode it does not know ends the walk: the unpickler
/// refuses that itself).
std::string pickleProblem(const unsigned char *p, size_t n) {
  size_t at = 0;
  auto lengthOf = [&](size_t bytes, uint64_t &len) {
    if (n - at < bytes)
      return false;
    len = 0;
    for (size_t k = 0; k < bytes; ++k)
      len |= uint64_t(p[at + k]) << (8 * k);
    at += bytes;
    return true;
  };
  auto skipLine = [&] {
    while (at < n && p[at] != '\n')
      ++at;
    if (at >= n)
      return false;
    ++at;
    return true;
  };
  while (at < n) {
    unsigned char op = p[at++];
    uint64_t len = 0;
    size_t fixed = 0; // bytes of a fixed-size argument
    int prefix = 0;   // bytes of a length prefix, then that many bytes
    int lines = 0;    // newline-terminated arguments
    switch (op) {
    case '.': // STOP
      return std::string();
    case 0x80: case 'K': case 'h': case 'q': case 0x82: fixed = 1; break; // PROTO BININT1 BINGET BINPUT EXT1
    case 'M': case 0x83: fixed = 2; break;                                // BININT2 EXT2
    case 'J': case 'j': case 'r': case 0x84: fixed = 4; break;            // BININT LONG_BINGET LONG_BINPUT EXT4
    case 'G': case 0x95: fixed = 8; break;                                // BINFLOAT FRAME
    case 0x8a: case 'U': case 0x8c: case 'C': prefix = 1; break; // LONG1 SHORT_BINSTRING SHORT_BINUNICODE SHORT_BINBYTES
    case 0x8b: case 'T': case 'X': case 'B': prefix = 4; break;  // LONG4 BINSTRING BINUNICODE BINBYTES
    case 0x8d: case 0x8e: case 0x96: prefix = 8; break;          // BINUNICODE8 BINBYTES8 BYTEARRAY8
    case 'c': case 'i': lines = 2; break;                                  // GLOBAL INST
    case 'I': case 'L': case 'S': case 'V': case 'F': case 'g': case 'p': case 'P':
      lines = 1;
      break;
    default:
      break; // no argument, or one the unpickler refuses itself
    }
    if (fixed && n - at < fixed)
      return "the record ends inside an opcode's argument";
    if (op == 'r') { // LONG_BINPUT: the unpickler sizes its memo to the index
      uint64_t index = 0;
      for (size_t k = 0; k < 4; ++k)
        index |= uint64_t(p[at + k]) << (8 * k);
      if (index > n)
        return "a memo index of " + std::to_string(index) + " in a record of " +
               std::to_string(n) + " bytes";
    }
    at += fixed;
    if (prefix) {
      if (!lengthOf(size_t(prefix), len))
        return "the record ends inside a length";
      if (len > n - at)
        return "a length of " + std::to_string(len) + " bytes runs past the record's " +
               std::to_string(n) + " bytes";
      at += size_t(len);
    }
    for (int k = 0; k < lines; ++k)
      if (!skipLine())
        return "the record ends inside a text argument";
  }
  return std::string();
}

/// What libtorch 1.13's source-range unpickler would trip on in a
/// *.debug_pkl (serialization/source_range_serialization.cpp: it indexes
/// its string table and slices the source text unchecked, and its asserts
/// throw inside ErrorReport::what()); "" when it reads cleanly.
std::string debugInfoProblem(const c10::IValue &root) {
  if (!root.isTuple())
    return "not a tuple";
  const auto &top = root.toTupleRef().elements();
  if (top.empty())
    return "an empty tuple";
  std::vector<size_t> table; // the string table (format 2): its entries' lengths
  c10::IValue lines = root;
  if (top[0].isString() && top[0].toStringRef() == "FORMAT_WITH_STRING_TABLE") {
    if (top.size() < 3 || !top[1].isTuple() || !top[2].isTuple())
      return "a string-table record without its table and lines";
    for (const c10::IValue &t : top[1].toTupleRef().elements()) {
      if (!t.isString())
        return "a string table entry that is not a string";
      table.push_back(t.toStringRef().size());
    }
    lines = top[2];
  }
  for (const c10::IValue &line : lines.toTupleRef().elements()) {
    if (!line.isTuple() || line.toTupleRef().elements().size() < 2 ||
        !line.toTupleRef().elements()[0].isInt())
      return "a record that is not (offset, range)";
    const c10::IValue &range = line.toTupleRef().elements()[1];
    if (!range.isTuple() || range.toTupleRef().elements().size() != 3)
      return "a source range that is not (source, start, end)";
    const auto &r = range.toTupleRef().elements();
    if (!r[0].isTuple() || r[0].toTupleRef().elements().size() != 3 || !r[1].isInt() ||
        !r[2].isInt())
      return "a source range of the wrong types";
    const auto &src = r[0].toTupleRef().elements();
    if (!table.empty()) {
      if (!src[0].isIntList() || !src[1].isInt() || !src[2].isInt())
        return "a source of the wrong types";
      auto inTable = [&](int64_t k) { return k >= 0 && k < int64_t(table.size()); };
      if (!inTable(src[1].toInt()))
        return "a file name outside the string table";
      for (int64_t k : src[0].toIntVector())
        if (!inTable(k))
          return "a source piece outside the string table";
    } else {
      if (!src[0].isString() || !(src[1].isString() || src[1].isNone()) || !src[2].isInt())
        return "a source of the wrong types";
    }
    // (A range past its text occurs in archives PyTorch writes; libtorch
    // clamps it when it renders.)
  }
  return std::string();
}

/// What the child of trialLoad runs: "" when `path` loads, else why not.
/// Every pickle is walked first (lengths that fit); the debug info
/// (*.debug_pkl: where each line of the archive's code came from), which
/// libtorch reads only inside ErrorReport::what(), where an error ends the
/// process, is read here, where an error is an error.
std::string checkAndLoad(const std::string &path) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    for (const std::string &record : reader.getAllRecords()) {
      auto endsWith = [&](const char *tail) {
        size_t t = std::strlen(tail);
        return record.size() >= t && record.compare(record.size() - t, t, tail) == 0;
      };
      if (!endsWith(".pkl") && !endsWith("_pkl"))
        continue;
      auto [data, size] = reader.getRecord(record);
      if (std::string why =
              pickleProblem(static_cast<const unsigned char *>(data.get()), size);
          !why.empty())
        return "its record '" + record + "' is corrupt: " + why;
      if (!endsWith(".debug_pkl"))
        continue;
      std::string why;
      try {
        why = debugInfoProblem(torch::jit::unpickle(static_cast<const char *>(data.get()), size));
      } catch (const std::exception &e) {
        why = firstLine(e.what());
      }
      if (!why.empty())
        return "its debug info '" + record + "' is corrupt: " + why;
    }
    (void)torch::jit::load(path);
  } catch (const std::exception &e) {
    return "not a TorchScript archive libtorch can read: " + firstLine(e.what());
  }
  return std::string();
}

/// Runs checkAndLoad(`path`) in a child process: "" when the archive
/// loads, else why not (the child's verdict, or the signal that ended it).
std::string trialLoad(const std::string &path) {
  int fds[2];
  if (::pipe(fds) != 0)
    return checkAndLoad(path); // no child to be had: check here
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return checkAndLoad(path);
  }
  if (pid == 0) {
    ::close(fds[0]);
    // What a crash prints here (glibc's "free(): invalid pointer", a
    // sanitizer's report) is libtorch's, not the user's to read; the
    // parent says what happened.
    if (int devNull = ::open("/dev/null", O_WRONLY); devNull >= 0) {
      ::dup2(devNull, STDERR_FILENO);
      ::close(devNull);
    }
    std::string verdict = checkAndLoad(path);
    if (verdict.size() > 4000)
      verdict.resize(4000);
    verdict = (verdict.empty() ? "OK" : "E") + verdict;
    ssize_t unused = ::write(fds[1], verdict.data(), verdict.size());
    (void)unused;
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string verdict;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;
    verdict.append(buf, size_t(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (verdict.rfind("OK", 0) == 0)
    return std::string();
  if (!verdict.empty() && verdict[0] == 'E')
    return verdict.substr(1);
  std::string how = WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                        : "exit status " + std::to_string(WEXITSTATUS(status));
  return "libtorch crashed reading it (" + how +
         "): the archive is corrupt, or uses what libtorch 1.13 cannot read";
}

} // namespace

/// The archive as libtorch loaded it.
class LibtorchArchive final : public Archive {
public:
  static llvm::Expected<std::unique_ptr<Archive>>
  load(const std::string &path, const std::map<std::string, std::vector<int64_t>> &inputShapes,
       const std::map<std::string, std::string> &inputDTypes);
  llvm::Expected<std::string> readTensor(const std::string &name,
                                         aten::TensorMeta &meta) const override;
  llvm::Error readFloat(const std::string &name, std::vector<int64_t> &shape,
                        std::vector<float> &values) const override;

private:
  torch::jit::Module module_;
  /// Parameters and buffers by their PyTorch names.
  std::map<std::string, at::Tensor> tensors_;
};

namespace {

/// Builds the program from the inlined, lowered graph.
class Builder {
public:
  Builder(const std::string &path, aten::Program &program,
          std::map<std::string, at::Tensor> &tensors)
      : path_(path), program_(program), tensors_(tensors) {}

  llvm::Error run(torch::jit::Module &m,
                  const std::map<std::string, std::vector<int64_t>> &inputShapes,
                  const std::map<std::string, std::string> &inputDTypes);

private:
  std::string nameOf(const Value *v) {
    auto it = names_.find(v);
    return it != names_.end() ? it->second : v->debugName();
  }
  llvm::Error fail(const Node *n, const std::string &why) {
    std::string src = sourceOf(n);
    return err(path_, std::string("node '") + n->kind().toQualString() + "'" +
                          (src.empty() ? "" : " (" + src + ")") + ": " + why);
  }
  llvm::Error resolveAttributes(std::shared_ptr<torch::jit::Graph> &graph,
                                torch::jit::Module &m);
  /// The integer `v` holds when it is a constant or computed from tensor
  /// sizes (aten::size, int arithmetic, NumToTensor / Int round trips); null
  /// otherwise.
  aten::IntExprPtr exprOf(const Value *v);
  llvm::Expected<aten::Arg> argOf(const Node *n, const Value *v, const std::string &argName);
  llvm::Error addNode(Node *n);

  std::string path_;
  aten::Program &program_;
  std::map<std::string, at::Tensor> &tensors_;
  std::unordered_map<const Value *, std::string> names_;
  std::unordered_map<const Value *, aten::IntExprPtr> exprs_;
  int constants_ = 0;
};

llvm::Error Builder::resolveAttributes(std::shared_ptr<torch::jit::Graph> &graph,
                                       torch::jit::Module &m) {
  torch::jit::Graph &g = *graph;
  // PyTorch's names, shared storage once (tied weights): the first name
  // named_parameters() gives a tensor is its name.
  std::map<const void *, std::string> byStorage;
  std::set<std::string> parameterNames;
  for (const auto &p : m.named_parameters(/*recurse=*/true)) {
    parameterNames.insert(p.name);
    byStorage.emplace(p.value.unsafeGetTensorImpl(), p.name);
  }
  for (const auto &b : m.named_buffers(/*recurse=*/true))
    byStorage.emplace(b.value.unsafeGetTensorImpl(), b.name);

  Value *self = g.inputs().at(0);
  std::unordered_map<const Value *, torch::jit::Module> modules{{self, m}};
  std::map<std::string, Value *> inputOf; // one graph input per tensor
  std::vector<Node *> getAttrs;
  // Every block's (a branch's attribute reads too), definitions first.
  torch::jit::DepthFirstGraphNodeIterator walk(graph);
  while (Node *n = walk.next()) {
    if (n->kind() != prim::GetAttr)
      continue;
    auto owner = modules.find(n->input());
    if (owner == modules.end())
      return fail(n, "reads an attribute of something that is not a module");
    const std::string attr = n->s(c10::attr::name);
    c10::IValue v = owner->second.attr(attr);
    getAttrs.push_back(n);
    if (v.isObject()) {
      modules.emplace(n->output(), torch::jit::Module(v.toObject()));
      continue;
    }
    if (v.isTensor()) {
      at::Tensor t = v.toTensor();
      auto known = byStorage.find(t.unsafeGetTensorImpl());
      std::string name = known != byStorage.end()
                             ? known->second
                             : "constant." + std::to_string(constants_++);
      Value *&in = inputOf[name];
      if (!in) {
        in = g.addInput();
        in->setType(n->output()->type());
        names_[in] = name;
        tensors_[name] = t;
        aten::Input input;
        input.role = parameterNames.count(name) ? aten::Input::Parameter
                     : known != byStorage.end() ? aten::Input::Buffer
                                                : aten::Input::Constant;
        input.placeholder = name;
        input.name = name;
        input.requiresGrad = t.requires_grad();
        program_.inputs.push_back(input);
        aten::TensorMeta meta;
        meta.dtype = exportDType(t.scalar_type());
        meta.sizes.assign(t.sizes().begin(), t.sizes().end());
        program_.values[name] = meta;
      }
      n->output()->replaceAllUsesWith(in);
      continue;
    }
    if (v.isBool() || v.isInt() || v.isDouble() || v.isNone() || v.isString()) {
      torch::jit::WithInsertPoint guard(n);
      n->output()->replaceAllUsesWith(g.insertConstant(v));
      continue;
    }
    return fail(n, "attribute '" + attr + "' is a " + v.tagKind() +
                       ", which dsc cannot read as a constant");
  }
  // The model's tensors in named_parameters() then named_buffers() order,
  // as torch.export lists them (so that both give one IR).
  std::map<std::string, size_t> rank;
  for (const auto &p : m.named_parameters(/*recurse=*/true))
    rank.emplace(p.name, rank.size());
  for (const auto &b : m.named_buffers(/*recurse=*/true))
    rank.emplace(b.name, rank.size());
  std::stable_sort(program_.inputs.begin(), program_.inputs.end(),
                   [&](const aten::Input &a, const aten::Input &b) {
                     auto ra = rank.find(a.name), rb = rank.find(b.name);
                     size_t x = a.role == aten::Input::UserInput ? 0
                                : ra != rank.end()              ? 1 + ra->second
                                                                : rank.size() + 1;
                     size_t y = b.role == aten::Input::UserInput ? 0
                                : rb != rank.end()              ? 1 + rb->second
                                                                : rank.size() + 1;
                     return x < y;
                   });
  for (auto it = getAttrs.rbegin(); it != getAttrs.rend(); ++it)
    if (!(*it)->hasUses())
      (*it)->destroy();
  if (self->hasUses())
    return fail(self->uses()[0].user,
                "uses the module itself beyond reading its attributes (a method call "
                "that inlining left, or the module passed on)");
  g.eraseInput(0);
  return llvm::Error::success();
}

aten::IntExprPtr Builder::exprOf(const Value *v) {
  if (auto it = exprs_.find(v); it != exprs_.end())
    return it->second;
  exprs_[v] = nullptr; // no cycles in a graph; this marks the visit
  auto make = [](aten::IntExpr::Op op, int64_t value = 0, std::string tensor = "",
                 aten::IntExprPtr lhs = nullptr, aten::IntExprPtr rhs = nullptr) {
    auto e = std::make_shared<aten::IntExpr>();
    e->op = op;
    e->value = value;
    e->tensor = std::move(tensor);
    e->lhs = std::move(lhs);
    e->rhs = std::move(rhs);
    return aten::IntExprPtr(e);
  };
  aten::IntExprPtr e;
  const Node *n = v->node();
  const std::string kind = n->kind().toQualString();
  if (kind == "prim::Constant") {
    if (c10::optional<c10::IValue> c = torch::jit::toIValue(v)) {
      if (c->isInt())
        e = make(aten::IntExpr::Const, c->toInt());
      else if (c->isTensor() && c->toTensor().dim() == 0 &&
               c->toTensor().scalar_type() == c10::ScalarType::Long)
        e = make(aten::IntExpr::Const, c->toTensor().item<int64_t>());
    }
  } else if (kind == "aten::size" && n->inputs().size() == 2) {
    if (aten::IntExprPtr d = exprOf(n->inputs()[1]); d && d->op == aten::IntExpr::Const)
      e = make(aten::IntExpr::Size, d->value, nameOf(n->inputs()[0]));
  } else if (kind == "prim::ListUnpack" && n->input()->node()->kind() == c10::aten::size &&
             n->input()->node()->inputs().size() == 1) {
    for (size_t k = 0; k < n->outputs().size(); ++k)
      if (n->outputs()[k] == v)
        e = make(aten::IntExpr::Size, int64_t(k), nameOf(n->input()->node()->input()));
  } else if (kind == "aten::__getitem__" && n->inputs().size() == 2 &&
             n->inputs()[0]->node()->kind() == c10::aten::size &&
             n->inputs()[0]->node()->inputs().size() == 1) {
    // x.shape[-1] in a scripted forward: an element of the size list.
    if (aten::IntExprPtr d = exprOf(n->inputs()[1]); d && d->op == aten::IntExpr::Const)
      e = make(aten::IntExpr::Size, d->value, nameOf(n->inputs()[0]->node()->input()));
  } else if (kind == "prim::NumToTensor" || kind == "aten::Int" ||
             kind == "aten::ScalarImplicit" || kind == "aten::IntImplicit") {
    e = exprOf(n->inputs()[0]);
  } else if ((kind == "aten::floor_divide" || kind == "aten::floordiv" || kind == "aten::mul" ||
              kind == "aten::add" || kind == "aten::sub") &&
             n->inputs().size() >= 2) {
    aten::IntExprPtr a = exprOf(n->inputs()[0]), b = exprOf(n->inputs()[1]);
    bool unitAlpha = true;
    if (n->inputs().size() == 3) {
      aten::IntExprPtr alpha = exprOf(n->inputs()[2]);
      unitAlpha = alpha && alpha->op == aten::IntExpr::Const && alpha->value == 1;
    }
    if (a && b && unitAlpha)
      e = make(kind == "aten::add"   ? aten::IntExpr::Add
               : kind == "aten::sub" ? aten::IntExpr::Sub
               : kind == "aten::mul" ? aten::IntExpr::Mul
                                     : aten::IntExpr::FloorDiv,
               0, "", a, b);
  }
  return exprs_[v] = e;
}

llvm::Expected<aten::Arg> Builder::argOf(const Node *n, const Value *v,
                                         const std::string &argName) {
  aten::Arg a;
  if (v->type()->kind() == c10::TypeKind::TensorType) {
    // A 0-dim constant (a Python number the trace recorded as a tensor)
    // is the number, as torch.export writes it.
    if (v->node()->kind() == prim::Constant) {
      at::Tensor t = torch::jit::toIValue(v)->toTensor();
      if (t.dim() == 0 && (t.is_floating_point() || t.scalar_type() == c10::ScalarType::Long)) {
        if (t.is_floating_point()) {
          a.kind = aten::Arg::Float;
          a.f = t.item<double>();
        } else {
          a.kind = aten::Arg::Int;
          a.i = t.item<int64_t>();
        }
        return a;
      }
    }
    // A size the graph computes (NumToTensor(x.size(1)) // 2) is a number.
    if (aten::IntExprPtr e = v->node()->kind() != prim::Constant ? exprOf(v) : nullptr) {
      a.kind = aten::Arg::Int;
      a.exprs = {e};
      return a;
    }
    a.kind = aten::Arg::Tensor;
    a.tensor = nameOf(v);
    return a;
  }
  const Node *p = v->node();
  if (p->kind() == prim::ListConstruct && !torch::jit::toIValue(v)) {
    // A list of sizes some of which the graph computes.
    bool sizes = !p->inputs().empty();
    for (const Value *e : p->inputs())
      sizes &= bool(exprOf(e));
    if (sizes) {
      a.kind = aten::Arg::Ints;
      for (const Value *e : p->inputs()) {
        a.ints.push_back(0);
        a.exprs.push_back(exprOf(e));
      }
      return a;
    }
  }
  if (p->kind() != prim::Constant && v->type()->kind() == c10::TypeKind::IntType) {
    if (aten::IntExprPtr e = exprOf(v)) {
      a.kind = aten::Arg::Int;
      a.exprs = {e};
      return a;
    }
  }
  if (p->kind() == prim::ListConstruct) {
    bool tensors = true;
    for (const Value *e : p->inputs())
      tensors &= e->type()->kind() == c10::TypeKind::TensorType;
    if (tensors) {
      a.kind = aten::Arg::Tensors;
      for (const Value *e : p->inputs())
        a.tensors.push_back(nameOf(e));
      return a;
    }
  }
  c10::optional<c10::IValue> c = torch::jit::toIValue(v);
  if (!c)
    return fail(n, "argument '" + argName + "' is computed when the graph runs (" +
                       p->kind().toQualString() +
                       "); dsc reads sizes and flags that are constants in the archive (trace "
                       "the module with the shapes to train on)");
  if (c->isNone()) {
    a.kind = aten::Arg::None;
  } else if (c->isBool()) {
    a.kind = aten::Arg::Bool;
    a.i = c->toBool();
  } else if (c->isInt()) {
    a.kind = argName == "dtype" ? aten::Arg::ScalarType : aten::Arg::Int;
    a.i = argName == "dtype" ? exportDType(c10::ScalarType(c->toInt())) : c->toInt();
  } else if (c->isDouble()) {
    a.kind = aten::Arg::Float;
    a.f = c->toDouble();
  } else if (c->isString()) {
    a.kind = aten::Arg::String;
    a.s = c->toStringRef();
  } else if (c->isIntList()) {
    a.kind = aten::Arg::Ints;
    for (int64_t x : c->toIntVector())
      a.ints.push_back(x);
  } else if (c->isDoubleList()) {
    a.kind = aten::Arg::Floats;
    for (double x : c->toDoubleVector())
      a.floats.push_back(x);
  } else if (c->isBoolList()) {
    a.kind = aten::Arg::Bools;
    for (bool x : c->toBoolList())
      a.ints.push_back(x);
  } else if (c->isDevice()) {
    a.kind = aten::Arg::Device;
    a.s = c->toDevice().str();
  } else {
    a.kind = aten::Arg::Other;
    a.s = c->tagKind();
  }
  return a;
}

llvm::Error Builder::addNode(Node *n) {
  const c10::FunctionSchema *schema = n->maybeSchema();
  if (!schema)
    return fail(n, "has no operator schema (dsc lowers ATen operator calls)");
  aten::Node node;
  std::string name = schema->name();
  if (name.rfind("aten::", 0) != 0)
    return fail(n, "is not an ATen operator");
  node.target = "aten." + name.substr(6) + "." +
                (schema->overload_name().empty() ? "default" : schema->overload_name());
  node.sourceLine = sourceOf(n);
  const auto &params = schema->arguments();
  if (n->inputs().size() > params.size())
    return fail(n, "has more inputs than its schema's arguments");
  for (size_t k = 0; k < n->inputs().size(); ++k) {
    auto a = argOf(n, n->inputs()[k], params[k].name());
    if (!a)
      return a.takeError();
    node.args.emplace_back(params[k].name(), *a);
  }
  for (Value *out : n->outputs()) {
    if (out->type()->kind() == c10::TypeKind::ListType) {
      // Tensor[] results (split, chunk) are read through one ListUnpack.
      if (out->uses().size() != 1 || out->uses()[0].user->kind() != prim::ListUnpack)
        return fail(n, "its list result is used other than by unpacking it");
      for (Value *piece : out->uses()[0].user->outputs())
        node.outputs.push_back(nameOf(piece));
      continue;
    }
    node.outputs.push_back(nameOf(out));
  }
  node.name = n->outputs().empty() ? node.target : nameOf(n->outputs()[0]);
  program_.nodes.push_back(std::move(node));
  return llvm::Error::success();
}

llvm::Error Builder::run(torch::jit::Module &m,
                         const std::map<std::string, std::vector<int64_t>> &inputShapes,
                         const std::map<std::string, std::string> &inputDTypes) {
  if (!m.find_method("forward"))
    return err(path_, "the module has no forward method");
  std::shared_ptr<torch::jit::Graph> g = m.get_method("forward").graph()->copy();
  torch::jit::Inline(*g);
  // An Optional input (a scripted forward's `mask: Optional[Tensor] = None`)
  // is None without --input-shape, as a caller who leaves it out passes it,
  // and a tensor with one; either way the checks on it (`is not None`, and
  // the casts after them) fold away.
  bool refined = false;
  for (size_t k = g->inputs().size(); k-- > 1;) {
    Value *v = g->inputs()[k];
    auto optional = v->type()->cast<c10::OptionalType>();
    if (!optional)
      continue;
    refined = true;
    if (inputShapes.count(v->debugNameBase())) {
      v->setType(optional->getElementType());
      continue;
    }
    torch::jit::WithInsertPoint guard(g->param_node()->next());
    v->replaceAllUsesWith(g->insertConstant(c10::IValue()));
    g->eraseInput(k);
  }
  if (refined)
    torch::jit::PeepholeOptimize(g, /*disable_shape_peepholes=*/true);
  // The tuples a scripted forward passes between its functions
  // (`cos, sin = self.rotary_emb()`) unpacked where they are built.
  torch::jit::LowerSimpleTuples(g);
  // The user's inputs, before the attributes add theirs.
  std::vector<Value *> user(g->inputs().begin() + 1, g->inputs().end());
  for (Value *v : user) {
    std::string name = v->debugNameBase();
    names_[v] = name;
    aten::Input in;
    in.role = aten::Input::UserInput;
    in.placeholder = name;
    in.name = name;
    program_.inputs.push_back(in);
  }
  if (auto e = resolveAttributes(g, m))
    return e;
  // What a scripted forward asks of a tensor when it runs, and a trace
  // records as a constant: `x.device` (arange(..., device=ids.device); the
  // plan places tensors itself, so any device is the one), and a model
  // tensor's `.dtype` (arange(T, dtype=self.inv_freq.dtype)).
  for (auto it = g->nodes().begin(); it != g->nodes().end();) {
    Node *n = *it++;
    c10::IValue known;
    if (n->kind() == prim::device) {
      known = c10::Device(c10::kCPU);
    } else if (n->kind() == prim::dtype) {
      auto t = tensors_.find(nameOf(n->input()));
      if (t == tensors_.end())
        continue;
      known = int64_t(t->second.scalar_type());
    } else {
      continue;
    }
    torch::jit::WithInsertPoint guard(n);
    n->output()->replaceAllUsesWith(g->insertConstant(known));
    n->destroy();
  }
  torch::jit::ConstantPropagation(g);
  torch::jit::EliminateDeadCode(g);
  // In-place ops become functional where alias analysis proves it safe
  // (RemoveTensorMutation; not RemoveInplaceOps, which would also rewrite
  // a write through a view and lose it). What is left is refused below.
  torch::jit::RemoveListMutation(g);
  torch::jit::RemoveTensorMutation(g);
  torch::jit::ConstantPropagation(g);
  torch::jit::EliminateDeadCode(g);

  // Each user input's shape (--input-shape) and dtype (from its use).
  std::set<std::string> integral;
  for (Node *n : g->nodes()) {
    const c10::FunctionSchema *schema = n->maybeSchema();
    if (!schema)
      continue;
    for (size_t k = 0; k < n->inputs().size() && k < schema->arguments().size(); ++k) {
      const std::string &arg = schema->arguments()[k].name();
      bool index = (schema->name() == "aten::embedding" && arg == "indices") ||
                   (arg == "target" && (schema->name() == "aten::cross_entropy_loss" ||
                                        schema->name() == "aten::nll_loss" ||
                                        schema->name() == "aten::nll_loss_nd"));
      // Through the shape-only ops between the input and its use
      // (tgt.view(-1)).
      for (const Value *v = index ? n->inputs()[k] : nullptr; v;) {
        integral.insert(nameOf(v));
        const Node *p = v->node();
        static const std::set<std::string> views = {
            "aten::view", "aten::reshape", "aten::flatten", "aten::contiguous",
            "aten::squeeze", "aten::unsqueeze", "aten::select", "aten::slice"};
        const c10::FunctionSchema *ps = p->maybeSchema();
        v = ps && views.count(ps->name()) ? p->inputs()[0] : nullptr;
      }
    }
  }
  std::vector<std::string> missing;
  for (Value *v : user) {
    const std::string &name = names_[v];
    auto shape = inputShapes.find(name);
    if (shape == inputShapes.end()) {
      missing.push_back(name);
      continue;
    }
    aten::TensorMeta meta;
    meta.dtype = int(integral.count(name) ? aten::ScalarType::Long : aten::ScalarType::Float);
    if (auto d = inputDTypes.find(name); d != inputDTypes.end()) {
      static const std::map<std::string, aten::ScalarType> types = {
          {"float32", aten::ScalarType::Float}, {"float16", aten::ScalarType::Half},
          {"bfloat16", aten::ScalarType::BFloat16}, {"int64", aten::ScalarType::Long},
          {"int32", aten::ScalarType::Int}, {"bool", aten::ScalarType::Bool}};
      meta.dtype = int(types.at(d->second));
    }
    meta.sizes = shape->second;
    program_.values[name] = meta;
  }
  if (!missing.empty()) {
    std::string list;
    for (const std::string &s : missing)
      list += (list.empty() ? "" : ", ") + s;
    return err(path_, "a TorchScript archive keeps no input shapes: give each input's with "
                      "--input-shape NAME=DxD... (missing: " + list + ")");
  }

  // Tensor constants (what constant propagation folded, such as an arange
  // of fixed length, and the trace's own) are the program's constants.
  for (Node *n : g->nodes()) {
    if (n->kind() != prim::Constant ||
        n->output()->type()->kind() != c10::TypeKind::TensorType)
      continue;
    at::Tensor t = torch::jit::toIValue(n->output())->toTensor();
    if (t.dim() == 0 && (t.is_floating_point() || t.scalar_type() == c10::ScalarType::Long))
      continue; // an argument (argOf)
    // A trace records a Python float it divides by as a float64 tensor; a
    // 0-dim tensor takes the other operand's type in PyTorch's promotion,
    // and dsc computes in float32.
    if (t.scalar_type() == c10::ScalarType::Double)
      t = t.to(c10::ScalarType::Float);
    std::string name = "constant." + std::to_string(constants_++);
    names_[n->output()] = name;
    tensors_[name] = t;
    aten::Input in;
    in.role = aten::Input::Constant;
    in.placeholder = name;
    in.name = name;
    in.requiresGrad = false;
    program_.inputs.push_back(in);
    aten::TensorMeta meta;
    meta.dtype = exportDType(t.scalar_type());
    meta.sizes.assign(t.sizes().begin(), t.sizes().end());
    program_.values[name] = meta;
  }
  for (Node *n : g->nodes()) {
    auto kind = n->kind();
    if (kind == prim::Constant || kind == prim::ListConstruct || kind == prim::ListUnpack)
      continue;
    if (kind == prim::TupleConstruct && n->output()->uses().size() == 1 &&
        n->output()->uses()[0].user->kind() == prim::Return)
      continue;
    // Sizes and the integer arithmetic on them: their users' arguments.
    if (kind == c10::aten::size)
      continue;
    bool integerOnly = !n->outputs().empty();
    for (const Value *out : n->outputs())
      integerOnly &= bool(exprOf(out));
    if (integerOnly)
      continue;
    if (kind.is_prim())
      return fail(n, "is not supported (constant propagation leaves it: control flow or "
                     "Python objects the graph builds when it runs)");
    std::string qual = kind.toQualString();
    if (qual.size() > 1 && qual.back() == '_' && qual.find("__") == std::string::npos)
      return fail(n, "is an in-place op dsc could not make functional (it writes a tensor "
                     "another op reads); write it out of place in the model");
    if (auto e = addNode(n))
      return e;
  }
  for (Value *out : g->outputs()) {
    if (out->node()->kind() == prim::TupleConstruct) {
      for (Value *e : out->node()->inputs())
        program_.outputs.push_back(nameOf(e));
      continue;
    }
    program_.outputs.push_back(nameOf(out));
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::unique_ptr<Archive>>
LibtorchArchive::load(const std::string &path,
                      const std::map<std::string, std::vector<int64_t>> &inputShapes,
                      const std::map<std::string, std::string> &inputDTypes) {
  std::unique_ptr<LibtorchArchive> a(new LibtorchArchive());
  a->program_.path = path;
  a->program_.producer = "TorchScript (torch.jit.save)";
  // libtorch 1.13 is not safe on a malformed archive (the fuzzer found a
  // null dereference in its TorchScript class parser, a bad free in its
  // unpickler, and 12 GB allocations): a child process checks and loads
  // it first (checkAndLoad), so that a crash there is an error here, and
  // this process reads only an archive that loaded there.
  if (std::string why = trialLoad(path); !why.empty())
    return err(path, why);
  try {
    a->module_ = torch::jit::load(path);
  } catch (const std::exception &e) {
    return err(path, "not a TorchScript archive libtorch can read: " + firstLine(e.what()));
  }
  torch::jit::Module &m = a->module_;
  if (!m.is_training())
    return err(path, "the module was saved in eval mode (model.eval(): dropout off, batch "
                     "norm frozen); call model.train() before torch.jit.trace or "
                     "torch.jit.script and save it again");
  Builder b(path, a->program_, a->tensors_);
  try {
    if (auto e = b.run(m, inputShapes, inputDTypes))
      return std::move(e);
  } catch (const std::exception &e) {
    return err(path, "cannot read its forward graph: " + firstLine(e.what()));
  }
  return std::unique_ptr<Archive>(std::move(a));
}

llvm::Expected<std::string> LibtorchArchive::readTensor(const std::string &name,
                                                        aten::TensorMeta &meta) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return err(program_.path, "no parameter or buffer named '" + name + "'");
  at::Tensor t = it->second.contiguous();
  meta.dtype = exportDType(t.scalar_type());
  meta.sizes.assign(t.sizes().begin(), t.sizes().end());
  return std::string(static_cast<const char *>(t.data_ptr()), t.numel() * t.element_size());
}

llvm::Error LibtorchArchive::readFloat(const std::string &name, std::vector<int64_t> &shape,
                                       std::vector<float> &values) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return err(program_.path, "no parameter or buffer named '" + name + "'");
  at::Tensor t = it->second.detach().to(at::kFloat).contiguous();
  shape.assign(t.sizes().begin(), t.sizes().end());
  const float *p = t.data_ptr<float>();
  values.assign(p, p + t.numel());
  return llvm::Error::success();
}

} // namespace dsc::torchscript

// The library's one entry point (TorchScriptLoader.cpp finds it by name).
extern "C" __attribute__((visibility("default"))) void *dsc_torchscript_open() {
  dsc::torchscript::OpenFn fn = &dsc::torchscript::LibtorchArchive::load;
  return reinterpret_cast<void *>(fn);
}
