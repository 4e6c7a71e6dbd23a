//===- NNBase.td - nn dialect definition, types, enums -----*- tablegen -*-===//
#ifndef DSC_NN_BASE
#define DSC_NN_BASE

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def NN_Dialect : Dialect {
  let name = "nn";
  let cppNamespace = "::dsc::nn";
  let summary = "Tensor compute at the granularity of runtime kernels";
  let description = [{
    Every `nn` op maps to one runtime kernel (or a view, for reshape). Operands
    and results are statically shaped tensors: the importer folds every shape
    computation, so memory planning and cost estimation are exact.
    Elementwise binary ops broadcast with NumPy rules.
  }];
  let useDefaultAttributePrinterParser = 1;
  // Gradient rules materialize scalar constants with arith.constant.
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

// Every nn value has a static shape: the memory planner needs exact sizes.
def NN_Tensor : StaticShapeTensorOf<[AnyType]>;
def NN_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
def NN_IntTensor : StaticShapeTensorOf<[AnySignlessInteger]>;
def NN_BoolTensor : StaticShapeTensorOf<[I1]>;
def NN_Scalar : 0DTensorOf<[AnyFloat]>;

def NN_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how GELU evaluates the Gaussian CDF", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::dsc::nn";
  let genSpecializedAttr = 0;
}
def NN_GeluApproximationAttr
    : EnumAttr<NN_Dialect, NN_GeluApproximation, "gelu_approximation">;

def NN_Reduction : I32EnumAttr<"Reduction", "how a loss reduces over samples", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"sum", 1>,
      I32EnumAttrCase<"mean", 2>]> {
  let cppNamespace = "::dsc::nn";
  let genSpecializedAttr = 0;
}
def NN_ReductionAttr : EnumAttr<NN_Dialect, NN_Reduction, "reduction">;

def NN_CmpPredicate : I32EnumAttr<"CmpPredicate", "elementwise comparison", [
      I32EnumAttrCase<"eq", 0>,
      I32EnumAttrCase<"ne", 1>,
      I32EnumAttrCase<"lt", 2>,
      I32EnumAttrCase<"le", 3>,
      I32EnumAttrCase<"gt", 4>,
      I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::dsc::nn";
  let genSpecializedAttr = 0;
}
def NN_CmpPredicateAttr : EnumAttr<NN_Dialect, NN_CmpPredicate, "predicate">;

#endif // DSC_NN_BASE
