// RUN: dsc-opt %s --split-input-file --comm-fusion | FileCheck %s
// RUN: dsc-opt %s --split-input-file --comm-fusion="reduce-bucket=6" | FileCheck %s --check-prefix=SMALL

// --comm-fusion alone, on hand-written steps at its precondition: the output
// of data-parallel / zero, one collective + dist.wait per tensor. Adjacent
// collectives of one kind and group become one variadic collective while
// their elements fit the bucket.

// Three gradient all-reduces after the accumulation (data-parallel's
// output): one bucket, placed at its last member.
// CHECK-LABEL: func.func @reduces
// CHECK:         %[[SA:.*]] = nn.mul %{{.*}}#1, %{{.*}} : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// CHECK-NEXT:    %[[SB:.*]] = nn.mul %{{.*}}#2, %{{.*}} : tensor<2xf32>, tensor<f32> -> tensor<2xf32>
// CHECK-NEXT:    %[[SC:.*]] = nn.mul %{{.*}}#3, %{{.*}} : tensor<2xf32>, tensor<f32> -> tensor<2xf32>
// CHECK-NEXT:    %[[R:.*]]:3 = dist.all_reduce  avg %[[SA]], %[[SB]], %[[SC]] {group = #dist.group<dp, 2>} : tensor<4xf32>, tensor<2xf32>, tensor<2xf32> -> tensor<4xf32>, tensor<2xf32>, tensor<2xf32>
// CHECK-NEXT:    %[[W:.*]]:3 = dist.wait %[[R]]#0, %[[R]]#1, %[[R]]#2
// CHECK-NEXT:    train.clip_grad_norm %[[W]]#0, %[[W]]#1, %[[W]]#2
// CHECK-NOT:     dist.
// CHECK:         return
// With buckets of 6 elements: a and b (4 + 2) share one, c has its own.
// SMALL-LABEL: func.func @reduces
// SMALL:         %[[R:.*]]:2 = dist.all_reduce  avg %{{.*}}, %{{.*}} {{.*}} : tensor<4xf32>, tensor<2xf32> -> tensor<4xf32>, tensor<2xf32>
// SMALL-NEXT:    dist.wait %[[R]]#0, %[[R]]#1
// SMALL:         %[[RC:.*]] = dist.all_reduce  avg %{{.*}} {{.*}} : tensor<2xf32> -> tensor<2xf32>
// SMALL-NEXT:    dist.wait %[[RC]]
// SMALL-NEXT:    train.clip_grad_norm
module attributes {dist.dp = 2 : i64, dist.zero_stage = 0 : i64} {
  func.func @reduces(%x: tensor<4xf32> {train.input = "x"}, %a: tensor<4xf32> {train.param = "a"},
                     %b: tensor<2xf32> {train.param = "b"}, %c: tensor<2xf32> {train.param = "c"}, %s: tensor<i64> {train.step})
      -> (tensor<4xf32> {train.updated = "a"}, tensor<2xf32> {train.updated = "b"}, tensor<2xf32> {train.updated = "c"},
          tensor<f32> {train.loss}, tensor<f32> {train.grad_norm}, tensor<f32> {train.lr}) {
    %lr = train.lr_schedule "constant" {lr = 1.0e-3 : f64}, %s
    %r:4 = train.accumulate 2 -> tensor<f32>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32> {
    ^bb0(%i: index):
      %p = nn.mul %x, %a : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
      %la = nn.reduce_sum %p {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
      %bc = nn.add %b, %c : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
      %lb = nn.reduce_sum %bc {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
      %l = nn.add %la, %lb : tensor<f32>, tensor<f32> -> tensor<f32>
      %one = arith.constant dense<1.0> : tensor<2xf32>
      train.yield %l, %x, %one, %one : tensor<f32>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>
    }
    %half = arith.constant dense<5.0e-01> : tensor<f32>
    %loss = nn.mul %r#0, %half : tensor<f32>, tensor<f32> -> tensor<f32>
    %sa = nn.mul %r#1, %half : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
    %ra = dist.all_reduce avg %sa {group = #dist.group<dp, 2>} : tensor<4xf32> -> tensor<4xf32>
    %ga = dist.wait %ra : tensor<4xf32>
    %sb = nn.mul %r#2, %half : tensor<2xf32>, tensor<f32> -> tensor<2xf32>
    %rb = dist.all_reduce avg %sb {group = #dist.group<dp, 2>} : tensor<2xf32> -> tensor<2xf32>
    %gb = dist.wait %rb : tensor<2xf32>
    %sc = nn.mul %r#3, %half : tensor<2xf32>, tensor<f32> -> tensor<2xf32>
    %rc = dist.all_reduce avg %sc {group = #dist.group<dp, 2>} : tensor<2xf32> -> tensor<2xf32>
    %gc = dist.wait %rc : tensor<2xf32>
    %ca, %cb, %cc, %n = train.clip_grad_norm %ga, %gb, %gc {max_norm = 0.0 : f64} : tensor<4xf32>, tensor<2xf32>, tensor<2xf32> -> tensor<4xf32>, tensor<2xf32>, tensor<2xf32>
    %na = train.sgd %a, %ca, %lr : tensor<4xf32>
    %nb = train.sgd %b, %cb, %lr : tensor<2xf32>
    %nc = train.sgd %c, %cc, %lr : tensor<2xf32>
    return %na, %nb, %nc, %loss, %n, %lr : tensor<4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<f32>, tensor<f32>
  }
}

// -----

// Two parameter all-gathers of ZeRO stage 3 (zero's output): one bucket,
// placed at its first member, so b's gather moves above a's use.
// CHECK-LABEL: func.func @gathers
// CHECK-NEXT:    %[[G:.*]]:2 = dist.all_gather %arg0, %arg1 {group = #dist.group<dp, 2>} : tensor<2xf32>, tensor<3xf32> -> tensor<4xf32>, tensor<6xf32>
// CHECK-NEXT:    %[[W:.*]]:2 = dist.wait %[[G]]#0, %[[G]]#1
// CHECK-NEXT:    nn.reduce_sum %[[W]]#0
// CHECK-NEXT:    nn.reduce_sum %[[W]]#1
// CHECK-NOT:     dist.
// CHECK:         return
// reduce-bucket does not limit the gathers.
// SMALL-LABEL: func.func @gathers
// SMALL-NEXT:    dist.all_gather %arg0, %arg1
module attributes {dist.dp = 2 : i64, dist.zero_stage = 3 : i64} {
  func.func @gathers(%a: tensor<2xf32> {dist.shard_of = array<i64: 4>, train.param = "a"},
                     %b: tensor<3xf32> {dist.shard_of = array<i64: 6>, train.param = "b"}) -> (tensor<f32> {train.loss}) {
    %ra = dist.all_gather %a {group = #dist.group<dp, 2>} : tensor<2xf32> -> tensor<4xf32>
    %fa = dist.wait %ra : tensor<4xf32>
    %sa = nn.reduce_sum %fa {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
    %rb = dist.all_gather %b {group = #dist.group<dp, 2>} : tensor<3xf32> -> tensor<6xf32>
    %fb = dist.wait %rb : tensor<6xf32>
    %sb = nn.reduce_sum %fb {axes = array<i64: 0>} : tensor<6xf32> -> tensor<f32>
    %l = nn.add %sa, %sb : tensor<f32>, tensor<f32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
