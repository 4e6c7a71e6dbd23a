"""DeepSpeed's LAMB and Lion update rules as torch optimizers, for the parity
reference (reference_train.py). Transcribed from DeepSpeed edaa722:

* FusedLamb: deepspeed/ops/lamb/fused_lamb.py (defaults, per-tensor state)
  and csrc/lamb/fused_lamb_cuda_kernel.cu (the update: lines 194-319; the
  host's bias-correction factors: lines 321-370), eps outside the square
  root (eps_inside_sqrt False, the default).
* FusedLion: deepspeed/ops/lion/fused_lion.py (defaults) and
  csrc/lion/multi_tensor_lion.cu lines 61-95 (the update).

torch.optim.Adagrad is what DeepSpeed builds for "Adagrad" without offload
(engine.py _configure_basic_optimizer), so the reference uses torch's own.
"""
import math

import torch


def f32(x):
    """x rounded to float32, as the kernels hold their scalars."""
    return float(torch.tensor(x, dtype=torch.float32))


class FusedLambRule(torch.optim.Optimizer):
    """DeepSpeed's FusedLamb, one tensor at a time (its norms are per tensor):

        m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
        u = m / (sqrt(v) + eps) + wd p          (no bias correction in u)
        r = clamp(|p| / |u|, min_coeff, max_coeff), 1 if either norm is 0
        p -= step_size r u,  step_size = lr sqrt(1-b2^t) / (1-b1^t)
                             (bias correction; the factors rounded to float)
    """

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0.0, max_coeff=10.0, min_coeff=0.01):
        super().__init__(params, dict(lr=lr, bias_correction=bias_correction, betas=betas,
                                      eps=eps, weight_decay=weight_decay, max_coeff=max_coeff,
                                      min_coeff=min_coeff))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            # The kernel's float scalars: beta, 1 - beta (in float), eps, wd.
            b1, b2 = f32(group["betas"][0]), f32(group["betas"][1])
            c1, c2 = f32(1 - b1), f32(1 - b2)
            lr, eps, wd = f32(group["lr"]), f32(group["eps"]), f32(group["weight_decay"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = torch.zeros_like(p)
                    st["exp_avg_sq"] = torch.zeros_like(p)
                st["step"] += 1
                t = st["step"]
                m, v = st["exp_avg"], st["exp_avg_sq"]
                m.mul_(b1).add_(g, alpha=c1)
                v.mul_(b2).addcmul_(g, g, value=c2)
                u = m / (v.sqrt() + eps) + wd * p
                w_norm = float(p.norm())
                u_norm = float(u.norm())
                coeff = 1.0
                if w_norm != 0 and u_norm != 0:
                    coeff = min(max(w_norm / u_norm, group["min_coeff"]), group["max_coeff"])
                if group["bias_correction"]:
                    bc1 = f32(1 - b1 ** t)
                    bc2 = f32(1 - b2 ** t)
                    step_size = f32(f32(lr * f32(math.sqrt(bc2))) / bc1)
                else:
                    step_size = lr
                p.add_(u, alpha=-(step_size * coeff))


class FusedLionRule(torch.optim.Optimizer):
    """DeepSpeed's FusedLion:

        c = b1 m + (1-b1) g
        p = p (1 - lr wd) + (c > 0 ? -lr : +lr)   (c == 0 moves p by +lr)
        m = b2 m + (1-b2) g
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            # The kernel's float scalars, 1 - lr wd and 1 - beta in float.
            b1, b2 = f32(group["betas"][0]), f32(group["betas"][1])
            c1, c2 = f32(1 - b1), f32(1 - b2)
            lr, wd = f32(group["lr"]), f32(group["weight_decay"])
            after_decay = f32(1 - f32(lr * wd))
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                st = self.state[p]
                if not st:
                    st["exp_avg"] = torch.zeros_like(p)
                m = st["exp_avg"]
                c = b1 * m + c1 * g
                # One rounding, as the kernel's p * after_decay + step is
                # compiled (nvcc's default --fmad=true; dsrt's kernels are
                # built with FMA contraction too).
                step = torch.where(c > 0, -lr, lr).to(torch.float64)
                p.copy_(p.double() * after_decay + step)
                m.mul_(b2).add_(g, alpha=c2)
