// RUN: dsc-opt %S/Inputs/recompute-blocks.mlir --autodiff --recompute=mode=layers | FileCheck %s --check-prefix=LAYERS
// RUN: dsc-opt %S/Inputs/recompute-blocks.mlir --autodiff --recompute=mode=layers | dsc-opt | FileCheck %s --check-prefix=LAYERS
// RUN: dsc-opt %S/Inputs/recompute-blocks.mlir --autodiff --recompute=mode=selective | FileCheck %s --check-prefix=SELECTIVE
// RUN: dsc-opt %S/Inputs/recompute-blocks.mlir --autodiff --recompute=mode=none | FileCheck %s --check-prefix=NONE
// RUN: dsc-opt %S/Inputs/recompute-blocks.mlir --autodiff --recompute="mode=layers interval=2" | FileCheck %s --check-prefix=EVERY2
// RUN: dsc-opt %S/Inputs/recompute-blocks.mlir --autodiff --recompute="mode=layers checkpoints=2" | FileCheck %s --check-prefix=EVERY2
// RUN: dsc-opt %S/Inputs/recompute-blocks.mlir --autodiff --recompute=mode=layers --gradient-accumulation=steps=2 --optimizer --zero="stage=3 dp=2 persistence-threshold=0" | FileCheck %s --check-prefix=ZERO3

// --recompute clones the forward ops whose results the backward pass reads
// and the mode does not keep, right before their first backward use
// (train.recomputed = the layer), so the originals die after the forward.
// The layers here (passes/Layers.h): the w1 GEMM, then GELU + w2 + the
// residual add, then w3 + GELU, then w4 + add + head + loss (the last layer,
// never recomputed).

// layers: the layers' inputs are kept (%3, the residual stream, and %1);
// layer 2 (w3 GEMM + GELU) and layer 0 (the w1 GEMM) are recomputed, each
// just before its backward.
// LAYERS:       module attributes {train.recompute = {flops = 1.280000e+03 : f64, mode = "layers", ops = 3 : i64}, train.recompute_layers = 4 : i64}
// LAYERS-LABEL: func.func @blocks(
// LAYERS:         %[[G0:.*]] = nn.gelu %{{.*}} : tensor<4x8xf32>
// LAYERS:         %[[H:.*]] = nn.add %{{.*}}, %arg0 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// LAYERS:         nn.cross_entropy_grad
// LAYERS:         %[[M:.*]] = nn.matmul %[[H]], %arg4 {train.recomputed = 2 : i64}
// LAYERS-NEXT:    %[[G:.*]] = nn.gelu %[[M]] {train.recomputed = 2 : i64}
// LAYERS-NEXT:    nn.matmul %[[G]], %{{.*}} {transpose_lhs}
// LAYERS-NEXT:    nn.gelu_grad %[[M]],
// LAYERS:         nn.matmul %[[G0]], %{{.*}} {transpose_lhs}
// LAYERS:         %[[M0:.*]] = nn.matmul %arg0, %arg2 {train.recomputed = 0 : i64}
// LAYERS-NEXT:    nn.gelu_grad %[[M0]],

// selective: GEMM outputs with a weight are kept; only the GELUs are
// recomputed, from them.
// SELECTIVE-LABEL: func.func @blocks(
// SELECTIVE:         %[[M:.*]] = nn.matmul %{{.*}}, %arg4 : tensor<4x8xf32>
// SELECTIVE:         nn.cross_entropy_grad
// SELECTIVE-NOT:     nn.matmul {{.*}}train.recomputed
// SELECTIVE:         %[[G:.*]] = nn.gelu %[[M]] {train.recomputed = 2 : i64}
// SELECTIVE-NEXT:    nn.matmul %[[G]], %{{.*}} {transpose_lhs}
// SELECTIVE-NEXT:    nn.gelu_grad %[[M]],
// SELECTIVE-NOT:     train.recomputed

// NONE-NOT: train.recomputed

// Every second layer input kept (interval 2, or 2 checkpoints of 4
// layers): %1, the input of layer 1, is no longer kept, so layers 0-1 are
// recomputed together from the model input: the w1 GEMM, its GELU.
// EVERY2-LABEL: func.func @blocks(
// EVERY2:         nn.cross_entropy_grad
// EVERY2:         nn.matmul %arg0, %arg2 {train.recomputed = 0 : i64}
// EVERY2-NEXT:    nn.gelu %{{.*}} {train.recomputed = 0 : i64}

// ZeRO-3 after recompute: the recomputed w3 GEMM reads the parameter in the
// backward pass, so it is served by the backward gather of w3 (the forward
// and backward gathers are separate, and the recomputation is counted).
// ZERO3:         train.accumulate
// ZERO3:         dist.all_gather %arg4
// ZERO3:         nn.cross_entropy_grad
// ZERO3:         %[[G:.*]] = dist.all_gather %arg4
// ZERO3-NEXT:    %[[W:.*]] = dist.wait %[[G]]
// ZERO3-NEXT:    %[[W3:.*]] = nn.reshape %[[W]]
// ZERO3-NEXT:    nn.matmul %{{.*}}, %[[W3]] {train.recomputed = 2 : i64}

// limit=2 (what --recompute auto searches): only the first two layers are
// recomputed; layer 2 (w3 GEMM + GELU) keeps its activations.
// RUN: dsc-opt %S/Inputs/recompute-blocks.mlir --autodiff --recompute="mode=layers limit=2" | FileCheck %s --check-prefix=LIMIT
// LIMIT:     nn.cross_entropy_grad
// LIMIT-NOT: train.recomputed = 2
// LIMIT:     nn.matmul %arg0, %arg2 {train.recomputed = 0 : i64}

// A pipeline's later stage reads its activations from a dist.recv, which
// is data of the micro-batch, not a constant: its layers are found and
// recomputed as the first stage's are (they were taken for functions of
// the parameters alone, and nothing was recomputed past stage 0).
// RUN: dsc-opt %S/Inputs/recompute-blocks.mlir --pipeline-split="stages=2 method=uniform" --autodiff --recompute=mode=layers | FileCheck %s --check-prefix=PIPE
// PIPE-LABEL: func.func @blocks_stage0(
// PIPE-SAME:    train.recomputed_ops = 1 : i64
// PIPE:         nn.matmul {{.*}}train.backward, train.recomputed = 0 : i64
// PIPE-LABEL: func.func @blocks_stage1(
// PIPE-SAME:    train.recomputed_ops = 1 : i64
// PIPE:         %[[RECV:.*]] = dist.recv
// PIPE-NEXT:    %[[IN:.*]] = dist.wait %[[RECV]]
// PIPE:         nn.matmul %[[IN]], {{.*}}train.backward, train.recomputed = 0 : i64

// The last layer's values are kept only where its backward follows its
// forward at once: on a pipeline's last stage. Earlier stages run other
// micro-batches' forwards in between (1F1B), so their last layer (here the
// bias add and ReLU after each stage's GEMM) is recomputed too.
// RUN: dsc-opt %S/Inputs/pp-fixed-copies.mlir --pipeline-split="stages=3 method=uniform" --autodiff --recompute=mode=selective | FileCheck %s --check-prefix=LASTSTAGE
// LASTSTAGE-LABEL: func.func @mlp_stage0(
// LASTSTAGE-SAME:    train.recomputed_ops = 1 : i64
// LASTSTAGE-LABEL: func.func @mlp_stage1(
// LASTSTAGE-SAME:    train.recomputed_ops = 1 : i64
// LASTSTAGE-LABEL: func.func @mlp_stage2(
// LASTSTAGE-SAME:    train.recomputed_ops = 0 : i64
