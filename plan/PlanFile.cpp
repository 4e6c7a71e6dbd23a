//===- PlanFile.cpp - reading plan.pb, checked --------------------------===//
#include "plan/PlanFile.h"
#include "plan/PipelineItems.h"

#include "io/FileUtil.h"
#include "plan/Version.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace dsrt {

namespace plan = dsc::plan;

namespace {

/// The first field of `msg` (or of a message inside it) that this dsrt's
/// plan.proto does not define, as "Plan.program.prologue[3]: field 12";
/// empty when there is none. proto3 keeps unknown fields instead of
/// failing the parse: a plan from a newer dsc would otherwise run with
/// what it says about them ignored.
std::string firstUnknownField(const google::protobuf::Message &msg, const std::string &where) {
  const google::protobuf::Reflection *r = msg.GetReflection();
  const google::protobuf::UnknownFieldSet &unknown = r->GetUnknownFields(msg);
  if (unknown.field_count() > 0)
    return where + ": field " + std::to_string(unknown.field(0).number());
  std::vector<const google::protobuf::FieldDescriptor *> fields;
  r->ListFields(msg, &fields);
  for (const google::protobuf::FieldDescriptor *f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE)
      continue;
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(msg, f); ++i) {
        std::string found = firstUnknownField(r->GetRepeatedMessage(msg, f, i),
                                              where + "." + f->name() + "[" + std::to_string(i) + "]");
        if (!found.empty())
          return found;
      }
    } else {
      std::string found = firstUnknownField(r->GetMessage(msg, f), where + "." + f->name());
      if (!found.empty())
        return found;
    }
  }
  return std::string();
}

/// Checks plan.pb's bytes against plan.sha256 and returns the checksum the
/// list gives weights.safetensors (verified when the weights are read).
std::string verifyPlanChecksum(const std::string &dir, const std::string &path,
                               const std::string &planBytes) {
  std::string list = dir + "/" + io::kChecksumFile;
  std::vector<io::FileChecksum> sums;
  try {
    sums = io::readChecksums(dir);
  } catch (const io::IoError &e) {
    throw PlanError(std::string(e.what()) + ": dsc writes the checksums of plan.pb and "
                    "weights.safetensors there, and dsrt runs only a plan that matches them (" +
                    planChecksumHint(dir) + ")");
  }
  auto sumOf = [&](const char *file) {
    auto it = std::find_if(sums.begin(), sums.end(),
                           [&](const io::FileChecksum &f) { return f.name == file; });
    if (it == sums.end())
      throw PlanError(list + ": no checksum of " + file + " (" + planChecksumHint(dir) + ")");
    return it->sha256;
  };
  if (io::sha256Hex(planBytes.data(), planBytes.size()) != sumOf("plan.pb"))
    throw PlanError(path + ": does not match its checksum in " + list +
                    ": the file was modified after dsc wrote it (" + planChecksumHint(dir) + ")");
  return sumOf("weights.safetensors");
}

} // namespace

std::string planChecksumHint(const std::string &dir) {
  return "recompile the model with dsc; to run a plan changed on purpose, record its checksums "
         "with: cd " + dir + " && sha256sum plan.pb weights.safetensors > " + io::kChecksumFile;
}

PlanFile readPlanFile(const std::string &dir) {
  std::string path = dir + "/plan.pb";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw PlanError(path + ": cannot open (is '" + dir + "' a plan directory written by dsc -o?)");
  try {
    io::requireRegularFile(path);
  } catch (const io::IoError &e) {
    throw PlanError(e.what());
  }
  // Read, not mapped: a plan.pb truncated while it is read must not SIGBUS.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in)
      throw PlanError(path + ": cannot open (is '" + dir +
                      "' a plan directory written by dsc -o?)");
    char chunk[1 << 16];
    while (in.read(chunk, sizeof chunk) || in.gcount()) {
      bytes.append(chunk, size_t(in.gcount()));
      if (bytes.size() > kMaxPlanFileBytes)
        throw PlanError(path + ": more than the " + std::to_string(kMaxPlanFileBytes) +
                        " bytes a plan may have (not a plan?)");
    }
  }
  if (bytes.empty())
    throw PlanError(path + ": empty file, not a plan");
  google::protobuf::SetLogHandler(nullptr); // our error says it instead
  plan::Plan top;
  if (!top.ParseFromString(bytes))
    throw PlanError(path + ": not a valid plan (corrupt or truncated protobuf)");
  unsigned version = top.format_version();
  if (version < kOldestPlanFormatVersion || version > kPlanFormatVersion)
    throw PlanError(path + ": plan format version " + std::to_string(version) +
                    ", this dsrt runs versions " + std::to_string(kOldestPlanFormatVersion) +
                    " to " + std::to_string(kPlanFormatVersion) +
                    (version > kPlanFormatVersion
                         ? " (the plan was written by a newer dsc: run it with the dsrt of "
                           "that release, or recompile the model with this one's dsc)"
                         : " (recompile the model with this release's dsc)"));
  // After the version: a plan of another format may keep its checksums
  // elsewhere.
  PlanFile file;
  file.weightsSha256 = verifyPlanChecksum(dir, path, bytes);
  // After the checksums (a corrupt plan.pb is reported as such): proto3
  // keeps a field it does not know and carries on: a newer dsc's
  // field would be ignored without a word.
  if (std::string unknown = firstUnknownField(top, "Plan"); !unknown.empty())
    throw PlanError(path + ": " + unknown + " is not in this dsrt's plan.proto (format version " +
                    std::to_string(kPlanFormatVersion) + "; the plan says " +
                    std::to_string(version) +
                    "): written by a newer dsc, or not a plan; refusing rather than ignoring it");
  // A format-13 stage's schedule, unrolled once here: the executor reads
  // the step as one list in run order.
  for (int k = 0; k < top.stages_size(); ++k)
    if (std::string bad = unrollPipeline(*top.mutable_stages(k)); !bad.empty())
      throw PlanError(path + ": stage " + std::to_string(k) + ": " + bad);
  if (std::string bad = unrollPipeline(top); !bad.empty())
    throw PlanError(path + ": " + bad);
  file.plan = std::move(top);
  return file;
}

PlanShape planShape(const plan::Plan &top, const std::string &where) {
  // Bounded before any int arithmetic: dp, pp and tp are uint32 in the plan.
  uint64_t pp = std::max<uint32_t>(1, top.pp());
  uint64_t dp = std::max<uint32_t>(
      1, top.dp() || pp == 1 || !top.stages_size() ? top.dp() : top.stages(0).dp());
  uint64_t tp = std::max<uint32_t>(1, top.tp());
  if (pp > uint64_t(kMaxPlanRanks) || dp > uint64_t(kMaxPlanRanks) ||
      tp > uint64_t(kMaxPlanRanks) || pp * dp * tp > uint64_t(kMaxPlanRanks))
    throw PlanError(where + ": " + (pp > 1 ? "pp=" + std::to_string(pp) + " x " : std::string()) +
                    "dp=" + std::to_string(dp) +
                    (tp > 1 ? " x tp=" + std::to_string(tp) : std::string()) + " exceeds the " +
                    std::to_string(kMaxPlanRanks) + " ranks a plan may have");
  return {uint32_t(dp), uint32_t(pp), uint32_t(tp)};
}

} // namespace dsrt
