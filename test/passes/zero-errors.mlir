// RUN: not dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation --optimizer --zero="stage=0" 2>&1 | FileCheck %s --check-prefix=STAGE0
// RUN: not dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation --optimizer --zero="stage=4" 2>&1 | FileCheck %s --check-prefix=STAGE4
// RUN: not dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation --optimizer --zero="dp=0" 2>&1 | FileCheck %s --check-prefix=DP
// RUN: not dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation --optimizer --data-parallel --zero 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --optimizer --zero 2>&1 | FileCheck %s --check-prefix=NOACC

// STAGE0: error: zero: stage must be 1, 2 or 3 (stage 0 is the data-parallel pass), got 0
// STAGE4: error: zero: stage must be 1, 2 or 3 (stage 0 is the data-parallel pass), got 4
// DP: error: zero: dp must be at least 1, got 0
// Partitioning a step that already all-reduces its gradients.
// TWICE: error: 'dist.all_reduce' op zero: the step already communicates (data-parallel ran?)
// NOACC: error: zero: expected one train.accumulate (run gradient-accumulation)
