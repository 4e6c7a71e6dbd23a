// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=1 --optimizer --data-parallel=dp=4 | FileCheck %s --check-prefix=GA1
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=2 --optimizer --data-parallel=dp=4 | FileCheck %s --check-prefix=GA2
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=2 --optimizer --data-parallel=dp=4 | dsc-opt --verify-zero | FileCheck %s --check-prefix=GA2
// RUN: split-file %s %t
// RUN: dsc-opt %t/dp0.mlir --data-parallel=dp=0 -verify-diagnostics
// RUN: dsc-opt %t/twice.mlir --data-parallel -verify-diagnostics
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=2 --optimizer --data-parallel="dp=4 comm-dtype=bf16" | FileCheck %s --check-prefix=BF16
// RUN: not dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=2 --optimizer --data-parallel="dp=4 comm-dtype=fp8" 2>&1 | FileCheck %s --check-prefix=BADCOMM

// comm-dtype (communication_data_type): each gradient is cast to bf16, all-
// reduced in bf16 (half the bytes), and cast back to fp32 where the
// clipping reads it, after every all-reduce (so comm-fusion can bucket
// them); the clipping and the update stay fp32.
// BF16-LABEL: func.func @mlp(
// BF16:         %[[L:.*]] = nn.cast %{{.*}} : tensor<6x3xf32> to tensor<6x3xbf16>
// BF16-NEXT:    %[[R:.*]] = dist.all_reduce avg %[[L]] {group = #dist.group<dp, 4>} : tensor<6x3xbf16> -> tensor<6x3xbf16>
// BF16-NEXT:    %[[W:.*]] = dist.wait %[[R]] : tensor<6x3xbf16>
// BF16:         %[[B:.*]] = nn.cast %[[W]] : tensor<6x3xbf16> to tensor<6x3xf32>
// BF16:         train.clip_grad_norm %[[B]],
// BADCOMM: for the --comm-dtype option: Cannot find option named 'fp8'!

// --data-parallel (ZeRO stage 0) averages every gradient over the ranks
// once per optimizer step; parameters and states stay whole.

// With one micro-batch the boundary is the end of the micro-batch: each
// gradient is all-reduced where the backward pass produces it (w2's first),
// so the reduction overlaps the rest of the backward pass.
// GA1:      module attributes {dist.dp = 4 : i64, dist.zero_stage = 0 : i64}
// GA1:      train.accumulate 1 -> tensor<f32>, tensor<6x3xf32>, tensor<6xf32>, tensor<6x5xf32>
// GA1:      %[[G2:.*]] = nn.matmul %{{.*}}, %{{.*}} {transpose_lhs} : tensor<4x6xf32>, tensor<4x5xf32> -> tensor<6x5xf32>
// GA1-NEXT: %[[R2:.*]] = dist.all_reduce  avg %[[G2]] {group = #dist.group<dp, 4>} : tensor<6x5xf32> -> tensor<6x5xf32>
// GA1-NEXT: %[[W2:.*]] = dist.wait %[[R2]] : tensor<6x5xf32>
// GA1:      %[[GB:.*]] = nn.reduce_sum
// GA1-NEXT: %[[RB:.*]] = dist.all_reduce  avg %[[GB]] {group = #dist.group<dp, 4>} : tensor<6xf32> -> tensor<6xf32>
// GA1-NEXT: %[[WB:.*]] = dist.wait %[[RB]]
// GA1-NEXT: %[[G1:.*]] = nn.matmul %{{.*}}, %{{.*}} {transpose_lhs} : tensor<4x6xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
// GA1-NEXT: %[[R1:.*]] = dist.all_reduce  avg %[[G1]]
// GA1-NEXT: %[[W1:.*]] = dist.wait %[[R1]]
// GA1-NEXT: train.yield %{{.*}}, %[[W1]], %[[WB]], %[[W2]] :
// GA1-NOT:  dist.
// GA1:      train.clip_grad_norm %{{.*}}#1, %{{.*}}#2, %{{.*}}#3 {max_norm
// GA1-NOT:  dist.
// GA1:      return

// With two micro-batches, the scaled sums are reduced after the
// accumulation: never once per micro-batch.
// GA2:      train.accumulate 2
// GA2-NOT:  dist.
// GA2:      train.yield
// GA2:      %[[S1:.*]] = nn.mul %{{.*}}#1, %{{.*}} : tensor<6x3xf32>, tensor<f32> -> tensor<6x3xf32>
// GA2-NEXT: %[[R1:.*]] = dist.all_reduce  avg %[[S1]] {group = #dist.group<dp, 4>} : tensor<6x3xf32> -> tensor<6x3xf32>
// GA2-NEXT: %[[W1:.*]] = dist.wait %[[R1]] : tensor<6x3xf32>
// GA2:      dist.all_reduce  avg %{{.*}} : tensor<6xf32>
// GA2:      dist.all_reduce  avg %{{.*}} : tensor<6x5xf32>
// GA2-NEXT: %[[W3:.*]] = dist.wait
// GA2-NEXT: train.clip_grad_norm %[[W1]], %{{.*}}, %[[W3]] {max_norm

// Errors (-verify-diagnostics, each on its own input).

//--- dp0.mlir
// The rank count is checked on the module, before any function.
// expected-error @below {{data-parallel: dp must be at least 1, got 0}}
module {
}

//--- twice.mlir
// A step that already all-reduces its gradients (data-parallel ran twice).
module attributes {dist.dp = 2 : i64, dist.zero_stage = 0 : i64} {
  func.func @twice(%x: tensor<4xf32> {train.input = "x"}, %w: tensor<4xf32> {train.param = "w"}, %step: tensor<i64> {train.step})
      -> (tensor<4xf32> {train.updated = "w"}, tensor<f32> {train.loss}, tensor<f32> {train.grad_norm}, tensor<f32> {train.lr}) {
    %lr = train.lr_schedule "constant" {lr = 1.000000e-03 : f64}, %step
    %0:2 = train.accumulate 1 -> tensor<f32>, tensor<4xf32> {
    ^bb0(%i: index):
      %m = nn.mul %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
      %l = nn.reduce_sum %m {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
      // expected-error @+1 {{'dist.all_reduce' op data-parallel: the step already communicates}}
      %r = dist.all_reduce avg %x {group = #dist.group<dp, 2>} : tensor<4xf32> -> tensor<4xf32>
      %g = dist.wait %r : tensor<4xf32>
      train.yield %l, %g : tensor<f32>, tensor<4xf32>
    }
    %clipped, %norm = train.clip_grad_norm %0#1 {max_norm = 0.000000e+00 : f64} : tensor<4xf32> -> tensor<4xf32>
    %new = train.sgd %w, %clipped, %lr : tensor<4xf32>
    return %new, %0#0, %norm, %lr : tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>
  }
}
