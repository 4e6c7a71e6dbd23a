// RUN: dsc-opt %S/Inputs/pp-mlp.mlir --pipeline-split="stages=4" --autodiff --pipeline-schedule="micro-batches=8" --optimizer="clip=1.0" --pipeline-grad-norm --cse --memory-plan | FileCheck %s
// RUN: dsc-opt %S/Inputs/pp-mlp.mlir --pipeline-split="stages=4" --autodiff --pipeline-schedule="micro-batches=8 schedule=zb-h1" --optimizer="clip=1.0" --pipeline-grad-norm --cse --memory-plan | FileCheck %s --check-prefix=ZB

// memory-plan on a pipeline stage's train.pipeline: the items run one at a
// time, so what a micro-batch keeps from one item to a later one (its
// stash) lives in the micro-batch's slot, and the slots are one block
// (train.stash = offset, slot bytes, slots) held through the items. A
// micro-batch takes the lowest free slot at its forward and frees it after
// its last item: 1F1B's P - s micro-batches in flight on stage s are its
// slots, whatever M is (train.item_slots, one per item). A send in the
// body sends a copy from its channel's buffer (train.staging), held through
// the items too.

// Stage 0 (F0 F1 F2 F3 B0 F4 B1 ...): four slots, F4 reusing B0's.
// CHECK-LABEL: func.func @mlp_stage0(
// CHECK:         train.pipeline 8 schedule [1, 0, 1, 1, 1, 2, 1, 3, 2, 0, 1, 4, 2, 1,
// CHECK:           %[[SEND:.*]] = dist.send {{.*}}train.phase = 1 : i64, train.staging = array<i64: {{[0-9]+}}, 128>}
// CHECK:         } {train.item_slots = array<i64: 0, 1, 2, 3, 0, 0, 1, 1, 2, 2, 3, 3, 0, 1, 2, 3>, train.offsets = array<i64: {{[0-9]+}}>, train.stash = array<i64: {{[0-9]+}}, {{[0-9]+}}, 4>}
// Stage 1: three slots; stage 2: two; the last stage one (F0 B0 F1 B1 ...).
// CHECK-LABEL: func.func @mlp_stage1(
// CHECK:         } {train.item_slots = array<i64: 0, 1, 2, 0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 0, 1>, {{.*}}train.stash = array<i64: {{[0-9]+}}, {{[0-9]+}}, 3>}
// CHECK-LABEL: func.func @mlp_stage2(
// CHECK:         train.stash = array<i64: {{[0-9]+}}, {{[0-9]+}}, 2>}
// CHECK-LABEL: func.func @mlp_stage3(
// CHECK:         } {train.item_slots = array<i64: 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, {{.*}}train.stash = array<i64: {{[0-9]+}}, {{[0-9]+}}, 1>}

// zb-h1: a micro-batch's slot is held until its W, which the schedule
// defers to fill the bubble: stage 0 needs one slot more than 1F1B's 4.
// ZB-LABEL: func.func @mlp_stage0(
// ZB:         train.pipeline 8 schedule {{.*}} sum_phases [3]
// ZB:         } {train.item_slots = array<i64: 0, 1, 2, 3, 0, 4, 0, 1, 0, 1, 2, 1, 2, 3, 2, 3, 4, 4, 0, 0, 1, 1, 2, 2>, {{.*}}train.stash = array<i64: {{[0-9]+}}, {{[0-9]+}}, 5>}
// ZB-LABEL: func.func @mlp_stage3(
// ZB:         train.stash = array<i64: {{[0-9]+}}, {{[0-9]+}}, 1>}
