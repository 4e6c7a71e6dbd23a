// RUN: dsc-opt %S/Inputs/pp-mlp.mlir --pipeline-split="stages=4" --autodiff --pipeline-schedule="micro-batches=8" --pipeline-expand | FileCheck %s
// RUN: dsc-opt %S/Inputs/pp-mlp.mlir --pipeline-split="stages=4" --autodiff --pipeline-schedule="micro-batches=8 schedule=zb-h1" --pipeline-expand | FileCheck %s --check-prefix=ZB
// The scheduled step goes through the rest of the pipeline.
// RUN: dsc-opt %S/Inputs/pp-mlp.mlir --pipeline-split="stages=4" --autodiff --pipeline-schedule="micro-batches=8" --pipeline-expand --optimizer="clip=1.0" --pipeline-grad-norm --cse --memory-plan | FileCheck %s --check-prefix=PLANNED

// 1F1B with P = 4 stages and M = 8 micro-batches. Stage 0 runs P-1 = 3
// warm-up forwards and one more, then alternates backward and forward, then
// drains: F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7. A forward starts
// with the micro-batch's inputs (train.load_batch k); stage 0's backward
// starts with the gradient from stage 1 (tag 1).
// CHECK: module attributes {dist.bubble = {{.*}}, dist.micro_batches = 8 : i64, dist.pp = 4 : i64, dist.schedule = "1f1b"}
// CHECK-LABEL: func.func @mlp_stage0(
// The inputs are no longer arguments.
// CHECK-SAME:    %{{.*}}: tensor<64x8xf32> {train.param = "emb"})
// CHECK:      train.load_batch 0 ["x", "y"] {train.micro = 0 : i64, train.phase = 1 : i64}
// CHECK:      dist.send {{.*}}tag = 0 : i64, train.micro = 0 : i64, train.phase = 1 : i64
// CHECK:      train.load_batch 1 [
// CHECK:      train.load_batch 2 [
// CHECK:      train.load_batch 3 [
// CHECK:      dist.recv {{.*}}tag = 1 : i64, train.micro = 0 : i64, train.phase = 2 : i64
// CHECK:      train.load_batch 4 [
// CHECK:      dist.recv {{.*}}train.micro = 1 : i64, train.phase = 2 : i64
// CHECK:      train.load_batch 5 [
// CHECK:      dist.recv {{.*}}train.micro = 2 : i64, train.phase = 2 : i64
// CHECK:      train.load_batch 6 [
// CHECK:      dist.recv {{.*}}train.micro = 3 : i64, train.phase = 2 : i64
// CHECK:      train.load_batch 7 [
// CHECK:      dist.recv {{.*}}train.micro = 4 : i64, train.phase = 2 : i64
// CHECK-NOT:  train.load_batch
// CHECK:      dist.recv {{.*}}train.micro = 5 : i64, train.phase = 2 : i64
// CHECK:      dist.recv {{.*}}train.micro = 6 : i64, train.phase = 2 : i64
// CHECK:      %[[G7:.*]] = nn.gather_grad {{.*}}train.micro = 7 : i64, train.phase = 2 : i64
// Gradients are summed as micro-batches finish.
// CHECK-NEXT: %[[SUM:.*]] = nn.add %{{.*}}, %[[G7]] {train.micro = 7 : i64, train.phase = 2 : i64}
// The last forward send completes once the stage's last item is done.
// CHECK-NEXT: dist.wait %{{.*}} {train.micro = 7 : i64, train.phase = 1 : i64}
// The tied embedding: stage 0 sends its sum to stage 3 and adds stage 3's,
// on the channel after the activations' (tag 6), then scales by 1/M once.
// CHECK:      %[[OUT:.*]] = dist.send %[[SUM]] {group = #dist.group<pp, 4>, peer = 3 : i64, tag = 6 : i64}
// CHECK-NEXT: %[[IN:.*]] = dist.recv {group = #dist.group<pp, 4>, peer = 3 : i64, tag = 6 : i64}
// CHECK-NEXT: %[[THEIRS:.*]] = dist.wait %[[IN]]
// CHECK-NEXT: %[[TOTAL:.*]] = nn.add %[[SUM]], %[[THEIRS]]
// CHECK-NEXT: %[[INV:.*]] = arith.constant dense<1.250000e-01>
// CHECK-NEXT: %[[MEAN:.*]] = nn.mul %[[TOTAL]], %[[INV]]
// The tied send completes at the end.
// CHECK-NEXT: dist.wait %[[OUT]]
// CHECK-NEXT: return %{{.*}}, %[[MEAN]]
// Stage 1: 2 warm-up forwards (F0 F1 F2 B0 F3 B1 ...).
// CHECK-LABEL: func.func @mlp_stage1(
// CHECK:      train.load_batch 2 [
// CHECK:      dist.recv {{.*}}tag = 3 : i64, train.micro = 0 : i64, train.phase = 2 : i64
// A send completes before the next send on its channel.
// CHECK:      %[[B0:.*]] = dist.send {{.*}}peer = -1 : i64, tag = 1 : i64, train.micro = 0 : i64, train.phase = 2 : i64
// CHECK:      train.load_batch 3 [
// CHECK:      dist.wait %[[B0]]
// CHECK-NEXT: dist.send {{.*}}peer = -1 : i64, tag = 1 : i64, train.micro = 1 : i64, train.phase = 2 : i64
// The last stage alternates from the start: F0 B0 F1 B1 ..., and adds its
// losses as forwards finish; the tied embedding's sums meet stage 0's.
// CHECK-LABEL: func.func @mlp_stage3(
// CHECK:      train.load_batch 0 [
// CHECK:      %[[L0:.*]] = nn.cross_entropy {{.*}}train.micro = 0 : i64, train.phase = 1 : i64
// CHECK:      dist.send {{.*}}tag = 5 : i64, train.micro = 0 : i64, train.phase = 2 : i64
// CHECK:      train.load_batch 1 [
// CHECK:      %[[L1:.*]] = nn.cross_entropy {{.*}}train.micro = 1 : i64
// CHECK:      nn.add %[[L0]], %[[L1]] {train.micro = 1 : i64, train.phase = 1 : i64}
// CHECK:      dist.send {{.*}}tag = 5 : i64, train.micro = 1 : i64, train.phase = 2 : i64
// CHECK:      train.load_batch 7 [
// CHECK:      dist.send {{.*}}peer = -3 : i64, tag = 6 : i64
// CHECK:      dist.recv {{.*}}peer = -3 : i64, tag = 6 : i64

// zb-h1: weight gradients (phase 3) come apart from the input gradients
// (phase 2). Stage 0 holds them back while it waits: its W0 comes after F4.
// ZB-LABEL: func.func @mlp_stage0(
// ZB:       train.load_batch 4 [
// ZB:       nn.gather_grad {{.*}}train.micro = 0 : i64, train.phase = 3 : i64
// The last stage runs each W right after its B.
// ZB-LABEL: func.func @mlp_stage3(
// ZB:       dist.send {{.*}}tag = 5 : i64, train.micro = 0 : i64, train.phase = 2 : i64
// ZB:       nn.matmul {{.*}}train.micro = 0 : i64, train.phase = 3 : i64, transpose_lhs
// ZB:       train.load_batch 1 [

// With the optimizer: each stage's gradient norm is made global over the
// pp group, counting the tied embedding once (stage 3 leaves it out).
// PLANNED-LABEL: func.func @mlp_stage0(
// PLANNED:       %[[SQ:.*]] = train.sum_sq %{{.*}} : tensor<64x8xf32>
// PLANNED:       %[[AR:.*]] = dist.all_reduce  sum %[[SQ]] {{.*}}group = #dist.group<pp, 4>
// PLANNED:       %[[GLOBAL:.*]] = dist.wait %[[AR]]
// PLANNED:       train.clip_grad_norm {{.*}} sum_sq(%[[GLOBAL]])
// PLANNED-LABEL: func.func @mlp_stage3(
// PLANNED:       %[[SQ3:.*]] = arith.constant {{.*}}dense<0.000000e+00> : tensor<f32>
// PLANNED:       dist.all_reduce  sum %[[SQ3]] {{.*}}group = #dist.group<pp, 4>

// Mixed precision: a parameter's bf16 copy is made once, before the
// micro-batches, and every micro-batch reads it (each in-flight micro-batch
// held a copy of the stage's weights); a micro-batch's gradient is added
// into its sum right after it is computed (not after the whole backward,
// which kept every gradient of the micro-batch beside the sums).
// RUN: dsc-opt %S/Inputs/pp-fixed-copies.mlir --pipeline-split="stages=3 method=uniform" --autodiff --pipeline-schedule="micro-batches=3" --pipeline-expand | FileCheck %s --check-prefix=COPIES
// COPIES-LABEL: func.func @mlp_stage1(
// COPIES-SAME:    %[[W2:[^:]*]]: tensor<8x8xf32> {train.param = "w2"}, %[[B2:[^:]*]]: tensor<8xf32> {train.param = "b2"})
// COPIES-NEXT:    %[[C2:.*]] = nn.cast %[[W2]] : tensor<8x8xf32> to tensor<8x8xbf16>
// COPIES-NEXT:    %[[CB2:.*]] = nn.cast %[[B2]] : tensor<8xf32> to tensor<8xbf16>
// COPIES-NEXT:    train.load_batch 0
// COPIES-NOT:     nn.cast %[[W2]]
// COPIES:         nn.matmul %{{.*}}, %[[C2]] {train.micro = 0
// COPIES-NOT:     nn.cast %[[W2]]
// COPIES:         nn.matmul %{{.*}}, %[[C2]] {train.micro = 1
// Micro-batch 1's bias gradient joins micro-batch 0's as soon as it is cast.
// COPIES:         %[[G0:.*]] = nn.cast %{{.*}} {train.micro = 0 : i64, train.phase = 2 : i64} : tensor<8xbf16> to tensor<8xf32>
// COPIES:         %[[G1:.*]] = nn.cast %{{.*}} {train.micro = 1 : i64, train.phase = 2 : i64} : tensor<8xbf16> to tensor<8xf32>
// COPIES-NEXT:    nn.add %[[G0]], %[[G1]] {train.micro = 1 : i64, train.phase = 2 : i64}
