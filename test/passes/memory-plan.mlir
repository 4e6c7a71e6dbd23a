// RUN: dsc-opt %s --memory-plan | FileCheck %s
// RUN: dsc-opt %s --memory-plan=alignment=16 | FileCheck %s --check-prefix=A16
// The annotated IR is valid and round-trips.
// RUN: dsc-opt %s --memory-plan | dsc-opt | FileCheck %s

// --memory-plan numbers the ops in program order (arguments are at 0, the
// first op at 1; the pass counts in steps of two, the slot between two ops
// being where a yielded value is added to its sum), gives each buffer a lifetime [definition, last use], and
// lays out one arena: model state first (parameters, optimizer states,
// buffers, inputs, the step, constants, in that order and in argument order
// within a class), every buffer rounded up to the alignment (64 bytes by
// default); then the transient values, largest first, each at the lowest
// offset (from the end of the model state) that no buffer with an
// overlapping lifetime occupies. Lifetimes that touch (one ends at the op
// where the other starts) overlap. Results: train.offset on arguments,
// train.offsets on ops (one per result), train.arena_bytes and
// train.persistent_bytes on the function.

// @fwd, by hand (positions: %0=1 ... %6=7, return=8; f32 = 4 bytes):
//   model state: w [4x4] = 64 B at 0; b [3] = 12 B -> 64 at 64 (parameters
//   come first although x is argument 0); x [4x4] = 64 B at 128.
//   persistent = 192.
//   %0 (matmul, 64 B) lives [1,2]. %1 = relu(%0): %0 dies at the relu and has
//   the same type, so the relu writes in place: one buffer for %0 and %1.
//   %2 = reshape(%1) is a view of it: the same buffer, now live [1,4].
//   %3 (4 B) lives [4,7]; %6 = add(%3, %5) writes in place over %3 (its
//   first operand of the result type, dying there), so that buffer lives
//   [4,8] (the return reads %6).
//   %4 (matmul, 64 B) lives [5,6]: it does not overlap [1,4], so it shares
//   offset 192 with %0/%1/%2.
//   %5 (4 B) lives [6,7], overlapping %4 and %3/%6.
//   Largest first (ties in program order): %0 group at 192; %4 at 192;
//   %3/%6 overlaps both -> 256; %5 overlaps [192,256) and [256,320) -> 320.
//   arena = 320 + 64 = 384.
// CHECK-LABEL: func.func @fwd(
// CHECK-SAME:    {train.input = "x", train.offset = 128 : i64}
// CHECK-SAME:    {train.offset = 0 : i64, train.param = "w"}
// CHECK-SAME:    {train.offset = 64 : i64, train.param = "b"}
// CHECK-SAME:    attributes {train.arena_bytes = 384 : i64, train.peak_live_bytes = 264 : i64, train.persistent_bytes = 192 : i64}
// CHECK-NEXT:    nn.matmul {{.*}} {train.offsets = array<i64: 192>}
// CHECK-NEXT:    nn.relu {{.*}} {train.offsets = array<i64: 192>}
// CHECK-NEXT:    nn.reshape {{.*}} {train.offsets = array<i64: 192>}
// CHECK-NEXT:    nn.reduce_sum {{.*}} {axes = array<i64: 0>, train.offsets = array<i64: 256>}
// CHECK-NEXT:    nn.matmul {{.*}} {train.offsets = array<i64: 192>}
// CHECK-NEXT:    nn.reduce_sum {{.*}} {axes = array<i64: 0, 1>, train.offsets = array<i64: 320>}
// CHECK-NEXT:    nn.add {{.*}} {train.offsets = array<i64: 256>}
// CHECK-NEXT:    return
//
// alignment=16: w at 0, b (12 -> 16 B) at 64, x at 80; persistent 144.
//   %0 group and %4 at 144; %3/%6 (4 -> 16 B) at 208; %5 at 224; arena 240.
// A16-LABEL: func.func @fwd(
// A16-SAME:    {train.input = "x", train.offset = 80 : i64}
// A16-SAME:    {train.offset = 0 : i64, train.param = "w"}
// A16-SAME:    {train.offset = 64 : i64, train.param = "b"}
// A16-SAME:    attributes {train.arena_bytes = 240 : i64, train.peak_live_bytes = 216 : i64, train.persistent_bytes = 144 : i64}
// A16-NEXT:    nn.matmul {{.*}} {train.offsets = array<i64: 144>}
// A16-NEXT:    nn.relu {{.*}} {train.offsets = array<i64: 144>}
// A16-NEXT:    nn.reshape {{.*}} {train.offsets = array<i64: 144>}
// A16-NEXT:    nn.reduce_sum {{.*}} train.offsets = array<i64: 208>}
// A16-NEXT:    nn.matmul {{.*}} {train.offsets = array<i64: 144>}
// A16-NEXT:    nn.reduce_sum {{.*}} train.offsets = array<i64: 224>}
// A16-NEXT:    nn.add {{.*}} {train.offsets = array<i64: 208>}
func.func @fwd(%x: tensor<4x4xf32> {train.input = "x"}, %w: tensor<4x4xf32> {train.param = "w"},
               %b: tensor<3xf32> {train.param = "b"}) -> tensor<f32> {
  %0 = nn.matmul %x, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %1 = nn.relu %0 : tensor<4x4xf32>
  %2 = nn.reshape %1 : tensor<4x4xf32> -> tensor<16xf32>
  %3 = nn.reduce_sum %2 {axes = array<i64: 0>} : tensor<16xf32> -> tensor<f32>
  %4 = nn.matmul %x, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %5 = nn.reduce_sum %4 {axes = array<i64: 0, 1>} : tensor<4x4xf32> -> tensor<f32>
  %6 = nn.add %3, %5 : tensor<f32>, tensor<f32> -> tensor<f32>
  return %6 : tensor<f32>
}

// The optimizer update runs in place: train.adam's three results are the
// parameter's and the two states' own buffers; clipping writes over the
// gradient it reads (%g dies there).
//   model state: w 0, exp_avg 64, exp_avg_sq 128, step (i64, 8 B) 192;
//   persistent 256. Positions: lr 1, %g 2, clip 3, adam 4, return 5.
//   %g/clipped (16 B) [2,4] at 256; lr (4 B) [1,5] -> 320; norm [3,5] -> 384.
//   arena 448.
// CHECK-LABEL: func.func @adam(
// CHECK-SAME:    {train.offset = 0 : i64, train.param = "w"}
// CHECK-SAME:    {train.offset = 64 : i64, train.opt_state = "w/exp_avg"}
// CHECK-SAME:    {train.offset = 128 : i64, train.opt_state = "w/exp_avg_sq"}
// CHECK-SAME:    {train.offset = 192 : i64, train.step}
// CHECK-SAME:    attributes {train.arena_bytes = 448 : i64, train.peak_live_bytes = 280 : i64, train.persistent_bytes = 256 : i64}
// CHECK-NEXT:    train.lr_schedule {{.*}} {train.offsets = array<i64: 320>}
// CHECK-NEXT:    nn.mul {{.*}} {train.offsets = array<i64: 256>}
// CHECK-NEXT:    train.clip_grad_norm {{.*}} {max_norm = {{[^,]*}}, train.offsets = array<i64: 256, 384>}
// CHECK-NEXT:    train.adam {{.*}} {train.offsets = array<i64: 0, 64, 128>}
// A16-LABEL: func.func @adam(
// A16-SAME:    {train.offset = 0 : i64, train.param = "w"}
// A16-SAME:    {train.offset = 16 : i64, train.opt_state = "w/exp_avg"}
// A16-SAME:    {train.offset = 32 : i64, train.opt_state = "w/exp_avg_sq"}
// A16-SAME:    {train.offset = 48 : i64, train.step}
// A16-SAME:    attributes {train.arena_bytes = 112 : i64, train.peak_live_bytes = 88 : i64, train.persistent_bytes = 64 : i64}
// A16-NEXT:    train.lr_schedule {{.*}} {train.offsets = array<i64: 80>}
// A16-NEXT:    nn.mul {{.*}} {train.offsets = array<i64: 64>}
// A16-NEXT:    train.clip_grad_norm {{.*}} {max_norm = {{[^,]*}}, train.offsets = array<i64: 64, 96>}
// A16-NEXT:    train.adam {{.*}} {train.offsets = array<i64: 0, 16, 32>}
func.func @adam(%w: tensor<4xf32> {train.param = "w"}, %m: tensor<4xf32> {train.opt_state = "w/exp_avg"},
                %v: tensor<4xf32> {train.opt_state = "w/exp_avg_sq"}, %s: tensor<i64> {train.step})
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) {
  %lr = train.lr_schedule "constant" {lr = 1.0e-3 : f64}, %s
  %g = nn.mul %w, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %c, %n = train.clip_grad_norm %g {max_norm = 1.0} : tensor<4xf32> -> tensor<4xf32>
  %p, %m2, %v2 = train.adam %w, %c, %m, %v, %lr, %s : tensor<4xf32>
  return %p, %m2, %v2, %n, %lr : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>
}

// SGD with momentum updates the parameter and its buffer in place too.
// CHECK-LABEL: func.func @sgd(
// CHECK-SAME:    {train.offset = 0 : i64, train.param = "w"}
// CHECK-SAME:    {train.offset = 64 : i64, train.opt_state = "w/momentum_buffer"}
// CHECK:         train.sgd {{.*}} {momentum = {{[^,]*}}, train.offsets = array<i64: 0, 64>}
func.func @sgd(%w: tensor<4xf32> {train.param = "w"}, %buf: tensor<4xf32> {train.opt_state = "w/momentum_buffer"},
               %g: tensor<4xf32> {train.input = "g"}, %lr: tensor<f32> {train.input = "lr"}) -> (tensor<4xf32>, tensor<4xf32>) {
  %p, %b = train.sgd %w, %g, %lr buffer %buf : tensor<4xf32> {momentum = 0.9} : tensor<4xf32> -> tensor<4xf32>
  return %p, %b : tensor<4xf32>, tensor<4xf32>
}

// The micro-batch body of train.accumulate counts once (positions: %t 1,
// accumulate 2, body 3..6, return 7), and a value from outside the body that
// the body reads (%t) stays live until the body ends (6), since the body
// runs again for the next micro-batch. So %b [4,5] cannot take %t's offset
// although %t's last reader is at 3. The accumulated sum %r lives from the
// accumulate op (2) to the return. All buffers are 16 B -> 64.
//   model state: w 0, x 64; persistent 128.
//   %t [1,6] 128; %r [2,7] 192; %a/%c (add in place over %a) [3,6] 256;
//   %b [4,5] 320. arena 384.
// CHECK-LABEL: func.func @acc(
// CHECK-SAME:    {train.offset = 0 : i64, train.param = "w"}
// CHECK-SAME:    {train.input = "x", train.offset = 64 : i64}
// CHECK-SAME:    attributes {train.arena_bytes = 384 : i64, train.peak_live_bytes = 192 : i64, train.persistent_bytes = 128 : i64}
// CHECK-NEXT:    nn.mul {{.*}} {train.offsets = array<i64: 128>}
// CHECK-NEXT:    train.accumulate 2
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      nn.mul {{.*}} {train.offsets = array<i64: 256>}
// CHECK-NEXT:      nn.exp {{.*}} {train.offsets = array<i64: 320>}
// CHECK-NEXT:      nn.add {{.*}} {train.offsets = array<i64: 256>}
// CHECK-NEXT:      train.yield
// CHECK-NEXT:    } {train.offsets = array<i64: 192>}
// A16-LABEL: func.func @acc(
// A16-SAME:    attributes {train.arena_bytes = 96 : i64, train.peak_live_bytes = 96 : i64, train.persistent_bytes = 32 : i64}
// A16-NEXT:    nn.mul {{.*}} {train.offsets = array<i64: 32>}
// A16-NEXT:    train.accumulate 2
// A16-NEXT:    ^bb0
// A16-NEXT:      nn.mul {{.*}} {train.offsets = array<i64: 64>}
// A16-NEXT:      nn.exp {{.*}} {train.offsets = array<i64: 80>}
// A16-NEXT:      nn.add {{.*}} {train.offsets = array<i64: 64>}
// A16-NEXT:      train.yield
// A16-NEXT:    } {train.offsets = array<i64: 48>}
func.func @acc(%w: tensor<4xf32> {train.param = "w"}, %x: tensor<4xf32> {train.input = "x"}) -> tensor<4xf32> {
  %t = nn.mul %w, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %r = train.accumulate 2 -> tensor<4xf32> {
  ^bb0(%i: index):
    %a = nn.mul %t, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %b = nn.exp %x : tensor<4xf32>
    %c = nn.add %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    train.yield %c : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// A yielded value is added to its sum right after its sum point (its
// definition, or its last other reader in the body), not at the yield, and
// may die there: %g1, defined first and read by nothing else, dies after
// its addition (before %e), so %e takes its offset, while the sums %s1, %s2
// live through the body. (Positions: %h 1, %g1 2, its addition 2.5, %e 3,
// %g2 4, yield 5.) 16 B each -> 64.
//   model state: x 0; persistent 64. %s1 [acc,end] 64, %s2 128;
//   %h [1,4] 192 (read by %g2); %g1 [1..2.5] 256; %e [3,4] 256 again;
//   %g2 [4,4.5]: %e dies at %g2 and has its type: in place, 256. arena 320.
// CHECK-LABEL: func.func @sum_point(
// CHECK-SAME:    attributes {train.arena_bytes = 320 : i64, train.peak_live_bytes = 128 : i64, train.persistent_bytes = 64 : i64}
// CHECK:           nn.exp {{.*}} {train.offsets = array<i64: 192>}
// CHECK-NEXT:      nn.mul {{.*}} {train.offsets = array<i64: 256>}
// CHECK-NEXT:      nn.neg {{.*}} {train.offsets = array<i64: 256>}
// CHECK-NEXT:      nn.add {{.*}} {train.offsets = array<i64: 256>}
// CHECK-NEXT:      train.yield
// CHECK-NEXT:    } {train.offsets = array<i64: 64, 128>}
func.func @sum_point(%x: tensor<4xf32> {train.input = "x"}) -> (tensor<4xf32>, tensor<4xf32>) {
  %s1, %s2 = train.accumulate 2 -> tensor<4xf32>, tensor<4xf32> {
  ^bb0(%i: index):
    %h = nn.exp %x : tensor<4xf32>
    %g1 = nn.mul %h, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %e = nn.neg %x : tensor<4xf32>
    %g2 = nn.add %e, %h : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    train.yield %g1, %g2 : tensor<4xf32>, tensor<4xf32>
  }
  return %s1, %s2 : tensor<4xf32>, tensor<4xf32>
}

// With one micro-batch a value computed in the body is its sum: one buffer
// from its definition to the sum's last reader (no zero fill, no addition).
// %c is yielded twice: its first sum is %c itself, the second is a buffer of
// its own, filled and added to. %x (an argument) is not computed in the body,
// so its sum is a buffer of its own too.
//   model state: x 0; persistent 64. %c, %r0 at 64; %r1 128; %r2 192.
// CHECK-LABEL: func.func @sum_in_place(
// CHECK-SAME:    attributes {train.arena_bytes = 256 : i64, train.peak_live_bytes = 112 : i64, train.persistent_bytes = 64 : i64}
// CHECK:           nn.exp {{.*}} {train.offsets = array<i64: 64>}
// CHECK-NEXT:      train.yield
// CHECK-NEXT:    } {train.offsets = array<i64: 64, 128, 192>}
func.func @sum_in_place(%x: tensor<4xf32> {train.input = "x"}) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %r0, %r1, %r2 = train.accumulate 1 -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32> {
  ^bb0(%i: index):
    %c = nn.exp %x : tensor<4xf32>
    train.yield %c, %c, %x : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
  return %r0, %r1, %r2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// The model-state classes in arena order whatever the argument order:
// parameters, optimizer states, buffers (train.buffer and arguments without
// a role), inputs, the step, then constants; the transient %0 follows.
//   w 80 B -> 128 at 0; exp_avg 20 -> 64 at 128; buf 12 -> 64 at 192;
//   unannotated 8 -> 64 at 256; x at 320; step at 384; constant at 448;
//   persistent 512; %0 at 512, arena 576. (x dies at the add but is not
//   transient, so the add does not write over it.)
// CHECK-LABEL: func.func @kinds(
// CHECK-SAME:    {train.offset = 384 : i64, train.step}
// CHECK-SAME:    {train.input = "x", train.offset = 320 : i64}
// CHECK-SAME:    {train.buffer = "buf", train.offset = 192 : i64}
// CHECK-SAME:    {train.offset = 128 : i64, train.opt_state = "w/exp_avg"}
// CHECK-SAME:    {train.offset = 0 : i64, train.param = "w"}
// CHECK-SAME:    {train.offset = 256 : i64})
// CHECK-SAME:    attributes {train.arena_bytes = 576 : i64, train.peak_live_bytes = 520 : i64, train.persistent_bytes = 512 : i64}
// CHECK-NEXT:    arith.constant {train.offsets = array<i64: 448>}
// CHECK-NEXT:    nn.add {{.*}} {train.offsets = array<i64: 512>}
// A16-LABEL: func.func @kinds(
// A16-SAME:    {train.offset = 160 : i64, train.step}
// A16-SAME:    {train.input = "x", train.offset = 144 : i64}
// A16-SAME:    {train.buffer = "buf", train.offset = 112 : i64}
// A16-SAME:    {train.offset = 80 : i64, train.opt_state = "w/exp_avg"}
// A16-SAME:    {train.offset = 0 : i64, train.param = "w"}
// A16-SAME:    {train.offset = 128 : i64})
// A16-SAME:    attributes {train.arena_bytes = 208 : i64, train.peak_live_bytes = 200 : i64, train.persistent_bytes = 192 : i64}
// A16-NEXT:    arith.constant {train.offsets = array<i64: 176>}
// A16-NEXT:    nn.add {{.*}} {train.offsets = array<i64: 192>}
func.func @kinds(%s: tensor<i64> {train.step}, %x: tensor<2xf32> {train.input = "x"}, %buf: tensor<3xf32> {train.buffer = "buf"},
                 %m: tensor<5xf32> {train.opt_state = "w/exp_avg"}, %w: tensor<20xf32> {train.param = "w"}, %n: tensor<2xf32>) -> tensor<2xf32> {
  %c = arith.constant dense<1.0> : tensor<2xf32>
  %0 = nn.add %x, %c : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// Equal constants (a mask each layer and micro-batch clones) are one
// buffer: %a and %c share offset 64, %b (another value) has its own at 128;
// persistent 192.
// CHECK-LABEL: func.func @equal_constants(
// CHECK-SAME:    attributes {train.arena_bytes = 256 : i64, {{.*}}train.persistent_bytes = 192 : i64}
// CHECK-NEXT:    arith.constant {train.offsets = array<i64: 64>} dense<[1.000000e+00, 2.000000e+00]>
// CHECK-NEXT:    arith.constant {train.offsets = array<i64: 128>} dense<[1.000000e+00, 3.000000e+00]>
// CHECK-NEXT:    nn.add {{.*}} {train.offsets = array<i64: 192>}
// CHECK-NEXT:    arith.constant {train.offsets = array<i64: 64>} dense<[1.000000e+00, 2.000000e+00]>
func.func @equal_constants(%x: tensor<2xf32> {train.input = "x"}) -> tensor<2xf32> {
  %a = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %b = arith.constant dense<[1.0, 3.0]> : tensor<2xf32>
  %0 = nn.add %x, %a : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  %c = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %1 = nn.add %0, %c : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  %2 = nn.add %1, %b : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %2 : tensor<2xf32>
}
