//===- PlanBuilder.h - small plans written by the comm tests ----*- C++ -*-===//
//
// Builds a plan.pb (and its weights.safetensors and plan.sha256) in code,
// so the executor's data-parallel paths are tested without the compiler.
// Buffers 0-3 are the step, lr, loss and grad_norm scalars every plan
// needs; buffers are laid out back to back, 8-byte aligned.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_TEST_COMM_PLANBUILDER_H
#define DSRT_TEST_COMM_PLANBUILDER_H

#include "config/PlanSettings.h"
#include "io/SafeTensors.h"
#include "plan/Version.h"

#include "plan.pb.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "test/runtime/io/TestDir.h"

#include <unistd.h>

namespace dsrt::test {

namespace plan = dsc::plan;

/// A fresh directory, removed afterwards (the io tests' helper).
using TempDir = dsrt::io::test::TestDir;

enum List { Prologue, MicroBatch, Epilogue };

/// Makes `p` a plan of this dsc's format, with the typed settings of a
/// plan compiled without a ds_config (format 9); an lr schedule it holds
/// is kept.
inline void currentFormat(plan::Plan &p) {
  std::optional<plan::LrSchedule> lr;
  if (p.has_lr_schedule())
    lr = p.lr_schedule();
  p.set_format_version(kPlanFormatVersion);
  config::writePlanSettings(config::planSettingsOf(config::defaultConfig()), p);
  if (lr)
    *p.mutable_lr_schedule() = *lr;
}

class PlanBuilder {
public:
  static constexpr uint32_t kStep = 0, kLr = 1, kLoss = 2, kNorm = 3;

  PlanBuilder(uint32_t dp, int64_t microBatches, int64_t microBatchSize) {
    plan_.set_format_version(1);
    plan_.set_producer("PlanBuilder");
    plan_.set_dp(dp);
    plan_.set_micro_batch_size(microBatchSize);
    plan_.mutable_program()->set_micro_batches(microBatches);
    buffer("step", plan::I64, {}, plan::STEP);
    buffer("", plan::F32, {}, plan::ACTIVATION);
    buffer("", plan::F32, {}, plan::ACTIVATION);
    buffer("", plan::F32, {}, plan::ACTIVATION);
    plan_.set_step_buffer(kStep);
    plan_.set_lr_buffer(kLr);
    plan_.set_loss_buffer(kLoss);
    plan_.set_grad_norm_buffer(kNorm);
  }

  uint32_t buffer(const std::string &name, plan::DType dtype, std::vector<int64_t> shape,
                  plan::Role role) {
    plan::Buffer *b = plan_.add_buffers();
    b->set_name(name);
    b->set_dtype(dtype);
    int64_t n = 1;
    for (int64_t d : shape) {
      b->add_shape(d);
      n *= d;
    }
    b->set_role(role);
    b->set_offset(next_);
    int64_t bytes = n * (dtype == plan::F64 || dtype == plan::I64 ? 8 : dtype == plan::BOOL ? 1 : 4);
    next_ += uint64_t((bytes + 7) / 8 * 8);
    return uint32_t(plan_.buffers_size() - 1);
  }
  uint32_t f32(std::vector<int64_t> shape) {
    return buffer("", plan::F32, std::move(shape), plan::ACTIVATION);
  }
  /// A ZeRO shard of `name` (full shape `full`) over `shards` ranks.
  uint32_t shard(const std::string &name, plan::Role role, std::vector<int64_t> full,
                 uint32_t shards) {
    int64_t n = 1;
    for (int64_t d : full)
      n *= d;
    uint32_t index = buffer(name, plan::F32, {(n + shards - 1) / shards}, role);
    plan::Buffer *b = plan_.mutable_buffers(int(index));
    for (int64_t d : full)
      b->add_full_shape(d);
    b->set_shard_count(shards);
    return index;
  }
  plan::Buffer &at(uint32_t index) { return *plan_.mutable_buffers(int(index)); }

  plan::Instr &instr(List list, const std::string &op, std::initializer_list<uint32_t> in,
                    std::initializer_list<uint32_t> out, std::initializer_list<int64_t> ints = {},
                    std::initializer_list<double> floats = {}) {
    plan::Program *p = plan_.mutable_program();
    plan::Instr *i = list == Prologue     ? p->add_prologue()
                     : list == MicroBatch ? p->add_micro_batch()
                                          : p->add_epilogue();
    i->set_op(op);
    for (uint32_t k : in)
      i->add_inputs(k);
    for (uint32_t k : out)
      i->add_outputs(k);
    for (int64_t v : ints)
      i->add_ints(v);
    for (double v : floats)
      i->add_floats(v);
    return *i;
  }

  void weight(const std::string &name, std::vector<int64_t> shape, std::vector<float> values) {
    weights_.push_back({name, std::move(shape), std::move(values)});
  }

  /// plan.pb, weights.safetensors and their plan.sha256 into `dir`.
  void write(const std::string &dir) {
    plan_.set_arena_bytes(next_);
    std::ofstream out(dir + "/plan.pb", std::ios::binary);
    plan_.SerializeToOstream(&out);
    out.close();
    writeWeights(dir + "/weights.safetensors", weights_);
    writeChecksums(dir);
  }

  /// DIR/plan.sha256 for the plan.pb and weights.safetensors in DIR, as dsc
  /// writes it: dsrt runs no plan without one (a test that edits a plan's
  /// files calls this again).
  static void writeChecksums(const std::string &dir) {
    std::string weights = dir + "/weights.safetensors";
    io::writeChecksums(dir, {{"plan.pb", io::sha256File(dir + "/plan.pb")},
                             {"weights.safetensors", io::sha256File(weights)}});
  }

  /// A pipeline plan of `stages` (stage s: stages[s], its `stage` set)
  /// with M micro-batches per step, and the weights of every stage (a name
  /// several stages hold, once) into `dir`.
  static void writePipeline(const std::string &dir, std::vector<PlanBuilder *> stages,
                            int64_t microBatches) {
    plan::Plan top;
    top.set_format_version(1);
    top.set_producer("PlanBuilder");
    top.set_pp(uint32_t(stages.size()));
    top.set_dp(stages[0]->plan_.dp());
    top.set_pipeline_micro_batches(microBatches);
    top.set_schedule("gpipe");
    std::vector<Weight> weights;
    for (size_t s = 0; s < stages.size(); ++s) {
      stages[s]->plan_.set_arena_bytes(stages[s]->next_);
      stages[s]->plan_.set_stage(uint32_t(s));
      stages[s]->plan_.set_pp(0); // only the top level is a pipeline
      *top.add_stages() = stages[s]->plan_;
      for (const Weight &w : stages[s]->weights_) {
        bool have = false;
        for (const Weight &o : weights)
          have |= o.name == w.name;
        if (!have)
          weights.push_back(w);
      }
    }
    std::ofstream out(dir + "/plan.pb", std::ios::binary);
    top.SerializeToOstream(&out);
    out.close();
    writeWeights(dir + "/weights.safetensors", weights);
    writeChecksums(dir);
  }

  plan::Plan &proto() { return plan_; }

private:
  struct Weight {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> values;
  };
  static void writeWeights(const std::string &path, const std::vector<Weight> &weights) {
    std::vector<io::TensorRef> refs;
    for (const Weight &w : weights)
      refs.push_back({w.name, io::DType::F32, w.shape, w.values.data()});
    io::writeSafeTensors(path, refs, {});
  }
  plan::Plan plan_;
  uint64_t next_ = 0;
  std::vector<Weight> weights_;
};

} // namespace dsrt::test

#endif // DSRT_TEST_COMM_PLANBUILDER_H
