//===- plan_loader.cpp - fuzz dsrt's plan validation and one step ----------===//
//
// Input: a 4-byte little-endian length L, L bytes of plan.pb, then the
// bytes of weights.safetensors. An empty weights part means "matching
// weights": the harness writes a weights file with every PARAM and FROZEN
// buffer the plan declares (float32, its whole shape), so that mutated plans
// reach the step instead of stopping at a missing tensor. plan.sha256 always
// matches the files (what dsc writes; a changed plan is what is fuzzed here,
// not the checksum).
//
// The plan is loaded as dsrt loads it, for one rank: Executor's constructor
// validates it (PlanError), initialize() allocates the arena and reads the
// weights (PlanError, IoError), then one optimizer step runs on inputs the
// harness fills (index inputs include out-of-range ids). The step only runs
// on a tiny plan (arena <= kMaxArena, <= kMaxMicroBatches micro-batches), so
// an input costs milliseconds; validation itself runs on every plan.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/Executor.h"
#include "runtime/kernels/cpu/Kernels.h"
#include "io/FileUtil.h"
#include "io/SafeTensors.h"
#include "test/fuzz/FuzzUtil.h"

#include <nlohmann/json.hpp>

#include <cstring>

#include <sys/stat.h>

namespace plan = dsc::plan;

namespace {
constexpr uint64_t kMaxArena = uint64_t(1) << 20;
constexpr int64_t kMaxMicroBatches = 8;
constexpr int64_t kMaxWeightFloats = int64_t(1) << 20;

/// The bytes of a weights.safetensors with every PARAM and FROZEN buffer of
/// `p`; empty when the plan's names or sizes make that impossible (it then
/// fails on load).
std::string matchingWeights(const plan::Plan &p) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<float> values;
  for (const plan::Buffer &b : p.buffers()) {
    if (b.role() != plan::PARAM && b.role() != plan::FROZEN)
      continue;
    if (header.contains(b.name()))
      continue;
    const auto &dims = b.shard_count() > 1 ? b.full_shape() : b.shape();
    int64_t n = 1;
    for (int64_t d : dims) {
      if (d < 0 || (d > 0 && n > kMaxWeightFloats / d))
        return {};
      n *= d;
    }
    if (int64_t(values.size()) + n > kMaxWeightFloats)
      return {};
    size_t begin = values.size() * 4;
    for (int64_t i = 0; i < n; ++i)
      values.push_back(0.01f * float(int(values.size() % 13) - 6));
    header[b.name()] = {{"dtype", "F32"},
                        {"shape", std::vector<int64_t>(dims.begin(), dims.end())},
                        {"data_offsets", {begin, values.size() * 4}}};
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception &) {
    return {}; // a name that is not UTF-8
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  uint64_t n = text.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes += text;
  bytes.append(reinterpret_cast<const char *>(values.data()), values.size() * 4);
  return bytes;
}

/// What dsrt's loader would put there: index inputs get ids in [0, 3) and
/// now and then -1 or 1000 (out of range: the kernels must count them, not
/// read there), bool inputs mostly false (all-true attention masks are NaN
/// in PyTorch too), float inputs small values.
void fillInputs(const std::vector<dsrt::Tensor *> &inputs, int64_t global) {
  uint64_t state = uint64_t(global) * 0x9e3779b97f4a7c15ull + 1;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 33);
  };
  auto index = [&]() -> int64_t {
    uint32_t r = next() % 64;
    return r == 0 ? -1 : r == 1 ? 1000 : int64_t(r % 3);
  };
  for (dsrt::Tensor *t : inputs) {
    for (int64_t i = 0; i < t->numel; ++i) {
      switch (t->dtype) {
      case plan::F32:
        t->f32()[i] = float(int(next() % 17) - 8) / 8;
        break;
      case plan::F64:
        static_cast<double *>(t->data)[i] = double(int(next() % 17) - 8) / 8;
        break;
      case plan::I64:
        t->i64()[i] = index();
        break;
      case plan::I32:
        static_cast<int32_t *>(t->data)[i] = int32_t(index());
        break;
      case plan::BOOL:
        t->u8()[i] = next() % 4 == 0;
        break;
      default:
        break;
      }
    }
  }
}
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  dsrt::cpu::setNumThreads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4)
    return 0;
  uint32_t planBytes;
  std::memcpy(&planBytes, data, 4);
  planBytes = uint32_t(std::min<size_t>(planBytes, size - 4));
  static const std::string dir = [] {
    std::string d = dsc::fuzz::scratchDir() + "/plan";
    ::mkdir(d.c_str(), 0700);
    return d;
  }();
  std::string planText(reinterpret_cast<const char *>(data) + 4, planBytes);
  std::string weights(reinterpret_cast<const char *>(data) + 4 + planBytes, size - 4 - planBytes);
  if (weights.empty()) {
    plan::Plan p;
    if (p.ParseFromString(planText) && p.arena_bytes() <= kMaxArena)
      weights = matchingWeights(p);
  }
  dsc::fuzz::writeScratch("plan/plan.pb", planText.data(), planText.size());
  std::vector<dsrt::io::FileChecksum> sums = {
      {"plan.pb", dsrt::io::sha256Hex(planText.data(), planText.size())}};
  if (!weights.empty()) {
    dsc::fuzz::writeScratch("plan/weights.safetensors", weights.data(), weights.size());
    sums.push_back({"weights.safetensors", dsrt::io::sha256Hex(weights.data(), weights.size())});
  } else {
    dsc::fuzz::removeScratch("plan/weights.safetensors");
  }
  dsrt::io::writeChecksums(dir, sums);

  try {
    dsrt::Executor ex(dir);
    if (ex.plan().arena_bytes() > kMaxArena || ex.microBatches() > kMaxMicroBatches)
      return 0;
    ex.initialize(dir + "/weights.safetensors", 1);
    ex.step(1, [&](int64_t global) { fillInputs(ex.inputs(), global); });
    volatile float sink = ex.loss() + ex.gradNorm() + ex.lr();
    (void)sink;
    for (const dsrt::WholeTensor &w : ex.gatherWeights()) {
      int64_t n = 1;
      for (int64_t d : w.shape)
        n *= d;
      dsc::fuzz::touch(w.data, size_t(n) * sizeof(float));
    }
  } catch (const dsrt::PlanError &e) {
    dsc::fuzz::note(e.what());
  } catch (const dsrt::NonFiniteError &e) {
    dsc::fuzz::note(e.what()); // a fully masked attention row is NaN in PyTorch too
  } catch (const dsrt::io::IoError &e) {
    dsc::fuzz::note(e.what());
  } catch (const dsrt::config::ConfigError &e) {
    dsc::fuzz::note(e.what());
  } catch (const dsrt::comm::CommError &e) {
    dsc::fuzz::note(e.what());
  } catch (const std::exception &e) {
    if (!dsc::fuzz::lenient())
      dsc::fuzz::foreignException("plan_loader", e);
  }
  return 0;
}
