// RUN: dsc-opt %s | dsc-opt | FileCheck %s
// RUN: dsc-opt %s --mlir-print-op-generic | dsc-opt | FileCheck %s

// Round trip of every dist op through the custom assembly and through the
// generic form.

// The group attribute prints as #dist.group<axis, size> for every axis of the
// grid (dp, pp, tp, world), here on single-tensor all_reduces of every
// reduction kind; a 0-d tensor and an integer max are fine.
// CHECK-LABEL: func.func @all_reduce(
// CHECK-SAME:    %[[G:.*]]: tensor<8x4xf32>, %[[N:.*]]: tensor<i64>, %[[S:.*]]: tensor<f32>)
// CHECK-NEXT:    %[[R0:.*]] = dist.all_reduce sum %[[G]] {group = #dist.group<dp, 4>} : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    dist.all_reduce avg %[[R0]] {group = #dist.group<tp, 2>} : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    dist.all_reduce max %[[N]] {group = #dist.group<pp, 8>} : tensor<i64> -> tensor<i64>
// CHECK-NEXT:    dist.all_reduce min %[[S]] {group = #dist.group<world, 16>} : tensor<f32> -> tensor<f32>
// CHECK-NEXT:    dist.all_reduce sum %[[N]] {group = #dist.group<dp, 1>} : tensor<i64> -> tensor<i64>
func.func @all_reduce(%g: tensor<8x4xf32>, %n: tensor<i64>, %s: tensor<f32>) {
  %0 = dist.all_reduce sum %g {group = #dist.group<dp, 4>} : tensor<8x4xf32> -> tensor<8x4xf32>
  %1 = dist.all_reduce avg %0 {group = #dist.group<tp, 2>} : tensor<8x4xf32> -> tensor<8x4xf32>
  %2 = dist.all_reduce max %n {group = #dist.group<pp, 8>} : tensor<i64> -> tensor<i64>
  %3 = dist.all_reduce min %s {group = #dist.group<world, 16>} : tensor<f32> -> tensor<f32>
  // A group of one rank is a valid (trivial) communicator.
  %4 = dist.all_reduce sum %n {group = #dist.group<dp, 1>} : tensor<i64> -> tensor<i64>
  return
}

// Bucketed (variadic) all_reduce: one call moves tensors of different shapes
// and element types, results in operand order.
// CHECK-LABEL: func.func @all_reduce_bucket(
// CHECK-SAME:    %[[A:.*]]: tensor<16x8xf32>, %[[B:.*]]: tensor<8xbf16>, %[[C:.*]]: tensor<3xi32>)
// CHECK-NEXT:    %[[R:.*]]:3 = dist.all_reduce sum %[[A]], %[[B]], %[[C]] {group = #dist.group<dp, 4>} : tensor<16x8xf32>, tensor<8xbf16>, tensor<3xi32> -> tensor<16x8xf32>, tensor<8xbf16>, tensor<3xi32>
// CHECK-NEXT:    %{{.*}}:2 = dist.all_reduce avg %[[R]]#0, %[[R]]#1 {group = #dist.group<dp, 4>} : tensor<16x8xf32>, tensor<8xbf16> -> tensor<16x8xf32>, tensor<8xbf16>
func.func @all_reduce_bucket(%a: tensor<16x8xf32>, %b: tensor<8xbf16>, %c: tensor<3xi32>) {
  %0:3 = dist.all_reduce sum %a, %b, %c {group = #dist.group<dp, 4>} : tensor<16x8xf32>, tensor<8xbf16>, tensor<3xi32> -> tensor<16x8xf32>, tensor<8xbf16>, tensor<3xi32>
  %1:2 = dist.all_reduce avg %0#0, %0#1 {group = #dist.group<dp, 4>} : tensor<16x8xf32>, tensor<8xbf16> -> tensor<16x8xf32>, tensor<8xbf16>
  return
}

// reduce_scatter divides dimension 0 by the group size and keeps the other
// dims (single and bucketed); all_gather multiplies it back.
// CHECK-LABEL: func.func @scatter_gather(
// CHECK-SAME:    %[[A:.*]]: tensor<8x4xf32>, %[[B:.*]]: tensor<12xf16>, %[[C:.*]]: tensor<4x2x3xi64>)
// CHECK-NEXT:    %[[RS:.*]] = dist.reduce_scatter sum %[[A]] {group = #dist.group<dp, 4>} : tensor<8x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT:    %[[RS2:.*]]:2 = dist.reduce_scatter avg %[[A]], %[[B]] {group = #dist.group<dp, 2>} : tensor<8x4xf32>, tensor<12xf16> -> tensor<4x4xf32>, tensor<6xf16>
// CHECK-NEXT:    dist.reduce_scatter max %[[C]] {group = #dist.group<tp, 4>} : tensor<4x2x3xi64> -> tensor<1x2x3xi64>
// CHECK-NEXT:    dist.all_gather %[[RS]] {group = #dist.group<dp, 4>} : tensor<2x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    dist.all_gather %[[RS2]]#0, %[[RS2]]#1 {group = #dist.group<dp, 2>} : tensor<4x4xf32>, tensor<6xf16> -> tensor<8x4xf32>, tensor<12xf16>
// CHECK-NEXT:    dist.all_gather %[[C]] {group = #dist.group<world, 1>} : tensor<4x2x3xi64> -> tensor<4x2x3xi64>
func.func @scatter_gather(%a: tensor<8x4xf32>, %b: tensor<12xf16>, %c: tensor<4x2x3xi64>) {
  %0 = dist.reduce_scatter sum %a {group = #dist.group<dp, 4>} : tensor<8x4xf32> -> tensor<2x4xf32>
  %1:2 = dist.reduce_scatter avg %a, %b {group = #dist.group<dp, 2>} : tensor<8x4xf32>, tensor<12xf16> -> tensor<4x4xf32>, tensor<6xf16>
  %2 = dist.reduce_scatter max %c {group = #dist.group<tp, 4>} : tensor<4x2x3xi64> -> tensor<1x2x3xi64>
  %3 = dist.all_gather %0 {group = #dist.group<dp, 4>} : tensor<2x4xf32> -> tensor<8x4xf32>
  %4:2 = dist.all_gather %1#0, %1#1 {group = #dist.group<dp, 2>} : tensor<4x4xf32>, tensor<6xf16> -> tensor<8x4xf32>, tensor<12xf16>
  %5 = dist.all_gather %c {group = #dist.group<world, 1>} : tensor<4x2x3xi64> -> tensor<4x2x3xi64>
  return
}

// all_to_all keeps the type (single and bucketed, mixed element types);
// its wait takes every result.
// CHECK-LABEL: func.func @all_to_all(
// CHECK-SAME:    %[[A:.*]]: tensor<8x4xf32>, %[[B:.*]]: tensor<12xbf16>)
// CHECK-NEXT:    %[[X:.*]] = dist.all_to_all %[[A]] {group = #dist.group<dp, 4>} : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    %[[Y:.*]]:2 = dist.all_to_all %[[A]], %[[B]] {group = #dist.group<dp, 2>} : tensor<8x4xf32>, tensor<12xbf16> -> tensor<8x4xf32>, tensor<12xbf16>
// CHECK-NEXT:    dist.wait %[[Y]]#0, %[[Y]]#1 : tensor<8x4xf32>, tensor<12xbf16>
func.func @all_to_all(%a: tensor<8x4xf32>, %b: tensor<12xbf16>) {
  %0 = dist.all_to_all %a {group = #dist.group<dp, 4>} : tensor<8x4xf32> -> tensor<8x4xf32>
  %1:2 = dist.all_to_all %a, %b {group = #dist.group<dp, 2>} : tensor<8x4xf32>, tensor<12xbf16> -> tensor<8x4xf32>, tensor<12xbf16>
  %2:2 = dist.wait %1#0, %1#1 : tensor<8x4xf32>, tensor<12xbf16>
  return
}

// broadcast from the first and from the last rank of the group; the result
// type is the input type and is printed once.
// CHECK-LABEL: func.func @broadcast(
// CHECK-SAME:    %[[W:.*]]: tensor<4x4xf32>, %[[S:.*]]: tensor<i64>)
// CHECK-NEXT:    dist.broadcast %[[W]] {group = #dist.group<dp, 8>, root = 0 : i64} : tensor<4x4xf32>
// CHECK-NEXT:    dist.broadcast %[[S]] {group = #dist.group<world, 8>, root = 7 : i64} : tensor<i64>
func.func @broadcast(%w: tensor<4x4xf32>, %s: tensor<i64>) {
  %0 = dist.broadcast %w {group = #dist.group<dp, 8>, root = 0 : i64} : tensor<4x4xf32>
  %1 = dist.broadcast %s {root = 7 : i64, group = #dist.group<world, 8>} : tensor<i64>
  return
}

// Point-to-point: peers are relative offsets in (-size, size), non-zero;
// tags are non-negative; send returns its handle (of the input's type),
// recv's type is written; dist.wait completes either.
// CHECK-LABEL: func.func @send_recv(
// CHECK-SAME:    %[[A:.*]]: tensor<2x16xbf16>)
// CHECK-NEXT:    %[[S:.*]] = dist.send %[[A]] {group = #dist.group<pp, 4>, peer = 1 : i64, tag = 0 : i64} : tensor<2x16xbf16>
// CHECK-NEXT:    %[[R:.*]] = dist.recv {group = #dist.group<pp, 4>, peer = -1 : i64, tag = 0 : i64} : tensor<2x16xbf16>
// CHECK-NEXT:    %[[V:.*]] = dist.wait %[[R]] : tensor<2x16xbf16>
// CHECK-NEXT:    dist.send %[[V]] {group = #dist.group<pp, 4>, peer = -3 : i64, tag = 42 : i64} : tensor<2x16xbf16>
// CHECK-NEXT:    dist.recv {group = #dist.group<pp, 4>, peer = 3 : i64, tag = 42 : i64} : tensor<2x16xbf16>
// CHECK-NEXT:    dist.recv {group = #dist.group<world, 2>, peer = 1 : i64, tag = 7 : i64} : tensor<i32>
// CHECK-NEXT:    dist.wait %[[S]] : tensor<2x16xbf16>
func.func @send_recv(%a: tensor<2x16xbf16>) {
  %s = dist.send %a {group = #dist.group<pp, 4>, peer = 1 : i64, tag = 0 : i64} : tensor<2x16xbf16>
  %0 = dist.recv {group = #dist.group<pp, 4>, peer = -1 : i64, tag = 0 : i64} : tensor<2x16xbf16>
  %v = dist.wait %0 : tensor<2x16xbf16>
  %s2 = dist.send %v {group = #dist.group<pp, 4>, peer = -3 : i64, tag = 42 : i64} : tensor<2x16xbf16>
  %1 = dist.recv {group = #dist.group<pp, 4>, peer = 3 : i64, tag = 42 : i64} : tensor<2x16xbf16>
  %2 = dist.recv {group = #dist.group<world, 2>, peer = 1 : i64, tag = 7 : i64} : tensor<i32>
  %w = dist.wait %s : tensor<2x16xbf16>
  return
}

// Collectives keep their program order through a round trip (they are
// never reordered or merged), interleaved with nn compute.
// CHECK-LABEL: func.func @ordered(
// CHECK:         dist.all_reduce sum
// CHECK-NEXT:    nn.mul
// CHECK-NEXT:    dist.all_reduce sum
// CHECK-NEXT:    dist.all_gather
// CHECK-NEXT:    return
func.func @ordered(%a: tensor<8xf32>) -> tensor<16xf32> {
  %0 = dist.all_reduce sum %a {group = #dist.group<dp, 2>} : tensor<8xf32> -> tensor<8xf32>
  %1 = nn.mul %0, %a : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %2 = dist.all_reduce sum %a {group = #dist.group<dp, 2>} : tensor<8xf32> -> tensor<8xf32>
  %3 = dist.all_gather %2 {group = #dist.group<dp, 2>} : tensor<8xf32> -> tensor<16xf32>
  return %3 : tensor<16xf32>
}

// Non-blocking form: the wait returns the collective's results, ready; 1-D
// shards are padded (10 elements on 4 ranks: chunks of 3, gathered back to
// 10); a chunk is this rank's part of a flat tensor.
// CHECK-LABEL: func.func @async(
// CHECK:         %[[RS:.*]] = dist.reduce_scatter avg %{{.*}} {group = #dist.group<dp, 4>} : tensor<10xf32> -> tensor<3xf32>
// CHECK-NEXT:    %[[W:.*]] = dist.wait %[[RS]] : tensor<3xf32>
// CHECK-NEXT:    %[[AG:.*]] = dist.all_gather %[[W]] {group = #dist.group<dp, 4>} : tensor<3xf32> -> tensor<10xf32>
// CHECK-NEXT:    %[[W2:.*]] = dist.wait %[[AG]] : tensor<10xf32>
// CHECK-NEXT:    dist.chunk %[[W2]] {group = #dist.group<dp, 4>} : tensor<10xf32> -> tensor<3xf32>
func.func @async(%a: tensor<10xf32>) -> tensor<3xf32> {
  %0 = dist.reduce_scatter avg %a {group = #dist.group<dp, 4>} : tensor<10xf32> -> tensor<3xf32>
  %1 = dist.wait %0 : tensor<3xf32>
  %2 = dist.all_gather %1 {group = #dist.group<dp, 4>} : tensor<3xf32> -> tensor<10xf32>
  %3 = dist.wait %2 : tensor<10xf32>
  %4 = dist.chunk %3 {group = #dist.group<dp, 4>} : tensor<10xf32> -> tensor<3xf32>
  return %4 : tensor<3xf32>
}

// Megatron's f (enter a tensor-parallel region) and g (leave it).
// CHECK-LABEL: func.func @tp_regions(
// CHECK-NEXT:    %[[F:.*]] = dist.tp_copy %{{.*}} {group = #dist.group<tp, 2>} : tensor<4x8xf32>
// CHECK-NEXT:    dist.tp_reduce %[[F]] {group = #dist.group<tp, 2>} : tensor<4x8xf32>
func.func @tp_regions(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = dist.tp_copy %a {group = #dist.group<tp, 2>} : tensor<4x8xf32>
  %1 = dist.tp_reduce %0 {group = #dist.group<tp, 2>} : tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// Sequence parallelism: a token-split region's entry and exit (with
// `reduce`: Megatron's g and f under sequence parallelism).
// CHECK-LABEL: func.func @sp_regions(
// CHECK-NEXT:    %[[S:.*]] = dist.sp_scatter %{{.*}} {dim = 1 : i64, group = #dist.group<tp, 2>, reduce} : tensor<1x6x8xf32> -> tensor<1x3x8xf32>
// CHECK-NEXT:    dist.sp_gather %[[S]] {dim = 1 : i64, group = #dist.group<tp, 2>} : tensor<1x3x8xf32> -> tensor<1x6x8xf32>
func.func @sp_regions(%a: tensor<1x6x8xf32>) -> tensor<1x6x8xf32> {
  %0 = dist.sp_scatter %a {dim = 1 : i64, group = #dist.group<tp, 2>, reduce} : tensor<1x6x8xf32> -> tensor<1x3x8xf32>
  %1 = dist.sp_gather %0 {dim = 1 : i64, group = #dist.group<tp, 2>} : tensor<1x3x8xf32> -> tensor<1x6x8xf32>
  return %1 : tensor<1x6x8xf32>
}
