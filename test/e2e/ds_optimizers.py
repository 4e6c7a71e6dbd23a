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


def sgn(x):
    """DeepSpeed's sign for 1-bit compression: +1 where x >= 0 (and NaN), -1 else
    (x.sign().add_(1).bool().float().add_(-0.5).mul_(2.0))."""
    return x.sign().add_(1).bool().float().add_(-0.5).mul_(2.0)


def compressed_allreduce(xs, worker_errors, server_error_chunks):
    """DeepSpeed's compressed_allreduce (edaa722 runtime/comm/nccl.py:52-170)
    simulated over W workers in one process. xs: each worker's tensor (the
    same shape, N elements); worker_errors: each worker's error (Np);
    server_error_chunks: server r's error (Np / W). Updates the errors in
    place and returns the tensor every worker receives."""
    w = len(xs)
    n = xs[0].numel()
    np_ = worker_errors[0].numel()
    signs, scales = [], []
    for r in range(w):
        x = torch.cat([xs[r].flatten(), torch.zeros(np_ - n)]) if np_ != n else xs[r].flatten().clone()
        x.add_(worker_errors[r])
        a = torch.linalg.norm(x) / math.sqrt(np_)
        s = sgn(x)
        worker_errors[r].set_(x - a * s)
        signs.append(s)
        scales.append(a)
    chunk = np_ // w
    out = []
    for r in range(w):
        c = sum(signs[i][r * chunk:(r + 1) * chunk] * (scales[i] * (1.0 / w)) for i in range(w))
        c = c + server_error_chunks[r]
        b = torch.linalg.norm(c) / math.sqrt(chunk)
        s = sgn(c)
        server_error_chunks[r].set_(c - b * s)
        out.append(b * s)
    return torch.cat(out)[:n].reshape(xs[0].shape)


class OnebitAdamRule:
    """DeepSpeed's OnebitAdam (edaa722 runtime/fp16/onebit/adam.py:112-256) on
    W simulated data-parallel workers. step(worker_grads) takes each
    parameter's local gradients, one per worker, already clipped; the
    engine's part (the average of the gradients in the warm-up, none after
    it) is the caller's. Per parameter:

        t = 1:              nothing (state allocated)
        1 < t <= freeze_step (at least 2): m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2,
                            g the workers' average
        t > that:           m = C(b1 m + (1-b1) g_w) over the workers (1-bit,
                            error-compensated, padded to a multiple of W lcm(W, 8)); v frozen
        then (t > 1):       p -= lr (m / (sqrt(v) + eps) + wd p)

    fp32 (wrapped=False): no wrapper, the first training step is the
    initialising call t = 1, and each parameter is its own tensor.
    bf16 / fp16 (wrapped=True): FP16_Optimizer (runtime/fp16/fused_optimizer.py)
    made the initialising call at construction with zero gradients (the first
    training step is t = 2), and hands OnebitAdam one flat fp32 tensor of
    every parameter in order: C compresses their concatenation, with one
    scale per worker and server and one pair of errors.
    """

    def __init__(self, params, workers, lr=1e-3, freeze_step=100000, betas=(0.9, 0.999),
                 eps=1e-8, weight_decay=0.0, wrapped=False):
        self.params = list(params)
        self.workers = workers
        self.wrapped = wrapped
        self.defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        self.param_groups = [dict(self.defaults, params=self.params)]
        self.freeze_step = freeze_step
        self.t = 1 if wrapped else 0
        w = workers
        unit = w * (w * 8 // math.gcd(w, 8))

        def errors(n):
            np_ = max(unit, -(-n // unit) * unit)
            return ([torch.zeros(np_) for _ in range(w)],
                    [torch.zeros(np_ // w) for _ in range(w)])
        self.state = [dict(exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
                      for p in self.params]
        if wrapped:
            self.flat_errors = errors(sum(p.numel() for p in self.params))
        else:
            for st, p in zip(self.state, self.params):
                st["worker_error"], st["server_error"] = errors(p.numel())

    def compressed_phase(self, t):
        return t > max(self.freeze_step, 2)

    @torch.no_grad()
    def step(self, worker_grads):
        self.t += 1
        t = self.t
        if t == 1:
            return
        group = self.param_groups[0]
        b1, b2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        compressed = self.compressed_phase(t)
        if compressed:
            local = [[st["exp_avg"] * b1 + g * (1 - b1) for st, g in zip(self.state, gs)]
                     for gs in worker_grads]
            if self.workers == 1:  # DeepSpeed compresses only with several ranks
                new_m = local[0]
            elif self.wrapped:  # one flat tensor
                flat = compressed_allreduce([torch.cat([x.flatten() for x in xs]) for xs in local],
                                            *self.flat_errors)
                new_m, at = [], 0
                for p in self.params:
                    new_m.append(flat[at:at + p.numel()].reshape(p.shape))
                    at += p.numel()
            else:
                new_m = [compressed_allreduce([xs[k] for xs in local], st["worker_error"],
                                              st["server_error"])
                         for k, st in enumerate(self.state)]
        for k, p in enumerate(self.params):
            st = self.state[k]
            m, v = st["exp_avg"], st["exp_avg_sq"]
            if not compressed:
                g = worker_grads[0][k]  # the workers hold the same averaged gradient
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
            else:
                m.copy_(new_m[k])
            update = m / (v.sqrt() + eps)
            if wd > 0:
                update += wd * p
            p.add_(-lr * update)


class ZeroOneAdamRule:
    """DeepSpeed's ZeroOneAdam (edaa722 runtime/fp16/onebit/zoadam.py:127-319)
    on W simulated data-parallel workers, fp32 (no wrapper: the first
    training step is the initialising call). step(worker_grads) takes each
    parameter's local gradients, one per worker, already clipped; the
    engine's part (averaging them where enable_backward_allreduce is on) is
    the caller's, asked through compressed_phase(t): whether call t gets the
    workers' own gradients. The policy counters are DeepSpeed's, kept as it
    keeps them (not dsc's closed form, plan/StepRule.h):

        call 1:        state only
        unfrozen:      t % var_interval == 0: m, v as Adam on the average
                       else: m = b1 m + (1-b1) C(g_w) (W > 1; W = 1: m stays)
                       p -= lr (m / (sqrt(v) + eps) + wd p)
                       var_counter += 1 on variance calls; var_interval *= 2
                       after var_update_scaler of them
        after the call whose step > var_freeze_step: frozen, errors zeroed
        frozen:        m = b1 m + (1-b1) g_w; lrs += lr; upd = m / (sqrt(v) + eps) + wd p
                       p -= lr upd; u -= lr upd
                       t % local_step_interval == 0: p -= u; u *= sqrt(v) + eps;
                         u = C(u) (W > 1); m = -u / lrs; p += u / (sqrt(v) + eps); u = 0; lrs = 0
                       local_step_interval doubles (up to local_step_clipper) after
                       every local_step_scaler frozen calls

    Each worker holds its own p, m and u after the freeze (their local steps
    differ); the weights compared are worker 0's, as rank 0 saves them.

    wrapped=True (bf16 / fp16): FP16_Optimizer made the initialising call at
    construction (the first training step is call 2) and hands ZeroOneAdam
    one flat fp32 tensor of every parameter, so each compressed all-reduce
    (of the gradients, or of the syncs' u (sqrt(v) + eps)) takes their
    concatenation, with one pair of errors. The rest is elementwise, the
    same per parameter or flat.
    """

    def __init__(self, params, workers, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0.0, var_freeze_step=100000, var_update_scaler=16,
                 local_step_scaler=32678, local_step_clipper=16, wrapped=False):
        self.params = list(params)
        self.workers = workers
        self.defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        self.param_groups = [dict(self.defaults, params=self.params)]
        self.var_freeze_step = var_freeze_step
        self.var_update_scaler = var_update_scaler
        self.local_step_scaler = local_step_scaler
        self.local_step_clipper = local_step_clipper
        self.wrapped = wrapped
        self.t = 1 if wrapped else 0
        self.freeze_key = False
        self.var_interval, self.var_counter = 1, 0
        self.local_step_interval, self.local_step_counter = 1, 0
        w = workers
        unit = w * (w * 8 // math.gcd(w, 8))
        # Per worker: its copy of every parameter's state (identical until
        # the freeze, when the local steps make them differ).
        self.state = [[dict(exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p),
                            momentum_accumulator=torch.zeros_like(p), lrs=0.0)
                       for p in self.params] for _ in range(w)]
        self.replica = [[p.detach().clone() for p in self.params] for _ in range(w)]
        self.errors = []
        for n in ([sum(p.numel() for p in self.params)] if wrapped
                  else [p.numel() for p in self.params]):
            np_ = max(unit, -(-n // unit) * unit)
            self.errors.append(([torch.zeros(np_) for _ in range(w)],
                                [torch.zeros(np_ // w) for _ in range(w)]))

    def compress(self, k, xs):
        """Parameter k's compressed all-reduce of the workers' xs: its own
        (fp32), or its slice of the flat tensor's (wrapped; computed at
        k == 0 for every parameter)."""
        if not self.wrapped:
            return compressed_allreduce(xs, *self.errors[k])
        if k == 0:
            flat = compressed_allreduce([torch.cat([x.flatten() for x in per])
                                         for per in self.pending], *self.errors[0])
            self.flat, at = [], 0
            for p in self.params:
                self.flat.append(flat[at:at + p.numel()].reshape(p.shape))
                at += p.numel()
        return self.flat[k]

    def compressed_phase(self, t):
        """Whether call t's gradients stay local (the engine's
        enable_backward_allreduce, set at the end of call t - 1)."""
        if t <= 1:
            return False
        if self.freeze_key:
            return True
        return t % self.var_interval != 0

    @torch.no_grad()
    def step(self, worker_grads):
        self.t += 1
        t = self.t
        if t == 1:
            return
        w = self.workers
        group = self.param_groups[0]
        b1, b2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        if self.wrapped and w > 1:
            # What the flat tensor's all-reduce takes this call: the local
            # gradients, or each parameter's u (sqrt(v) + eps) after its
            # local update, computed ahead as the loop below computes it.
            if not self.freeze_key and t % self.var_interval != 0:
                self.pending = [list(gs) for gs in worker_grads]
            elif self.freeze_key and t % self.local_step_interval == 0:
                self.pending = [[self.sync_payload(self.state[r][k], self.replica[r][k],
                                                   worker_grads[r][k], lr, b1, eps, wd)
                                 for k in range(len(self.params))] for r in range(w)]
        for k in range(len(self.params)):
            sts = [self.state[r][k] for r in range(w)]
            ps = [self.replica[r][k] for r in range(w)]
            gs = [worker_grads[r][k] for r in range(w)]
            if not self.freeze_key:
                if t % self.var_interval == 0:
                    for st, g in zip(sts, gs):  # the averaged gradient, on every worker
                        st["exp_avg_sq"].mul_(b2).addcmul_(g, g, value=1 - b2)
                        st["exp_avg"].mul_(b1).add_(g, alpha=1 - b1)
                elif w > 1:
                    c = self.compress(k, gs)
                    for st in sts:
                        st["exp_avg"].mul_(b1).add_(c, alpha=1 - b1)
            else:
                for st, g in zip(sts, gs):
                    st["exp_avg"].mul_(b1).add_(g, alpha=1 - b1)
                    st["lrs"] += lr
            for st, p in zip(sts, ps):
                update = st["exp_avg"] / (st["exp_avg_sq"].sqrt() + eps)
                if wd > 0.0:
                    update += wd * p
                p.add_(-lr * update)
                if self.freeze_key:
                    st["momentum_accumulator"].add_(-lr * update)
            if self.freeze_key and t % self.local_step_interval == 0:
                for st, p in zip(sts, ps):
                    u = st["momentum_accumulator"]
                    p.add_(-1 * u)
                    u.mul_(st["exp_avg_sq"].sqrt() + eps)
                if w > 1:
                    c = self.compress(k, [st["momentum_accumulator"] for st in sts])
                    for st in sts:
                        st["momentum_accumulator"].copy_(c)
                for st, p in zip(sts, ps):
                    u = st["momentum_accumulator"]
                    st["exp_avg"].zero_().add_(u / st["lrs"], alpha=-1)
                    p.add_(u / (st["exp_avg_sq"].sqrt() + eps))
                    u.zero_()
                    st["lrs"] = 0
        # The policy, once per call (every parameter's counters move alike).
        if not self.freeze_key:
            if t % self.var_interval == 0:
                self.var_counter += 1
                if self.var_counter == self.var_update_scaler:
                    self.var_counter = 0
                    self.var_interval *= 2
        else:
            self.local_step_counter += 1
            if self.local_step_counter == self.local_step_scaler:
                self.local_step_counter = 0
                self.local_step_interval = min(self.local_step_clipper,
                                               self.local_step_interval * 2)
        if t > self.var_freeze_step and not self.freeze_key:
            self.freeze_key = True
            for werr, serr in self.errors:  # reinitial_error_buffer
                for e in werr + serr:
                    e.zero_()
        for p, mine in zip(self.params, self.replica[0]):
            p.copy_(mine)

    @staticmethod
    def sync_payload(st, p, g, lr, b1, eps, wd):
        """A sync's u (sqrt(v) + eps) after the call's local update, as
        step() computes it (without changing the state)."""
        m = st["exp_avg"].clone().mul_(b1).add_(g, alpha=1 - b1)
        update = m / (st["exp_avg_sq"].sqrt() + eps)
        if wd > 0.0:
            update += wd * p
        u = st["momentum_accumulator"] + (-lr * update)
        return u * (st["exp_avg_sq"].sqrt() + eps)


class OnebitLambRule:
    """DeepSpeed's OnebitLamb (edaa722 runtime/fp16/onebit/lamb.py:161-371)
    on W simulated data-parallel workers, fp32. step(worker_grads) as
    OnebitAdamRule's; compressed_phase(t) says whether call t's gradients
    stay local (the engine's all-reduce is off after the last warm-up call,
    max(freeze_step, 2)). Per parameter:

        t = 1:      nothing (state allocated; every exp_avg re-pointed into one
                    flat buffer, padded with zeros to a multiple of W lcm(W, 8))
        warm-up:    m, v as Adam's (no bias correction) on the average; at t ==
                    freeze_step v_fresh = v; u = m / (sqrt(v) + eps) + wd p;
                    c = clamp(|p| / |u|, min_coeff, max_coeff) (1 if either is 0);
                    coeff_freeze = coeff_beta coeff_freeze + (1 - coeff_beta) c if c != 1;
                    p -= lr c u
        compressed: at the first, scaling_coeff = mean_q(rms(m_q)) / rms(m_p);
                    m_last = m; m = (b1 m + (1-b1) g_w) scaling_coeff; the flat
                    buffer (padding included: it keeps the last result there)
                    through one compressed_allreduce (W > 1); m /= scaling_coeff;
                    g = (m - b1 m_last) / (1 - b1); v_fresh = b2 v_fresh + (1-b2) g^2;
                    denom = sqrt(v) + eps (v frozen); u0 = m / denom; u = u0 + wd p;
                    factor = max(denom / (sqrt(v_fresh) + eps)), with wd > 0
                    r = min(1, |u0| / |u|), factor = factor r + 1 - r; clamped to
                    [factor_min, factor_max], then to last_factor (1 -+ threshold);
                    p -= lr coeff_freeze factor u

    wrapped=True (bf16 / fp16): FP16_Optimizer made the initialising call at
    construction (the first training step is call 2) and hands OnebitLamb
    ONE flat fp32 tensor of every parameter: one trust ratio, one
    coeff_freeze, one factor and last_factor, norms and maximum over the
    whole model, and a scaling coefficient of 1 (its mean over one tensor
    is its own).
    """

    def __init__(self, params, workers, lr=1e-3, freeze_step=100000, betas=(0.9, 0.999),
                 eps=1e-8, weight_decay=0.0, max_coeff=10.0, min_coeff=0.01, coeff_beta=0.9,
                 factor_max=4.0, factor_min=0.5, factor_threshold=0.1, wrapped=False):
        self.params = [p for p in params if p.numel() > 0]
        self.workers = workers
        self.defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        self.param_groups = [dict(self.defaults, params=self.params)]
        self.freeze_step = freeze_step
        self.max_coeff, self.min_coeff = max_coeff, min_coeff
        self.coeff_beta = coeff_beta
        self.factor_max, self.factor_min = factor_max, factor_min
        self.factor_threshold = factor_threshold
        self.wrapped = wrapped
        self.t = 1 if wrapped else 0
        w = workers
        unit = w * (w * 8 // math.gcd(w, 8))
        n = sum(p.numel() for p in self.params)
        self.np = n if n % unit == 0 else n + unit - n % unit
        # Each worker's flat momentum (the exp_avg of every parameter are views).
        self.flat = [torch.zeros(self.np) for _ in range(w)]
        self.state = []
        for r in range(w):
            sts, at = [], 0
            for p in self.params:
                sts.append(dict(exp_avg=self.flat[r][at:at + p.numel()].view(p.shape),
                                exp_avg_sq=torch.zeros_like(p), exp_avg_sq_fresh=torch.zeros_like(p),
                                lamb_coeff_freeze=0.0, last_factor=1.0))
                at += p.numel()
            self.state.append(sts)
        self.worker_errors = [torch.zeros(self.np) for _ in range(w)]
        self.server_errors = [torch.zeros(self.np // w) for _ in range(w)]
        self.scaling = None

    def last_warmup_call(self):
        return max(self.freeze_step, 2)

    def compressed_phase(self, t):
        return t > self.last_warmup_call()

    @torch.no_grad()
    def step(self, worker_grads):
        self.t += 1
        t = self.t
        if t == 1:
            return
        w = self.workers
        group = self.param_groups[0]
        b1, b2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        if self.wrapped:
            return self.flat_step(worker_grads, t)
        if not self.compressed_phase(t):
            for r in range(w):  # every worker holds the averaged gradient
                for k, p in enumerate(self.params):
                    st, g = self.state[r][k], worker_grads[r][k]
                    m, v = st["exp_avg"], st["exp_avg_sq"]
                    m.mul_(b1).add_(g, alpha=1 - b1)
                    v.mul_(b2).addcmul_(g, g, value=1 - b2)
                    if t == self.freeze_step:
                        st["exp_avg_sq_fresh"].data = v.detach().clone()
                    if r != 0:
                        continue
                    weight_norm = p.pow(2).sum().sqrt()
                    update = m / (v.sqrt() + eps)
                    if wd > 0.0:
                        update += wd * p
                    update_norm = update.pow(2).sum().sqrt()
                    coeff = 1.0
                    if weight_norm != 0 and update_norm != 0:
                        coeff = min(max((weight_norm / update_norm).item(), self.min_coeff),
                                    self.max_coeff)
                    if coeff != 1.0:
                        for rr in range(w):
                            s = self.state[rr][k]
                            s["lamb_coeff_freeze"] = (self.coeff_beta * s["lamb_coeff_freeze"]
                                                      + (1 - self.coeff_beta) * coeff)
                    p.add_(-lr * coeff * update)
            return
        last = [[st["exp_avg"].detach().clone() for st in sts] for sts in self.state]
        if self.scaling is None:
            scales = [(torch.linalg.vector_norm(st["exp_avg"]) / math.sqrt(st["exp_avg"].numel())).item()
                      for st in self.state[0]]
            united = sum(scales) / len(scales)
            self.scaling = [united / s for s in scales]
        for r in range(w):
            for k, st in enumerate(self.state[r]):
                st["exp_avg"].mul_(b1).add_(worker_grads[r][k], alpha=1 - b1)
                st["exp_avg"].mul_(self.scaling[k])
        if w > 1:
            # The whole flat buffer, padding included: DeepSpeed copies the
            # result into it in place, so the padding keeps the decompressed
            # values of its chunk until the next call compresses them again.
            out = compressed_allreduce(self.flat, self.worker_errors, self.server_errors)
            for r in range(w):
                self.flat[r].copy_(out)
        for r in range(w):
            for k, p in enumerate(self.params):
                st = self.state[r][k]
                m, v, vf = st["exp_avg"], st["exp_avg_sq"], st["exp_avg_sq_fresh"]
                m.div_(self.scaling[k])
                g = (m - last[r][k] * b1) / (1 - b1)
                vf.mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = v.sqrt() + eps
                prelim = m / denom
                update = prelim + wd * p if wd > 0.0 else prelim
                update_norm = update.pow(2).sum().sqrt()
                denom_real = vf.sqrt() + eps
                factor = (denom / denom_real).max().item()
                if wd > 0.0:
                    ratio = min(1.0, (prelim.pow(2).sum().sqrt() / update_norm).item())
                    factor = factor * ratio + (1.0 - ratio)
                factor = min(max(factor, self.factor_min), self.factor_max)
                factor = min(factor, st["last_factor"] * (1.0 + self.factor_threshold))
                factor = max(factor, st["last_factor"] * (1.0 - self.factor_threshold))
                st["last_factor"] = factor
                if r == 0:
                    p.add_(-lr * (st["lamb_coeff_freeze"] * factor) * update)

    @torch.no_grad()
    def flat_step(self, worker_grads, t):
        """step() on the wrapper's one flat tensor: the same elementwise rule,
        the norms, the maximum and the scalars of the whole model. The
        workers hold the same weights and (after each compressed all-reduce)
        the same momenta, so worker 0's values stand for all."""
        w = self.workers
        group = self.param_groups[0]
        b1, b2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        flat = lambda xs: torch.cat([x.flatten() for x in xs])
        sts = self.state[0]
        if not self.compressed_phase(t):
            for r in range(w):
                for k in range(len(self.params)):
                    st, g = self.state[r][k], worker_grads[r][k]
                    st["exp_avg"].mul_(b1).add_(g, alpha=1 - b1)
                    st["exp_avg_sq"].mul_(b2).addcmul_(g, g, value=1 - b2)
                    if t == self.freeze_step:
                        st["exp_avg_sq_fresh"].data = st["exp_avg_sq"].detach().clone()
            p = flat(self.params)
            update = flat(st["exp_avg"] for st in sts) / (flat(st["exp_avg_sq"] for st in sts).sqrt() + eps)
            if wd > 0.0:
                update += wd * p
            weight_norm, update_norm = p.pow(2).sum().sqrt(), update.pow(2).sum().sqrt()
            coeff = 1.0
            if weight_norm != 0 and update_norm != 0:
                coeff = min(max((weight_norm / update_norm).item(), self.min_coeff), self.max_coeff)
            if coeff != 1.0:
                for r in range(w):
                    st = self.state[r][0]
                    st["lamb_coeff_freeze"] = (self.coeff_beta * st["lamb_coeff_freeze"]
                                               + (1 - self.coeff_beta) * coeff)
            at = 0
            for q in self.params:
                q.add_((-lr * coeff * update[at:at + q.numel()]).view(q.shape))
                at += q.numel()
            return
        last = [flat(st["exp_avg"] for st in sts_r).clone() for sts_r in self.state]
        for r in range(w):
            for k, st in enumerate(self.state[r]):
                st["exp_avg"].mul_(b1).add_(worker_grads[r][k], alpha=1 - b1)
        if w > 1:
            out = compressed_allreduce(self.flat, self.worker_errors, self.server_errors)
            for r in range(w):
                self.flat[r].copy_(out)
        st0 = self.state[0][0]
        m = flat(st["exp_avg"] for st in sts)
        v = flat(st["exp_avg_sq"] for st in sts)
        vf = flat(st["exp_avg_sq_fresh"] for st in sts)
        g = (m - last[0] * b1) / (1 - b1)
        vf.mul_(b2).addcmul_(g, g, value=1 - b2)
        at = 0
        for k, st in enumerate(sts):  # back into each worker's v_fresh (equal on every worker)
            n = st["exp_avg"].numel()
            for r in range(w):
                self.state[r][k]["exp_avg_sq_fresh"].copy_(vf[at:at + n].view(st["exp_avg"].shape))
            at += n
        p = flat(self.params)
        denom = v.sqrt() + eps
        prelim = m / denom
        update = prelim + wd * p if wd > 0.0 else prelim
        update_norm = update.pow(2).sum().sqrt()
        factor = (denom / (vf.sqrt() + eps)).max().item()
        if wd > 0.0:
            ratio = min(1.0, (prelim.pow(2).sum().sqrt() / update_norm).item())
            factor = factor * ratio + (1.0 - ratio)
        factor = min(max(factor, self.factor_min), self.factor_max)
        factor = min(factor, st0["last_factor"] * (1.0 + self.factor_threshold))
        factor = max(factor, st0["last_factor"] * (1.0 - self.factor_threshold))
        for r in range(w):
            self.state[r][0]["last_factor"] = factor
        coeff = st0["lamb_coeff_freeze"] * factor
        at = 0
        for q in self.params:
            q.add_((-lr * coeff * update[at:at + q.numel()]).view(q.shape))
            at += q.numel()
