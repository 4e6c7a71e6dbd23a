// RUN: not dsc-opt %S/Inputs/pp-mlp.mlir --pipeline-split="stages=5" 2>&1 | FileCheck %s --check-prefix=LAYERS
// RUN: not dsc-opt %S/Inputs/pp-mlp.mlir --pipeline-split="stages=2 method=best" 2>&1 | FileCheck %s --check-prefix=METHOD
// RUN: not dsc-opt %S/Inputs/pp-mlp.mlir --pipeline-split="stages=4" --autodiff --pipeline-schedule="micro-batches=3" 2>&1 | FileCheck %s --check-prefix=FEWER
// RUN: not dsc-opt %S/Inputs/pp-mlp.mlir --pipeline-split="stages=2" --autodiff --pipeline-schedule="micro-batches=2 schedule=gpipe" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not dsc-opt %S/Inputs/pp-mlp.mlir --autodiff --pipeline-schedule="micro-batches=2" 2>&1 | FileCheck %s --check-prefix=NOSPLIT
// RUN: not dsc-opt %S/Inputs/pp-mlp.mlir --pipeline-split="stages=2" --autodiff --gradient-accumulation=steps=2 --pipeline-schedule="micro-batches=2" 2>&1 | FileCheck %s --check-prefix=ACCUMULATED

// LAYERS: error: pipeline-split: 5 stages but the model has only 4 layers to cut between (cut points are where 1 activation is live); use fewer stages
// METHOD: error: pipeline-split: unknown partition method 'best' (expected uniform, parameters or cost)
// FEWER: error: pipeline-schedule: 1f1b needs at least as many micro-batches as stages, got M = 3 < P = 4 (raise gradient_accumulation_steps / --micro-batches, or use fewer stages)
// SCHEDULE: error: pipeline-schedule: unknown schedule 'gpipe' (expected 1f1b or zb-h1)
// NOSPLIT: error: pipeline-schedule: no dist.pp on the module (run pipeline-split first)
// ACCUMULATED: error: pipeline-schedule: the step is already accumulated (run pipeline-schedule instead of gradient-accumulation)
