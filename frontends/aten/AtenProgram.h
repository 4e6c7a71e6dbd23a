//===- AtenProgram.h - a forward+loss graph of ATen operator calls -*- C++ -*-===//
//
// What the frontends that speak ATen hand to the one ATen op table: a
// torch.export program (.pt2) and a TorchScript graph (.pt). It is the
// graph as a list of calls of ATen overloads with named arguments (the
// names of the operator's schema), the static type of every tensor value
// (of the inputs only, for TorchScript: the importer infers the rest),
// and the program's signature: which placeholders are parameters, buffers,
// constants and user inputs. Weights are not held here; the reader serves
// them on demand by their PyTorch names.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FRONTENDS_ATEN_ATENPROGRAM_H
#define DSC_FRONTENDS_ATEN_ATENPROGRAM_H

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dsc::aten {

/// torch's ScalarType numbering (torch/_export/serde/schema.py).
enum class ScalarType : int {
  Byte = 1, Char = 2, Short = 3, Int = 4, Long = 5, Half = 6, Float = 7, Double = 8,
  Bool = 12, BFloat16 = 13,
};
/// "float32" for 7; "dtype 9" for what dsc does not name.
std::string scalarTypeName(int code);
/// Bytes per element, 0 for a type dsc does not read.
int64_t scalarTypeBytes(int code);
/// "[8, 64]".
std::string formatSizes(const std::vector<int64_t> &sizes);

struct TensorMeta {
  int dtype = 0;
  std::vector<int64_t> sizes;
};

/// An integer a TorchScript graph computes from tensor sizes (x.size(-1)
/// // 2): evaluated by the importer, which knows every tensor's shape.
struct IntExpr {
  enum Op { Const, Size, Add, Sub, Mul, FloorDiv };
  Op op = Const;
  int64_t value = 0;  // Const: the number; Size: the dimension
  std::string tensor; // Size: the value whose dimension it is
  std::shared_ptr<const IntExpr> lhs, rhs;
};
using IntExprPtr = std::shared_ptr<const IntExpr>;

/// One argument of a call, as the serialized schema spells it.
struct Arg {
  enum Kind { None, Tensor, Tensors, Int, Ints, Float, Floats, Bool, Bools, String, ScalarType,
              Device, Layout, MemoryFormat, Other };
  Kind kind = None;
  std::string tensor;               // Tensor
  std::vector<std::string> tensors; // Tensors
  int64_t i = 0;                    // Int, ScalarType (its code), Bool
  std::vector<int64_t> ints;        // Ints, Bools
  double f = 0;                     // Float
  std::vector<double> floats;       // Floats
  std::string s;                    // String, Device; the JSON key for Other
  /// Int, Ints: sizes computed from tensor shapes (one per element of Ints,
  /// null for a constant one); empty when every value is a constant.
  std::vector<IntExprPtr> exprs;
};

struct Node {
  std::string target; // "aten.linear.default"
  std::string name;   // the fx node's name
  std::vector<std::pair<std::string, Arg>> args; // by schema name, in order
  /// Tensor results; "" for one that is not used.
  std::vector<std::string> outputs;
  /// "make_exports.py:26" of the innermost frame of the user's code, and
  /// the module path ("blocks.0.qkv"), where the program records them.
  std::string sourceLine, module;

  const Arg *arg(const std::string &name) const {
    for (const auto &[n, a] : args)
      if (n == name)
        return &a;
    return nullptr;
  }
};

struct Input {
  enum Role { Parameter, Buffer, Constant, UserInput };
  Role role = UserInput;
  std::string placeholder; // the graph's value name (p_wte_weight, idx)
  std::string name;        // the PyTorch name (wte.weight); idx for inputs
  bool requiresGrad = true;
};

struct Program {
  std::string path;       // the file, for messages
  std::string producer;   // "PyTorch 2.11.0 (torch.export)"
  std::vector<Input> inputs;
  std::vector<Node> nodes;
  std::vector<std::string> outputs; // user outputs, by value name
  std::map<std::string, TensorMeta> values;
};

} // namespace dsc::aten

#endif // DSC_FRONTENDS_ATEN_ATENPROGRAM_H
