// RUN: dsc-opt %s --autodiff | FileCheck %s
// RUN: dsc-opt %s --autodiff | dsc-opt | FileCheck %s
// RUN: dsc-opt %s --autodiff --optimizer="clip=1.0" | FileCheck %s --check-prefix=OPT
// RUN: dsc-opt %s --autodiff --optimizer | dsc-opt | FileCheck %s --check-prefix=OPT

// fp16 loss scaling (mixed-precision marks the module train.precision =
// "fp16"): --autodiff gives the step an f32 scalar argument marked
// train.loss_scale and seeds the backward pass with it instead of 1.0, so
// the gradients are those of scale x loss; the loss itself is returned
// unscaled. --optimizer hands the same argument to train.clip_grad_norm,
// which divides the scale out (and detects overflow).

// CHECK-LABEL: func.func @mlp(
// CHECK-SAME:    %[[W:[a-z0-9]+]]: tensor<5x3xf32> {train.param = "w"},
// CHECK-SAME:    %[[SCALE:[a-z0-9]+]]: tensor<f32> {train.loss_scale})
// CHECK-SAME:    -> (tensor<f32> {train.loss}, tensor<5x3xf32> {train.grad = "w"})
// CHECK:         %[[LOSS:.*]] = nn.cross_entropy
// CHECK-NOT:     arith.constant dense<1.000000e+00>
// CHECK:         nn.cross_entropy_grad %{{.*}}, %{{.*}}, %[[SCALE]] : tensor<4x5xf32>, tensor<4xi64>, tensor<f32>
// CHECK:         return %[[LOSS]],

// OPT-LABEL: func.func @mlp(
// OPT-SAME:    %[[SCALE:[a-z0-9]+]]: tensor<f32> {train.loss_scale}
// OPT-SAME:    {train.step})
// OPT:         nn.cross_entropy_grad %{{.*}}, %{{.*}}, %[[SCALE]]
// OPT:         train.clip_grad_norm %{{.*}} loss_scale(%[[SCALE]]) {max_norm =
// OPT-NOT:     loss_scale
module attributes {train.precision = "fp16"} {
  func.func @mlp(%x: tensor<4x3xf32> {train.input = "x"}, %y: tensor<4xi64> {train.input = "y"},
                 %w: tensor<5x3xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
    %0 = nn.matmul %x, %w {transpose_rhs} : tensor<4x3xf32>, tensor<5x3xf32> -> tensor<4x5xf32>
    %1 = nn.cross_entropy %0, %y : tensor<4x5xf32>, tensor<4xi64> -> tensor<f32>
    return %1 : tensor<f32>
  }
}
