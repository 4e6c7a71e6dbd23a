// RUN: dsc-opt %s --offload | FileCheck %s
// RUN: dsc-opt %s --offload="sub-group-size=0" | FileCheck %s --check-prefix=EACH
// RUN: dsc-opt %s --offload="sub-group-size=20" | FileCheck %s --check-prefix=TWO
// The memory plan places the working copies, not the tiered state.
// RUN: dsc-opt %s --offload="sub-group-size=0" --memory-plan | FileCheck %s --check-prefix=PLAN
// NVMe: the same tiles, in the NVMe tier.
// RUN: dsc-opt %s --offload=device=nvme | FileCheck %s --check-prefix=NVME
// Parameter offload (ZeRO-3's offload_param): the parameters of at least
// persistence-threshold elements join their tile's fetch and store, and
// each other reader gets a working copy fetched right before it.
// RUN: dsc-opt %s --offload="device=none param-device=cpu persistence-threshold=8" | FileCheck %s --check-prefix=PARAM
// Both: parameters in host memory, optimizer state on NVMe, one fetch each tile.
// RUN: dsc-opt %s --offload="device=nvme param-device=cpu persistence-threshold=8" | FileCheck %s --check-prefix=BOTH
// param-nvme-file: parameters and optimizer state both on NVMe, on two
// drives (offload_param.nvme_path differing from offload_optimizer's): the
// parameters' bytes follow all the state's, from train.nvme_param_offset
// on, in the same tiles; without it they interleave in one file.
// RUN: dsc-opt %s --offload="device=nvme param-device=nvme persistence-threshold=8 param-nvme-file=true" | FileCheck %s --check-prefix=OWN
// RUN: dsc-opt %s --offload="device=nvme param-device=nvme persistence-threshold=8" | FileCheck %s --check-prefix=SHARED
// The offloaded IR is valid and round-trips.
// RUN: dsc-opt %s --offload | dsc-opt | FileCheck %s

// --offload gives the optimizer state (Adam's exp_avg and exp_avg_sq, SGD's
// momentum) a tier outside the arena, the host: DeepSpeed's
// offload_optimizer {device: cpu}. The updates are cut into tiles as
// DeepSpeed cuts sub-groups (parameters added until the tile's elements
// reach sub-group-size; 0: one per tile). Each tile's state is fetched into
// working copies before its first update and stored back after its last;
// the step returns the state arguments, which the stores wrote. Tier
// offsets: each tensor 4096-aligned, in tile order.

// Two Adam updates of 16 and 8 elements, then SGD with momentum of 4.
// Default sub-group-size (1e9): one tile of all three.
// CHECK-LABEL: func.func @step(
// CHECK-SAME:    %[[M1:[a-z0-9]+]]: tensor<16xf32> {train.opt_state = "a/exp_avg", train.tier = "host", train.tier_offset = 0 : i64, train.tile = 0 : i64}
// CHECK-SAME:    %[[V1:[a-z0-9]+]]: tensor<16xf32> {train.opt_state = "a/exp_avg_sq", train.tier = "host", train.tier_offset = 4096 : i64, train.tile = 0 : i64}
// CHECK-SAME:    {train.opt_state = "b/exp_avg", train.tier = "host", train.tier_offset = 8192 : i64, train.tile = 0 : i64}
// CHECK-SAME:    {train.opt_state = "b/exp_avg_sq", train.tier = "host", train.tier_offset = 12288 : i64, train.tile = 0 : i64}
// CHECK-SAME:    {train.opt_state = "c/momentum_buffer", train.tier = "host", train.tier_offset = 16384 : i64, train.tile = 0 : i64}
// CHECK-SAME:  attributes {train.host_tier_bytes = 20480 : i64}
// CHECK:         %[[S:.*]]:5 = train.tier_fetch %[[M1]], %[[V1]], %{{.*}}, %{{.*}}, %{{.*}} {tile = 0 : i64}
// CHECK-NEXT:    %[[PA:.*]], %[[MA:.*]], %[[VA:.*]] = train.adam %{{.*}}, %{{.*}}, %[[S]]#0, %[[S]]#1,
// CHECK-NEXT:    %[[PB:.*]], %[[MB:.*]], %[[VB:.*]] = train.adam %{{.*}}, %{{.*}}, %[[S]]#2, %[[S]]#3,
// CHECK-NEXT:    %[[PC:.*]], %[[BC:.*]] = train.sgd {{.*}} buffer %[[S]]#4
// CHECK-NEXT:    train.tier_store %[[MA]], %[[VA]], %[[MB]], %[[VB]], %[[BC]] to %[[M1]], %[[V1]], %{{.*}}, %{{.*}}, %{{.*}} {tile = 0 : i64}
// CHECK-NEXT:    return %[[PA]], %[[M1]], %[[V1]], %[[PB]], %{{.*}}, %{{.*}}, %[[PC]], %{{.*}} :

// NVME-LABEL: func.func @step(
// NVME-SAME:    {train.opt_state = "a/exp_avg", train.tier = "nvme", train.tier_offset = 0 : i64, train.tile = 0 : i64}
// NVME-SAME:  attributes {train.nvme_tier_bytes = 20480 : i64}
// NVME:         train.tier_fetch

// PARAM-LABEL: func.func @step(
// PARAM-SAME:    %[[A:[a-z0-9]+]]: tensor<16xf32> {train.param = "a", train.tier = "host", train.tier_offset = 0 : i64, train.tile = 0 : i64}
// PARAM-SAME:    %[[B:[a-z0-9]+]]: tensor<8xf32> {train.param = "b", train.tier = "host", train.tier_offset = 4096 : i64, train.tile = 0 : i64}
// PARAM-SAME:    %[[C:[a-z0-9]+]]: tensor<4xf32> {train.param = "c"}
// PARAM-SAME:  attributes {train.host_tier_bytes = 8192 : i64}
// PARAM:         %[[FA:.*]] = train.tier_fetch %[[A]] {tile = 0 : i64}
// PARAM-NEXT:    nn.mul %[[FA]], %[[FA]]
// PARAM-NEXT:    %[[FB:.*]] = train.tier_fetch %[[B]] {tile = 0 : i64}
// PARAM-NEXT:    nn.mul %[[FB]], %[[FB]]
// PARAM-NEXT:    nn.mul %[[C]], %[[C]]
// PARAM-NEXT:    %[[T:.*]]:2 = train.tier_fetch %[[A]], %[[B]] {tile = 0 : i64}
// PARAM-NEXT:    %[[PA:.*]], %{{.*}}, %{{.*}} = train.adam %[[T]]#0,
// PARAM-NEXT:    %[[PB:.*]], %{{.*}}, %{{.*}} = train.adam %[[T]]#1,
// PARAM-NEXT:    %[[PC:.*]], %{{.*}} = train.sgd %[[C]],
// PARAM-NEXT:    train.tier_store %[[PA]], %[[PB]] to %[[A]], %[[B]] {tile = 0 : i64}
// PARAM-NEXT:    return %[[A]], %{{.*}}, %{{.*}}, %[[B]], %{{.*}}, %{{.*}}, %[[PC]], %{{.*}} :

// BOTH-LABEL: func.func @step(
// BOTH-SAME:    {train.param = "a", train.tier = "host", train.tier_offset = 0 : i64, train.tile = 0 : i64}
// BOTH-SAME:    {train.opt_state = "a/exp_avg", train.tier = "nvme", train.tier_offset = 0 : i64, train.tile = 0 : i64}
// BOTH-SAME:    {train.param = "b", train.tier = "host", train.tier_offset = 4096 : i64, train.tile = 0 : i64}
// BOTH-SAME:  attributes {train.host_tier_bytes = 8192 : i64, train.nvme_tier_bytes = 20480 : i64}
// BOTH:         train.tier_fetch %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}} {tile = 0 : i64}

// OWN-LABEL: func.func @step(
// OWN-SAME:    {train.param = "a", train.tier = "nvme", train.tier_offset = 20480 : i64, train.tile = 0 : i64}
// OWN-SAME:    {train.opt_state = "a/exp_avg", train.tier = "nvme", train.tier_offset = 0 : i64, train.tile = 0 : i64}
// OWN-SAME:    {train.opt_state = "a/exp_avg_sq", train.tier = "nvme", train.tier_offset = 4096 : i64, train.tile = 0 : i64}
// OWN-SAME:    {train.param = "b", train.tier = "nvme", train.tier_offset = 24576 : i64, train.tile = 0 : i64}
// OWN-SAME:    {train.opt_state = "b/exp_avg", train.tier = "nvme", train.tier_offset = 8192 : i64, train.tile = 0 : i64}
// OWN-SAME:    {train.opt_state = "c/momentum_buffer", train.tier = "nvme", train.tier_offset = 16384 : i64, train.tile = 0 : i64}
// OWN-SAME:  attributes {train.nvme_param_offset = 20480 : i64, train.nvme_tier_bytes = 28672 : i64}
// OWN:         train.tier_fetch %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}} {tile = 0 : i64}

// SHARED-LABEL: func.func @step(
// SHARED-SAME:    {train.param = "a", train.tier = "nvme", train.tier_offset = 0 : i64, train.tile = 0 : i64}
// SHARED-SAME:    {train.opt_state = "a/exp_avg", train.tier = "nvme", train.tier_offset = 4096 : i64, train.tile = 0 : i64}
// SHARED-SAME:  attributes {train.nvme_tier_bytes = 28672 : i64}

// One tile per parameter.
// EACH:  train.tier_fetch %{{.*}}, %{{.*}} {tile = 0 : i64}
// EACH-NEXT: train.adam
// EACH-NEXT: train.tier_store {{.*}} {tile = 0 : i64}
// EACH-NEXT: train.tier_fetch %{{.*}}, %{{.*}} {tile = 1 : i64}
// EACH-NEXT: train.adam
// EACH-NEXT: train.tier_store {{.*}} {tile = 1 : i64}
// EACH-NEXT: train.tier_fetch %{{.*}} {tile = 2 : i64}
// EACH-NEXT: train.sgd
// EACH-NEXT: train.tier_store {{.*}} {tile = 2 : i64}

// 20: a (16) does not reach it, a + b (24) does and closes the first tile.
// TWO:  train.tier_fetch %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {tile = 0 : i64}
// TWO:  train.tier_store {{.*}} {tile = 0 : i64}
// TWO-NEXT: train.tier_fetch %{{.*}} {tile = 1 : i64}

// The tiered state has its tier offset as train.offset and no arena bytes:
// the persistent part of the arena is the parameters (16, 8, 4 floats ->
// 64 + 64 + 64 bytes with the default 64-byte alignment) and the step, 256
// bytes. Each tile's working copies live from its fetch to its store, so
// the next tile's reuse their bytes (tile 0 at 320 and 384, tile 1 at 256
// and 320, tile 2 at 256); with the gradients the arena is 640 bytes.
// PLAN-LABEL: func.func @step(
// PLAN-SAME:    {train.offset = 0 : i64, train.opt_state = "a/exp_avg", train.tier = "host", train.tier_offset = 0 : i64
// PLAN-SAME:    {train.offset = 4096 : i64, train.opt_state = "a/exp_avg_sq", train.tier = "host", train.tier_offset = 4096 : i64
// PLAN-SAME:  attributes {train.arena_bytes = 640 : i64, train.host_tier_bytes = 20480 : i64, train.peak_live_bytes = 500 : i64, train.persistent_bytes = 256 : i64}
// PLAN:         train.tier_fetch {{.*}} {tile = 0 : i64, train.offsets = array<i64: 320, 384>}
// PLAN:         train.tier_fetch {{.*}} {tile = 1 : i64, train.offsets = array<i64: 256, 320>}
// PLAN:         train.tier_fetch {{.*}} {tile = 2 : i64, train.offsets = array<i64: 256>}
func.func @step(%a: tensor<16xf32> {train.param = "a"}, %ma: tensor<16xf32> {train.opt_state = "a/exp_avg"},
                %va: tensor<16xf32> {train.opt_state = "a/exp_avg_sq"},
                %b: tensor<8xf32> {train.param = "b"}, %mb: tensor<8xf32> {train.opt_state = "b/exp_avg"},
                %vb: tensor<8xf32> {train.opt_state = "b/exp_avg_sq"},
                %c: tensor<4xf32> {train.param = "c"}, %bc: tensor<4xf32> {train.opt_state = "c/momentum_buffer"},
                %s: tensor<i64> {train.step})
    -> (tensor<16xf32> {train.updated = "a"}, tensor<16xf32> {train.opt_state = "a/exp_avg"},
        tensor<16xf32> {train.opt_state = "a/exp_avg_sq"}, tensor<8xf32> {train.updated = "b"},
        tensor<8xf32> {train.opt_state = "b/exp_avg"}, tensor<8xf32> {train.opt_state = "b/exp_avg_sq"},
        tensor<4xf32> {train.updated = "c"}, tensor<4xf32> {train.opt_state = "c/momentum_buffer"}) {
  %lr = train.lr_schedule "constant" {lr = 1.0e-3 : f64}, %s
  %ga = nn.mul %a, %a : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  %gb = nn.mul %b, %b : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %gc = nn.mul %c, %c : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %pa, %ma2, %va2 = train.adam %a, %ga, %ma, %va, %lr, %s : tensor<16xf32>
  %pb, %mb2, %vb2 = train.adam %b, %gb, %mb, %vb, %lr, %s : tensor<8xf32>
  %pc, %bc2 = train.sgd %c, %gc, %lr buffer %bc : tensor<4xf32> {momentum = 0.9} : tensor<4xf32> -> tensor<4xf32>
  return %pa, %ma2, %va2, %pb, %mb2, %vb2, %pc, %bc2
      : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<8xf32>, tensor<8xf32>,
        tensor<8xf32>, tensor<4xf32>, tensor<4xf32>
}
