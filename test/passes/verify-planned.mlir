// RUN: split-file %s %t
// RUN: dsc-opt %t/bad.mlir --split-input-file --verify-planned -verify-diagnostics
// RUN: dsc-opt %t/good.mlir --verify-planned -o /dev/null

//--- good.mlir
// Every argument and result inside the arena of 64 bytes: nothing to say.
func.func @good(%a: tensor<4xf32> {train.offset = 0 : i64}) -> tensor<4xf32> attributes {train.arena_bytes = 64 : i64} {
  %c = arith.constant {train.offsets = array<i64: 16>} dense<1.0> : tensor<4xf32>
  %s = nn.add %a, %c {train.offsets = array<i64: 32>} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}

//--- bad.mlir
// expected-error @below {{verify-planned: argument 0 has no train.offset}}
func.func @noarg(%a: tensor<4xf32>) -> tensor<4xf32> attributes {train.arena_bytes = 64 : i64} {
  return %a : tensor<4xf32>
}

// -----

func.func @nooffsets(%a: tensor<4xf32> {train.offset = 0 : i64}) -> tensor<4xf32> attributes {train.arena_bytes = 64 : i64} {
  // expected-error @below {{verify-planned: has no train.offsets for its 1 results}}
  %s = nn.add %a, %a : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

func.func @outside(%a: tensor<4xf32> {train.offset = 0 : i64}) -> tensor<4xf32> attributes {train.arena_bytes = 64 : i64} {
  // expected-error @below {{verify-planned: result 0 at offset 56 (16 bytes) does not fit the arena of 64 bytes}}
  %s = nn.add %a, %a {train.offsets = array<i64: 56>} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// expected-error @below {{verify-planned: argument 0 at offset 64 does not fit the arena of 64 bytes}}
func.func @argoutside(%a: tensor<4xf32> {train.offset = 64 : i64}) -> tensor<4xf32> attributes {train.arena_bytes = 64 : i64} {
  return %a : tensor<4xf32>
}

// -----

// A function without train.arena_bytes is not planned: not checked.
func.func @unplanned(%a: tensor<4xf32>) -> tensor<4xf32> {
  %s = nn.add %a, %a : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}
