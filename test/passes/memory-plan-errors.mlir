// RUN: split-file %s %t
// RUN: dsc-opt %t/functions.mlir -split-input-file --memory-plan -verify-diagnostics
// RUN: dsc-opt %t/alignment.mlir --memory-plan=alignment=0 -verify-diagnostics
// RUN: dsc-opt %t/alignment.mlir --memory-plan=alignment=48 -verify-diagnostics
// RUN: dsc-opt %t/alignment.mlir --memory-plan=alignment=-64 -verify-diagnostics

//--- alignment.mlir
// The alignment must be a positive power of two; it is checked on each
// function before it is planned.
// expected-error @below {{memory-plan: alignment must be a power of two}}
func.func @step() {
  return
}

//--- functions.mlir
// Every error --memory-plan reports on a function.

// train.adam updates the parameter in place, so nothing may read the old
// value after it: the reader is reported.
func.func @read_after_adam(%w: tensor<4xf32> {train.param = "w"}, %m: tensor<4xf32> {train.opt_state = "w/exp_avg"},
                           %v: tensor<4xf32> {train.opt_state = "w/exp_avg_sq"}, %s: tensor<i64> {train.step},
                           %g: tensor<4xf32> {train.input = "g"}, %lr: tensor<f32> {train.input = "lr"})
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %p, %m2, %v2 = train.adam %w, %g, %m, %v, %lr, %s : tensor<4xf32>
  // expected-error @+1 {{'nn.mul' op reads a parameter or optimizer state after its optimizer update}}
  %late = nn.mul %w, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %p, %m2, %v2, %late : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// The same for train.sgd, when the reader is the return of the old value.
func.func @return_after_sgd(%w: tensor<4xf32> {train.param = "w"}, %g: tensor<4xf32> {train.input = "g"},
                            %lr: tensor<f32> {train.input = "lr"}) -> (tensor<4xf32>, tensor<4xf32>) {
  %p = train.sgd %w, %g, %lr : tensor<4xf32>
  // expected-error @+1 {{'func.return' op reads a parameter or optimizer state after its optimizer update}}
  return %p, %w : tensor<4xf32>, tensor<4xf32>
}

// -----

// Reading the parameter before its update is fine (no diagnostic).
func.func @read_before_sgd(%w: tensor<4xf32> {train.param = "w"}, %g: tensor<4xf32> {train.input = "g"},
                           %lr: tensor<f32> {train.input = "lr"}) -> (tensor<4xf32>, tensor<4xf32>) {
  %early = nn.mul %w, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %p = train.sgd %w, %g, %lr : tensor<4xf32>
  return %p, %early : tensor<4xf32>, tensor<4xf32>
}
