// RUN: dsc-opt %s --nn-cost-report | FileCheck %s
// The pass changes nothing: the IR it prints is the IR without the pass.
// RUN: dsc-opt %s --nn-cost-report -o %t.after > /dev/null
// RUN: dsc-opt %s -o %t.before
// RUN: diff %t.before %t.after
// RUN: FileCheck %s --check-prefix=IR < %t.after

// --nn-cost-report prints, per function, one row per op kind (sorted by
// name): count, GFLOP (flops / 1e9, %.6f), MB read and MB written (bytes /
// 1e6, %.3f), then the totals. Expected numbers, from the cost rules in
// dialects/nn/NNOps.cpp (f32 = 4 bytes, i64 = 8 bytes):
//
//   nn.matmul [512x1024] x [1024x2048]: M=512, N=2048, K=1024
//     flops   = 2*M*N*K = 2*512*2048*1024    = 2147483648 -> 2.147484 GFLOP
//     read    = (512*1024 + 1024*2048) * 4   = 10485760   -> 10.486 MB
//     written = 512*2048 * 4                 = 4194304    -> 4.194 MB
//   nn.add (x2): default rule, one flop per result element
//     [512x2048] + [2048]: flops 1048576, read 4194304 + 8192, written 4194304
//     []  + []           : flops 1,       read 4 + 4,         written 4
//     sum: flops 1048577 -> 0.001049; read 4202504 -> 4.203; written 4194308 -> 4.194
//   nn.reshape: a view, 0 flops and 0 bytes both ways
//   nn.softmax [1024x1024]: flops 5*1048576 = 5242880 -> 0.005243;
//     read 4194304 -> 4.194; written 4194304 -> 4.194
//   nn.cross_entropy [1024x1024], labels [1024] (i64), sum -> scalar:
//     flops 6*1048576 = 6291456 -> 0.006291; read 4194304 + 8192 = 4202496
//     -> 4.202; written 4 -> 0.000
//   total: 6 ops; flops 2160066561 -> 2.160067; read 23085064 -> 23.085;
//     written 12582920 -> 12.583
//
// CHECK-LABEL: cost of @step:
// CHECK-NEXT:  op                  count        GFLOP      MB read   MB written
// CHECK-NEXT:  nn.add                  2     0.001049        4.203        4.194
// CHECK-NEXT:  nn.cross_entropy        1     0.006291        4.202        0.000
// CHECK-NEXT:  nn.matmul               1     2.147484       10.486        4.194
// CHECK-NEXT:  nn.reshape              1     0.000000        0.000        0.000
// CHECK-NEXT:  nn.softmax              1     0.005243        4.194        4.194
// CHECK-NEXT:  total                   6     2.160067       23.085       12.583
func.func @step(%x: tensor<512x1024xf32>, %w: tensor<1024x2048xf32>, %b: tensor<2048xf32>, %l: tensor<1024xi64>) -> tensor<f32> {
  %0 = nn.matmul %x, %w : tensor<512x1024xf32>, tensor<1024x2048xf32> -> tensor<512x2048xf32>
  %1 = nn.add %0, %b : tensor<512x2048xf32>, tensor<2048xf32> -> tensor<512x2048xf32>
  %2 = nn.reshape %1 : tensor<512x2048xf32> -> tensor<1024x1024xf32>
  %3 = nn.softmax %2 : tensor<1024x1024xf32>
  %4 = nn.cross_entropy %3, %l {reduction = #nn<reduction sum>} : tensor<1024x1024xf32>, tensor<1024xi64> -> tensor<f32>
  %5 = nn.add %4, %4 : tensor<f32>, tensor<f32> -> tensor<f32>
  return %5 : tensor<f32>
}

// A second function gets its own table. With transpose_lhs the contracting
// dimension K is lhs's second to last dim (256), not its last (64):
//   lhs [256x64]^T = [64x256], rhs [32x256]^T = [256x32]: M=64, N=32, K=256
//   flops = 2*64*32*256 = 1048576 -> 0.001049 GFLOP
//   read = (256*64 + 32*256) * 4 = 98304 -> 0.098 MB; written 64*32*4 = 8192 -> 0.008 MB
// CHECK-LABEL: cost of @transposed:
// CHECK-NEXT:  op                  count        GFLOP      MB read   MB written
// CHECK-NEXT:  nn.matmul               1     0.001049        0.098        0.008
// CHECK-NEXT:  total                   1     0.001049        0.098        0.008
func.func @transposed(%a: tensor<256x64xf32>, %w: tensor<32x256xf32>) -> tensor<64x32xf32> {
  %0 = nn.matmul %a, %w {transpose_lhs, transpose_rhs} : tensor<256x64xf32>, tensor<32x256xf32> -> tensor<64x32xf32>
  return %0 : tensor<64x32xf32>
}

// A function without nn ops still gets a header and a zero total.
// CHECK-LABEL: cost of @empty:
// CHECK-NEXT:  op                  count        GFLOP      MB read   MB written
// CHECK-NEXT:  total                   0     0.000000        0.000        0.000
func.func @empty() {
  return
}

// The IR after the pass is the input, op for op.
// IR-LABEL: func.func @step(
// IR:         %[[MM:.*]] = nn.matmul %{{.*}}, %{{.*}} : tensor<512x1024xf32>, tensor<1024x2048xf32> -> tensor<512x2048xf32>
// IR-NEXT:    %[[ADD:.*]] = nn.add %[[MM]], %{{.*}} : tensor<512x2048xf32>, tensor<2048xf32> -> tensor<512x2048xf32>
// IR-NEXT:    %[[RS:.*]] = nn.reshape %[[ADD]] : tensor<512x2048xf32> -> tensor<1024x1024xf32>
// IR-NEXT:    %[[SM:.*]] = nn.softmax %[[RS]] : tensor<1024x1024xf32>
// IR-NEXT:    %[[CE:.*]] = nn.cross_entropy %[[SM]], %{{.*}} {reduction = #nn<reduction sum>} : tensor<1024x1024xf32>, tensor<1024xi64> -> tensor<f32>
// IR-NEXT:    %[[SUM:.*]] = nn.add %[[CE]], %[[CE]] : tensor<f32>, tensor<f32> -> tensor<f32>
// IR-NEXT:    return %[[SUM]] : tensor<f32>
// IR-LABEL: func.func @transposed(
// IR:         nn.matmul %{{.*}}, %{{.*}} {transpose_lhs, transpose_rhs} : tensor<256x64xf32>, tensor<32x256xf32> -> tensor<64x32xf32>
// IR-LABEL: func.func @empty()
// IR-NEXT:    return
// IR-NOT:     cost of
