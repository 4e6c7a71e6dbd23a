// RUN: dsc-opt %s --pipeline-schedule="micro-batches=2" -split-input-file -verify-diagnostics

// Send and recv pair by (stage, peer, tag) and must agree on the type.
module attributes {dist.pp = 2 : i64} {
  func.func @s0(%w: tensor<4x8xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}, tensor<4x8xf32> {train.grad = "w"}) attributes {dist.stage = 0 : i64} {
    // expected-error @+1 {{'dist.send' op pipeline-schedule: sends 'tensor<4x8xf32>' to stage 1 (tag 0), which receives 'tensor<8x4xf32>'}}
    %h = dist.send %w {group = #dist.group<pp, 2>, peer = 1 : i64, tag = 0 : i64} : tensor<4x8xf32>
    %d = dist.wait %h : tensor<4x8xf32>
    %z = arith.constant dense<0.0> : tensor<f32>
    return %z, %w : tensor<f32>, tensor<4x8xf32>
  }
  func.func @s1(%v: tensor<8x4xf32> {train.param = "v"}) -> (tensor<f32> {train.loss}, tensor<8x4xf32> {train.grad = "v"}) attributes {dist.stage = 1 : i64} {
    %r = dist.recv {group = #dist.group<pp, 2>, peer = -1 : i64, tag = 0 : i64} : tensor<8x4xf32>
    %x = dist.wait %r : tensor<8x4xf32>
    %z = arith.constant dense<0.0> : tensor<f32>
    return %z, %x : tensor<f32>, tensor<8x4xf32>
  }
}

// -----

// A recv with no send on the peer would wait forever.
module attributes {dist.pp = 2 : i64} {
  func.func @s0(%w: tensor<4x8xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}, tensor<4x8xf32> {train.grad = "w"}) attributes {dist.stage = 0 : i64} {
    %z = arith.constant dense<0.0> : tensor<f32>
    return %z, %w : tensor<f32>, tensor<4x8xf32>
  }
  func.func @s1(%v: tensor<8x4xf32> {train.param = "v"}) -> (tensor<f32> {train.loss}, tensor<8x4xf32> {train.grad = "v"}) attributes {dist.stage = 1 : i64} {
    // expected-error @+1 {{'dist.recv' op pipeline-schedule: recv from stage 0 (tag 3) has no matching dist.send there}}
    %r = dist.recv {group = #dist.group<pp, 2>, peer = -1 : i64, tag = 3 : i64} : tensor<8x4xf32>
    %x = dist.wait %r : tensor<8x4xf32>
    %z = arith.constant dense<0.0> : tensor<f32>
    return %z, %x : tensor<f32>, tensor<8x4xf32>
  }
}

// -----

// expected-error @+1 {{pipeline-schedule: no function for stage 1}}
module attributes {dist.pp = 2 : i64} {
  func.func @s0(%w: tensor<4x8xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}, tensor<4x8xf32> {train.grad = "w"}) attributes {dist.stage = 0 : i64} {
    %z = arith.constant dense<0.0> : tensor<f32>
    return %z, %w : tensor<f32>, tensor<4x8xf32>
  }
}
