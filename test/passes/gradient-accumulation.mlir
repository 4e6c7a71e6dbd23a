// RUN: dsc-opt %s --gradient-accumulation=steps=4 | FileCheck %s --check-prefix=GA4
// RUN: dsc-opt %s --gradient-accumulation=steps=1 | FileCheck %s --check-prefix=GA1
// The default is one micro-batch per step.
// RUN: dsc-opt %s --gradient-accumulation | FileCheck %s --check-prefix=GA1
// The output is valid IR that round-trips.
// RUN: dsc-opt %s --gradient-accumulation=steps=4 | dsc-opt | FileCheck %s --check-prefix=GA4

// --gradient-accumulation moves the whole body of a differentiated step
// (one with train.grad results) into `train.accumulate steps`, whose block
// takes the micro-batch index and yields the loss and the gradients; their
// sums come out of the op and are multiplied by a 1/steps constant each, so
// the step returns the mean loss and the gradients of the mean loss.

// A step as --autodiff leaves it: loss, then the gradients of w and b.
// GA4-LABEL: func.func @step(
// GA4-SAME:    %[[X:[a-z0-9]+]]: tensor<4x3xf32> {train.input = "x"}, %[[W:[a-z0-9]+]]: tensor<3x5xf32> {train.param = "w"}, %[[B:[a-z0-9]+]]: tensor<5xf32> {train.param = "b"})
// GA4-SAME:    -> (tensor<f32> {train.loss}, tensor<3x5xf32> {train.grad = "w"}, tensor<5xf32> {train.grad = "b"})
// GA4-NEXT:    %[[ACC:.*]]:3 = train.accumulate 4 -> tensor<f32>, tensor<3x5xf32>, tensor<5xf32> {
// GA4-NEXT:    ^bb0(%{{.*}}: index):
// GA4-NEXT:      %[[MM:.*]] = nn.matmul %[[X]], %[[W]] : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
// GA4-NEXT:      %[[ADD:.*]] = nn.add %[[MM]], %[[B]] : tensor<4x5xf32>, tensor<5xf32> -> tensor<4x5xf32>
// GA4-NEXT:      %[[LOSS:.*]] = nn.reduce_sum %[[ADD]] {axes = array<i64: 0, 1>} : tensor<4x5xf32> -> tensor<f32>
// GA4-NEXT:      %[[ONES:.*]] = arith.constant dense<1.000000e+00> : tensor<4x5xf32>
// GA4-NEXT:      %[[GW:.*]] = nn.matmul %[[X]], %[[ONES]] {transpose_lhs} : tensor<4x3xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
// GA4-NEXT:      %[[GB:.*]] = nn.reduce_sum %[[ONES]] {axes = array<i64: 0>} : tensor<4x5xf32> -> tensor<5xf32>
// GA4-NEXT:      train.yield %[[LOSS]], %[[GW]], %[[GB]] : tensor<f32>, tensor<3x5xf32>, tensor<5xf32>
// GA4-NEXT:    }
// Each sum is scaled by its own 1/4 constant, of its element type.
// GA4-NEXT:    %[[Q0:.*]] = arith.constant dense<2.500000e-01> : tensor<f32>
// GA4-NEXT:    %[[L:.*]] = nn.mul %[[ACC]]#0, %[[Q0]] : tensor<f32>, tensor<f32> -> tensor<f32>
// GA4-NEXT:    %[[Q1:.*]] = arith.constant dense<2.500000e-01> : tensor<f32>
// GA4-NEXT:    %[[DW:.*]] = nn.mul %[[ACC]]#1, %[[Q1]] : tensor<3x5xf32>, tensor<f32> -> tensor<3x5xf32>
// GA4-NEXT:    %[[Q2:.*]] = arith.constant dense<2.500000e-01> : tensor<f32>
// GA4-NEXT:    %[[DB:.*]] = nn.mul %[[ACC]]#2, %[[Q2]] : tensor<5xf32>, tensor<f32> -> tensor<5xf32>
// GA4-NEXT:    return %[[L]], %[[DW]], %[[DB]] : tensor<f32>, tensor<3x5xf32>, tensor<5xf32>
// GA4-NEXT:  }

// With one micro-batch the body is wrapped the same way (the runtime's
// schedule is uniform) but nothing is scaled: the sums are returned.
// GA1-LABEL: func.func @step(
// GA1-NEXT:    %[[ACC:.*]]:3 = train.accumulate 1 -> tensor<f32>, tensor<3x5xf32>, tensor<5xf32> {
// GA1-NEXT:    ^bb0(%{{.*}}: index):
// GA1:           train.yield
// GA1-NEXT:    }
// GA1-NEXT:    return %[[ACC]]#0, %[[ACC]]#1, %[[ACC]]#2 : tensor<f32>, tensor<3x5xf32>, tensor<5xf32>
// GA1-NEXT:  }
// GA1-NOT:   nn.mul
func.func @step(%x: tensor<4x3xf32> {train.input = "x"}, %w: tensor<3x5xf32> {train.param = "w"}, %b: tensor<5xf32> {train.param = "b"})
    -> (tensor<f32> {train.loss}, tensor<3x5xf32> {train.grad = "w"}, tensor<5xf32> {train.grad = "b"}) {
  %0 = nn.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
  %1 = nn.add %0, %b : tensor<4x5xf32>, tensor<5xf32> -> tensor<4x5xf32>
  %2 = nn.reduce_sum %1 {axes = array<i64: 0, 1>} : tensor<4x5xf32> -> tensor<f32>
  %ones = arith.constant dense<1.0> : tensor<4x5xf32>
  %3 = nn.matmul %x, %ones {transpose_lhs} : tensor<4x3xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
  %4 = nn.reduce_sum %ones {axes = array<i64: 0>} : tensor<4x5xf32> -> tensor<5xf32>
  return %2, %3, %4 : tensor<f32>, tensor<3x5xf32>, tensor<5xf32>
}

// The scale constant has the element type of the value it scales (f64
// here, with 1/4 exact in both types).
// GA4-LABEL: func.func @f64_step(
// GA4:         train.accumulate 4 -> tensor<f64>, tensor<2xf64> {
// GA4:         %[[Q:.*]] = arith.constant dense<2.500000e-01> : tensor<f64>
// GA4-NEXT:    nn.mul %{{.*}}#0, %[[Q]] : tensor<f64>, tensor<f64> -> tensor<f64>
// GA4-NEXT:    %[[Q2:.*]] = arith.constant dense<2.500000e-01> : tensor<f64>
// GA4-NEXT:    nn.mul %{{.*}}#1, %[[Q2]] : tensor<2xf64>, tensor<f64> -> tensor<2xf64>
func.func @f64_step(%w: tensor<2xf64> {train.param = "w"})
    -> (tensor<f64> {train.loss}, tensor<2xf64> {train.grad = "w"}) {
  %0 = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<2xf64> -> tensor<f64>
  return %0, %w : tensor<f64>, tensor<2xf64>
}

// A function without train.grad results (not differentiated) is left
// alone, even with a train.loss.
// GA4-LABEL: func.func @forward_only(
// GA4-NEXT:    nn.reduce_sum
// GA4-NEXT:    return
// GA4-NOT:     train.accumulate
// GA1-LABEL: func.func @forward_only(
// GA1-NEXT:    nn.reduce_sum
// GA1-NEXT:    return
// GA1-NOT:     train.accumulate
func.func @forward_only(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  %0 = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// accum-dtype=bf16 (grad_accum_dtype): the micro-batch yields each
// parameter's bf16 gradient (the one before its cast back to fp32; the
// cast is gone), the sums are bf16, and each is cast to fp32 once after the
// micro-batches, before the 1/steps scaling. The loss stays fp32.
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --mixed-precision --autodiff --gradient-accumulation="steps=2 accum-dtype=bf16" | FileCheck %s --check-prefix=BF16SUM
// BF16SUM:      %[[S:.*]]:4 = train.accumulate 2 -> tensor<f32>, tensor<6x3xbf16>, tensor<6xbf16>, tensor<6x5xbf16>
// BF16SUM-NOT:    nn.cast {{.*}}xbf16> to tensor<6x3xf32>
// BF16SUM:        train.yield
// BF16SUM:      nn.cast %[[S]]#1 : tensor<6x3xbf16> to tensor<6x3xf32>
// RUN: not dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation="steps=2 accum-dtype=fp8" 2>&1 | FileCheck %s --check-prefix=BADACC
// BADACC: for the --accum-dtype option: Cannot find option named 'fp8'!
