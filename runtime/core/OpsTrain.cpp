//===- OpsTrain.cpp - optimizer, clipping, accumulation ops -===//
//
// train.lr_schedule, train.clip_grad_norm, train.adam, train.sgd,
// train.sum_sq, fill and accumulate (their attributes:
// plan/Instructions.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/core/OpsInternal.h"
#include "runtime/core/Tier.h"

namespace dsrt::ops {

namespace {

/// An optimizer update's layout: input 0 the parameter, input 1 its
/// gradient, inputs 2.. its `states` states, all of one shape; output 0
/// the new parameter and output j the new state j, each over its input's
/// bytes (in place).
void updateInPlace(const Instr &i, const Check &c, int states) {
  for (int k = 1; k < 2 + states; ++k)
    c.sameShape(i.in[0], i.in[k]);
  for (int k = 0; k <= states; ++k)
    c.sameShape(i.in[0], i.out[k]);
  c.inPlace(i.in[0], i.out[0]);
  for (int k = 1; k <= states; ++k)
    c.inPlace(i.in[1 + k], i.out[k]);
}
/// `bytes` from `src` to `dst` with the threads of the kernels, in 1 MiB
/// pieces.
void copyBytes(const void *src, void *dst, uint64_t bytes) {
  const char *s = static_cast<const char *>(src);
  char *d = static_cast<char *>(dst);
  const int64_t n = int64_t(bytes), piece = int64_t(1) << 20;
#pragma omp parallel for schedule(static) if (n > 4 * piece)
  for (int64_t o = 0; o < n; o += piece)
    std::memcpy(d + o, s + o, size_t(std::min(piece, n - o)));
}

/// tier.fetch (fetch: the host tier's state into arena working copies) and
/// tier.store (back): pairwise copies, in = the source, out = the target.
void bindTierCopy(Instr &i, const Check &c, bool fetch) {
  if (i.in.empty() || i.in.size() != i.out.size())
    c.fail("copies as many tensors as it writes, at least one; has " +
           std::to_string(i.in.size()) + " and " + std::to_string(i.out.size()));
  c.layout();
  if (i.ints[0] < 0)
    c.fail("tile must be non-negative, is " + std::to_string(i.ints[0]));
  for (size_t k = 0; k < i.in.size(); ++k) {
    const Tensor *from = i.in[k], *to = i.out[k];
    if (from->dtype != to->dtype || from->numel != to->numel)
      c.fail("copy " + std::to_string(k) + " is between tensors of different type or size");
    const Tensor *tier = fetch ? from : to, *arena = fetch ? to : from;
    if (tier->tier == plan::ARENA || arena->tier != plan::ARENA)
      c.fail(std::string(fetch ? "fetches from a tier into the arena"
                               : "stores from the arena into a tier") +
             ": copy " + std::to_string(k) + " does not");
  }
  i.g[0] = fetch ? 1 : 0;
  i.run = [](const Instr &i, Context &ctx) {
    const bool fetch = i.g[0] == 1;
    // pipeline_read: this fetch's NVMe bytes were started by the one
    // before it, into the read-ahead buffer, in input order.
    const bool ahead = fetch && ctx.readAheadFor == &i;
    if (ahead) {
      ctx.nvme->wait(ctx.readAheadTicket);
      ctx.readAheadFor = nullptr;
    }
    // pipeline_write: the write-behind buffer is free once its last
    // write is done; this store's NVMe values are copied into it.
    const bool behind = !fetch && ctx.writeBehindBuffer;
    if (behind)
      ctx.nvme->wait(ctx.writeBehindTicket);
    uint64_t at = 0; // in the read-ahead / write-behind buffer
    for (size_t k = 0; k < i.in.size(); ++k) {
      const Tensor *from = i.in[k], *to = i.out[k];
      if (from->tier == plan::NVME && ahead) {
        copyBytes(ctx.readAheadBuffer + at, to->data, from->bytes());
        at += from->bytes();
        continue;
      }
      if (from->tier == plan::NVME) {
        ctx.nvme->read(from->offset, from->bytes(), to->data);
        continue;
      }
      if (to->tier == plan::NVME && behind) {
        copyBytes(from->data, ctx.writeBehindBuffer + at, from->bytes());
        ctx.writeBehindTicket =
            ctx.nvme->startWrite(to->offset, to->bytes(), ctx.writeBehindBuffer + at);
        at += from->bytes();
        continue;
      }
      if (to->tier == plan::NVME) {
        ctx.nvme->write(to->offset, to->bytes(), from->data);
        continue;
      }
      copyBytes(from->data, to->data, from->bytes());
    }
    // pipeline_read: start the next fetch's NVMe reads (the buffer is free:
    // this fetch's bytes are out of it).
    // (Not in an evaluation: the fetch it would read ahead for may be
    // the backward's, which an evaluation does not run.)
    if (const Instr *next = ctx.eval ? nullptr : i.readAhead) {
      at = 0;
      for (const Tensor *from : next->in)
        if (from->tier == plan::NVME) {
          ctx.readAheadTicket =
              ctx.nvme->startRead(from->offset, from->bytes(), ctx.readAheadBuffer + at);
          at += from->bytes();
        }
      ctx.readAheadFor = next;
    }
  };
}
/// The 1-bit compression's error state: the new error is written in place
/// of the old one (the memory plan's placement of an updated state) or into
/// bytes apart from every operand, after a copy of the old one.
void errorInPlaceOrApart(const Instr &i, const Check &c, size_t errorIn, size_t errorOut) {
  const Tensor *in = i.in[errorIn], *out = i.out[errorOut];
  c.sameShape(in, out);
  if (out->offset == in->offset && out->tier == in->tier)
    return;
  for (const Tensor *t : i.in)
    if (bytesOverlap(t, out))
      c.fail("the new error must be written in place of the old one or apart from the "
             "operands; it overlaps an operand at offset " + std::to_string(t->offset));
}
/// Puts the old error where the new one goes (a copy unless in place).
void copyErrorIn(const Instr &i, size_t errorIn, size_t errorOut) {
  if (i.out[errorOut]->data != i.in[errorIn]->data)
    std::memcpy(i.out[errorOut]->data, i.in[errorIn]->data, i.in[errorIn]->bytes());
}
uint8_t *bytesOf(const Tensor *t) { return static_cast<uint8_t *>(t->data); }
/// The tensors of a fused update or of its sums (train.fused_adam,
/// train.fused_lamb, train.fused_lamb_stats): N f32 parameters, N
/// gradients of their shapes (f32, bf16 or f16) and N moments of each kind,
/// the first 4 N inputs; with `inPlace`, the 3 N outputs are the
/// parameters and moments, each over its input.
void checkFusedTensors(const Instr &i, const Check &c, size_t n, bool inPlace) {
  for (size_t k = 0; k < n; ++k) {
    const Tensor *p = i.in[k], *g = i.in[n + k], *m = i.in[2 * n + k], *v = i.in[3 * n + k];
    for (const Tensor *t : {p, m, v})
      c.dtype(t, plan::F32, "parameter and state");
    (void)c.sameFloat({g}); // f32, bf16 or f16
    for (const Tensor *t : {g, m, v})
      c.sameShape(p, t);
    if (!inPlace)
      continue;
    for (size_t j = 0; j < 3; ++j) {
      c.dtype(i.out[j * n + k], plan::F32, "parameter and state");
      c.sameShape(p, i.out[j * n + k]);
    }
    c.inPlace(p, i.out[k]);
    c.inPlace(m, i.out[n + k]);
    c.inPlace(v, i.out[2 * n + k]);
  }
}

/// A fused update's N (fusedParameters) and whether a coef follows lr and
/// step (the flag at `coefFlag`): refuses counts that do not add up, with
/// `perParameter` inputs each (its tensors, LAMB's stats) besides lr, step,
/// coef and the copies.
std::pair<size_t, size_t> checkFusedCounts(const Instr &i, const Check &c, size_t coefFlag,
                                           size_t perParameter, const std::string &inputs) {
  const size_t flags = coefFlag + 1, coef = i.ints[coefFlag] != 0,
               copies = i.ints.size() - flags, n = fusedParameters(i, flags);
  if (n == 0 || i.in.size() != perParameter * n + 2 + coef + copies)
    c.fail("expects N " + inputs + ", lr, step" + std::string(coef ? ", coef" : "") +
           " and the K working copies copy_of names, and writes the N params and states and "
           "the copies");
  return {n, coef};
}

/// A fused update's working copies (format 19): the integers from
/// `first` on name the parameters (by index, each once) whose bf16 / fp16
/// copies are the inputs from `in` on and the last outputs, in place.
void checkCopies(const Instr &i, const Check &c, size_t n, size_t first, size_t in) {
  const size_t copies = i.ints.size() - first;
  std::vector<bool> seen(n, false);
  for (size_t j = 0; j < copies; ++j) {
    const int64_t k = i.ints[first + j];
    if (k < 0 || size_t(k) >= n || seen[size_t(k)])
      c.fail("copy_of " + std::to_string(k) + " must name one of the " + std::to_string(n) +
             " parameters, each once");
    seen[size_t(k)] = true;
    const Tensor *copy = i.in[in + j], *p = i.in[size_t(k)];
    if (copy->dtype != plan::BF16 && copy->dtype != plan::F16)
      c.fail("the copy of parameter " + std::to_string(k) + " must be BF16 or F16, is " +
             plan::DType_Name(copy->dtype));
    c.sameShape(p, copy);
    c.inPlace(copy, i.out[3 * n + j]);
  }
}

/// What the CPU kernels take of a fused update's tensors (checkFusedTensors):
/// the updated outputs with `inPlace`, otherwise the inputs (which the sums
/// only read).
std::vector<cpu::AdamTensor> fusedTensors(const Instr &i, size_t n, bool inPlace) {
  std::vector<cpu::AdamTensor> t(n);
  for (size_t k = 0; k < n; ++k) {
    const Tensor *g = i.in[n + k];
    // The parameter, exp_avg and exp_avg_sq: outputs 0, 1, 2 or inputs 0, 2, 3.
    auto at = [&](size_t out, size_t in) {
      return (inPlace ? i.out[out * n + k] : i.in[in * n + k])->f32();
    };
    t[k] = {at(0, 0), g->data,
            g->dtype == plan::BF16  ? cpu::AdamTensor::Grad::BF16
            : g->dtype == plan::F16 ? cpu::AdamTensor::Grad::F16
                                    : cpu::AdamTensor::Grad::F32,
            at(1, 2), at(2, 3), g->numel};
  }
  return t;
}

/// fusedTensors of an update, with the working copies checkCopies checked
/// attached.
std::vector<cpu::AdamTensor> updatedTensors(const Instr &i, size_t n, size_t firstCopy) {
  std::vector<cpu::AdamTensor> t = fusedTensors(i, n, true);
  for (size_t j = 0; firstCopy + j < i.ints.size(); ++j) {
    const Tensor *copy = i.out[3 * n + j];
    cpu::AdamTensor &a = t[size_t(i.ints[firstCopy + j])];
    a.copy = copy->data;
    a.copyType = copy->dtype == plan::BF16 ? cpu::AdamTensor::Copy::BF16
                                           : cpu::AdamTensor::Copy::F16;
  }
  return t;
}

/// Adam's floats (beta1, beta2, eps, weight_decay), as train.adam and
/// train.onebit_adam verify them.
void checkAdamRates(const Instr &i, const Check &c) {
  c.floatIn(0, "beta1", 0, 1);
  c.floatIn(1, "beta2", 0, 1);
  c.floatIn(2, "eps", 0, INFINITY);
  if (i.floats[2] == 0)
    c.fail("eps must be positive");
  c.floatIn(3, "weight_decay", 0, 1e30);
}
/// ZeroOneAdam's policy from ints 0-4 (train.zero_one_adam, _payload).
ZeroOneRule zeroOneRuleOf(const Instr &i) {
  return ZeroOneRule{i.ints[0], i.ints[1], i.ints[2], i.ints[3], i.ints[4]};
}
/// What train.zero_one_adam's verifier accepts of it.
void checkZeroOneRule(const Instr &i, const Check &c) {
  const ZeroOneRule r = zeroOneRuleOf(i);
  if (r.varFreezeStep < 0 || r.varUpdateScaler < 0 || r.localStepScaler < 0)
    c.fail("var_freeze_step, var_update_scaler and local_step_scaler must be non-negative");
  if (r.localStepClipper < 1)
    c.fail("local_step_clipper must be at least 1, is " + std::to_string(r.localStepClipper));
  if (r.stepOffset != 0 && r.stepOffset != 1)
    c.fail("step_offset must be 0 or 1, is " + std::to_string(r.stepOffset));
}
/// The sum of squares of inputs [0, n) (f32, bf16 or f16 gradients).
double gradientSquares(const Instr &i, size_t n) {
  thread_local std::vector<cpu::SquaresOf> ts; // grows once: steps allocate nothing
  ts.resize(n);
  for (size_t k = 0; k < n; ++k) {
    const Tensor *g = i.in[k];
    ts[k] = {g->data, kernelDType(g->dtype), g->numel};
  }
  return cpu::sumSquares(ts.data(), n);
}
} // namespace

void addTrainOps(OpTable &t) {
    // 1-bit compression (the compressed all-reduce's local steps).
    t["train.onebit_compress"] = {[](Instr &i, const Check &c) {
      c.arity(2, 3);
      c.layout();
      c.dtype(i.in[0], plan::F32, "input");
      c.dtype(i.in[1], plan::F32, "error");
      c.dtype(i.out[0], plan::U8, "bits");
      c.dtype(i.out[2], plan::F32, "new error");
      c.scalar(i.out[1], plan::F32, "scale");
      c.sameShape(i.in[0], i.in[1]);
      if (i.in[0]->numel % 8 || i.out[0]->numel != i.in[0]->numel / 8)
        c.fail("bits must hold one byte per 8 of the " + std::to_string(i.in[0]->numel) +
               " elements, has " + std::to_string(i.out[0]->numel));
      errorInPlaceOrApart(i, c, 1, 2);
      i.run = [](const Instr &i, Context &ctx) {
        copyErrorIn(i, 1, 2);
        // fp16: a skipped step leaves the errors as they were (DeepSpeed
        // does not call the optimizer); the ranks agree on the skip, so the
        // exchanges still pair up, and what they carry is not read.
        if (ctx.overflow)
          return;
        *i.out[1]->f32() = cpu::onebitCompress(i.in[0]->f32(), i.out[2]->f32(),
                                               i.in[0]->numel, bytesOf(i.out[0]));
      };
    }};
    t["train.onebit_server"] = {[](Instr &i, const Check &c) {
      c.arity(3, 3);
      c.layout();
      c.dtype(i.in[0], plan::U8, "bits");
      c.dtype(i.in[1], plan::F32, "scales");
      c.dtype(i.in[2], plan::F32, "error");
      c.dtype(i.out[0], plan::U8, "bits out");
      c.dtype(i.out[2], plan::F32, "new error");
      c.scalar(i.out[1], plan::F32, "scale out");
      int64_t n = i.in[2]->numel, w = i.in[1]->numel;
      if (n % 8 || w < 1 || i.in[0]->numel != w * (n / 8) || i.out[0]->numel != n / 8)
        c.fail("bits must hold " + std::to_string(w) + " workers' " + std::to_string(n / 8) +
               " bytes and bits out " + std::to_string(n / 8) + "; they hold " +
               std::to_string(i.in[0]->numel) + " and " + std::to_string(i.out[0]->numel));
      errorInPlaceOrApart(i, c, 2, 2);
      i.run = [](const Instr &i, Context &ctx) {
        copyErrorIn(i, 2, 2);
        if (ctx.overflow) // fp16: a skipped step (see train.onebit_compress)
          return;
        *i.out[1]->f32() =
            cpu::onebitServer(bytesOf(i.in[0]), i.in[1]->f32(), int(i.in[1]->numel),
                              i.out[2]->f32(), i.in[2]->numel, bytesOf(i.out[0]));
      };
    }};
    t["train.onebit_expand"] = {[](Instr &i, const Check &c) {
      c.arity(2, 1);
      c.layout();
      c.dtype(i.in[0], plan::U8, "bits");
      c.dtype(i.in[1], plan::F32, "scales");
      c.dtype(i.out[0], plan::F32, "result");
      int64_t bytes = i.in[0]->numel, w = i.in[1]->numel;
      if (w < 1 || bytes % w || i.out[0]->numel != 8 * bytes)
        c.fail("the result must hold 8 elements per byte of bits, in " + std::to_string(w) +
               " equal chunks");
      i.run = [](const Instr &i, Context &) {
        const int64_t w = i.in[1]->numel, chunk = i.out[0]->numel / w;
        for (int64_t k = 0; k < w; ++k)
          cpu::onebitExpand(bytesOf(i.in[0]) + k * (chunk / 8), i.in[1]->f32()[k], chunk,
                            i.out[0]->f32() + k * chunk);
      };
    }};
    t["train.lr_schedule"] = {[](Instr &i, const Check &c) {
      c.arity(1, 1);
      c.layout();
      c.scalar(i.in[0], plan::I64, "step");
      c.scalar(i.out[0], plan::F32, "lr");
      i.run = [](const Instr &i, Context &ctx) {
        // DeepSpeed's schedules count updates from 0.
        *i.out[0]->f32() = (float)config::learningRate(ctx.settings->scheduler, ctx.settings->lr,
                                                      *i.in[0]->i64() - 1);
      };
    }};
    t["train.clip_grad_norm"] = {[](Instr &i, const Check &c) {
      // N gradients [, the global sum of squares (sharded gradients)]
      // [, the loss scale (fp16)] -> N results and the norm. ints:
      // has_sum_sq, has_loss_scale (a plan without them: the sum of squares
      // exactly when there is one more input than outputs - 1).
      size_t n = i.out.size() >= 1 ? i.out.size() - 1 : 0;
      c.layout();
      if (i.ints.size() == 2) {
        c.flag(0, "has_sum_sq");
        c.flag(1, "has_loss_scale");
      }
      bool sharded = i.ints.size() == 2 ? i.ints[0] != 0 : i.in.size() == n + 1;
      bool scaled = i.ints.size() == 2 && i.ints[1] != 0;
      if (n == 0 || i.in.size() != n + sharded + scaled)
        c.fail("expects N gradients (sharded: then the global sum of squares; fp16: then the "
               "loss scale), N results and the norm");
      for (size_t k = 0; k < n; ++k) {
        c.floats({i.in[k], i.out[k]});
        c.sameShape(i.in[k], i.out[k]);
        c.inPlace(i.in[k], i.out[k]);
      }
      c.scalar(i.out[n], plan::F32, "norm");
      if (sharded)
        c.scalar(i.in[n], plan::F32, "sum of squares");
      if (scaled)
        c.scalar(i.in[n + sharded], plan::F32, "loss scale");
      if (!(i.floats[0] >= 0)) // inf: never clip
        c.fail("max_norm " + std::to_string(i.floats[0]) + " must be >= 0");
      i.g[0] = sharded;
      i.g[1] = scaled;
      i.run = [](const Instr &i, Context &ctx) {
        size_t n = i.out.size() - 1;
        double sq = 0;
        if (i.g[0])
          sq = *i.in[n]->f32();
        else
          sq = gradientSquares(i, n);
        // The updates follow this instruction (clipFactor: the decision).
        std::optional<double> coef = clipFactor(i, ctx, sq);
        if (coef && *coef != 1.0)
          for (size_t k = 0; k < n; ++k)
            cpu::scale(i.out[k]->f32(), i.out[k]->numel, (float)*coef);
      };
    }};
    t["train.clip_coef"] = {[](Instr &i, const Check &c) {
      // N gradients (f32, bf16 or f16) [, sum_sq] [, loss_scale] -> norm,
      // coef; ints: has_sum_sq, has_loss_scale.
      c.layout();
      c.flag(0, "has_sum_sq");
      c.flag(1, "has_loss_scale");
      const bool sharded = i.ints[0] != 0, scaled = i.ints[1] != 0;
      if (i.out.size() != 2 || i.in.size() < 1 + size_t(sharded) + size_t(scaled))
        c.fail("expects N >= 1 gradients (sharded: then the global sum of squares; fp16: then "
               "the loss scale) and writes the norm and the factor");
      const size_t n = i.in.size() - sharded - scaled;
      for (size_t k = 0; k < n; ++k)
        (void)c.sameFloat({i.in[k]}); // f32, bf16 or f16
      c.scalar(i.out[0], plan::F32, "norm");
      c.scalar(i.out[1], plan::F32, "coef");
      if (sharded)
        c.scalar(i.in[n], plan::F32, "sum of squares");
      if (scaled)
        c.scalar(i.in[n + sharded], plan::F32, "loss scale");
      if (!(i.floats[0] >= 0))
        c.fail("max_norm " + std::to_string(i.floats[0]) + " must be >= 0");
      i.g[0] = sharded;
      i.g[1] = scaled;
      i.run = [](const Instr &i, Context &ctx) {
        const size_t n = i.in.size() - size_t(i.g[0]) - size_t(i.g[1]);
        double sq = 0;
        if (i.g[0])
          sq = *i.in[n]->f32();
        else
          sq = gradientSquares(i, n);
        clipCoef(i, ctx, sq);
      };
    }};
    t["train.fused_adam"] = {[](Instr &i, const Check &c) {
      // N params, N grads, N exp_avg, N exp_avg_sq, lr, step [, coef] ->
      // N params, N exp_avg, N exp_avg_sq, each in place of its input.
      c.layout();
      checkAdamRates(i, c);
      c.flag(0, "decoupled");
      c.flag(1, "bias_correction");
      c.flag(2, "has_coef");
      // K working copies after the inputs and the outputs (copy_of).
      const auto [n, coef] =
          checkFusedCounts(i, c, 2, 4, "params, grads, exp_avgs and exp_avg_sqs");
      checkFusedTensors(i, c, n, true);
      c.scalar(i.in[4 * n], plan::F32, "lr");
      c.scalar(i.in[4 * n + 1], plan::I64, "step");
      if (coef)
        c.scalar(i.in[4 * n + 2], plan::F32, "coef");
      checkCopies(i, c, n, 3, 4 * n + 2 + coef);
      i.run = [](const Instr &i, Context &ctx) {
        if (ctx.overflow) // fp16: the loss scaler skips this step
          return;
        const size_t n = fusedParameters(i, 3);
        const std::vector<cpu::AdamTensor> t = updatedTensors(i, n, 3);
        const float scale = i.ints[2] ? *i.in[4 * n + 2]->f32() : 1.0f;
        auto [beta1, beta2] = stepBetas(i, ctx);
        cpu::fusedAdam(t.data(), n, scale, *i.in[4 * n]->f32(), beta1, beta2,
                       (float)i.floats[2], (float)i.floats[3], i.ints[0] != 0, i.ints[1] != 0,
                       *i.in[4 * n + 1]->i64());
      };
    }};
    t["train.adam"] = {[](Instr &i, const Check &c) {
      c.arity(6, 3);
      c.layout();
      c.floats({i.in[0], i.in[1], i.in[2], i.in[3], i.out[0], i.out[1], i.out[2]});
      c.scalar(i.in[4], plan::F32, "lr");
      c.scalar(i.in[5], plan::I64, "step");
      checkAdamRates(i, c); // what train.adam's verifier accepts
      c.flag(0, "decoupled");
      c.flag(1, "bias_correction");
      updateInPlace(i, c, 2);
      i.run = [](const Instr &i, Context &ctx) {
        if (ctx.overflow) // fp16: the loss scaler skips this step
          return;
        // In place: the outputs view the parameter and state bytes.
        auto [beta1, beta2] = stepBetas(i, ctx);
        cpu::adam(i.out[0]->f32(), i.in[1]->f32(), i.out[1]->f32(), i.out[2]->f32(),
                  i.out[0]->numel, *i.in[4]->f32(), beta1, beta2,
                  (float)i.floats[2], (float)i.floats[3], i.ints[0] != 0, i.ints[1] != 0,
                  *i.in[5]->i64());
      };
    }};
    t["train.onebit_adam"] = {[](Instr &i, const Check &c) {
      if (i.in.size() != 6 && i.in.size() != 7)
        c.fail("expects 6 or 7 inputs (param, grad, exp_avg, exp_avg_sq, lr, step[, "
               "compressed]), has " + std::to_string(i.in.size()));
      c.arity(i.in.size(), 3);
      c.layout();
      c.floats({i.in[0], i.in[1], i.in[2], i.in[3], i.out[0], i.out[1], i.out[2]});
      c.scalar(i.in[4], plan::F32, "lr");
      c.scalar(i.in[5], plan::I64, "step");
      if (i.in.size() == 7) {
        c.floats({i.in[6]});
        c.sameShape(i.in[0], i.in[6]);
      }
      checkAdamRates(i, c); // what train.onebit_adam's verifier accepts
      if (i.ints[0] < 0)
        c.fail("freeze_step must be non-negative, is " + std::to_string(i.ints[0]));
      if (i.ints[1] != 0 && i.ints[1] != 1)
        c.fail("step_offset must be 0 or 1, is " + std::to_string(i.ints[1]));
      updateInPlace(i, c, 2);
      i.run = [](const Instr &i, Context &ctx) {
        if (ctx.overflow) // fp16: the loss scaler skips this step
          return;
        auto [beta1, beta2] = stepBetas(i, ctx);
        // DeepSpeed's call count: its first call only initialises, and
        // the last uncompressed one is max(freeze_step, 2).
        const int64_t t = *i.in[5]->i64() + i.ints[1];
        const cpu::OneBitPhase phase = t <= 1 ? cpu::OneBitPhase::Init
                                       : t <= std::max<int64_t>(i.ints[0], 2)
                                           ? cpu::OneBitPhase::Warmup
                                           : cpu::OneBitPhase::Compressed;
        cpu::onebitAdam(i.out[0]->f32(), i.in[1]->f32(), i.out[1]->f32(), i.out[2]->f32(),
                        i.in.size() == 7 ? i.in[6]->f32() : nullptr, i.out[0]->numel,
                        *i.in[4]->f32(), beta1, beta2, (float)i.floats[2], (float)i.floats[3],
                        phase);
      };
    }};
    t["train.onebit_lamb"] = {[](Instr &i, const Check &c) {
      c.layout();
      const bool hasCompressed = i.ints[2] != 0, hasStats = i.ints[3] != 0;
      const size_t inputs = 10 + hasCompressed + hasStats;
      if (i.in.size() != inputs)
        c.fail("expects " + std::to_string(inputs) + " inputs (param, grad, exp_avg, "
               "exp_avg_sq, exp_avg_sq_fresh, lamb_coeff_freeze, last_factor, scaling_coeff, lr, "
               "step, then the compressed momentum and the stats as ints 2 and 3 say), has " +
               std::to_string(i.in.size()));
      c.arity(i.in.size(), 6);
      c.floats({i.in[0], i.in[1], i.in[2], i.in[3], i.in[4], i.out[0], i.out[1], i.out[2],
                i.out[3]});
      for (int k : {5, 6, 7})
        c.scalar(i.in[size_t(k)], plan::F32, "a coefficient");
      c.scalar(i.out[4], plan::F32, "new lamb_coeff_freeze");
      c.scalar(i.out[5], plan::F32, "new last_factor");
      c.scalar(i.in[8], plan::F32, "lr");
      c.scalar(i.in[9], plan::I64, "step");
      if (hasCompressed) {
        c.floats({i.in[10]});
        c.sameShape(i.in[0], i.in[10]);
      }
      if (hasStats) {
        c.dtype(i.in[inputs - 1], plan::F32, "stats");
        if (i.in[inputs - 1]->numel != 3)
          c.fail("stats must hold 3 values, has " + std::to_string(i.in[inputs - 1]->numel));
      }
      checkAdamRates(i, c);
      c.floatIn(5, "min_coeff", 0, 1e30);
      c.floatIn(4, "max_coeff", i.floats[5], 1e30);
      c.floatIn(6, "coeff_beta", 0, 1);
      c.floatIn(8, "factor_min", 0, 1e30);
      c.floatIn(7, "factor_max", i.floats[8], 1e30);
      c.floatIn(9, "factor_threshold", 0, 1e30);
      if (i.ints[0] < 0)
        c.fail("freeze_step must be non-negative, is " + std::to_string(i.ints[0]));
      if (i.ints[1] != 0 && i.ints[1] != 1)
        c.fail("step_offset must be 0 or 1, is " + std::to_string(i.ints[1]));
      updateInPlace(i, c, 3);
      c.inPlace(i.in[5], i.out[4]);
      c.inPlace(i.in[6], i.out[5]);
      i.run = [](const Instr &i, Context &ctx) {
        if (ctx.overflow)
          return;
        const int64_t t = *i.in[9]->i64() + i.ints[1], last = std::max<int64_t>(i.ints[0], 2);
        const cpu::OneBitPhase phase = t <= 1      ? cpu::OneBitPhase::Init
                                       : t <= last ? cpu::OneBitPhase::Warmup
                                                   : cpu::OneBitPhase::Compressed;
        const cpu::OneBitLambParams a{*i.in[8]->f32(), (float)i.floats[0], (float)i.floats[1],
                                      (float)i.floats[2], (float)i.floats[3], i.floats[4],
                                      i.floats[5], i.floats[6], i.floats[7], i.floats[8],
                                      i.floats[9]};
        const bool hasCompressed = i.ints[2] != 0, hasStats = i.ints[3] != 0;
        cpu::onebitLamb(i.out[0]->f32(), i.in[1]->f32(), i.out[1]->f32(), i.out[2]->f32(),
                        i.out[3]->f32(), i.out[4]->f32(), i.out[5]->f32(), *i.in[7]->f32(),
                        hasCompressed ? i.in[10]->f32() : nullptr, i.out[0]->numel, a, phase,
                        t == i.ints[0], t == last + 1,
                        hasStats ? i.in[i.in.size() - 1]->f32() : nullptr);
      };
    }};
    t["train.onebit_lamb_stats"] = {[](Instr &i, const Check &c) {
      c.layout();
      const int64_t n = i.ints[3];
      const bool hasCompressed = i.ints[2] != 0;
      if (n < 1 || i.in.size() != size_t(n * (hasCompressed ? 6 : 5) + 1) || i.out.size() != 1)
        c.fail("expects n params, grads, exp_avgs, exp_avg_sqs, exp_avg_sq_freshes (and "
               "compressed momenta, as int 2 says) and the step, n = int 3, and one result");
      for (int64_t k = 0; k < n; ++k)
        for (int64_t j = 0; j < (hasCompressed ? 6 : 5); ++j) {
          c.floats({i.in[size_t(j * n + k)]});
          c.sameShape(i.in[size_t(k)], i.in[size_t(j * n + k)]);
        }
      c.scalar(i.in.back(), plan::I64, "step");
      c.dtype(i.out[0], plan::F32, "stats");
      if (i.out[0]->numel != 3)
        c.fail("stats must hold 3 values, has " + std::to_string(i.out[0]->numel));
      checkAdamRates(i, c);
      if (i.ints[0] < 0 || (i.ints[1] != 0 && i.ints[1] != 1))
        c.fail("freeze_step must be non-negative and step_offset 0 or 1");
      i.run = [](const Instr &i, Context &) {
        const int64_t n = i.ints[3];
        const bool hasCompressed = i.ints[2] != 0;
        const int64_t t = *i.in.back()->i64() + i.ints[1], last = std::max<int64_t>(i.ints[0], 2);
        const cpu::OneBitPhase phase = t <= 1      ? cpu::OneBitPhase::Init
                                       : t <= last ? cpu::OneBitPhase::Warmup
                                                   : cpu::OneBitPhase::Compressed;
        const cpu::OneBitLambParams a{0, (float)i.floats[0], (float)i.floats[1],
                                      (float)i.floats[2], (float)i.floats[3], 0, 0, 0, 0, 0, 0};
        double stats[3] = {0, 0, 0};
        auto in = [&](int64_t j, int64_t k) { return i.in[size_t(j * n + k)]->f32(); };
        for (int64_t k = 0; k < n; ++k)
          cpu::onebitLambStats(in(0, k), in(1, k), in(2, k), in(3, k), in(4, k),
                               hasCompressed ? in(5, k) : nullptr, i.in[size_t(k)]->numel, a,
                               phase, stats);
        for (int j = 0; j < 3; ++j)
          i.out[0]->f32()[j] = float(stats[j]);
      };
    }};
    t["train.onebit_lamb_scaling"] = {[](Instr &i, const Check &c) {
      const size_t k = i.out.size();
      if (k == 0 || i.in.size() != 2 * k + 1)
        c.fail("expects k momenta, k coefficients and the step, and k results; has " +
               std::to_string(i.in.size()) + " inputs and " + std::to_string(k) + " results");
      c.layout();
      for (size_t j = 0; j < k; ++j) {
        c.floats({i.in[j]});
        c.scalar(i.in[k + j], plan::F32, "a coefficient");
        c.scalar(i.out[j], plan::F32, "a new coefficient");
      }
      c.scalar(i.in[2 * k], plan::I64, "step");
      if (i.ints[0] < 1)
        c.fail("at must be an optimizer step (>= 1), is " + std::to_string(i.ints[0]));
      i.run = [](const Instr &i, Context &) {
        const size_t k = i.out.size();
        if (*i.in[2 * k]->i64() == i.ints[0]) {
          std::vector<const float *> m(k);
          std::vector<int64_t> n(k);
          std::vector<float> coeff(k);
          for (size_t j = 0; j < k; ++j) {
            m[j] = i.in[j]->f32();
            n[j] = i.in[j]->numel;
          }
          cpu::onebitLambScaling(m.data(), n.data(), int(k), coeff.data());
          for (size_t j = 0; j < k; ++j)
            *i.out[j]->f32() = coeff[j];
        } else {
          for (size_t j = 0; j < k; ++j)
            *i.out[j]->f32() = *i.in[k + j]->f32();
        }
      };
    }};
    t["train.zero_one_adam"] = {[](Instr &i, const Check &c) {
      if (i.in.size() != 8 && i.in.size() != 9)
        c.fail("expects 8 or 9 inputs (param, grad, exp_avg, exp_avg_sq, momentum_accumulator, "
               "lrs, lr, step[, compressed]), has " + std::to_string(i.in.size()));
      c.arity(i.in.size(), 5);
      c.layout();
      c.floats({i.in[0], i.in[1], i.in[2], i.in[3], i.in[4], i.out[0], i.out[1], i.out[2],
                i.out[3]});
      c.scalar(i.in[5], plan::F32, "lrs");
      c.scalar(i.out[4], plan::F32, "new lrs");
      c.scalar(i.in[6], plan::F32, "lr");
      c.scalar(i.in[7], plan::I64, "step");
      if (i.in.size() == 9) {
        c.floats({i.in[8]});
        c.sameShape(i.in[0], i.in[8]);
      }
      checkAdamRates(i, c);
      checkZeroOneRule(i, c);
      updateInPlace(i, c, 3);
      c.inPlace(i.in[5], i.out[4]);
      i.run = [](const Instr &i, Context &ctx) {
        if (ctx.overflow) // fp16: the loss scaler skips this step
          return;
        const uint32_t cls = zeroOneRuleOf(i).classOf(*i.in[7]->i64());
        cpu::zeroOneAdam(i.out[0]->f32(), i.in[1]->f32(), i.out[1]->f32(), i.out[2]->f32(),
                         i.out[3]->f32(), i.out[4]->f32(),
                         i.in.size() == 9 ? i.in[8]->f32() : nullptr, i.out[0]->numel,
                         *i.in[6]->f32(), (float)i.floats[0], (float)i.floats[1],
                         (float)i.floats[2], (float)i.floats[3], cls);
      };
    }};
    t["train.zero_one_payload"] = {[](Instr &i, const Check &c) {
      c.arity(7, 1);
      c.layout();
      c.floats({i.in[0], i.in[1], i.in[2], i.in[3], i.in[4], i.out[0]});
      for (int k = 1; k < 5; ++k)
        c.sameShape(i.in[0], i.in[k]);
      c.sameShape(i.in[0], i.out[0]);
      c.scalar(i.in[5], plan::F32, "lr");
      c.scalar(i.in[6], plan::I64, "step");
      c.floatIn(0, "beta1", 0, 1);
      c.floatIn(1, "eps", 0, INFINITY);
      if (i.floats[1] == 0)
        c.fail("eps must be positive");
      c.floatIn(2, "weight_decay", 0, 1e30);
      checkZeroOneRule(i, c);
      i.run = [](const Instr &i, Context &) {
        const uint32_t cls = zeroOneRuleOf(i).classOf(*i.in[6]->i64());
        cpu::zeroOnePayload(i.out[0]->f32(), i.in[0]->f32(), i.in[1]->f32(), i.in[2]->f32(),
                            i.in[3]->f32(), i.in[4]->f32(), i.out[0]->numel, *i.in[5]->f32(),
                            (float)i.floats[0], (float)i.floats[1], (float)i.floats[2], cls);
      };
    }};
    t["train.reset_at"] = {[](Instr &i, const Check &c) {
      c.arity(2, 1);
      c.layout();
      c.floats({i.in[0], i.out[0]});
      c.sameShape(i.in[0], i.out[0]);
      c.scalar(i.in[1], plan::I64, "step");
      if (i.ints[0] < 1)
        c.fail("at must be an optimizer step (>= 1), is " + std::to_string(i.ints[0]));
      i.run = [](const Instr &i, Context &) {
        if (*i.in[1]->i64() == i.ints[0])
          std::fill(i.out[0]->f32(), i.out[0]->f32() + i.out[0]->numel, 0.0f);
        else if (i.out[0]->data != i.in[0]->data)
          std::memcpy(i.out[0]->data, i.in[0]->data, i.in[0]->bytes());
      };
    }};
    t["train.lion"] = {[](Instr &i, const Check &c) {
      c.arity(4, 2);
      c.layout();
      c.floats({i.in[0], i.in[1], i.in[2], i.out[0], i.out[1]});
      c.scalar(i.in[3], plan::F32, "lr");
      // What train.lion's verifier accepts.
      c.floatIn(0, "beta1", 0, 1);
      c.floatIn(1, "beta2", 0, 1);
      c.floatIn(2, "weight_decay", 0, 1e30);
      updateInPlace(i, c, 1);
      i.run = [](const Instr &i, Context &ctx) {
        if (ctx.overflow) // fp16: the loss scaler skips this step
          return;
        auto [beta1, beta2] = stepBetas(i, ctx);
        cpu::lion(i.out[0]->f32(), i.in[1]->f32(), i.out[1]->f32(), i.out[0]->numel,
                  *i.in[3]->f32(), beta1, beta2, (float)i.floats[2]);
      };
    }};
    t["train.adagrad"] = {[](Instr &i, const Check &c) {
      c.arity(5, 2);
      c.layout();
      c.floats({i.in[0], i.in[1], i.in[2], i.out[0], i.out[1]});
      c.scalar(i.in[3], plan::F32, "lr");
      c.scalar(i.in[4], plan::I64, "step");
      // What train.adagrad's verifier accepts.
      c.floatIn(0, "eps", 0, INFINITY);
      if (i.floats[0] == 0)
        c.fail("eps must be positive");
      c.floatIn(1, "weight_decay", 0, 1e30);
      c.floatIn(2, "lr_decay", 0, 1e30);
      updateInPlace(i, c, 1);
      i.run = [](const Instr &i, Context &ctx) {
        if (ctx.overflow)
          return;
        cpu::adagrad(i.out[0]->f32(), i.in[1]->f32(), i.out[1]->f32(), i.out[0]->numel,
                     *i.in[3]->f32(), (float)i.floats[0], (float)i.floats[1], (float)i.floats[2],
                     *i.in[4]->i64());
      };
    }};
    // LAMB's hyperparameters: floats beta1, beta2, eps, weight_decay first.
    auto lambRates = [](const Check &c) {
      c.floatIn(0, "beta1", 0, 1);
      c.floatIn(1, "beta2", 0, 1);
      c.floatIn(2, "eps", 0, INFINITY);
      if (c.i.floats[2] == 0)
        c.fail("eps must be positive");
      c.floatIn(3, "weight_decay", 0, 1e30);
    };
    // An update's: the rates, floats max_coeff and min_coeff, the flag
    // bias_correction first.
    auto lambUpdateRates = [lambRates](const Check &c) {
      lambRates(c);
      c.floatIn(4, "max_coeff", 0, INFINITY);
      c.floatIn(5, "min_coeff", 0, INFINITY);
      if (c.i.floats[5] > c.i.floats[4])
        c.fail("min_coeff must not exceed max_coeff");
      c.flag(0, "bias_correction");
    };
    t["train.lamb_stats"] = {[lambRates](Instr &i, const Check &c) {
      c.arity(4, 1);
      c.layout();
      c.floats({i.in[0], i.in[1], i.in[2], i.in[3], i.out[0]});
      if (i.out[0]->numel != 2)
        c.fail("the result must hold 2 sums, has shape " + Check::shape(i.out[0]));
      lambRates(c);
      for (int k = 1; k < 4; ++k)
        c.sameShape(i.in[0], i.in[k]);
      i.run = [](const Instr &i, Context &ctx) {
        auto [beta1, beta2] = stepBetas(i, ctx);
        cpu::lambStats(i.in[0]->f32(), i.in[1]->f32(), i.in[2]->f32(), i.in[3]->f32(),
                       i.in[0]->numel, beta1, beta2, (float)i.floats[2], (float)i.floats[3],
                       i.out[0]->f32());
      };
    }};
    t["train.lamb"] = {[lambUpdateRates](Instr &i, const Check &c) {
      c.arity(7, 3);
      c.layout();
      c.floats({i.in[0], i.in[1], i.in[2], i.in[3], i.in[6], i.out[0], i.out[1], i.out[2]});
      c.scalar(i.in[4], plan::F32, "lr");
      c.scalar(i.in[5], plan::I64, "step");
      if (i.in[6]->numel != 2)
        c.fail("stats must hold 2 sums, has shape " + Check::shape(i.in[6]));
      lambUpdateRates(c); // what train.lamb's verifier accepts
      updateInPlace(i, c, 2);
      i.run = [](const Instr &i, Context &ctx) {
        if (ctx.overflow)
          return;
        auto [beta1, beta2] = stepBetas(i, ctx);
        cpu::lamb(i.out[0]->f32(), i.in[1]->f32(), i.out[1]->f32(), i.out[2]->f32(),
                  i.out[0]->numel, *i.in[4]->f32(), beta1, beta2,
                  (float)i.floats[2], (float)i.floats[3], i.ints[0] != 0, (float)i.floats[4],
                  (float)i.floats[5], *i.in[5]->i64(), i.in[6]->f32());
      };
    }};
    t["train.fused_lamb_stats"] = {[lambRates](Instr &i, const Check &c) {
      // N params, N grads, N exp_avg, N exp_avg_sq [, coef] -> N sums.
      c.layout();
      lambRates(c);
      c.flag(0, "has_coef");
      const size_t coef = i.ints[0] != 0, n = i.out.size();
      if (n == 0 || i.in.size() != 4 * n + coef)
        c.fail("expects N params, grads, exp_avgs and exp_avg_sqs" +
               std::string(coef ? " and coef" : "") + " and writes N pairs of sums");
      checkFusedTensors(i, c, n, false);
      for (size_t k = 0; k < n; ++k) {
        c.dtype(i.out[k], plan::F32, "sums");
        if (i.out[k]->numel != 2)
          c.fail("result " + std::to_string(k) + " must hold 2 sums, has shape " +
                 Check::shape(i.out[k]));
      }
      if (coef)
        c.scalar(i.in[4 * n], plan::F32, "coef");
      i.run = [](const Instr &i, Context &ctx) {
        const size_t n = i.out.size();
        const std::vector<cpu::AdamTensor> t = fusedTensors(i, n, false);
        std::vector<float *> sums(n);
        for (size_t k = 0; k < n; ++k)
          sums[k] = i.out[k]->f32();
        const float scale = i.ints[0] ? *i.in[4 * n]->f32() : 1.0f;
        auto [beta1, beta2] = stepBetas(i, ctx);
        cpu::fusedLambStats(t.data(), n, scale, beta1, beta2, (float)i.floats[2],
                            (float)i.floats[3], sums.data());
      };
    }};
    t["train.fused_lamb"] = {[lambUpdateRates](Instr &i, const Check &c) {
      // N params, N grads, N exp_avg, N exp_avg_sq, N stats, lr, step
      // [, coef] -> N params, N exp_avg, N exp_avg_sq, in place.
      c.layout();
      lambUpdateRates(c);
      c.flag(1, "has_coef");
      const auto [n, coef] =
          checkFusedCounts(i, c, 1, 5, "params, grads, exp_avgs, exp_avg_sqs and stats");
      checkFusedTensors(i, c, n, true);
      for (size_t k = 0; k < n; ++k) {
        c.dtype(i.in[4 * n + k], plan::F32, "stats");
        if (i.in[4 * n + k]->numel != 2)
          c.fail("stats " + std::to_string(k) + " must hold 2 sums, has shape " +
                 Check::shape(i.in[4 * n + k]));
      }
      c.scalar(i.in[5 * n], plan::F32, "lr");
      c.scalar(i.in[5 * n + 1], plan::I64, "step");
      if (coef)
        c.scalar(i.in[5 * n + 2], plan::F32, "coef");
      checkCopies(i, c, n, 2, 5 * n + 2 + coef);
      i.run = [](const Instr &i, Context &ctx) {
        if (ctx.overflow)
          return;
        const size_t n = fusedParameters(i, 2);
        const std::vector<cpu::AdamTensor> t = updatedTensors(i, n, 2);
        std::vector<const float *> sums(n);
        for (size_t k = 0; k < n; ++k)
          sums[k] = i.in[4 * n + k]->f32();
        const float scale = i.ints[1] ? *i.in[5 * n + 2]->f32() : 1.0f;
        auto [beta1, beta2] = stepBetas(i, ctx);
        cpu::fusedLamb(t.data(), n, sums.data(), scale, *i.in[5 * n]->f32(), beta1, beta2,
                       (float)i.floats[2], (float)i.floats[3], i.ints[0] != 0,
                       (float)i.floats[4], (float)i.floats[5], *i.in[5 * n + 1]->i64());
      };
    }};
    t["tier.fetch"] = {[](Instr &i, const Check &c) { bindTierCopy(i, c, true); }};
    t["tier.store"] = {[](Instr &i, const Check &c) { bindTierCopy(i, c, false); }};
    t["train.sgd"] = {[](Instr &i, const Check &c) {
      bool momentum = i.in.size() == 4;
      c.arity(momentum ? 4 : 3, momentum ? 2 : 1);
      c.layout();
      c.floats({i.in[0], i.in[1], i.out[0]});
      c.scalar(i.in[2], plan::F32, "lr");
      c.sameShape(i.in[0], i.in[1]);
      c.sameShape(i.in[0], i.out[0]);
      c.inPlace(i.in[0], i.out[0]);
      if (momentum) {
        c.floats({i.in[3], i.out[1]});
        c.sameShape(i.in[0], i.in[3]);
        c.sameShape(i.in[0], i.out[1]);
        c.inPlace(i.in[3], i.out[1]);
      }
      // What train.sgd's verifier accepts.
      c.floatIn(0, "momentum", 0, 1);
      c.floatIn(1, "dampening", 0, 1);
      c.floatIn(2, "weight_decay", 0, 1e30);
      c.flag(0, "nesterov");
      if (momentum != (i.floats[0] > 0))
        c.fail("a momentum buffer (4 inputs, 2 outputs) is needed exactly when momentum > 0");
      if (i.ints[0] && (i.floats[0] == 0 || i.floats[1] != 0))
        c.fail("nesterov needs momentum > 0 and dampening 0");
      i.run = [](const Instr &i, Context &ctx) {
        if (ctx.overflow) // fp16: the loss scaler skips this step
          return;
        bool momentum = i.in.size() == 4;
        cpu::sgd(i.out[0]->f32(), i.in[1]->f32(), momentum ? i.out[1]->f32() : nullptr,
                 i.out[0]->numel, *i.in[2]->f32(), (float)i.floats[0], (float)i.floats[1],
                 (float)i.floats[2], i.ints[0] != 0, ctx.optimizerStep == 1);
      };
    }};
    t["train.sum_sq"] = {[](Instr &i, const Check &c) {
      if (i.in.empty() || i.out.size() != 1)
        c.fail("expects at least one input and one output");
      c.layout();
      for (const Tensor *t : i.in)
        c.floats({t});
      c.dtype(i.out[0], plan::F32, "result");
      if (i.out[0]->numel != 1)
        c.fail("the result must be a scalar");
      i.run = [](const Instr &i, Context &) {
        // In input order, in double: the same on every rank and thread count.
        double sq = 0;
        for (const Tensor *t : i.in)
          sq += cpu::sumSquares(t->f32(), t->numel);
        *i.out[0]->f32() = (float)sq;
      };
    }};
    t["train.assign"] = {[](Instr &i, const Check &c) {
      // A model buffer's new value (BatchNorm's running statistics): a copy
      // into the FROZEN buffer, which is then part of the model's state.
      c.arity(1, 1);
      c.layout();
      c.floats({i.in[0], i.out[0]});
      c.sameShape(i.in[0], i.out[0]);
      if (i.out[0]->role != plan::FROZEN)
        c.fail("the target '" + i.out[0]->name + "' is not a model buffer (FROZEN)");
      if (i.out[0]->shards > 1 || i.out[0]->tpDim >= 0 || i.out[0]->tier != plan::ARENA)
        c.fail("the model buffer '" + i.out[0]->name + "' must be whole and in the arena");
      i.out[0]->assigned = true;
      i.run = [](const Instr &i, Context &) {
        if (i.in[0]->data != i.out[0]->data)
          std::memcpy(i.out[0]->data, i.in[0]->data, i.in[0]->bytes());
      };
    }};
    t["fill"] = {[](Instr &i, const Check &c) {
      c.arity(0, 1);
      c.layout();
      plan::DType d = c.sameFloat({i.out[0]});
      if (d == plan::F32)
        i.run = [](const Instr &i, Context &) {
          cpu::fill(i.out[0]->f32(), i.out[0]->numel, (float)i.floats[0]);
        };
      else
        // 16-bit sums (grad_accum_dtype bf16 / fp16): the value rounded once.
        i.run = [](const Instr &i, Context &) {
          float v = (float)i.floats[0];
          uint16_t bits = i.out[0]->dtype == plan::BF16 ? cpu::detail::bf16Bits(v)
                                                        : cpu::detail::f16Bits(v);
          std::fill(i.out[0]->u16(), i.out[0]->u16() + i.out[0]->numel, bits);
        };
    }};
    t["accumulate"] = {[](Instr &i, const Check &c) {
      c.arity(1, 1);
      c.layout();
      c.sameShape(i.in[0], i.out[0]);
      // out += in. Into an f32 sum the value is read in its own float type
      // and widened as it is added (a bf16 / fp16 gradient: plan format
      // 17, the cast's sum without its pass); 16-bit sums (grad_accum_dtype)
      // round every addition.
      const bool intoFloat = i.out[0]->dtype == plan::F32;
      plan::DType d = intoFloat ? c.sameFloat({i.in[0]}) : c.sameFloat({i.in[0], i.out[0]});
      i.run = byFloat(d, [intoFloat](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        if (intoFloat)
          return [](const Instr &i, Context &) {
            cpu::accumulate(as<T>(i.in[0]), i.out[0]->f32(), i.out[0]->numel);
          };
        return [](const Instr &i, Context &) {
          cpu::binary(cpu::Binary::Add, as<T>(i.out[0]), i.out[0]->shape, as<T>(i.in[0]),
                      i.in[0]->shape, as<T>(i.out[0]), i.out[0]->shape);
        };
      });
    }};
}

} // namespace dsrt::ops
