// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=2 --optimizer="clip=1.0" --zero="stage=1 dp=4" | FileCheck %s --check-prefixes=CHECK,S1
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=2 --optimizer="clip=1.0" --zero="stage=2 dp=4" | FileCheck %s --check-prefixes=CHECK,S2
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=1 --optimizer --zero="stage=3 dp=4 persistence-threshold=10" | FileCheck %s --check-prefix=S3
// The output verifies and round-trips.
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=2 --optimizer --zero="stage=3 dp=4 persistence-threshold=0" | dsc-opt --verify-zero | FileCheck %s --check-prefix=ROUNDTRIP
// Mixed precision: stage 3 gathers the bf16 copy of each owned chunk.
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --mixed-precision --autodiff --gradient-accumulation=steps=2 --optimizer --zero="stage=3 dp=4 persistence-threshold=10" | FileCheck %s --check-prefix=MP3
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --mixed-precision --autodiff --gradient-accumulation=steps=2 --optimizer --zero="stage=1 dp=4" | FileCheck %s --check-prefix=MP1
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=2 --optimizer --zero="stage=2 dp=4 comm-dtype=fp16" | dsc-opt --verify-zero | FileCheck %s --check-prefix=COMM2
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=2 --optimizer --zero="stage=1 dp=4 comm-dtype=bf16" | FileCheck %s --check-prefix=COMM1
// With LAMB, each chunk's trust-ratio sums are all-reduced in one collective.
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=2 --optimizer="type=lamb clip=1.0" --zero="stage=1 dp=4" | FileCheck %s --check-prefix=LAMB
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=2 --optimizer="type=lamb" --zero="stage=3 dp=4 persistence-threshold=0" | dsc-opt --verify-zero | FileCheck %s --check-prefix=LAMB3

// LAMB (FusedLamb's trust ratio is per tensor): train.lamb_stats of each
// owned chunk, concatenated into one all-reduce over dp, sliced back and
// read by the chunk's train.lamb; the old whole-tensor sums are gone.
// LAMB:        train.clip_grad_norm
// LAMB:        %[[O1:.*]] = dist.chunk %{{.*}} {group = #dist.group<dp, 4>} : tensor<18xf32> -> tensor<5xf32>
// LAMB-NEXT:   %[[SUMA:.*]] = train.lamb_stats %[[O1]], %clipped#0, {{.*}} : tensor<5xf32> -> tensor<2xf32>
// LAMB:        %[[SUMB:.*]] = train.lamb_stats {{.*}} : tensor<2xf32> -> tensor<2xf32>
// LAMB:        %[[SUMC:.*]] = train.lamb_stats {{.*}} : tensor<8xf32> -> tensor<2xf32>
// LAMB-NEXT:   %[[CAT:.*]] = nn.concat %[[SUMA]], %[[SUMB]], %[[SUMC]] {axis = 0 : i64} : tensor<2xf32>, tensor<2xf32>, tensor<2xf32> -> tensor<6xf32>
// LAMB-NEXT:   %[[AR:.*]] = dist.all_reduce  sum %[[CAT]] {group = #dist.group<dp, 4>} : tensor<6xf32> -> tensor<6xf32>
// LAMB-NEXT:   %[[SUM:.*]] = dist.wait %[[AR]] : tensor<6xf32>
// LAMB-NEXT:   %[[RA:.*]] = nn.slice %[[SUM]] {limit = array<i64: 2>, start = array<i64: 0>, stride = array<i64: 1>} : tensor<6xf32> -> tensor<2xf32>
// LAMB-NEXT:   %[[RB:.*]] = nn.slice %[[SUM]] {limit = array<i64: 4>, start = array<i64: 2>, stride = array<i64: 1>} : tensor<6xf32> -> tensor<2xf32>
// LAMB-NEXT:   %[[RC:.*]] = nn.slice %[[SUM]] {limit = array<i64: 6>, start = array<i64: 4>, stride = array<i64: 1>} : tensor<6xf32> -> tensor<2xf32>
// LAMB-NEXT:   train.lamb %[[O1]], %clipped#0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[RA]] : tensor<5xf32>, tensor<2xf32>
// LAMB:        train.lamb %{{.*}}, %clipped#1, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[RB]] : tensor<2xf32>, tensor<2xf32>
// LAMB:        train.lamb %{{.*}}, %clipped#2, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[RC]] : tensor<8xf32>, tensor<2xf32>
// LAMB-NOT:    train.lamb_stats
// Stage 3: the argument is the chunk; the sums read it without a gather.
// LAMB3:       train.lamb_stats %arg{{[0-9]+}}, %clipped#0, {{.*}} : tensor<5xf32> -> tensor<2xf32>
// LAMB3:       dist.all_reduce  sum %{{.*}} {group = #dist.group<dp, 4>} : tensor<6xf32> -> tensor<6xf32>
// LAMB3-NOT:   dist.all_gather {{.*}} -> tensor<18xf32>
// LAMB3:       train.lamb %arg{{[0-9]+}}, %clipped#0,


// comm-dtype (communication_data_type): stage 2 casts each gradient to
// fp16 where the micro-batch produces it, reduce-scatters the fp16 vector
// and accumulates the chunk cast back to fp32 (cast at the yield);
// stage 1 reduce-scatters every gradient sum in bf16, then casts the
// chunks back before the clipping.
// COMM2:         train.accumulate 2
// COMM2:           %[[L:.*]] = nn.cast %{{.*}} : tensor<30xf32> to tensor<30xf16>
// COMM2-NEXT:      %[[R:.*]] = dist.reduce_scatter avg %[[L]] {group = #dist.group<dp, 4>} : tensor<30xf16> -> tensor<8xf16>
// COMM2-NEXT:      %[[W:.*]] = dist.wait %[[R]] : tensor<8xf16>
// COMM2:           %[[B:.*]] = nn.cast %[[W]] : tensor<8xf16> to tensor<8xf32>
// COMM2:           train.yield %{{.*}}, %{{.*}}, %{{.*}}, %[[B]]
// COMM1:         train.accumulate 2
// COMM1:         dist.reduce_scatter avg %{{.*}} : tensor<18xbf16> -> tensor<5xbf16>
// COMM1:         dist.reduce_scatter avg %{{.*}} : tensor<6xbf16> -> tensor<2xbf16>
// COMM1:         dist.reduce_scatter avg %{{.*}} : tensor<30xbf16> -> tensor<8xbf16>
// COMM1:         nn.cast %{{.*}} : tensor<5xbf16> to tensor<5xf32>
// COMM1:         train.clip_grad_norm

// Stages 1-2 with mixed precision partition the fp32 parameters too (the
// master weights, as DeepSpeed does): each chunk is cast to bf16 and
// gathered once per step, before the micro-batches; the updated chunk is
// not gathered back in fp32 after the update.
// MP1-LABEL: func.func @mlp(
// MP1-SAME:    %[[W1:[a-z0-9]+]]: tensor<5xf32> {dist.shard_of = array<i64: 6, 3>, train.param = "w1"}
// MP1:         %[[W1L:.*]] = nn.cast %[[W1]] : tensor<5xf32> to tensor<5xbf16>
// MP1:         dist.all_gather %[[W1L]] {group = #dist.group<dp, 4>} : tensor<5xbf16> -> tensor<18xbf16>
// MP1:         train.accumulate 2
// MP1-NOT:     dist.all_gather
// MP1:         dist.reduce_scatter
// MP1:         train.adam %[[W1]],
// MP1-NOT:     dist.all_gather
// MP1:         return

// With mixed precision each partitioned parameter's fp32 chunk is cast to
// bf16 once per step (before the micro-batches), and the forward and
// backward gathers move bf16 (half the bytes); b1, below the persistence
// threshold, stays whole and is cast whole (its updated chunk is gathered
// back in fp32 after the step, as without mixed precision). No fp32
// parameter is gathered in the micro-batches.
// MP3-LABEL: func.func @mlp(
// MP3-SAME:    %[[W1:[a-z0-9]+]]: tensor<5xf32> {dist.shard_of = array<i64: 6, 3>, train.param = "w1"}
// MP3:         %[[W1L:.*]] = nn.cast %[[W1]] : tensor<5xf32> to tensor<5xbf16>
// MP3:         %[[W2L:.*]] = nn.cast %{{.*}} : tensor<8xf32> to tensor<8xbf16>
// MP3:         train.accumulate 2
// MP3:           dist.all_gather %[[W1L]] {group = #dist.group<dp, 4>} : tensor<5xbf16> -> tensor<18xbf16>
// MP3:           dist.all_gather %[[W2L]] {group = #dist.group<dp, 4>} : tensor<8xbf16> -> tensor<30xbf16>
// MP3-NOT:       dist.all_gather {{.*}}xf32>
// MP3:           dist.reduce_scatter

// --zero partitions over 4 ranks, per tensor: w1 (18 elements) in chunks
// of 5, b1 (6) in chunks of 2, w2 (30) in chunks of 8. The module records
// the stage and dp; chunk arguments carry their full shape.
// CHECK: module attributes {dist.dp = 4 : i64, dist.zero_stage = {{[12]}} : i64}

// Stages 1 and 2: the parameters stay whole; every optimizer state is a chunk.
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME:    %[[W1:[a-z0-9]+]]: tensor<6x3xf32> {train.param = "w1"}, %[[B1:[a-z0-9]+]]: tensor<6xf32> {train.param = "b1"}, %[[W2:[a-z0-9]+]]: tensor<6x5xf32> {train.param = "w2"},
// CHECK-SAME:    %[[M1:[a-z0-9]+]]: tensor<5xf32> {dist.shard_of = array<i64: 6, 3>, train.opt_state = "w1/exp_avg"}, %{{.*}}: tensor<5xf32> {dist.shard_of = array<i64: 6, 3>, train.opt_state = "w1/exp_avg_sq"},
// CHECK-SAME:    tensor<2xf32> {dist.shard_of = array<i64: 6>, train.opt_state = "b1/exp_avg"}
// CHECK-SAME:    tensor<8xf32> {dist.shard_of = array<i64: 6, 5>, train.opt_state = "w2/exp_avg_sq"}
// CHECK-SAME:    -> (tensor<6x3xf32> {train.updated = "w1"}, tensor<6xf32> {train.updated = "b1"}, tensor<6x5xf32> {train.updated = "w2"}, tensor<5xf32> {train.opt_state = "w1/exp_avg"}

// Stage 1: the full gradient sums are accumulated, then reduce-scattered
// (avg) once per step, after the 1/2 scaling.
// S1:          train.accumulate 2 -> tensor<f32>, tensor<6x3xf32>, tensor<6xf32>, tensor<6x5xf32>
// S1-NOT:      dist.
// S1:          train.yield
// S1:          %[[G1:.*]] = nn.mul %{{.*}}#1, %{{.*}} : tensor<6x3xf32>
// S1:          %[[F1:.*]] = nn.reshape %[[G1]] : tensor<6x3xf32> -> tensor<18xf32>
// S1-NEXT:     %[[R1:.*]] = dist.reduce_scatter  avg %[[F1]] {group = #dist.group<dp, 4>} : tensor<18xf32> -> tensor<5xf32>
// S1-NEXT:     %[[C1:.*]] = dist.wait %[[R1]] : tensor<5xf32>
// S1:          dist.reduce_scatter  avg %{{.*}} : tensor<6xf32> -> tensor<2xf32>
// S1:          dist.reduce_scatter  avg %{{.*}} : tensor<30xf32> -> tensor<8xf32>
// S1-NEXT:     %[[C3:.*]] = dist.wait

// Stage 2: the reduce-scatter is in the micro-batch, right where each
// gradient is produced, and only the chunks are accumulated (and scaled).
// S2:          train.accumulate 2 -> tensor<f32>, tensor<5xf32>, tensor<2xf32>, tensor<8xf32>
// S2:          %[[GW1:.*]] = nn.matmul %{{.*}}, %{{.*}} {transpose_lhs} : tensor<4x6xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
// S2-NEXT:     %[[F1:.*]] = nn.reshape %[[GW1]] : tensor<6x3xf32> -> tensor<18xf32>
// S2-NEXT:     %[[R1:.*]] = dist.reduce_scatter  avg %[[F1]] {group = #dist.group<dp, 4>} : tensor<18xf32> -> tensor<5xf32>
// S2-NEXT:     %[[W:.*]] = dist.wait %[[R1]] : tensor<5xf32>
// S2:          train.yield %{{.*}}, %[[W]], %{{.*}}, %{{.*}} : tensor<f32>, tensor<5xf32>, tensor<2xf32>, tensor<8xf32>
// S2:          %[[C1:.*]] = nn.mul %{{.*}}#1, %{{.*}} : tensor<5xf32>, tensor<f32> -> tensor<5xf32>
// S2:          %[[C3:.*]] = nn.mul %{{.*}}#3, %{{.*}} : tensor<8xf32>, tensor<f32> -> tensor<8xf32>

// Both: the global norm from every rank's sum of squares; each rank updates
// its chunk of the parameter (dist.chunk) and the chunks are gathered back
// into the whole parameter, returned in its shape.
// CHECK:       %[[SS:.*]] = train.sum_sq %[[C1]], %{{.*}}, %[[C3]] : tensor<5xf32>, tensor<2xf32>, tensor<8xf32>
// CHECK-NEXT:  %[[AR:.*]] = dist.all_reduce  sum %[[SS]] {group = #dist.group<dp, 4>} : tensor<f32> -> tensor<f32>
// CHECK-NEXT:  %[[TOT:.*]] = dist.wait %[[AR]] : tensor<f32>
// CHECK-NEXT:  %[[CL:.*]]:3, %[[NORM:.*]] = train.clip_grad_norm %[[C1]], %{{.*}}, %[[C3]] sum_sq(%[[TOT]]) {max_norm = 1.000000e+00 : f64}
// CHECK-NEXT:  %[[FW1:.*]] = nn.reshape %[[W1]] : tensor<6x3xf32> -> tensor<18xf32>
// CHECK-NEXT:  %[[OWN:.*]] = dist.chunk %[[FW1]] {group = #dist.group<dp, 4>} : tensor<18xf32> -> tensor<5xf32>
// CHECK-NEXT:  %[[NEW:[a-z_0-9]+]], {{.*}} = train.adam %[[OWN]], %[[CL]]#0, %[[M1]], {{.*}} : tensor<5xf32>
// CHECK-NEXT:  %[[AG:.*]] = dist.all_gather %[[NEW]] {group = #dist.group<dp, 4>} : tensor<5xf32> -> tensor<18xf32>
// CHECK-NEXT:  %[[GW:.*]] = dist.wait %[[AG]] : tensor<18xf32>
// CHECK:       dist.chunk %[[B1]] {group = #dist.group<dp, 4>} : tensor<6xf32> -> tensor<2xf32>
// CHECK:       dist.all_gather %{{.*}} : tensor<8xf32> -> tensor<30xf32>
// CHECK:       %[[P1:.*]] = nn.reshape %[[GW]] : tensor<18xf32> -> tensor<6x3xf32>
// CHECK:       return %[[P1]],

// Stage 3: w1 and w2 (18 and 30 elements, above the threshold of 10) are
// chunks; b1 (6) stays whole and is handled as in stage 2. A partitioned
// parameter is gathered before its forward use and again before its
// backward use (w2 is needed for the input gradient; w1 is not).
// S3-LABEL: func.func @mlp(
// S3-SAME:    %[[W1:[a-z0-9]+]]: tensor<5xf32> {dist.shard_of = array<i64: 6, 3>, train.param = "w1"}, %[[B1:[a-z0-9]+]]: tensor<6xf32> {train.param = "b1"}, %[[W2:[a-z0-9]+]]: tensor<8xf32> {dist.shard_of = array<i64: 6, 5>, train.param = "w2"}
// S3-SAME:    -> (tensor<5xf32> {train.updated = "w1"}, tensor<6xf32> {train.updated = "b1"}, tensor<8xf32> {train.updated = "w2"}
// S3:         train.accumulate 1
// S3-NEXT:    ^bb0
// S3-NEXT:    %[[A1:.*]] = dist.all_gather %[[W1]] {group = #dist.group<dp, 4>} : tensor<5xf32> -> tensor<18xf32>
// S3-NEXT:    %[[F1:.*]] = dist.wait %[[A1]] : tensor<18xf32>
// S3-NEXT:    %[[V1:.*]] = nn.reshape %[[F1]] : tensor<18xf32> -> tensor<6x3xf32>
// S3-NEXT:    nn.matmul %{{.*}}, %[[V1]] {transpose_rhs}
// S3:         %[[A2:.*]] = dist.all_gather %[[W2]] {{.*}} : tensor<8xf32> -> tensor<30xf32>
// S3-NEXT:    %[[F2:.*]] = dist.wait %[[A2]]
// S3-NEXT:    %[[V2:.*]] = nn.reshape %[[F2]]
// S3-NEXT:    nn.matmul %{{.*}}, %[[V2]] :
// S3-NEXT:    nn.cross_entropy
// S3:         nn.cross_entropy_grad
// S3-NEXT:    %[[A3:.*]] = dist.all_gather %[[W2]] {{.*}} : tensor<8xf32> -> tensor<30xf32>
// S3-NEXT:    %[[F3:.*]] = dist.wait %[[A3]]
// S3-NEXT:    %[[V3:.*]] = nn.reshape %[[F3]]
// S3-NEXT:    nn.matmul %{{.*}}, %[[V3]] {transpose_rhs}
// S3-NOT:     dist.all_gather
// S3:         dist.reduce_scatter  avg {{.*}} : tensor<18xf32> -> tensor<5xf32>
// S3:         train.yield
// The partitioned parameters are updated in place as chunks; b1 is
// chunked and gathered.
// S3:         %[[N1:[a-z_0-9]+]], {{.*}} = train.adam %[[W1]], {{.*}} : tensor<5xf32>
// S3-NEXT:    dist.chunk %[[B1]]
// S3:         %[[N3:[a-z_0-9]+]], {{.*}} = train.adam %[[W2]], {{.*}} : tensor<8xf32>
// S3-NEXT:    return %[[N1]], %{{.*}}, %[[N3]],

// ROUNDTRIP: module attributes {dist.dp = 4 : i64, dist.zero_stage = 3 : i64}
// ROUNDTRIP: tensor<2xf32> {dist.shard_of = array<i64: 6>, train.param = "b1"}
