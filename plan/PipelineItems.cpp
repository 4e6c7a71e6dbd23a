//===- PipelineItems.cpp - a pipeline stage's schedule, item by item ------===//
#include "plan/PipelineItems.h"

#include <map>
#include <utility>
#include <vector>

namespace dsrt {

namespace {
/// 2^26 instructions (some GiB as protobuf messages) and 2^16 slots (the
/// micro-batches in flight on a stage): far above any real stage.
constexpr uint64_t kMaxUnrolledInstructions = uint64_t(1) << 26;
constexpr uint64_t kMaxSlots = uint64_t(1) << 16;
} // namespace

std::string unrollPipeline(dsc::plan::Plan &stage) {
  namespace plan = dsc::plan;
  plan::Program &prog = *stage.mutable_program();
  if (!prog.has_pipeline())
    return "";
  const plan::PipelineSchedule &pipe = prog.pipeline();
  const google::protobuf::RepeatedPtrField<plan::Instr> *lists[] = {
      &pipe.forward(), &pipe.backward(), &pipe.weight()};
  uint64_t slots = pipe.slots();
  if (pipe.items_size() % 3)
    return "the pipeline schedule's items are not (phase, micro-batch, slot) triples";
  if (slots == 0)
    return "the pipeline schedule has no slots";
  const uint64_t n = uint64_t(stage.buffers_size());
  for (int j = 0; j < pipe.items_size(); j += 3) {
    int64_t phase = pipe.items(j), micro = pipe.items(j + 1), slot = pipe.items(j + 2);
    if (phase < 1 || phase > 3 || micro < 0 || slot < 0 || uint64_t(slot) >= slots)
      return "pipeline item " + std::to_string(j / 3) + " (phase " + std::to_string(phase) +
             ", micro-batch " + std::to_string(micro) + ", slot " + std::to_string(slot) +
             ") is outside phases 1-3 or the " + std::to_string(slots) + " slots";
  }
  // A bound before anything is copied: the unrolled step is held in memory.
  uint64_t total = uint64_t(prog.prologue_size()) + uint64_t(prog.epilogue_size());
  for (int j = 0; j < pipe.items_size(); j += 3)
    total += uint64_t(lists[pipe.items(j) - 1]->size());
  if (total > kMaxUnrolledInstructions)
    return "the pipeline schedule unrolls into " + std::to_string(total) +
           " instructions, more than the " + std::to_string(kMaxUnrolledInstructions) +
           " a stage may run";
  if (slots > kMaxSlots)
    return "the pipeline schedule has " + std::to_string(slots) + " slots, more than " +
           std::to_string(kMaxSlots);
  for (const auto *list : lists)
    for (const plan::Instr &i : *list)
      for (const auto *operands : {&i.inputs(), &i.outputs()})
        for (uint32_t b : *operands)
          if (b >= n)
            return "a pipeline instruction (" + i.op() + ") names buffer " + std::to_string(b) +
                   ", which does not exist";
  uint64_t slotted = 0;
  for (const plan::Buffer &b : stage.buffers())
    slotted += b.slotted();
  if (slotted * slots > kMaxUnrolledInstructions)
    return std::to_string(slotted) + " slotted buffers in " + std::to_string(slots) +
           " slots are more copies than a stage may hold";
  // Slot s's copy of each slotted buffer.
  std::vector<std::vector<uint32_t>> copyOf(slots, std::vector<uint32_t>(n));
  for (uint64_t b = 0; b < n; ++b)
    for (uint64_t s = 0; s < slots; ++s)
      copyOf[s][b] = uint32_t(b);
  for (uint64_t b = 0; b < n; ++b) {
    if (!stage.buffers(int(b)).slotted())
      continue;
    for (uint64_t s = 1; s < slots; ++s) {
      plan::Buffer copy = stage.buffers(int(b));
      copy.set_offset(copy.offset() + s * pipe.slot_bytes());
      copyOf[s][b] = uint32_t(stage.buffers_size());
      *stage.add_buffers() = std::move(copy);
    }
  }
  for (uint64_t s = 1; s < slots; ++s)
    for (uint64_t b = 0; b < n; ++b)
      if (copyOf[s][b] != b) {
        plan::Buffer &copy = *stage.mutable_buffers(int(copyOf[s][b]));
        if (copy.has_view_of() && copy.view_of() < n)
          copy.set_view_of(copyOf[s][copy.view_of()]);
      }

  google::protobuf::RepeatedPtrField<plan::Instr> out;
  for (const plan::Instr &i : prog.prologue())
    *out.Add() = i;
  // The waits of the body's sends: each send's handle -> its wait, found
  // in its list after it; moved, not copied in place.
  std::vector<std::map<int64_t, int>> sendWait(3);
  std::vector<std::vector<bool>> moved(3); // per list: a send's wait, emitted elsewhere
  for (int p = 0; p < 3; ++p) {
    std::map<int64_t, int> sending; // handle -> index of the send
    for (int k = 0; k < lists[p]->size(); ++k) {
      const plan::Instr &i = (*lists[p])[k];
      if (i.op() == "dist.send" && i.ints_size() >= 4)
        sending[i.ints(3)] = k;
      else if (i.op() == "dist.wait" && i.ints_size() >= 1 && sending.count(i.ints(0)))
        sendWait[p][i.ints(0)] = k;
    }
    moved[p].assign(size_t(lists[p]->size()), false);
    for (auto &[handle, k] : sendWait[p])
      moved[p][size_t(k)] = true;
  }
  std::map<std::pair<int64_t, int64_t>, plan::Instr> pending; // channel -> its wait
  for (int j = 0; j < pipe.items_size(); j += 3) {
    int p = int(pipe.items(j)) - 1;
    int64_t micro = pipe.items(j + 1), slot = pipe.items(j + 2);
    const std::vector<uint32_t> &remap = copyOf[size_t(slot)];
    for (int k = 0; k < lists[p]->size(); ++k) {
      plan::Instr i = (*lists[p])[k];
      for (int x = 0; x < i.inputs_size(); ++x)
        i.set_inputs(x, remap[i.inputs(x)]);
      for (int x = 0; x < i.outputs_size(); ++x)
        i.set_outputs(x, remap[i.outputs(x)]);
      i.set_micro_batch(micro);
      i.set_phase(uint32_t(p + 1));
      if (i.op() == "load_batch" && i.ints_size() >= 1)
        i.set_ints(0, micro);
      if (moved[p][size_t(k)])
        continue;
      if (i.op() == "dist.send" && sendWait[p].count(i.ints(3))) {
        std::pair<int64_t, int64_t> channel{i.ints(1), i.ints(2)};
        if (auto it = pending.find(channel); it != pending.end()) {
          *out.Add() = it->second;
          pending.erase(it);
        }
        plan::Instr wait = (*lists[p])[sendWait[p][i.ints(3)]];
        wait.set_micro_batch(micro);
        wait.set_phase(uint32_t(p + 1));
        pending[channel] = std::move(wait);
      }
      *out.Add() = std::move(i);
    }
  }
  for (auto &[channel, wait] : pending)
    *out.Add() = std::move(wait);
  for (const plan::Instr &i : prog.epilogue())
    *out.Add() = i;
  prog.mutable_prologue()->Swap(&out);
  prog.clear_epilogue();
  prog.clear_pipeline();
  return "";
}

} // namespace dsrt
