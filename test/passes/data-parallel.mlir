// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=1 --optimizer --data-parallel=dp=4 | FileCheck %s --check-prefix=GA1
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=2 --optimizer --data-parallel=dp=4 | FileCheck %s --check-prefix=GA2
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=2 --optimizer --data-parallel=dp=4 | dsc-opt --verify-zero | FileCheck %s --check-prefix=GA2
// RUN: not dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation --optimizer --data-parallel=dp=0 2>&1 | FileCheck %s --check-prefix=DP0
// RUN: not dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation --optimizer --data-parallel --data-parallel 2>&1 | FileCheck %s --check-prefix=TWICE
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
// BADCOMM: error: data-parallel: comm-dtype must be fp32, bf16 or fp16, not 'fp8'

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

// DP0: error: data-parallel: dp must be at least 1, got 0
// TWICE: error: 'dist.all_reduce' op data-parallel: the step already communicates
