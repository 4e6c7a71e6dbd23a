//===- Passes.td - every dsc pass, by flag ------------------*- tablegen -*-===//
#ifndef DSC_PASSES
#define DSC_PASSES

include "mlir/Pass/PassBase.td"

def NNCostReport : Pass<"nn-cost-report", "mlir::ModuleOp"> {
  let summary = "Print the flops and bytes of every function, by op kind";
  let description = [{
    Sums the CostOpInterface of every op per function and prints a table
    (op, count, GFLOP, MB read, MB written) and the totals. It changes
    nothing; `dsc --explain` prints the same table.
  }];
  let statistics = [
    Statistic<"numCostedOps", "costed-ops", "Ops with a cost model">,
  ];
}

#endif // DSC_PASSES
