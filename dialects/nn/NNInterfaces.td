//===- NNInterfaces.td - gradient and cost op interfaces ---*- tablegen -*-===//
#ifndef DSC_NN_INTERFACES
#define DSC_NN_INTERFACES

include "mlir/IR/OpBase.td"

def NN_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::dsc::nn";
  let description = [{
    The gradient rule of an op. Reverse-mode autodiff walks from the loss and
    asks each op which operands receive a gradient; the explicit list of
    non-differentiable operands (indices, masks, integer inputs) keeps
    parameter classification and the backward graph exact.
  }];
  let methods = [
    InterfaceMethod<
      "Whether a gradient flows from the results to operand `index`.",
      "bool", "isDifferentiableOperand", (ins "unsigned":$index), "",
      [{ return ::dsc::nn::isFloatTensor($_op->getOperand(index).getType()); }]>,
    InterfaceMethod<[{
        Emits the gradients of the operands at `b`'s insertion point, given
        the gradients of the results (`resultGrads[i]` is null when result i
        receives none). Sets `operandGrads` to one value per operand, null
        where the operand gets no gradient. Fails with a diagnostic on the
        op when no rule exists (e.g. the gradient ops themselves).
      }],
      "::llvm::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$b,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

def NN_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::dsc::nn";
  let description = [{
    Static cost of one execution: floating-point operations and bytes moved.
    Used by --explain, pipeline-split (balance by cost), pipeline-schedule
    (each part's time as flops plus bytes / 8) and recompute (the flops it
    adds).
  }];
  let methods = [
    InterfaceMethod<"Floating-point operations (a fused multiply-add counts 2).",
      "int64_t", "getFlops", (ins), "",
      [{ return ::dsc::nn::resultElements($_op); }]>,
    InterfaceMethod<"Bytes read from the operands.",
      "int64_t", "getBytesRead", (ins), "",
      [{ return ::dsc::nn::operandBytes($_op); }]>,
    InterfaceMethod<"Bytes written to the results.",
      "int64_t", "getBytesWritten", (ins), "",
      [{ return ::dsc::nn::resultBytes($_op); }]>,
  ];
}

#endif // DSC_NN_INTERFACES
