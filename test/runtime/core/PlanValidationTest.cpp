//===- PlanValidationTest.cpp - crafted plans get an error, not a crash ---===//
//
// Regression tests of dsrt's plan loading (issue 11): each crafted plan,
// plan directory or weights file here crashed, hung, read out of bounds or
// asked for memory the machine has not before the check it names, and now
// gets a PlanError (or an io::IoError from the weights reader) saying what
// is wrong:
//  * sizes: the arena near 2^64, zero dimensions hiding huge ones, products
//    of two buffers' element counts, what the machine's memory can hold;
//  * loop counts: micro_batches, pipeline_micro_batches, dp and pp, one
//    load_batch per micro-batch;
//  * the shape relations and attributes every kernel relies on (matmul's
//    batch dimensions, concat's other dimensions, scalars, dtypes, flags,
//    ranges), and empty extents a kernel would divide by;
//  * files: a FIFO or a directory instead of plan.pb, weights or checksums;
//  * checksums: a byte changed in plan.pb or in its weights after dsc wrote
//    them.
//
//===----------------------------------------------------------------------===//
#include <google/protobuf/unknown_field_set.h>
#include "test/runtime/comm/PipelinePlan.h"
#include "test/runtime/comm/FakeCommunicator.h"
#include "test/runtime/core/InstrUtil.h"
#include "test/runtime/comm/PlanBuilder.h"

#include "runtime/core/Executor.h"
#include "plan/Instructions.h"
#include "io/FileUtil.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <cstring>
#include <fstream>
#include <optional>

#include <sys/stat.h>

namespace dsrt::test {
namespace {

using ::testing::HasSubstr;
using io::test::readBytes;
using io::test::writeBytes;

//===--- plans on disk ----------------------------------------------------===//

/// The message of loading the plan in `dir`, or "no error".
std::string loadError(const std::string &dir, comm::Communicator *world = nullptr) {
  try {
    Executor exec(dir, world);
  } catch (const PlanError &e) {
    return e.what();
  }
  return "no error";
}

/// Rewrites DIR/plan.pb through `edit` and records the new checksums, as
/// someone who changes a plan on purpose does: what is tested is then the
/// plan's content, not its checksum.
template <class F> void editPlan(const std::string &dir, F &&edit) {
  plan::Plan p;
  {
    std::ifstream in(dir + "/plan.pb", std::ios::binary);
    ASSERT_TRUE(p.ParseFromIstream(&in));
  }
  edit(p);
  {
    std::ofstream out(dir + "/plan.pb", std::ios::binary);
    ASSERT_TRUE(p.SerializeToOstream(&out));
  }
  PlanBuilder::writeChecksums(dir);
}

/// A small valid plan: lr = 0.125, a parameter w [4] scaled by it.
PlanBuilder smallPlan() {
  PlanBuilder p(1, 1, 1);
  uint32_t w = p.buffer("w", plan::F32, {4}, plan::PARAM);
  p.weight("w", {4}, {1, 2, 3, 4});
  p.instr(Prologue, "fill", {}, {p.kLr}, {}, {0.125});
  p.instr(Epilogue, "nn.mul", {w, p.kLr}, {w});
  return p;
}


//===--- format -----------------------------------------------------------===//

TEST(PlanFormat, UnknownFieldsAnywhereAreRefused) {
  // proto3 parses a field it does not know and keeps it aside: a newer
  // dsc's field, inside any message of the plan, must stop dsrt by name.
  TempDir dir;
  smallPlan().write(dir.path());
  EXPECT_EQ(loadError(dir.path()), "no error");
  auto unknown = [](google::protobuf::Message *m) {
    return m->GetReflection()->MutableUnknownFields(m);
  };
  editPlan(dir.path(), [&](plan::Plan &p) { unknown(p.mutable_buffers(2))->AddVarint(42, 7); });
  EXPECT_THAT(loadError(dir.path()),
              HasSubstr("plan.pb: Plan.buffers[2]: field 42 is not in this dsrt's plan.proto"));
  editPlan(dir.path(), [&](plan::Plan &p) {
    unknown(p.mutable_buffers(2))->Clear();
    unknown(p.mutable_program()->mutable_prologue(0))->AddFixed32(17, 1);
  });
  EXPECT_THAT(loadError(dir.path()),
              HasSubstr("plan.pb: Plan.program.prologue[0]: field 17 is not in this dsrt's "
                        "plan.proto"));
}

TEST(PlanFormat, VersionsThisDsrtRuns) {
  TempDir dir;
  smallPlan().write(dir.path());
  for (unsigned v = 0; v <= kPlanFormatVersion + 1; ++v) {
    editPlan(dir.path(), [v](plan::Plan &p) {
      if (v >= 9) // format 9 holds its settings typed
        currentFormat(p);
      p.set_format_version(v);
      if (v >= 3) // format 3 holds its lr schedule
        p.mutable_lr_schedule()->set_lr(0.125);
    });
    bool runs = v >= kOldestPlanFormatVersion && v <= kPlanFormatVersion;
    if (runs)
      EXPECT_EQ(loadError(dir.path()), "no error") << "version " << v;
    else
      EXPECT_THAT(loadError(dir.path()),
                  HasSubstr("plan format version " + std::to_string(v) + ", this dsrt runs "
                            "versions " + std::to_string(kOldestPlanFormatVersion) + " to " +
                            std::to_string(kPlanFormatVersion)))
          << "version " << v;
  }
}

TEST(PlanFormat, TheParametersNvmeFileIsCheckedAtLoad) {
  // The NVMe tier in two files (format 10): where the parameters' begins
  // is aligned, inside the tier, said by a plan that can say it.
  TempDir dir;
  smallPlan().write(dir.path());
  auto withTier = [&](uint64_t paramOffset, const std::string &paramPath, unsigned version) {
    editPlan(dir.path(), [&](plan::Plan &p) {
      plan::NvmeTier *t = p.mutable_nvme_tier();
      t->set_path(dir.path());
      t->set_bytes(8192);
      t->set_block_size(4096);
      t->set_queue_depth(4);
      t->set_param_path(paramPath);
      t->set_param_offset(paramOffset);
      currentFormat(p);
      p.set_format_version(version);
    });
    return loadError(dir.path());
  };
  EXPECT_THAT(withTier(100, dir.path(), kPlanFormatVersion),
              HasSubstr("nvme_tier.param_offset 100 must be a multiple of 4096 within the "
                        "tier's 8192 bytes"));
  EXPECT_THAT(withTier(12288, dir.path(), kPlanFormatVersion),
              HasSubstr("nvme_tier.param_offset 12288 must be a multiple"));
  EXPECT_THAT(withTier(4096, dir.path(), 9),
              HasSubstr("nvme_tier has a param_path, which a format-9 plan cannot say"));
  EXPECT_THAT(withTier(4096, "", kPlanFormatVersion),
              HasSubstr("nvme_tier.param_offset without a param_path"));
  EXPECT_EQ(withTier(4096, dir.path(), kPlanFormatVersion), "no error");
}

TEST(PlanFormat, WhatTheMemoryPlanKnowsIsCheckedAtLoad) {
  // Format 11: the bytes live at once, within the arena, and views of an
  // earlier buffer's bytes (what dsrt --timeline's planned bytes follow).
  TempDir dir;
  smallPlan().write(dir.path());
  auto with = [&](uint64_t peak, std::optional<uint32_t> viewOf, uint64_t viewOffset,
                  unsigned version) {
    smallPlan().write(dir.path());
    editPlan(dir.path(), [&](plan::Plan &p) {
      currentFormat(p);
      p.set_format_version(version);
      p.set_peak_live_bytes(peak);
      if (viewOf) {
        plan::Buffer *view = p.add_buffers();
        *view = p.buffers(int(PlanBuilder::kLoss));
        view->set_offset(viewOffset);
        view->set_view_of(*viewOf);
      }
    });
    return loadError(dir.path());
  };
  const uint64_t lossAt = [&] {
    plan::Plan p;
    std::ifstream in(dir.path() + "/plan.pb", std::ios::binary);
    EXPECT_TRUE(p.ParseFromIstream(&in));
    return p.buffers(int(PlanBuilder::kLoss)).offset();
  }();
  const unsigned v = kPlanFormatVersion;
  EXPECT_EQ(with(16, std::nullopt, 0, v), "no error");
  EXPECT_THAT(with(1 << 30, std::nullopt, 0, v),
              HasSubstr("peak_live_bytes 1073741824 exceeds the arena's"));
  EXPECT_EQ(with(0, PlanBuilder::kLoss, lossAt, v), "no error");
  // Neither changes how a plan runs: a plan relabelled older keeps them.
  EXPECT_EQ(with(16, PlanBuilder::kLoss, lossAt, 10), "no error");
  EXPECT_THAT(with(0, PlanBuilder::kLoss, lossAt + 8, v),
              HasSubstr("view_of 2 must name an earlier buffer at the same offset"));
  EXPECT_THAT(with(0, 99, lossAt, v), HasSubstr("view_of 99 must name an earlier buffer"));
}

TEST(PlanFormat, WorkingCopiesAreCheckedAtLoad) {
  // Format 19: a PARAM_COPY is the bf16 / fp16 copy of the parameter named
  // like it without ".copy", of its shape.
  TempDir dir;
  auto with = [&](const std::string &name, plan::DType dtype, std::vector<int64_t> shape) {
    PlanBuilder p = smallPlan();
    p.buffer(name, dtype, shape, plan::PARAM_COPY);
    p.write(dir.path());
    return loadError(dir.path());
  };
  EXPECT_EQ(with("w.copy", plan::BF16, {4}), "no error");
  EXPECT_EQ(with("w.copy", plan::F16, {4}), "no error");
  EXPECT_THAT(with("v.copy", plan::BF16, {4}),
              HasSubstr("a working copy is named like its parameter plus '.copy', and no "
                        "parameter is"));
  EXPECT_THAT(with("w", plan::BF16, {4}), HasSubstr("and no parameter is"));
  EXPECT_THAT(with("w.copy", plan::F32, {4}),
              HasSubstr("a working copy is BF16 or F16, this is F32"));
  EXPECT_THAT(with("w.copy", plan::BF16, {2, 2}),
              HasSubstr("the working copy of a [4] parameter in the arena must have its shape, "
                        "has [2,2]"));
}

TEST(PlanFormat, ThePipelineScheduleIsCheckedAtLoad) {
  // Format 13: a pipeline stage's items, unrolled at load
  // (plan/PipelineItems.h); a malformed schedule is refused, named.
  TempDir dir;
  auto with = [&](auto &&edit) {
    smallPlan().write(dir.path());
    editPlan(dir.path(), [&](plan::Plan &p) {
      currentFormat(p);
      edit(*p.mutable_program()->mutable_pipeline());
    });
    return loadError(dir.path());
  };
  EXPECT_THAT(with([](plan::PipelineSchedule &s) {
                s.set_slots(1);
                s.add_items(1);
              }),
              HasSubstr("plan.pb: the pipeline schedule's items are not (phase, micro-batch, "
                        "slot) triples"));
  EXPECT_THAT(with([](plan::PipelineSchedule &s) {
                for (int64_t x : {1, 0, 0})
                  s.add_items(x);
              }),
              HasSubstr("the pipeline schedule has no slots"));
  EXPECT_THAT(with([](plan::PipelineSchedule &s) {
                s.set_slots(2);
                for (int64_t x : {1, 0, 2})
                  s.add_items(x);
              }),
              HasSubstr("pipeline item 0 (phase 1, micro-batch 0, slot 2) is outside phases 1-3 "
                        "or the 2 slots"));
  EXPECT_THAT(with([](plan::PipelineSchedule &s) {
                s.set_slots(1);
                for (int64_t x : {4, 0, 0})
                  s.add_items(x);
              }),
              HasSubstr("pipeline item 0 (phase 4, micro-batch 0, slot 0)"));
  EXPECT_THAT(with([](plan::PipelineSchedule &s) {
                s.set_slots(1);
                for (int64_t x : {1, 0, 0})
                  s.add_items(x);
                s.add_forward()->set_op("nn.neg");
                s.mutable_forward(0)->add_inputs(999);
              }),
              HasSubstr("a pipeline instruction (nn.neg) names buffer 999, which does not exist"));
}

TEST(PlanFormat, TheCpuExecutorRunsExactlyTheInstructionVocabulary) {
  std::vector<std::string> vocabulary(kPlanInstructions.begin(), kPlanInstructions.end());
  EXPECT_TRUE(std::is_sorted(vocabulary.begin(), vocabulary.end())); // isPlanInstruction's search
  std::vector<std::string> known = knownOps(), missing, extra;
  std::set_difference(vocabulary.begin(), vocabulary.end(), known.begin(), known.end(),
                      std::back_inserter(missing));
  std::set_difference(known.begin(), known.end(), vocabulary.begin(), vocabulary.end(),
                      std::back_inserter(extra));
  EXPECT_THAT(missing, ::testing::IsEmpty()) << "instructions without a CPU kernel";
  EXPECT_THAT(extra, ::testing::IsEmpty()) << "kernels of no instruction";
}

TEST(PlanFormat, EveryInstructionDeclaresItsAttributeLayoutOnce) {
  // plan/Instructions.h: the vocabulary is the layout table's names, in its
  // order, and the CPU op table binds exactly the instructions it declares.
  ASSERT_EQ(std::size(kInstructionLayouts), kPlanInstructions.size());
  std::vector<std::string> known = knownOps(); // sorted: the op table is a map
  for (size_t k = 0; k < kPlanInstructions.size(); ++k) {
    const InstructionLayout &l = kInstructionLayouts[k];
    const std::string name(l.name);
    EXPECT_EQ(name, std::string(kPlanInstructions[k]));
    EXPECT_EQ(instructionId(l.name), int(k)) << name;
    EXPECT_TRUE(instructionLayout(l.name) == &l) << name;
    EXPECT_TRUE(attributeCounts(l.ints).wellFormed) << name << " ints '" << l.ints << "'";
    EXPECT_TRUE(attributeCounts(l.floats).wellFormed) << name << " floats '" << l.floats << "'";
    EXPECT_TRUE(std::binary_search(known.begin(), known.end(), name))
        << name << " has a declared layout but no CPU kernel";
  }
  for (const std::string &op : known)
    EXPECT_TRUE(instructionLayout(op) != nullptr) << op << " has a CPU kernel but no layout";
  EXPECT_TRUE(instructionLayout("nn.no_such_op") == nullptr);
}

TEST(PlanFormat, AttributeLayoutStrings) {
  // Names separated by ", "; name[length] a list sized by the operands;
  // [a, b] an optional trailing group, all of it or none.
  constexpr AttributeCounts none = attributeCounts(""), two = attributeCounts("lhs, rhs"),
                            group = attributeCounts("stream, [dim, blocks, size]"),
                            older = attributeCounts("[has_sum_sq, has_loss_scale]"),
                            list = attributeCounts("start[rank], stride[rank]");
  static_assert(none.allows(0) && !none.allows(1), "no attributes");
  EXPECT_TRUE(two.allows(2));
  EXPECT_FALSE(two.allows(1));
  EXPECT_FALSE(two.allows(3));
  EXPECT_TRUE(group.allows(1) && group.allows(4));
  EXPECT_FALSE(group.allows(0) || group.allows(2) || group.allows(3) || group.allows(5));
  EXPECT_TRUE(older.allows(0) && older.allows(2));
  EXPECT_FALSE(older.allows(1));
  EXPECT_TRUE(list.operandDependent);
  EXPECT_TRUE(list.allows(0) && list.allows(8));
  for (const AttributeCounts &c : {none, two, group, older, list})
    EXPECT_TRUE(c.wellFormed);
  for (std::string_view bad : {"a,", "a, , b", "[]", "a]", "[a", "a, [b], c", "a[rank"})
    EXPECT_FALSE(attributeCounts(bad).wellFormed) << bad;
}

TEST(PlanFormat, AttentionSaysItsLayoutFromFormat17) {
  // Format 17 gives the fused attention a fourth flag, bshd (operands
  // [..., T, H, E]); an older plan's three flags are read as head-major,
  // as they were meant, and the counts of each format are enforced.
  auto attention = [](unsigned version, std::vector<int64_t> q, std::vector<int64_t> out,
                      std::vector<int64_t> stats, std::initializer_list<int64_t> ints) {
    PlanBuilder b(1, 1, 1);
    uint32_t qb = b.f32(q), result = b.f32(out), st = b.f32(stats);
    b.instr(Prologue, "nn.attention", {qb, qb, qb}, {result, st}, ints, {0.5, 0.0});
    TempDir dir;
    b.write(dir.path());
    editPlan(dir.path(), [&](plan::Plan &p) {
      currentFormat(p);
      p.set_format_version(version);
    });
    return loadError(dir.path());
  };
  // Heads 2, T 3, E 4.
  EXPECT_EQ(attention(16, {2, 3, 4}, {2, 3, 4}, {2, 3, 2}, {0, 1, 0}), "no error");
  EXPECT_EQ(attention(17, {2, 3, 4}, {2, 3, 4}, {2, 3, 2}, {0, 1, 0, 0}), "no error");
  EXPECT_EQ(attention(17, {3, 2, 4}, {3, 2, 4}, {2, 3, 2}, {0, 1, 0, 1}), "no error");
  EXPECT_THAT(attention(17, {2, 3, 4}, {2, 3, 4}, {2, 3, 2}, {0, 1, 0}),
              HasSubstr("has 3 integer attributes; expected 4 (scale_divides, causal, "
                        "rng_stream, bshd) or 7"));
  EXPECT_THAT(attention(16, {2, 3, 4}, {2, 3, 4}, {2, 3, 2}, {0, 1, 0, 0}),
              HasSubstr("has 5 integer attributes"));
  // bshd's stats are head-major: [H, T, 2] of a [T, H, E] query.
  EXPECT_THAT(attention(17, {3, 2, 4}, {3, 2, 4}, {3, 2, 2}, {0, 1, 0, 1}),
              HasSubstr("[2,3,2]"));
  EXPECT_THAT(attention(17, {3, 4}, {3, 4}, {3, 2}, {0, 1, 0, 1}), HasSubstr("query"));
  EXPECT_THAT(attention(17, {3, 2, 4}, {3, 2, 4}, {2, 3, 2}, {0, 1, 0, 2}), HasSubstr("bshd"));
}

TEST(PlanFormat, AccumulateWidensSixteenBitValuesIntoFloatSums) {
  // Format 17: fuse-optimizer yields a bf16 / fp16 gradient for an f32
  // sum, which `accumulate` widens as it adds; nothing else mixes types.
  auto accumulate = [](plan::DType in, plan::DType out) {
    PlanBuilder b(1, 1, 1);
    uint32_t x = b.buffer("", in, {4}, plan::ACTIVATION);
    uint32_t sum = b.buffer("", out, {4}, plan::ACTIVATION);
    b.instr(MicroBatch, "accumulate", {x}, {sum});
    TempDir dir;
    b.write(dir.path());
    editPlan(dir.path(), [](plan::Plan &p) { currentFormat(p); });
    return loadError(dir.path());
  };
  EXPECT_EQ(accumulate(plan::BF16, plan::F32), "no error");
  EXPECT_EQ(accumulate(plan::F16, plan::F32), "no error");
  EXPECT_EQ(accumulate(plan::BF16, plan::BF16), "no error");
  EXPECT_THAT(accumulate(plan::F32, plan::BF16), HasSubstr("accumulate"));
  EXPECT_THAT(accumulate(plan::BF16, plan::F16), HasSubstr("accumulate"));
}

TEST(PlanFormat, TheLrScheduleIsPlanData) {
  // train.lr_schedule computes the plan's schedule (format 3), whatever the
  // baked config says (here nothing: no scheduler, lr 1e-3); a format-2
  // plan's is its config's. A format-3 plan without one is refused.
  PlanBuilder b(1, 1, 1);
  b.instr(Prologue, "train.lr_schedule", {b.kStep}, {b.kLr});
  TempDir dir;
  b.write(dir.path());
  auto lrAtStep3 = [&](unsigned version) {
    editPlan(dir.path(), [&](plan::Plan &p) {
      p.set_format_version(version);
      plan::LrSchedule &l = *p.mutable_lr_schedule();
      l.set_type("WarmupLR");
      l.set_lr(0.5);
      l.set_warmup_type("linear");
      (*l.mutable_params())["warmup_min_lr"] = 0.0;
      (*l.mutable_params())["warmup_max_lr"] = 1.0;
      (*l.mutable_params())["warmup_num_steps"] = 10;
    });
    Executor exec(dir.path());
    exec.initialize(dir.path() + "/weights.safetensors", 0);
    for (int64_t s = 1; s <= 3; ++s)
      exec.step(s, [](int64_t) {});
    return exec.lr();
  };
  EXPECT_FLOAT_EQ(lrAtStep3(3), 0.1f); // update 2 of a linear warmup over 10
  EXPECT_FLOAT_EQ(lrAtStep3(2), 1e-3f);
  editPlan(dir.path(), [](plan::Plan &p) {
    p.set_format_version(3);
    p.clear_lr_schedule();
  });
  EXPECT_THAT(loadError(dir.path()), HasSubstr("a format-3 plan has no lr_schedule"));
}

TEST(PlanFormat, StepClassesRunOnTheirClassesOnly) {
  // Format 7: an instruction of step classes runs on the steps whose class
  // (by Plan.step_rule, 0/1 Adam's policy) is one of its bits. Here w +=
  // 1 on variance steps only: with var_freeze_step 8 and var_update_scaler
  // 2, steps 2-4, 6 and 8 of the first 10 (step 1 initialises, 5, 7 and 9
  // compress the gradient, 10 is the first local step).
  PlanBuilder b(1, 1, 1);
  uint32_t w = b.buffer("w", plan::F32, {1}, plan::PARAM);
  uint32_t one = b.buffer("one", plan::F32, {1}, plan::FROZEN);
  b.weight("w", {1}, {0});
  b.weight("one", {1}, {1});
  b.instr(Epilogue, "nn.add", {w, one}, {w});
  TempDir dir;
  b.write(dir.path());
  auto rule = [](plan::Plan &p) {
    currentFormat(p);
    p.mutable_lr_schedule()->set_lr(0.125);
    plan::StepRule &r = *p.mutable_step_rule();
    r.set_var_freeze_step(8);
    r.set_var_update_scaler(2);
    r.set_local_step_scaler(2);
    r.set_local_step_clipper(4);
  };
  editPlan(dir.path(), [&](plan::Plan &p) {
    rule(p);
    p.mutable_program()->mutable_epilogue(0)->set_step_classes(kStepVariance);
  });
  {
    Executor exec(dir.path());
    exec.initialize(dir.path() + "/weights.safetensors", 0);
    for (int64_t s = 1; s <= 10; ++s)
      exec.step(s, [](int64_t) {});
    float got = 0;
    for (Tensor *t : exec.stateTensors())
      if (t->name == "w")
        got = *t->f32();
    EXPECT_EQ(got, 5.0f);
  }
  editPlan(dir.path(), [&](plan::Plan &p) { p.set_format_version(6); });
  EXPECT_THAT(loadError(dir.path()),
              HasSubstr("runs on step classes 2, which a format-6 plan cannot say (format 7 "
                        "and later)"));
  editPlan(dir.path(), [&](plan::Plan &p) {
    currentFormat(p);
    p.clear_step_rule();
  });
  EXPECT_THAT(loadError(dir.path()),
              HasSubstr("runs on step classes, but the plan has no step_rule"));
  editPlan(dir.path(), [&](plan::Plan &p) {
    rule(p);
    p.mutable_program()->mutable_epilogue(0)->set_step_classes(64);
  });
  EXPECT_THAT(loadError(dir.path()), HasSubstr("step classes 64 are no mask of the classes"));
  editPlan(dir.path(), [&](plan::Plan &p) {
    p.mutable_program()->mutable_epilogue(0)->set_step_classes(kStepVariance);
    p.mutable_step_rule()->set_local_step_clipper(0);
  });
  EXPECT_THAT(loadError(dir.path()), HasSubstr("local_step_clipper 0, step_offset 0} is out of "
                                               "range"));
}

TEST(PlanFormat, TheSettingsAreTypedPlanData) {
  // Format 9: dsrt reads the typed settings and never the recorded
  // ds_config; a format-8 plan's settings are its record's.
  TempDir dir;
  smallPlan().write(dir.path());
  config::TrainConfig recorded = config::defaultConfig();
  recorded.stepsPerPrint = 7;
  recorded.csvMonitor.enabled = true;
  editPlan(dir.path(), [&](plan::Plan &p) {
    currentFormat(p);
    p.set_ds_config(config::toJson(recorded));
  });
  {
    Executor exec(dir.path());
    EXPECT_EQ(exec.settings().stepsPerPrint, 0);
    EXPECT_FALSE(exec.settings().csvMonitor.enabled);
  }
  editPlan(dir.path(), [&](plan::Plan &p) { p.clear_ds_config(); });
  EXPECT_EQ(loadError(dir.path()), "no error");
  editPlan(dir.path(), [&](plan::Plan &p) {
    p.set_format_version(8);
    p.set_ds_config(config::toJson(recorded));
  });
  {
    Executor exec(dir.path());
    EXPECT_EQ(exec.settings().stepsPerPrint, 7);
    EXPECT_TRUE(exec.settings().csvMonitor.enabled);
    EXPECT_EQ(exec.settings().compiled, config::planSettingsOf(recorded).compiled);
  }
  // What a hand-made or damaged format-9 plan may not say.
  auto typedError = [&](auto &&edit) {
    editPlan(dir.path(), [&](plan::Plan &p) {
      currentFormat(p);
      edit(p);
    });
    return loadError(dir.path());
  };
  EXPECT_THAT(typedError([](plan::Plan &p) { p.clear_run_settings(); }),
              HasSubstr("a format-" + std::to_string(kPlanFormatVersion) + " plan has no run_settings"));
  EXPECT_THAT(typedError([](plan::Plan &p) { p.mutable_compiled_settings()->erase("zero"); }),
              HasSubstr("compiled_settings has no 'zero' digest"));
  EXPECT_THAT(typedError([](plan::Plan &p) { p.set_precision(plan::Precision(7)); }),
              HasSubstr("precision 7 is not one this dsrt knows"));
  EXPECT_THAT(typedError([](plan::Plan &p) { p.set_precision(plan::PRECISION_FP16); }),
              HasSubstr("an fp16 plan has no loss_scaler"));
  EXPECT_THAT(typedError([](plan::Plan &p) {
                p.mutable_run_settings()->mutable_flops_profiler()->set_profile_step(0);
              }),
              HasSubstr("run_settings.flops_profiler.profile_step 0 must lie in [1, "));
  EXPECT_THAT(typedError([](plan::Plan &p) {
                p.mutable_run_settings()->mutable_tensorboard()->set_job_name("../elsewhere");
              }),
              HasSubstr("run_settings.tensorboard.job_name '../elsewhere' leaves its "
                        "output_path"));
}

TEST(PlanFormat, RunTimeConfigsDifferOnlyInRunTimeSettings) {
  // dsrt --config: the compiled-in groups compare by digest; the run-time
  // settings may differ.
  config::TrainConfig base = config::defaultConfig();
  config::PlanSettings plan = config::planSettingsOf(base);
  auto differing = [&](auto &&edit) {
    config::TrainConfig given = base;
    edit(given);
    return config::firstDifferingGroup(plan, config::planSettingsOf(given));
  };
  EXPECT_EQ(differing([](config::TrainConfig &c) {
              c.stepsPerPrint = 5;
              c.tensorboard.enabled = true;
              c.scheduler.type = "WarmupLR";
              c.scheduler.params = {{"warmup_min_lr", 0}, {"warmup_max_lr", 1e-3},
                                    {"warmup_num_steps", 10}};
              c.scheduler.warmupType = "linear";
            }),
            "");
  EXPECT_EQ(differing([](config::TrainConfig &c) { c.optimizer.lr = 0.5; }),
            "the optimizer settings");
  EXPECT_EQ(differing([](config::TrainConfig &c) { c.aio.queueDepth = 16; }),
            "the zero_optimization / aio settings");
  EXPECT_EQ(differing([](config::TrainConfig &c) { c.precision.fp16.hysteresis = 3; }),
            "the bf16 / fp16 / data_types / communication_data_type settings");
  // Spelled differently, the same: overlap_comm written as its default.
  EXPECT_EQ(differing([](config::TrainConfig &c) { c.zero.overlapCommSetting = false; }), "");
}

TEST(PlanFormat, OnlyOptimizersWithBetasCycleThem) {
  // OneCycle's cycle_momentum acts on optimizers with betas (DeepSpeed
  // turns it off for the others): the plan says whether the betas cycle.
  auto cycles = [](const std::string &optimizer) {
    config::TrainConfig c = config::parseDsConfig(
        R"({"train_batch_size": 1, "optimizer": {"type": ")" + optimizer +
        R"("}, "scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0.001,
            "cycle_max_lr": 0.01, "cycle_first_step_size": 4, "cycle_momentum": true}}})");
    return config::planSettingsOf(c).scheduler.cycleMomentum;
  };
  EXPECT_TRUE(cycles("AdamW"));
  EXPECT_TRUE(cycles("Lamb"));
  EXPECT_FALSE(cycles("SGD"));
  EXPECT_FALSE(cycles("Adagrad"));
}

//===--- sizes ------------------------------------------------------------===//

TEST(PlanSizes, ArenaNearTwoTo64) {
  // The arena's size rounded up to 64 bytes wrapped to 0: a tiny allocation
  // that initialize() then zeroed for 2^64 bytes.
  TempDir dir;
  smallPlan().write(dir.path());
  editPlan(dir.path(), [](plan::Plan &p) { p.set_arena_bytes(UINT64_MAX - 7); });
  EXPECT_THAT(loadError(dir.path()),
              HasSubstr("plan.pb: arena of 18446744073709551608 bytes, more than the "
                        "1125899906842624 a plan may have"));
}

TEST(PlanSizes, ArenaBeyondTheMachine) {
  // Allowed by the plan format, not by this machine: refused before it is
  // allocated and touched.
  TempDir dir;
  smallPlan().write(dir.path());
  editPlan(dir.path(), [](plan::Plan &p) { p.set_arena_bytes(uint64_t(1) << 49); });
  Executor exec(dir.path());
  EXPECT_THAT(DSRT_ERROR_OF(PlanError, exec.initialize(dir.path() + "/weights.safetensors", 0)),
              HasSubstr("bytes of memory and swap"));
}

TEST(PlanSizes, ZeroDimensionHidesNothing) {
  // [0, 2^40, 2^40] has no elements, but kernels multiply its other
  // dimensions (2^80).
  PlanBuilder p = smallPlan();
  uint32_t b = p.f32({1});
  p.at(b).clear_shape();
  for (int64_t d : {int64_t(0), int64_t(1) << 40, int64_t(1) << 40})
    p.at(b).add_shape(d);
  TempDir dir;
  p.write(dir.path());
  EXPECT_THAT(loadError(dir.path()), HasSubstr("bad shape dimension 1099511627776"));
}

TEST(PlanSizes, IndexBound) {
  for (auto [dtype, bound, role] : {std::tuple{plan::I64, int64_t(-1), plan::INPUT},
                                    std::tuple{plan::F32, int64_t(10), plan::INPUT},
                                    std::tuple{plan::I64, int64_t(10), plan::ACTIVATION}}) {
    PlanBuilder p = smallPlan();
    uint32_t x = p.buffer(role == plan::INPUT ? "x" : "", dtype, {1}, role);
    p.at(x).set_index_bound(bound);
    TempDir dir;
    p.write(dir.path());
    EXPECT_THAT(loadError(dir.path()),
                HasSubstr("index_bound " + std::to_string(bound) + " (only integer INPUT"));
  }
}

//===--- loop counts ------------------------------------------------------===//

TEST(PlanCounts, MicroBatches) {
  // 2^62 micro-batches ran for ever.
  for (int64_t m : {int64_t(0), kMaxMicroBatches + 1, int64_t(1) << 62}) {
    TempDir dir;
    smallPlan().write(dir.path());
    editPlan(dir.path(), [&](plan::Plan &p) { p.mutable_program()->set_micro_batches(m); });
    EXPECT_THAT(loadError(dir.path()), HasSubstr("micro_batches " + std::to_string(m) +
                                                 " must lie in [1, 1048576]"));
  }
}

TEST(PlanCounts, DataParallelRanks) {
  // dp = 2^31 became int -2^31, and then a plan for one rank.
  TempDir dir;
  smallPlan().write(dir.path());
  editPlan(dir.path(), [](plan::Plan &p) { p.set_dp(1u << 31); });
  EXPECT_THAT(loadError(dir.path()),
              HasSubstr("dp=2147483648 exceeds the 65536 ranks a plan may have"));
}

TEST(PlanCounts, PipelineRanksAndMicroBatches) {
  auto pipelineError = [](auto &&edit) {
    PipelineStages st = pipelinePlan(1, 2, 3);
    TempDir dir;
    st.write(dir.path(), 2);
    editPlan(dir.path(), edit);
    return loadError(dir.path());
  };
  EXPECT_THAT(pipelineError([](plan::Plan &p) { p.set_dp(1u << 31); }),
              HasSubstr("pp=2 x dp=2147483648 exceeds the 65536 ranks"));
  EXPECT_THAT(pipelineError([](plan::Plan &p) { p.set_pp(1u << 31); }),
              HasSubstr("pp=2147483648 x dp=1 exceeds the 65536 ranks"));
  EXPECT_THAT(pipelineError([](plan::Plan &p) { p.set_dp(40000); }),
              HasSubstr("pp=2 x dp=40000 exceeds the 65536 ranks"));
  EXPECT_THAT(pipelineError([](plan::Plan &p) {
                p.set_dp(0);
                p.mutable_stages(1)->set_dp(1u << 31);
              }),
              HasSubstr("stage 1 is compiled for dp=2147483648, the pipeline for dp=1"));
  EXPECT_THAT(pipelineError([](plan::Plan &p) { p.set_pipeline_micro_batches(int64_t(1) << 62); }),
              HasSubstr("pipeline_micro_batches 4611686018427387904 must lie in [1, 1048576]"));
}

TEST(PlanCounts, OneLoadBatchPerMicroBatch) {
  {
    // Stage 0 loads micro-batches 0 and 1 of a step of 3.
    PipelineStages st = pipelinePlan(1, 2, 3);
    TempDir dir;
    st.write(dir.path(), 3);
    FakeCommunicator world(2, 0, {1, 2});
    EXPECT_THAT(loadError(dir.path(), &world),
                HasSubstr("(stage 0): no load_batch loads micro-batch 2; a stage that loads data "
                          "loads each of the step's 3 micro-batches once"));
  }
  {
    // Micro-batch 1 loaded twice.
    PipelineStages st = pipelinePlan(1, 2, 3);
    const plan::Instr *second = nullptr;
    for (const plan::Instr &i : st.stage(0).proto().program().prologue())
      if (i.op() == "load_batch" && i.ints(0) == 1)
        second = &i;
    ASSERT_TRUE(second);
    uint32_t x1 = second->outputs(0);
    st.stage(0).instr(Prologue, "load_batch", {}, {x1}, {1});
    int n = st.stage(0).proto().program().prologue_size();
    TempDir dir;
    st.write(dir.path(), 2);
    FakeCommunicator world(2, 0, {1, 2});
    EXPECT_THAT(loadError(dir.path(), &world),
                HasSubstr("instruction " + std::to_string(n - 1) +
                          " of the prologue (load_batch) loads micro-batch 1 again"));
  }
}

//===--- ops: shapes, dtypes, attributes ----------------------------------===//

/// The load-time error of one instruction, or "no error".
std::string bindError(const std::string &op, std::vector<Tensor *> in, std::vector<Tensor *> out,
                      std::vector<int64_t> ints = {}, std::vector<double> floats = {}) {
  Instr i = makeInstr(op, std::move(in), std::move(out), std::move(ints), std::move(floats));
  try {
    bindInstr(i, "test");
  } catch (const PlanError &e) {
    return e.what();
  }
  return "no error";
}

/// Binds and runs one instruction; returns the context it ran in.
Context run(const std::string &op, std::vector<Tensor *> in, std::vector<Tensor *> out,
            std::vector<int64_t> ints = {}, std::vector<double> floats = {}) {
  Instr i = makeInstr(op, std::move(in), std::move(out), std::move(ints), std::move(floats));
  bindInstr(i, "test");
  Context ctx;
  i.run(i, ctx);
  return ctx;
}

TEST(OpChecks, MatmulBatchDimensions) {
  // B's 2 batches were read as 5: out of bounds.
  Buf a({5, 3, 4}), b({2, 4, 6}), o({5, 3, 6});
  EXPECT_EQ(bindError("nn.matmul", {&a, &b}, {&o}, {0, 0}),
            "test: batch dimensions of [5,3,4] x [2,4,6] -> [5,3,6] do not broadcast to the "
            "result's");
  Buf o4({1, 5, 3, 6}), w({4, 6}), one({1, 4, 6}), o53({5, 3, 6});
  EXPECT_THAT(bindError("nn.matmul", {&a, &w}, {&o4}, {0, 0}), HasSubstr("do not broadcast"));
  EXPECT_EQ(bindError("nn.matmul", {&a, &w}, {&o53}, {0, 0}), "no error");
  EXPECT_EQ(bindError("nn.matmul", {&a, &one}, {&o53}, {0, 0}), "no error");
  EXPECT_EQ(bindError("nn.matmul", {&a, &w}, {&o53}, {0, 2}),
            "test: transpose_rhs must be 0 or 1, is 2");
}

TEST(OpChecks, MatmulEpilogueOperands) {
  Buf a({2, 3}), b({3, 4}), bias({4}), addend({2, 4}), o({2, 4}), wrongBias({2}),
      wrongAddend({4, 2}), half({4}, plan::BF16);
  EXPECT_EQ(bindError("nn.matmul_epilogue", {&a, &b, &bias, &addend}, {&o}, {0, 0, 1, 1}),
            "no error");
  EXPECT_EQ(bindError("nn.matmul_epilogue", {&a, &b, &addend}, {&o}, {0, 0, 0, 1}), "no error");
  EXPECT_EQ(bindError("nn.matmul_epilogue", {&a, &b}, {&o}, {0, 0, 0, 0}),
            "test: has neither a bias, a scale, an addend nor column sums");
  // Format 21's column sums: a second output, a vector of the N columns.
  Buf sums({4}), wrongSums({2}), halfSums({4}, plan::BF16), third({4});
  EXPECT_EQ(bindError("nn.matmul_epilogue", {&a, &b}, {&o, &sums}, {0, 0, 0, 0}), "no error");
  EXPECT_EQ(bindError("nn.matmul_epilogue", {&a, &b, &bias}, {&o, &sums}, {0, 0, 1, 0}),
            "no error");
  EXPECT_EQ(bindError("nn.matmul_epilogue", {&a, &b}, {&o, &wrongSums}, {0, 0, 0, 0}),
            "test: column sums [2] must be a vector of the 4 columns");
  EXPECT_EQ(bindError("nn.matmul_epilogue", {&a, &b}, {&o, &halfSums}, {0, 0, 0, 0}),
            "test: column sums must be F32, is BF16");
  EXPECT_THAT(bindError("nn.matmul_epilogue", {&a, &b, &bias}, {&o, &sums, &third}, {0, 0, 1, 0}),
              HasSubstr("expects 3 inputs and 1 outputs"));
  // Format 20's scale: between the bias and the addend, the result's shape.
  Buf scale({2, 4}), wrongScale({2, 3});
  EXPECT_EQ(bindError("nn.matmul_epilogue", {&a, &b, &bias, &scale, &addend}, {&o},
                      {0, 0, 1, 1, 1}),
            "no error");
  EXPECT_EQ(bindError("nn.matmul_epilogue", {&a, &b, &scale}, {&o}, {0, 0, 0, 0, 1}), "no error");
  EXPECT_THAT(bindError("nn.matmul_epilogue", {&a, &b, &wrongScale}, {&o}, {0, 0, 0, 0, 1}),
              HasSubstr("[2,3]"));
  EXPECT_EQ(bindError("nn.matmul_epilogue", {&a, &b, &scale}, {&o}, {0, 0, 0, 0, 2}),
            "test: has_scale must be 0 or 1, is 2");
  EXPECT_THAT(bindError("nn.matmul_epilogue", {&a, &b, &bias}, {&o}, {0, 0, 1, 1}),
              HasSubstr("expects 4 inputs and 1 outputs"));
  EXPECT_EQ(bindError("nn.matmul_epilogue", {&a, &b, &wrongBias}, {&o}, {0, 0, 1, 0}),
            "test: bias [2] must be a vector of the 4 columns");
  EXPECT_THAT(bindError("nn.matmul_epilogue", {&a, &b, &wrongAddend}, {&o}, {0, 0, 0, 1}),
              HasSubstr("[4,2]"));
  EXPECT_EQ(bindError("nn.matmul_epilogue", {&a, &b, &half}, {&o}, {0, 0, 1, 0}),
            "test: bias must be F32, is BF16");
  EXPECT_EQ(bindError("nn.matmul_epilogue", {&a, &b, &bias}, {&o}, {0, 0, 2, 0}),
            "test: has_bias must be 0 or 1, is 2");
}

TEST(OpChecks, ConcatOtherDimensions) {
  // The second input's rows were read past its one row.
  Buf x({2, 3}), y({1, 5}), out({2, 8}), bools({2, 8}, plan::BOOL), s0({}), s1({}), s2({});
  EXPECT_EQ(bindError("nn.concat", {&x, &y}, {&out}, {1}),
            "test: input 1 [1,5] differs from the result [2,8] outside axis 1");
  Buf y2({2, 5});
  EXPECT_EQ(bindError("nn.concat", {&x, &y2}, {&out}, {1}), "no error");
  EXPECT_EQ(bindError("nn.concat", {&x, &y2}, {&bools}, {1}),
            "test: operand must be F32, BF16 or F16, is BOOL");
  // 16-bit results take 16-bit inputs of the same type.
  Buf xb({2, 3}, plan::BF16), yb({2, 5}, plan::BF16), ob({2, 8}, plan::BF16);
  EXPECT_EQ(bindError("nn.concat", {&xb, &yb}, {&ob}, {1}), "no error");
  EXPECT_EQ(bindError("nn.concat", {&x, &yb}, {&ob}, {1}), "test: input must be BF16, is F32");
  EXPECT_THAT(bindError("nn.concat", {&s0, &s1}, {&s2}, {0}), HasSubstr("must have rank >= 1"));
}

TEST(OpChecks, ScalarsTheKernelsReadOrWrite) {
  // Element 0 of an empty buffer at the arena's end lies past it.
  Buf step({}, plan::I64), empty({0}), emptyStep({0}, plan::I64), lr({});
  Buf p({3}), g({3}), m({3}), v({3});
  EXPECT_EQ(bindError("train.lr_schedule", {&step}, {&empty}),
            "test: lr must be a scalar (one element), has shape [0]");
  EXPECT_THAT(bindError("train.adam", {&p, &g, &m, &v, &empty, &step}, {&p, &m, &v}, {1, 1},
                        {0.9, 0.999, 1e-8, 0.0}),
              HasSubstr("lr must be a scalar"));
  EXPECT_THAT(bindError("train.adam", {&p, &g, &m, &v, &lr, &emptyStep}, {&p, &m, &v}, {1, 1},
                        {0.9, 0.999, 1e-8, 0.0}),
              HasSubstr("step must be a scalar"));
  EXPECT_THAT(bindError("train.sgd", {&p, &g, &empty}, {&p}, {0}, {0.0, 0.0, 0.0}),
              HasSubstr("lr must be a scalar"));
  EXPECT_THAT(bindError("train.clip_grad_norm", {&g}, {&g, &empty}, {}, {1.0}),
              HasSubstr("norm must be a scalar"));
}

TEST(OpChecks, DtypesOfEveryOperand) {
  // A bool buffer of n bytes was read or written as n floats.
  Buf x({2, 4}), y({2, 4}), scale({4}), boolBias({4}, plan::BOOL);
  EXPECT_EQ(bindError("nn.layer_norm", {&x, &scale, &boolBias}, {&y}, {1}, {1e-5}),
            "test: operand must be F32, is BOOL");
  Buf p({3}), g({3}), lr({}), boolBuf({3}, plan::BOOL);
  EXPECT_EQ(bindError("train.sgd", {&p, &g, &lr, &boolBuf}, {&p, &boolBuf}, {0}, {0.9, 0.0, 0.0}),
            "test: operand must be F32, is BOOL");
}

TEST(OpChecks, AttributeRanges) {
  Buf x({4}), y({4}), mask({4}, plan::BOOL), p({3}), g({3}), m({3}), v({3}), lr({}),
      step({}, plan::I64);
  EXPECT_EQ(bindError("nn.gelu", {&x}, {&y}, {2}), "test: tanh approximation must be 0 or 1, is 2");
  EXPECT_EQ(bindError("nn.dropout_grad", {&x, &mask}, {&y}, {}, {1.5}),
            "test: ratio 1.5 must lie in [0, 1)");
  EXPECT_EQ(bindError("nn.layer_norm", {&x, &x}, {&y}, {0}, {NAN}),
            "test: epsilon nan must lie in [0, inf)");
  EXPECT_EQ(bindError("train.adam", {&p, &g, &m, &v, &lr, &step}, {&p, &m, &v}, {1, 1},
                      {1.0, 0.999, 1e-8, 0.0}),
            "test: beta1 1 must lie in [0, 1)");
  EXPECT_EQ(bindError("train.adam", {&p, &g, &m, &v, &lr, &step}, {&p, &m, &v}, {1, 1},
                      {0.9, 0.999, 0.0, 0.0}),
            "test: eps must be positive");
  EXPECT_EQ(bindError("train.sgd", {&p, &g, &lr}, {&p}, {0}, {0.5, 0.0, 0.0}),
            "test: a momentum buffer (4 inputs, 2 outputs) is needed exactly when momentum > 0");
  EXPECT_EQ(bindError("train.clip_grad_norm", {&g}, {&g, &lr}, {}, {NAN}),
            "test: max_norm nan must be >= 0");
  Buf labels({4}, plan::I64), loss({}), noClasses({4, 0});
  EXPECT_EQ(bindError("nn.cross_entropy", {&noClasses, &labels}, {&loss}, {2, 0, 0}),
            "test: input [4,0] has no classes (dimension 1 is 0)");
  Buf logits({4, 3});
  EXPECT_EQ(bindError("nn.cross_entropy", {&logits, &labels}, {&loss}, {2, 3, 0}),
            "test: has_ignore_index must be 0 or 1, is 3");
  Buf chunk({2});
  EXPECT_EQ(bindError("dist.all_reduce", {&chunk}, {&chunk}, {int64_t(1) << 40, 0, 1}),
            "test: group size 1099511627776 must lie in [1, 65536]");
}

TEST(OpChecks, AttributeCountsOutsideTheDeclaredLayout) {
  // Each instruction's counts are plan/Instructions.h's, checked before a
  // binder reads an attribute: in a plan on disk...
  TempDir dir;
  smallPlan().write(dir.path());
  editPlan(dir.path(),
           [](plan::Plan &p) { p.mutable_program()->mutable_prologue(0)->add_floats(1.0); });
  EXPECT_THAT(loadError(dir.path()),
              HasSubstr("prologue instruction 0 (fill): expects 0 integer and 1 float "
                        "attributes, has 0 and 2"));
  editPlan(dir.path(), [](plan::Plan &p) {
    p.mutable_program()->mutable_prologue(0)->mutable_floats()->RemoveLast();
    p.mutable_program()->mutable_epilogue(0)->add_ints(0);
  });
  EXPECT_THAT(loadError(dir.path()),
              HasSubstr("epilogue instruction 0 (nn.mul): expects 0 integer and 0 float "
                        "attributes, has 1 and 0"));
  // ... and of one instruction: fixed counts, optional groups, lists sized
  // by the operands (any length, or the one the shapes give).
  Buf a({2, 3}), b({3, 4}), o({2, 4}), x({4}), y({4}), mask({4}, plan::BOOL);
  EXPECT_EQ(bindError("nn.matmul", {&a, &b}, {&o}, {0}),
            "test: expects 2 integer and 0 float attributes, has 1 and 0");
  EXPECT_EQ(bindError("nn.dropout", {&x}, {&y, &mask}, {0, 1}, {0.5}),
            "test: expects 1 or 4 integer and 1 float attributes, has 2 and 1");
  Buf table({5, 3}), idx({2}, plan::I64), rows({2, 3});
  EXPECT_EQ(bindError("nn.gather", {&table, &idx}, {&rows}),
            "test: expects 1 or 2 integer and 0 float attributes, has 0 and 0");
  Buf at({3, 2});
  EXPECT_EQ(bindError("nn.transpose", {&a}, {&at}, {1, 0}, {1.0}),
            "test: expects an operand-dependent number of integer and 0 float attributes, "
            "has 2 and 1");
  // nn.conv over 2 spatial dims: strides[2], pads[4], dilations[2], groups.
  Buf image({1, 1, 4, 4}), weight({1, 1, 3, 3}), result({1, 1, 2, 2});
  EXPECT_EQ(bindError("nn.conv", {&image, &weight}, {&result}, {1, 1, 0, 0, 0, 0, 1, 1}),
            "test: expects 9 integer and 0 float attributes, has 8 and 0");
  EXPECT_EQ(bindError("nn.conv", {&image, &weight}, {&result}, {1, 1, 0, 0, 0, 0, 1, 1, 1}),
            "no error");
}

TEST(OpChecks, ElementCountsOfTwoBuffersDoNotOverflow) {
  // outer 2^30 x 2^20 indices x inner 2^20 = 2^70 wrapped to the 64
  // elements of the result: a write of 2^70 floats.
  Buf data({int64_t(1) << 30, 1, int64_t(1) << 20}), idx({int64_t(1) << 20}, plan::I64),
      out({64});
  EXPECT_THAT(bindError("nn.gather", {&data, &idx}, {&out}, {1}), HasSubstr("is too large"));
}

TEST(OpChecks, SliceBounds) {
  // start + (n - 1) * stride wrapped negative and passed the bound.
  Buf x({10}), y({3}), scalar({}), scalarOut({});
  EXPECT_EQ(bindError("nn.slice", {&x}, {&y}, {1, int64_t(1) << 62}),
            "test: dimension 0 slice is out of bounds");
  EXPECT_EQ(bindError("nn.slice_grad", {&y}, {&x}, {1, int64_t(1) << 62}),
            "test: dimension 0 slice is out of bounds");
  // A scalar has no last dimension to walk.
  EXPECT_THAT(bindError("nn.slice", {&scalar}, {&scalarOut}, {}), HasSubstr("rank >= 1"));
  // One element takes no step: any stride is right.
  Buf x4({4}), one({1});
  for (int k = 0; k < 4; ++k)
    x4.f()[k] = float(k);
  run("nn.slice", {&x4}, {&one}, {2, INT64_MAX});
  EXPECT_EQ(one.f()[0], 2.0f);
}

TEST(OpChecks, EmptyExtentsRunNothing) {
  // Each kernel divided by the zero extent (SIGFPE).
  Buf x({3, 0}), y({3, 0});
  run("nn.softmax", {&x}, {&y}, {1});
  run("nn.log_softmax", {&x}, {&y}, {1});
  run("nn.softmax_grad", {&x, &x}, {&y}, {1});
  Buf s0({0});
  run("nn.layer_norm", {&x, &s0, &s0}, {&y}, {1}, {1e-5});
  // No rows: the scale's gradients are zero.
  Buf dy({0, 3}), xr({0, 3}), gamma({3}), dx({0, 3}), dgamma({3}), dbeta({3});
  for (int k = 0; k < 3; ++k)
    dgamma.f()[k] = dbeta.f()[k] = 7.0f;
  run("nn.layer_norm_grad", {&dy, &xr, &gamma}, {&dx, &dgamma, &dbeta}, {1}, {1e-5});
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(dgamma.f()[k] + dbeta.f()[k], 0.0f);
  // Empty rows: nothing moves, a bad index is still reported.
  Buf table({5, 0}), idx({3}, plan::I64), rows({3, 0});
  idx.i64()[2] = 9;
  EXPECT_EQ(run("nn.gather", {&table, &idx}, {&rows}, {0}).badIndices, 1);
  EXPECT_EQ(run("nn.gather_grad", {&rows, &idx}, {&table}, {0}).badIndices, 1);
}

//===--- files ------------------------------------------------------------===//

TEST(PlanFiles, NotRegularFiles) {
  // Opening a FIFO blocked until a writer came: dsrt hung.
  {
    TempDir dir;
    ASSERT_EQ(::mkfifo(dir.file("plan.pb").c_str(), 0600), 0);
    EXPECT_EQ(loadError(dir.path()), dir.file("plan.pb") + ": not a regular file (a FIFO)");
  }
  {
    TempDir dir;
    ASSERT_EQ(::mkdir(dir.file("plan.pb").c_str(), 0700), 0);
    EXPECT_EQ(loadError(dir.path()), dir.file("plan.pb") + ": not a regular file (a directory)");
  }
  {
    TempDir dir;
    smallPlan().write(dir.path());
    std::remove(dir.file("plan.sha256").c_str());
    ASSERT_EQ(::mkfifo(dir.file("plan.sha256").c_str(), 0600), 0);
    EXPECT_THAT(loadError(dir.path()), HasSubstr("plan.sha256: not a regular file (a FIFO)"));
  }
  {
    TempDir dir;
    smallPlan().write(dir.path());
    std::remove(dir.file("weights.safetensors").c_str());
    ASSERT_EQ(::mkfifo(dir.file("weights.safetensors").c_str(), 0600), 0);
    Executor exec(dir.path());
    EXPECT_EQ(DSRT_ERROR_OF(io::IoError, exec.initialize(dir.file("weights.safetensors"), 0)),
              dir.file("weights.safetensors") + ": not a regular file (a FIFO)");
  }
  // The readers' own open never blocks either.
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  EXPECT_THAT(DSRT_ERROR_OF(io::IoError, io::MappedFile::open(dir.file("fifo"))),
              HasSubstr("not a regular file"));
}

//===--- checksums --------------------------------------------------------===//

TEST(PlanChecksums, Sha256) {
  EXPECT_EQ(io::sha256Hex("abc", 3),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // A file of several slices hashes as its bytes.
  TempDir dir;
  std::string bytes(size_t(20) << 20, '\0');
  for (size_t k = 0; k < bytes.size(); ++k)
    bytes[k] = char(k * 2654435761u >> 13);
  writeBytes(dir.file("big"), bytes);
  EXPECT_EQ(io::sha256File(dir.file("big")), io::sha256Hex(bytes.data(), bytes.size()));
  // The list is sha256sum's format.
  smallPlan().write(dir.path());
  EXPECT_EQ(std::system(("cd '" + dir.path() + "' && sha256sum --quiet -c plan.sha256").c_str()),
            0);
}

TEST(PlanChecksums, FlippedByteInPlan) {
  // lr 0.125 became 0.1328125: it trained without a word.
  TempDir dir;
  smallPlan().write(dir.path());
  std::string bytes = readBytes(dir.file("plan.pb"));
  double lr = 0.125;
  char pattern[sizeof lr];
  std::memcpy(pattern, &lr, sizeof lr);
  size_t at = bytes.find(std::string(pattern, sizeof lr));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 6] ^= 1; // a high mantissa bit
  writeBytes(dir.file("plan.pb"), bytes);
  EXPECT_EQ(loadError(dir.path()),
            dir.file("plan.pb") + ": does not match its checksum in " + dir.path() +
                "/plan.sha256: the file was modified after dsc wrote it (recompile the model with "
                "dsc; to run a plan changed on purpose, record its checksums with: cd " +
                dir.path() + " && sha256sum plan.pb weights.safetensors > plan.sha256)");
  // Recorded on purpose, it runs with the changed value.
  PlanBuilder::writeChecksums(dir.path());
  Executor exec(dir.path());
  exec.initialize(dir.file("weights.safetensors"), 0);
  exec.step(1, [](int64_t) {});
  EXPECT_EQ(exec.lr(), 0.1328125f);
}

TEST(PlanChecksums, FlippedByteInWeights) {
  TempDir dir;
  smallPlan().write(dir.path());
  std::string bytes = readBytes(dir.file("weights.safetensors"));
  bytes[bytes.size() - 1] ^= 1; // w[3]: 4.0f becomes 16.0f
  writeBytes(dir.file("weights.safetensors"), bytes);
  Executor exec(dir.path());
  EXPECT_EQ(DSRT_ERROR_OF(PlanError, exec.initialize(dir.file("weights.safetensors"), 0)),
            dir.file("weights.safetensors") + ": does not match its checksum in " + dir.path() +
                "/plan.sha256: the file was modified after dsc wrote it (recompile the model with "
                "dsc; to run a plan changed on purpose, record its checksums with: cd " +
                dir.path() + " && sha256sum plan.pb weights.safetensors > plan.sha256)");
  // Weights from elsewhere have no checksum to match (the plan's own are
  // the only ones plan.sha256 describes).
  TempDir other;
  writeBytes(other.file("w.safetensors"), bytes);
  Executor again(dir.path());
  again.initialize(other.file("w.safetensors"), 0);
  EXPECT_EQ(again.weights()[0]->f32()[3], 16.0f);
}

TEST(PlanChecksums, MissingOrIncompleteList) {
  TempDir dir;
  smallPlan().write(dir.path());
  std::remove(dir.file("plan.sha256").c_str());
  EXPECT_EQ(loadError(dir.path()),
            dir.file("plan.sha256") + ": cannot open: No such file or directory: dsc writes the "
            "checksums of plan.pb and weights.safetensors there, and dsrt runs only a plan that "
            "matches them (recompile the model with dsc; to run a plan changed on purpose, record "
            "its checksums with: cd " + dir.path() +
            " && sha256sum plan.pb weights.safetensors > plan.sha256)");
  writeBytes(dir.file("plan.sha256"), "not a checksum\n");
  EXPECT_THAT(loadError(dir.path()),
              HasSubstr("plan.sha256: line 1 is not '<64 hex digits>  <file name>'"));
  writeBytes(dir.file("plan.sha256"),
             io::sha256File(dir.file("plan.pb")) + "  plan.pb\n");
  EXPECT_THAT(loadError(dir.path()),
              HasSubstr("plan.sha256: no checksum of weights.safetensors"));
}

TEST(PlanChecksums, WeightsLoadedInOnePass) {
  // Parameters larger than a slice (8 MiB), in another order than the
  // file's, and a ZeRO-like chunk: every byte lands where it belongs.
  PlanBuilder p(1, 1, 1);
  const int64_t big = 3'000'000;
  uint32_t b = p.buffer("b", plan::F32, {3}, plan::PARAM);
  uint32_t a = p.buffer("a", plan::F32, {big}, plan::PARAM);
  std::vector<float> values(static_cast<size_t>(big));
  for (int64_t k = 0; k < big; ++k)
    values[size_t(k)] = float(k % 1000) - 0.5f;
  p.weight("a", {big}, values);
  p.weight("b", {3}, {7, 8, 9});
  p.instr(Prologue, "fill", {}, {p.kLr}, {}, {0.5});
  TempDir dir;
  p.write(dir.path());
  Executor exec(dir.path());
  exec.initialize(dir.file("weights.safetensors"), 0);
  std::vector<const Tensor *> w = exec.weights();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0]->name, "b");
  EXPECT_EQ(std::vector<float>(w[0]->f32(), w[0]->f32() + 3), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(std::memcmp(w[1]->f32(), values.data(), values.size() * sizeof(float)), 0);
  (void)a;
  (void)b;
}

TEST(LossScaling, ClipDividesTheScaleOut) {
  // Gradients of 1024 x loss: the norm and the results are those of the
  // loss, in one multiplication (DeepSpeed's combined_scale).
  Buf g({2}), scale({}), norm({});
  g.f()[0] = 3 * 1024.0f;
  g.f()[1] = 4 * 1024.0f;
  *scale.f() = 1024.0f;
  Context ctx = run("train.clip_grad_norm", {&g, &scale}, {&g, &norm}, {0, 1}, {0.0});
  EXPECT_FALSE(ctx.overflow);
  EXPECT_EQ(*norm.f(), 5.0f);
  EXPECT_EQ(g.f()[0], 3.0f);
  EXPECT_EQ(g.f()[1], 4.0f);
  // Clipping to 1 as well: the unscaled gradients times 1 / (5 + 1e-6).
  g.f()[0] = 3 * 1024.0f;
  g.f()[1] = 4 * 1024.0f;
  run("train.clip_grad_norm", {&g, &scale}, {&g, &norm}, {0, 1}, {1.0});
  EXPECT_EQ(*norm.f(), 5.0f);
  EXPECT_FLOAT_EQ(g.f()[0], 0.6f);
  EXPECT_FLOAT_EQ(g.f()[1], 0.8f);
  // Sharded: the global sum of squares comes before the scale.
  Buf sq({});
  *sq.f() = 25.0f * 1024 * 1024;
  g.f()[0] = 3 * 1024.0f;
  run("train.clip_grad_norm", {&g, &sq, &scale}, {&g, &norm}, {1, 1}, {0.0});
  EXPECT_EQ(*norm.f(), 5.0f);
  EXPECT_EQ(g.f()[0], 3.0f);
}

TEST(LossScaling, OverflowSkipsTheUpdateInsteadOfStopping) {
  Buf g({2}), scale({}), norm({});
  g.f()[0] = INFINITY;
  g.f()[1] = 1.0f;
  *scale.f() = 65536.0f;
  Context ctx = run("train.clip_grad_norm", {&g, &scale}, {&g, &norm}, {0, 1}, {1.0});
  EXPECT_TRUE(ctx.overflow);
  EXPECT_TRUE(std::isinf(*norm.f()));
  EXPECT_EQ(g.f()[1], 1.0f); // left as it was
  // Without a loss scale the same gradients stop the run.
  EXPECT_THROW(run("train.clip_grad_norm", {&g}, {&g, &norm}, {0, 0}, {1.0}), NonFiniteError);
  // The optimizer kernels leave parameters and states alone on overflow.
  Buf p({2}), m({2}), v({2}), lr({}), step({}, plan::I64);
  p.f()[0] = 0.5f;
  *lr.f() = 0.1f;
  *step.i64() = 1;
  Instr adam = makeInstr("train.adam", {&p, &g, &m, &v, &lr, &step}, {&p, &m, &v}, {1, 1},
                         {0.9, 0.999, 1e-8, 0.0});
  bindInstr(adam, "test");
  Context skipped;
  skipped.overflow = true;
  adam.run(adam, skipped);
  EXPECT_EQ(p.f()[0], 0.5f);
  EXPECT_EQ(m.f()[0], 0.0f);
  Instr sgd = makeInstr("train.sgd", {&p, &g, &lr}, {&p}, {0}, {0.0, 0.0, 0.0});
  bindInstr(sgd, "test");
  sgd.run(sgd, skipped);
  EXPECT_EQ(p.f()[0], 0.5f);
}

TEST(FusedOptimizer, ClipCoefIsClipGradNormsDecision) {
  // fp16 gradients of 1024 x loss, one in bf16: the norm of the loss's and
  // the factor clip_grad_norm multiplies by (unscale and clip to 1).
  Buf g({2}), h({1}, plan::BF16), scale({}), norm({}), coef({});
  g.f()[0] = 3 * 1024.0f;
  g.f()[1] = 0.0f;
  static_cast<uint16_t *>(h.data)[0] = 0x4580; // bf16 4096 = 4 x 1024
  *scale.f() = 1024.0f;
  Context ctx = run("train.clip_coef", {&g, &h, &scale}, {&norm, &coef}, {0, 1}, {1.0});
  EXPECT_FALSE(ctx.overflow);
  EXPECT_EQ(*norm.f(), 5.0f);
  EXPECT_EQ(*coef.f(), float(1.0 / (5.0 + 1e-6) / 1024.0));
  EXPECT_EQ(g.f()[0], 3 * 1024.0f); // the gradients are not written
  // Under max_norm: only the unscaling; max_norm 0: never clipped.
  run("train.clip_coef", {&g, &h, &scale}, {&norm, &coef}, {0, 1}, {10.0});
  EXPECT_EQ(*coef.f(), 1.0f / 1024.0f);
  // Sharded: the sum of squares comes before the scale.
  Buf sq({});
  *sq.f() = 100.0f * 1024 * 1024;
  run("train.clip_coef", {&g, &sq, &scale}, {&norm, &coef}, {1, 1}, {0.0});
  EXPECT_EQ(*norm.f(), 10.0f);
  EXPECT_EQ(*coef.f(), 1.0f / 1024.0f);
  // Overflow: the step is skipped, the fused update leaves everything.
  g.f()[1] = INFINITY;
  ctx = run("train.clip_coef", {&g, &scale}, {&norm, &coef}, {0, 1}, {1.0});
  EXPECT_TRUE(ctx.overflow);
  EXPECT_TRUE(std::isinf(*norm.f()));
  Buf p({2}), m({2}), v({2}), lr({}), step({}, plan::I64);
  p.f()[0] = 0.5f;
  *lr.f() = 0.1f;
  *step.i64() = 1;
  Instr adam = makeInstr("train.fused_adam", {&p, &g, &m, &v, &lr, &step, &coef}, {&p, &m, &v},
                         {1, 1, 1}, {0.9, 0.999, 1e-8, 0.0});
  bindInstr(adam, "test");
  adam.run(adam, ctx);
  EXPECT_EQ(p.f()[0], 0.5f);
  EXPECT_EQ(m.f()[0], 0.0f);
  // Without a loss scale a non-finite norm stops the run.
  EXPECT_THROW(run("train.clip_coef", {&g}, {&norm, &coef}, {0, 0}, {1.0}), NonFiniteError);
}

TEST(FusedOptimizer, OperandChecks) {
  Buf p({2}), g({2}, plan::BF16), m({2}), v({2}), lr({}), step({}, plan::I64), coef({});
  Buf half({2}, plan::BF16), other({3}), norm({});
  const std::vector<double> rates = {0.9, 0.999, 1e-8, 0.0};
  EXPECT_EQ(bindError("train.fused_adam", {&p, &g, &m, &v, &lr, &step, &coef}, {&p, &m, &v},
                      {1, 1, 1}, rates),
            "no error");
  EXPECT_THAT(bindError("train.fused_adam", {&p, &g, &m, &v, &lr, &step}, {&p, &m, &v},
                        {1, 1, 1}, rates),
              HasSubstr("expects N params, grads, exp_avgs and exp_avg_sqs, lr, step, coef"));
  EXPECT_THAT(bindError("train.fused_adam", {&half, &g, &m, &v, &lr, &step}, {&half, &m, &v},
                        {1, 1, 0}, rates),
              HasSubstr("parameter and state must be F32, is BF16"));
  EXPECT_THAT(bindError("train.fused_adam", {&p, &other, &m, &v, &lr, &step}, {&p, &m, &v},
                        {1, 1, 0}, rates),
              HasSubstr("shape"));
  // Each result in place of its operand.
  Buf p2({2});
  EXPECT_THAT(bindError("train.fused_adam", {&p, &g, &m, &v, &lr, &step}, {&p2, &m, &v},
                        {1, 1, 0}, rates),
              HasSubstr("in place"));
  // Working copies (format 19): copy_of names each one's parameter, once;
  // a copy is BF16 or F16 of its shape, written in place.
  Buf copy({2}, plan::BF16), copy2({2}, plan::BF16), wide({2});
  EXPECT_EQ(bindError("train.fused_adam", {&p, &g, &m, &v, &lr, &step, &copy},
                      {&p, &m, &v, &copy}, {1, 1, 0, 0}, rates),
            "no error");
  EXPECT_THAT(bindError("train.fused_adam", {&p, &g, &m, &v, &lr, &step, &copy},
                        {&p, &m, &v, &copy}, {1, 1, 0, 1}, rates),
              HasSubstr("copy_of 1 must name one of the 1 parameters, each once"));
  EXPECT_THAT(bindError("train.fused_adam", {&p, &g, &m, &v, &lr, &step, &wide},
                        {&p, &m, &v, &wide}, {1, 1, 0, 0}, rates),
              HasSubstr("the copy of parameter 0 must be BF16 or F16, is F32"));
  EXPECT_THAT(bindError("train.fused_adam", {&p, &g, &m, &v, &lr, &step, &copy},
                        {&p, &m, &v, &copy2}, {1, 1, 0, 0}, rates),
              HasSubstr("in place"));
  EXPECT_THAT(bindError("train.fused_adam", {&p, &g, &m, &v, &lr, &step},
                        {&p, &m, &v, &copy}, {1, 1, 0, 0}, rates),
              HasSubstr("the K working copies copy_of names"));
  EXPECT_EQ(bindError("train.clip_coef", {&g, &half}, {&norm, &coef}, {0, 0}, {1.0}),
            "no error");
  EXPECT_THAT(bindError("train.clip_coef", {&g}, {&norm}, {0, 0}, {1.0}),
              HasSubstr("writes the norm and the factor"));
  EXPECT_THAT(bindError("train.clip_coef", {&g, &other}, {&norm, &coef}, {0, 1}, {1.0}),
              HasSubstr("loss scale must be a scalar"));
}

TEST(LossScaling, ClipOperandChecks) {
  Buf g({2}), scale({}), norm({}), vec({2});
  EXPECT_EQ(bindError("train.clip_grad_norm", {&g}, {&g, &norm}, {0, 1}, {1.0}),
            "test: expects N gradients (sharded: then the global sum of squares; fp16: then the "
            "loss scale), N results and the norm");
  EXPECT_EQ(bindError("train.clip_grad_norm", {&g, &scale}, {&g, &norm}, {0, 2}, {1.0}),
            "test: has_loss_scale must be 0 or 1, is 2");
  EXPECT_EQ(bindError("train.clip_grad_norm", {&g, &scale}, {&g, &norm}, {1}, {1.0}),
            "test: expects 0 or 2 integer and 1 float attributes, has 1 and 1");
  EXPECT_THAT(bindError("train.clip_grad_norm", {&g, &vec}, {&g, &norm}, {0, 1}, {1.0}),
              HasSubstr("loss scale must be a scalar"));
  EXPECT_EQ(bindError("train.clip_grad_norm", {&g, &scale}, {&g, &norm}, {0, 1}, {1.0}),
            "no error");
}

} // namespace
} // namespace dsrt::test
