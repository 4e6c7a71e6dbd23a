// RUN: dsc-opt %s -split-input-file -verify-diagnostics

// Verifier errors of the dist dialect, one case per message.

//===----------------------------------------------------------------------===//
// #dist.group
//===----------------------------------------------------------------------===//

// A communicator has at least one rank.
func.func @group_size_zero(%a: tensor<4xf32>) {
  // expected-error @+1 {{group size must be at least 1, got 0}}
  %0 = dist.all_reduce sum %a {group = #dist.group<dp, 0>} : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

// A negative group size is reported with its value.
func.func @group_size_negative(%a: tensor<4xf32>) {
  // expected-error @+1 {{group size must be at least 1, got -2}}
  %s = dist.send %a {group = #dist.group<pp, -2>, peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
  return
}

//===----------------------------------------------------------------------===//
// all_reduce
//===----------------------------------------------------------------------===//

// -----

// A collective has one result per input.
func.func @all_reduce_arity(%a: tensor<4xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{'dist.all_reduce' op has 2 inputs but 1 results}}
  %0 = dist.all_reduce sum %a, %b {group = #dist.group<dp, 2>} : tensor<4xf32>, tensor<2xf32> -> tensor<4xf32>
  return
}

// -----

// A collective moves at least one tensor (generic form: the custom form
// cannot spell an empty list).
func.func @all_reduce_empty() {
  // expected-error @+1 {{'dist.all_reduce' op needs at least one input}}
  "dist.all_reduce"() <{group = #dist.group<dp, 2>, reduce = #dist<reduce sum>}> : () -> ()
  return
}

// -----

// all_reduce keeps each tensor's type.
func.func @all_reduce_type(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dist.all_reduce' op result type 'tensor<4xf16>' differs from input type 'tensor<4xf32>'}}
  %0 = dist.all_reduce sum %a {group = #dist.group<dp, 2>} : tensor<4xf32> -> tensor<4xf16>
  return
}

// -----

// The type check applies to every member of a bucket, not just the first.
func.func @all_reduce_bucket_type(%a: tensor<4xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'dist.all_reduce' op result type 'tensor<4xf32>' differs from input type 'tensor<3xf32>'}}
  %0:2 = dist.all_reduce max %a, %b {group = #dist.group<dp, 2>} : tensor<4xf32>, tensor<3xf32> -> tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// avg divides by the group size: integers are rejected.
func.func @all_reduce_avg_int(%a: tensor<4xi32>) {
  // expected-error @+1 {{'dist.all_reduce' op avg needs float tensors, got 'tensor<4xi32>'}}
  %0 = dist.all_reduce avg %a {group = #dist.group<dp, 2>} : tensor<4xi32> -> tensor<4xi32>
  return
}

// -----

// The avg rule applies to every member of a bucket.
func.func @all_reduce_avg_int_bucket(%a: tensor<4xf32>, %b: tensor<i64>) {
  // expected-error @+1 {{'dist.all_reduce' op avg needs float tensors, got 'tensor<i64>'}}
  %0:2 = dist.all_reduce avg %a, %b {group = #dist.group<dp, 2>} : tensor<4xf32>, tensor<i64> -> tensor<4xf32>, tensor<i64>
  return
}

// -----

// Collectives name their group.
func.func @all_reduce_no_group(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dist.all_reduce' op requires attribute 'group'}}
  %0 = dist.all_reduce sum %a : tensor<4xf32> -> tensor<4xf32>
  return
}

//===----------------------------------------------------------------------===//
// reduce_scatter
//===----------------------------------------------------------------------===//

// -----

// reduce_scatter has one result per input.
func.func @reduce_scatter_arity(%a: tensor<8xf32>) {
  // expected-error @+1 {{'dist.reduce_scatter' op has 1 inputs but 2 results}}
  %0:2 = dist.reduce_scatter sum %a {group = #dist.group<dp, 2>} : tensor<8xf32> -> tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// reduce_scatter needs at least one input.
func.func @reduce_scatter_empty() {
  // expected-error @+1 {{'dist.reduce_scatter' op needs at least one input}}
  "dist.reduce_scatter"() <{group = #dist.group<dp, 2>, reduce = #dist<reduce sum>}> : () -> ()
  return
}

// -----

// reduce_scatter splits dimension 0, so scalars are rejected.
func.func @reduce_scatter_scalar(%a: tensor<f32>) {
  // expected-error @+1 {{'dist.reduce_scatter' op inputs must have rank >= 1}}
  %0 = dist.reduce_scatter sum %a {group = #dist.group<dp, 1>} : tensor<f32> -> tensor<f32>
  return
}

// -----

// Dimensions other than 0 are kept.
func.func @reduce_scatter_other_dims(%a: tensor<8x4xf32>) {
  // expected-error @+1 {{'dist.reduce_scatter' op result 'tensor<2x5xf32>' must match input 'tensor<8x4xf32>' outside dimension 0}}
  %0 = dist.reduce_scatter sum %a {group = #dist.group<dp, 4>} : tensor<8x4xf32> -> tensor<2x5xf32>
  return
}

// -----

// The element type is kept.
func.func @reduce_scatter_element_type(%a: tensor<8x4xf32>) {
  // expected-error @+1 {{'dist.reduce_scatter' op result 'tensor<2x4xbf16>' must match input 'tensor<8x4xf32>' outside dimension 0}}
  %0 = dist.reduce_scatter sum %a {group = #dist.group<dp, 4>} : tensor<8x4xf32> -> tensor<2x4xbf16>
  return
}

// -----

// The rank is kept.
func.func @reduce_scatter_rank(%a: tensor<8x4xf32>) {
  // expected-error @+1 {{'dist.reduce_scatter' op result 'tensor<2x4x1xf32>' must match input 'tensor<8x4xf32>' outside dimension 0}}
  %0 = dist.reduce_scatter sum %a {group = #dist.group<dp, 4>} : tensor<8x4xf32> -> tensor<2x4x1xf32>
  return
}

// -----

// Dimension 0 splits into `size` equal chunks: 6 is not divisible by 4.
func.func @reduce_scatter_divisible(%a: tensor<6x4xf32>) {
  // expected-error @+1 {{'dist.reduce_scatter' op dimension 0 of 'tensor<6x4xf32>' is not divisible by the group size 4 (pad the buffer to a multiple of it)}}
  %0 = dist.reduce_scatter sum %a {group = #dist.group<dp, 4>} : tensor<6x4xf32> -> tensor<1x4xf32>
  return
}

// -----

// Each rank keeps dim0 / size rows (not dim0, as an all_reduce would).
func.func @reduce_scatter_result_dim(%a: tensor<8x4xf32>) {
  // expected-error @+1 {{'dist.reduce_scatter' op result dimension 0 must be 2, got 8}}
  %0 = dist.reduce_scatter sum %a {group = #dist.group<dp, 4>} : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

// The checks apply to every member of a bucket; 1-D inputs are padded to
// size chunks of ceil(n / size): 12 elements in 4 chunks of 3.
func.func @reduce_scatter_bucket(%a: tensor<8xf32>, %b: tensor<12xf32>) {
  // expected-error @+1 {{'dist.reduce_scatter' op result length must be 3 for 12 elements in 4 chunks, got 4}}
  %0:2 = dist.reduce_scatter sum %a, %b {group = #dist.group<dp, 4>} : tensor<8xf32>, tensor<12xf32> -> tensor<2xf32>, tensor<4xf32>
  return
}

// -----

// avg divides by the group size: like all_reduce, reduce_scatter must reject
// integer tensors with avg.
func.func @reduce_scatter_avg_int(%a: tensor<8xi32>) {
  // expected-error @+1 {{avg needs float tensors, got 'tensor<8xi32>'}}
  %0 = dist.reduce_scatter avg %a {group = #dist.group<dp, 4>} : tensor<8xi32> -> tensor<2xi32>
  return
}

//===----------------------------------------------------------------------===//
// all_to_all
//===----------------------------------------------------------------------===//

// -----

// all_to_all has one result per input.
func.func @all_to_all_arity(%a: tensor<4xf32>, %b: tensor<6xf32>) {
  // expected-error @+1 {{'dist.all_to_all' op has 2 inputs but 1 results}}
  %0 = dist.all_to_all %a, %b {group = #dist.group<dp, 2>} : tensor<4xf32>, tensor<6xf32> -> tensor<4xf32>
  return
}

// -----

// all_to_all moves chunks: the result has the input's type.
func.func @all_to_all_type(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dist.all_to_all' op result type 'tensor<4xbf16>' must equal the input type 'tensor<4xf32>'}}
  %0 = dist.all_to_all %a {group = #dist.group<dp, 2>} : tensor<4xf32> -> tensor<4xbf16>
  return
}

// -----

// all_to_all splits dimension 0, so scalars are rejected.
func.func @all_to_all_scalar(%a: tensor<f32>) {
  // expected-error @+1 {{'dist.all_to_all' op inputs must have rank >= 1}}
  %0 = dist.all_to_all %a {group = #dist.group<dp, 1>} : tensor<f32> -> tensor<f32>
  return
}

// -----

// Dimension 0 must be whole chunks: all_to_all does not pad.
func.func @all_to_all_indivisible(%a: tensor<6x2xf32>) {
  // expected-error @+1 {{'dist.all_to_all' op dimension 0 of 'tensor<6x2xf32>' is not 4 equal chunks (pad the buffer to a multiple of the group size)}}
  %0 = dist.all_to_all %a {group = #dist.group<dp, 4>} : tensor<6x2xf32> -> tensor<6x2xf32>
  return
}

//===----------------------------------------------------------------------===//
// all_gather
//===----------------------------------------------------------------------===//

// -----

// all_gather has one result per input.
func.func @all_gather_arity(%a: tensor<2xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'dist.all_gather' op has 2 inputs but 1 results}}
  %0 = dist.all_gather %a, %b {group = #dist.group<dp, 2>} : tensor<2xf32>, tensor<3xf32> -> tensor<4xf32>
  return
}

// -----

// all_gather needs at least one input.
func.func @all_gather_empty() {
  // expected-error @+1 {{'dist.all_gather' op needs at least one input}}
  "dist.all_gather"() <{group = #dist.group<dp, 2>}> : () -> ()
  return
}

// -----

// all_gather concatenates along dimension 0, so scalars are rejected.
func.func @all_gather_scalar(%a: tensor<f32>) {
  // expected-error @+1 {{'dist.all_gather' op inputs must have rank >= 1}}
  %0 = dist.all_gather %a {group = #dist.group<dp, 2>} : tensor<f32> -> tensor<2xf32>
  return
}

// -----

// all_gather keeps the dimensions other than 0.
func.func @all_gather_other_dims(%a: tensor<2x4xf32>) {
  // expected-error @+1 {{'dist.all_gather' op result 'tensor<8x8xf32>' must match input 'tensor<2x4xf32>' outside dimension 0}}
  %0 = dist.all_gather %a {group = #dist.group<dp, 4>} : tensor<2x4xf32> -> tensor<8x8xf32>
  return
}

// -----

// The result's dimension 0 is the input's times the group size.
func.func @all_gather_result_dim(%a: tensor<2x4xf32>) {
  // expected-error @+1 {{'dist.all_gather' op result dimension 0 must be 8, got 2}}
  %0 = dist.all_gather %a {group = #dist.group<tp, 4>} : tensor<2x4xf32> -> tensor<2x4xf32>
  return
}

// -----

// A 1-D gather of chunks of 3 on 4 ranks gives 9 to 12 elements (the
// padding of the 4 chunks dropped), not 8 (which makes chunks of 2).
func.func @all_gather_padding(%a: tensor<3xf32>) {
  // expected-error @+1 {{'dist.all_gather' op result length must be in (8, 12] to make 4 chunks of 3, got 8}}
  %0 = dist.all_gather %a {group = #dist.group<dp, 4>} : tensor<3xf32> -> tensor<8xf32>
  return
}

//===----------------------------------------------------------------------===//
// wait and chunk
//===----------------------------------------------------------------------===//

// -----

// A wait completes a collective: its operands are that collective's results.
func.func @wait_not_collective(%a: tensor<4xf32>) {
  %0 = nn.neg %a : tensor<4xf32>
  // expected-error @+1 {{'dist.wait' op operands must be the results of one all_reduce, reduce_scatter, all_gather, all_to_all, send or recv}}
  %1 = dist.wait %0 : tensor<4xf32>
  return
}

// -----

// ... all of them, in order.
func.func @wait_partial(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  %0:2 = dist.all_reduce sum %a, %b {group = #dist.group<dp, 2>} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>
  // expected-error @+1 {{'dist.wait' op must take every result of its collective, in order (2 results)}}
  %1 = dist.wait %0#0 : tensor<4xf32>
  return
}

// -----

// A chunk is ceil(n / size) long: 10 elements on 4 ranks -> 3.
func.func @chunk_length(%a: tensor<10xf32>) {
  // expected-error @+1 {{'dist.chunk' op result length must be 3 (10 elements in 4 chunks)}}
  %0 = dist.chunk %a {group = #dist.group<dp, 4>} : tensor<10xf32> -> tensor<2xf32>
  return
}

// -----

// Chunks are of flattened (1-D) tensors.
func.func @chunk_rank(%a: tensor<4x2xf32>) {
  // expected-error @+1 {{'dist.chunk' op input and result must be 1-D}}
  %0 = dist.chunk %a {group = #dist.group<dp, 2>} : tensor<4x2xf32> -> tensor<4xf32>
  return
}

//===----------------------------------------------------------------------===//
// broadcast
//===----------------------------------------------------------------------===//

// -----

// The root is a rank of the group: size is one past the last rank.
func.func @broadcast_root_size(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dist.broadcast' op root 4 is outside the group of size 4}}
  %0 = dist.broadcast %a {group = #dist.group<dp, 4>, root = 4 : i64} : tensor<4xf32>
  return
}

// -----

// A negative root is rejected.
func.func @broadcast_root_negative(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dist.broadcast' op root -1 is outside the group of size 4}}
  %0 = dist.broadcast %a {group = #dist.group<dp, 4>, root = -1 : i64} : tensor<4xf32>
  return
}

// -----

// broadcast's result has the input's type (the ODS AllTypesMatch constraint
// reports it, before the C++ verifier's own equality check could run).
func.func @broadcast_type(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dist.broadcast' op failed to verify that all of {input, result} have same type}}
  %0 = "dist.broadcast"(%a) <{group = #dist.group<dp, 4>, root = 0 : i64}> : (tensor<4xf32>) -> tensor<4xf16>
  return
}

//===----------------------------------------------------------------------===//
// send / recv
//===----------------------------------------------------------------------===//

// -----

// A send to oneself (peer 0) is rejected.
func.func @send_peer_zero(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dist.send' op peer offset 0 must be non-zero and within the group of size 4}}
  %s = dist.send %a {group = #dist.group<pp, 4>, peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
  return
}

// -----

// A forward offset of `size` wraps onto oneself: rejected.
func.func @send_peer_too_far(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dist.send' op peer offset 4 must be non-zero and within the group of size 4}}
  %s = dist.send %a {group = #dist.group<pp, 4>, peer = 4 : i64, tag = 0 : i64} : tensor<4xf32>
  return
}

// -----

// send's tag must be non-negative.
func.func @send_negative_tag(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dist.send' op tag must be non-negative, got -1}}
  %s = dist.send %a {group = #dist.group<pp, 4>, peer = 1 : i64, tag = -1 : i64} : tensor<4xf32>
  return
}

// -----

// recv from oneself (peer 0) is rejected.
func.func @recv_peer_zero() {
  // expected-error @+1 {{'dist.recv' op peer offset 0 must be non-zero and within the group of size 2}}
  %0 = dist.recv {group = #dist.group<pp, 2>, peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
  return
}

// -----

// A backward offset of -size is out of the group.
func.func @recv_peer_too_far(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dist.recv' op peer offset -4 must be non-zero and within the group of size 4}}
  %0 = dist.recv {group = #dist.group<pp, 4>, peer = -4 : i64, tag = 0 : i64} : tensor<4xf32>
  return
}

// -----

// recv's tag must be non-negative.
func.func @recv_negative_tag() {
  // expected-error @+1 {{'dist.recv' op tag must be non-negative, got -5}}
  %0 = dist.recv {group = #dist.group<pp, 4>, peer = -1 : i64, tag = -5 : i64} : tensor<4xf32>
  return
}

// -----

// In a group of one rank there is no valid peer at all.
func.func @recv_single_rank_group() {
  // expected-error @+1 {{'dist.recv' op peer offset 1 must be non-zero and within the group of size 1}}
  %0 = dist.recv {group = #dist.group<pp, 1>, peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Tensor parallelism: Megatron's f and g
//===----------------------------------------------------------------------===//

// f and g work on the tensor-parallel group only.
func.func @tp_copy_other_axis(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dist.tp_copy' op works on the tensor-parallel group, not the dp group}}
  %0 = dist.tp_copy %a {group = #dist.group<dp, 2>} : tensor<4xf32>
  return
}

// -----

func.func @tp_reduce_other_axis(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dist.tp_reduce' op works on the tensor-parallel group, not the pp group}}
  %0 = dist.tp_reduce %a {group = #dist.group<pp, 2>} : tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Sequence parallelism: token-split parts
//===----------------------------------------------------------------------===//

func.func @sp_other_axis(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.sp_scatter' op works on the tensor-parallel group, not the dp group}}
  %0 = dist.sp_scatter %a {dim = 0 : i64, group = #dist.group<dp, 2>} : tensor<4x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @sp_dim_out_of_range(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'dist.sp_gather' op dim 2 must be a dimension of both (ranks 2 and 2)}}
  %0 = dist.sp_gather %a {dim = 2 : i64, group = #dist.group<tp, 2>} : tensor<2x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// A part of dimension 1 of [2, 6, 8] is not contiguous.
func.func @sp_not_contiguous(%a: tensor<2x6x8xf32>) {
  // expected-error @+1 {{'dist.sp_scatter' op every dimension before dim 1 must be 1 (a part must be contiguous), dimension 0 is 2}}
  %0 = dist.sp_scatter %a {dim = 1 : i64, group = #dist.group<tp, 2>} : tensor<2x6x8xf32> -> tensor<2x3x8xf32>
  return
}

// -----

func.func @sp_not_divisible(%a: tensor<3x8xf32>) {
  // expected-error @+1 {{'dist.sp_scatter' op dimension 0 of size 3 does not split into 2 parts}}
  %0 = dist.sp_scatter %a {dim = 0 : i64, group = #dist.group<tp, 2>} : tensor<3x8xf32> -> tensor<1x8xf32>
  return
}

// -----

func.func @sp_wrong_part(%b: tensor<2x4xf32>) {
  // expected-error @+1 {{'dist.sp_gather' op the part must be 'tensor<4x8xf32>' with dimension 0 cut into 2 parts, not 'tensor<2x4xf32>'}}
  %0 = dist.sp_gather %b {dim = 0 : i64, group = #dist.group<tp, 2>} : tensor<2x4xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @sp_element_type(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.sp_scatter' op result element type must equal the input's}}
  %0 = dist.sp_scatter %a {dim = 0 : i64, group = #dist.group<tp, 2>} : tensor<4x8xf32> -> tensor<2x8xbf16>
  return
}

// -----

func.func @tp_max_other_axis(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dist.tp_max' op works on the tensor-parallel group, not the dp group}}
  %0 = dist.tp_max %a {group = #dist.group<dp, 2>} : tensor<4xf32>
  return
}

// -----

// The layout the passes record (dist.dp, dist.zero_stage, dist.pp, dist.tp,
// dist.micro_batches on the module, dist.stage on a function,
// dist.schedule): the dialect checks it whichever pass sets it.
// expected-error @+1 {{'dist.zero_stage' is a module attribute, an i64 in [0, 3]; got 4 : i64}}
module attributes {dist.dp = 2 : i64, dist.zero_stage = 4 : i64} {
}

// -----

// expected-error @+1 {{'dist.dp' is a module attribute, an i64 in [1, 2147483648]; got 0 : i64}}
module attributes {dist.dp = 0 : i64} {
}

// -----

module {
  // expected-error @+1 {{'dist.stage' is a function attribute, an i64 in [0, 2147483648]; got -1 : i64}}
  func.func @stage() attributes {dist.stage = -1 : i64} {
    return
  }
}

// -----

// expected-error @+1 {{'dist.schedule' is a module attribute, "1f1b" or "zb-h1"; got "gpipe"}}
module attributes {dist.schedule = "gpipe"} {
}
