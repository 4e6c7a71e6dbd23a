//===- Hardware.cpp - reading a hardware file ------------------------------===//
#include "target/sim/Hardware.h"

#include "config/Section.h"
#include "plan/Instructions.h"

#include <filesystem>
#include <algorithm>
#include <fstream>
#include <sstream>

namespace dsc::sim {

using dsrt::config::detail::json;
using dsrt::config::detail::Section;

namespace {

constexpr double kTera = 1e12, kGiga = 1e9, kMicro = 1e-6;

/// A positive number (a rate or a count that divides).
double positive(const Section &s, const std::string &key) {
  std::optional<double> v = s.number(key);
  if (!v)
    s.fail("'" + s.path(key) + "' is missing");
  if (!(*v > 0))
    s.fail("'" + s.path(key) + "' must be positive, got " +
           dsrt::config::detail::formatNumber(*v));
  return *v;
}

double nonNegative(const Section &s, const std::string &key) {
  std::optional<double> v = s.number(key);
  if (!v)
    s.fail("'" + s.path(key) + "' is missing");
  if (!(*v >= 0))
    s.fail("'" + s.path(key) + "' must not be negative, got " +
           dsrt::config::detail::formatNumber(*v));
  return *v;
}

Rate readRate(const Section &top, const std::string &key, const std::string &rateKey,
              double unit) {
  Section s = top.object(key);
  s.checkKeys({rateKey, "latency_us"});
  return Rate{positive(s, rateKey) * unit, nonNegative(s, "latency_us") * kMicro};
}

Link readLink(const Section &top, const std::string &key) {
  Section s = top.object(key);
  const std::vector<std::string> collectives = {"all_reduce", "all_gather", "send"};
  std::vector<std::string> keys = {"bus_gbps", "latency_us", "all_reduce", "all_gather", "send"};
  if (key == "inter_node")
    keys.push_back("aggregate");
  s.checkKeys(keys);
  Link l;
  if (std::optional<bool> a = s.boolean("aggregate"))
    l.aggregate = *a;
  l.busBandwidth = positive(s, "bus_gbps") * kGiga;
  l.latency = nonNegative(s, "latency_us") * kMicro;
  for (const std::string &c : collectives)
    if (s.has(c)) {
      Rate r = readRate(s, c, "bus_gbps", kGiga);
      l.byCollective[c] = {r.rate, r.latency};
    }
  return l;
}

const std::vector<std::string> kDtypes = {"f32", "bf16", "f16"};

} // namespace

std::pair<double, double> Link::of(const std::string &op) const {
  std::string c = op.substr(op.find('.') + 1);
  if (c == "reduce_scatter")
    c = "all_reduce";
  else if (c == "all_to_all")
    c = "all_gather";
  else if (c == "recv")
    c = "send";
  auto it = byCollective.find(c);
  return it != byCollective.end() ? it->second : std::make_pair(busBandwidth, latency);
}

namespace {
/// The entry of `dtype`; f16 falls back to bf16's and the other way
/// round, then to f32's (which every file has).
template <typename T>
const T &byDtype(const std::map<std::string, T> &m, const std::string &dtype) {
  if (auto it = m.find(dtype); it != m.end())
    return it->second;
  const char *other = dtype == "f16" ? "bf16" : dtype == "bf16" ? "f16" : nullptr;
  if (auto it = other ? m.find(other) : m.end(); it != m.end())
    return it->second;
  return m.at("f32");
}
} // namespace

const Rate &Hardware::gemmRate(const std::string &dtype) const { return byDtype(gemm, dtype); }

double Hardware::peak(const std::string &dtype) const { return byDtype(peakFlops, dtype); }

Hardware parseHardware(const std::string &text, const std::string &source) {
  try {
    json root = dsrt::config::detail::parseStrict(text, source);
    if (!root.is_object())
      throw HardwareError(source + ": a hardware file is a JSON object");
    Section top(source, root, "");
    top.checkKeys({"name", "source", "devices_per_node", "cores", "thread_efficiency",
                   "peak_tflops", "gemm", "memory", "cache", "vector_tflops", "elementwise_ns", "instruction_us",
                   "intra_node", "inter_node", "host_gbps", "nvme_gbps",
                   "comm_overlaps_compute"});
    Hardware hw;
    hw.name = top.string("name").value_or("");
    if (hw.name.empty())
      top.fail("'name' is missing: say which machine the figures describe");
    hw.source = top.string("source").value_or("");
    hw.devicesPerNode = int(top.count("devices_per_node", 0, 1 << 20).value_or(-1));
    if (hw.devicesPerNode < 0)
      top.fail("'devices_per_node' is missing (0: every rank on one node)");
    hw.cores = int(top.count("cores", 0, 1 << 20).value_or(0));
    if (top.has("thread_efficiency")) {
      if (!hw.isCpu())
        top.fail("'thread_efficiency' applies to a CPU node: give 'cores' too, or drop it");
      Section e = top.object("thread_efficiency");
      const std::vector<std::string> classes = {"gemm", "memory", "elementwise"};
      e.checkKeys(classes);
      for (const std::string &c : classes)
        if (e.has(c))
          hw.threadEfficiency[c] = positive(e, c);
    }

    Section peaks = top.object("peak_tflops");
    peaks.checkKeys(kDtypes);
    for (const std::string &d : kDtypes)
      if (peaks.has(d))
        hw.peakFlops[d] = positive(peaks, d) * kTera;
    if (!hw.peakFlops.count("f32"))
      peaks.fail("'peak_tflops.f32' is missing");

    Section gemm = top.object("gemm");
    gemm.checkKeys(kDtypes);
    for (const std::string &d : kDtypes)
      if (gemm.has(d))
        hw.gemm[d] = readRate(gemm, d, "tflops", kTera);
    if (!hw.gemm.count("f32"))
      gemm.fail("'gemm.f32' is missing");

    hw.memory = readRate(top, "memory", "gbps", kGiga);
    if (top.has("cache")) {
      Section c = top.object("cache");
      c.checkKeys({"bytes", "gbps", "latency_us"});
      hw.cacheBytes = positive(c, "bytes");
      hw.cache = Rate{positive(c, "gbps") * kGiga, nonNegative(c, "latency_us") * kMicro};
    }
    hw.vectorFlops = positive(top, "vector_tflops") * kTera;
    if (top.has("elementwise_ns")) {
      Section e = top.object("elementwise_ns");
      std::vector<std::string> names;
      for (const dsrt::InstructionLayout &l : dsrt::kInstructionLayouts)
        names.emplace_back(l.name);
      e.checkKeys(names);
      for (const std::string &n : names)
        if (e.has(n))
          hw.elementSeconds[n] = positive(e, n) * 1e-9;
    }
    hw.instructionSeconds = nonNegative(top, "instruction_us") * kMicro;
    hw.intraNode = readLink(top, "intra_node");
    if (top.has("inter_node"))
      hw.interNode = readLink(top, "inter_node");
    else if (hw.devicesPerNode != 0)
      top.fail("'inter_node' is missing (or set devices_per_node to 0: one node)");
    hw.hostBandwidth = top.has("host_gbps") ? positive(top, "host_gbps") * kGiga : 0;
    hw.nvmeBandwidth = top.has("nvme_gbps") ? positive(top, "nvme_gbps") * kGiga : 0;
    std::optional<bool> overlap = top.boolean("comm_overlaps_compute");
    if (!overlap)
      top.fail("'comm_overlaps_compute' is missing (true: a GPU's NCCL stream; false: MPI "
               "on the CPU cores that compute)");
    hw.commOverlapsCompute = *overlap;
    return hw;
  } catch (const dsrt::config::ConfigError &e) {
    throw HardwareError(e.what());
  }
}

std::string resolveHardware(const std::string &nameOrPath) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(nameOrPath, ec) || nameOrPath.find('/') != std::string::npos)
    return nameOrPath;
  fs::path shipped = fs::path(DSC_HARDWARE_DIR) / (nameOrPath + ".json");
  return fs::exists(shipped, ec) ? shipped.string() : nameOrPath;
}

std::string shippedHardware() {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(DSC_HARDWARE_DIR, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".json")
      names.push_back(it->path().stem().string());
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string &n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? std::string("(none shipped)") : out;
}

Hardware readHardware(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw HardwareError(path + ": cannot read the hardware file (the shipped ones, by name: " +
                        shippedHardware() + ")");
  std::ostringstream text;
  text << in.rdbuf();
  Hardware hw = parseHardware(text.str(), path);
  hw.path = path;
  return hw;
}

} // namespace dsc::sim
