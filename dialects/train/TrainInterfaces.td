//===- TrainInterfaces.td - optimizer update interface -----*- tablegen -*-===//
#ifndef DSC_TRAIN_INTERFACES
#define DSC_TRAIN_INTERFACES

include "mlir/IR/OpBase.td"

def Train_OptimizerUpdateOpInterface : OpInterface<"OptimizerUpdateOpInterface"> {
  let cppNamespace = "::dsc::train";
  let description = [{
    A parameter update: operand 0 is the parameter, operand 1 its (clipped)
    gradient, and some later operands are the optimizer states; result 0
    is the new parameter and results 1.. are the new states, in the order
    of `getOptStates`. Elementwise in the parameter and its states (so ZeRO
    may update any chunk of them), except for what reads other operands:
    LAMB's trust ratio comes in as an operand the passes reduce. The
    runtime runs it in place (the memory plan gives each state and its new
    value one buffer) and skips it on an fp16 overflow.
  }];
  let methods = [
    InterfaceMethod<"The parameter it updates.", "::mlir::Value", "getOptParam", (ins), "",
      [{ return $_op->getOperand(0); }]>,
    InterfaceMethod<"The gradient it applies.", "::mlir::Value", "getOptGrad", (ins), "",
      [{ return $_op->getOperand(1); }]>,
    InterfaceMethod<"The updated parameter.", "::mlir::Value", "getOptNewParam", (ins), "",
      [{ return $_op->getResult(0); }]>,
    InterfaceMethod<"The optimizer-state operands, in the order of their new values.",
      "::llvm::SmallVector<::mlir::OpOperand *>", "getOptStates", (ins)>,
    InterfaceMethod<"The updated states, in the order of getOptStates.",
      "::mlir::ResultRange", "getOptNewStates", (ins), "",
      [{ return $_op->getResults().drop_front(1); }]>,
  ];
}

#endif // DSC_TRAIN_INTERFACES
