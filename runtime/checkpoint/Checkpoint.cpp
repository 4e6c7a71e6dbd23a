//===- Checkpoint.cpp - universal, crash-safe training checkpoints --------===//
#include "runtime/checkpoint/Checkpoint.h"

#include "io/OutputDir.h"
#include "io/SafeTensors.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <sys/file.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dsrt::checkpoint {
namespace fs = std::filesystem;
using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

namespace {

const char *kindOf(dsc::plan::Role role) {
  switch (role) {
  case dsc::plan::PARAM:
    return "param";
  case dsc::plan::OPT_STATE:
    return "opt_state";
  default:
    return "frozen";
  }
}

std::vector<int64_t> wholeShape(const Tensor &t) {
  const kernels::Shape &s = t.whole();
  return std::vector<int64_t>(s.dims, s.dims + s.rank);
}

std::string rankFile(int rank) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "rank-%05d.safetensors", rank);
  return buf;
}

/// Whether `name` ends with `suffix` after something (a state's parameter
/// or group name).
bool endsWith(const std::string &name, const std::string &suffix) {
  return name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// A sum of squared gradients, never negative: Adam's and LAMB's second
/// moment (exp_avg_sq) and Adagrad's accumulator (sum).
bool isSecondMoment(const std::string &name) {
  return endsWith(name, "/exp_avg_sq") || endsWith(name, "/sum");
}

/// A value no training state may hold: NaN, an infinity, or (in Adam's
/// second moment) a negative number.
bool unusable(float v, bool secondMoment) { return !std::isfinite(v) || (secondMoment && v < 0); }

std::string valueText(float v) {
  if (std::isnan(v))
    return "NaN";
  if (std::isinf(v))
    return v > 0 ? "+inf" : "-inf";
  return "the negative second moment " + std::to_string(v);
}

/// JSON with every object's keys distinct (nlohmann keeps the last of a
/// duplicated key silently): a hand-edited or merged index must not load.
json parseStrict(const std::string &text, const std::string &where) {
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  json::parser_callback_t check = [&](int, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!keys.empty())
        keys.pop_back();
    } else if (event == json::parse_event_t::key && !keys.empty() &&
               !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json j = json::parse(text, check);
  if (!duplicate.empty())
    throw CheckpointError(where + ": the key '" + duplicate + "' appears twice in one object");
  return j;
}

/// An integer field (not 2.5, not "2"); `nonNegative`: also >= 0.
int64_t intField(const json &j, const char *key, const std::string &where,
                 bool nonNegative = false) {
  const json &v = j.at(key);
  if (!v.is_number_integer() || (nonNegative && !v.is_number_unsigned()))
    throw CheckpointError(where + ": '" + key + "' must be " +
                          (nonNegative ? "a non-negative integer" : "an integer") + ", is " +
                          v.dump());
  return v.get<int64_t>();
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s;
}

std::vector<int64_t> parseShape(const std::string &where, const std::string &text) {
  std::vector<int64_t> shape;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception &) {
    }
    if (used != part.size() || v < 0)
      throw CheckpointError(where + ": shape '" + text + "' is not a list of sizes");
    shape.push_back(v);
  }
  return shape;
}

int64_t numelOf(const std::string &where, const std::vector<int64_t> &shape) {
  try {
    return io::numElements(shape, where);
  } catch (const io::IoError &e) {
    throw CheckpointError(e.what());
  }
}

/// Steps of the tags in `dir` (step-N folders), ascending.
std::vector<std::pair<int64_t, std::string>> tagsIn(const std::string &dir) {
  std::vector<std::pair<int64_t, std::string>> tags;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) != 0 || name.size() <= 5 || !e.is_directory())
      continue;
    std::string digits = name.substr(5);
    if (!std::all_of(digits.begin(), digits.end(), ::isdigit) || digits.size() > 18)
      continue;
    tags.push_back({std::stoll(digits), name});
  }
  std::sort(tags.begin(), tags.end());
  return tags;
}

constexpr const char *kDeleting = ".deleting";

/// Whether `name` is `prefix`, digits, `suffix`: exactly the names dsrt
/// gives its temporaries (digits where the pid or the step goes), so that a
/// user's `latest.tmp.notes` is never taken for dsrt's.
bool digitsBetween(const std::string &name, const std::string &prefix,
                   const std::string &suffix) {
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), std::string::npos, suffix) != 0)
    return false;
  return std::all_of(name.begin() + long(prefix.size()), name.end() - long(suffix.size()),
                     ::isdigit);
}

/// Removes what a kill during an earlier save left in `dir` besides its
/// .partial folder (which the next save of that tag replaces): a tag
/// --keep was removing (.step-N.deleting), and the temporary of `latest`
/// (latest.tmp.PID, io::AtomicFile's name), which would make a later
/// process of the same pid (a restarted container's pids repeat) fail to
/// replace `latest`. Only rank 0 of one run writes into a save folder, so
/// neither can be another process's work in progress.
void removeLeftovers(const std::string &dir) {
  std::error_code ec;
  std::vector<fs::path> found;
  for (const auto &e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (digitsBetween(name, ".step-", kDeleting) ||
        digitsBetween(name, std::string(kLatest) + ".tmp.", ""))
      found.push_back(e.path());
  }
  for (const fs::path &f : found)
    fs::remove_all(f, ec);
}

/// Whether a tag folder holds only what a save writes: index.json and the
/// ranks' rank-NNNNN.safetensors.
bool onlyDsrtFiles(const fs::path &tagDir) {
  std::error_code ec;
  for (const fs::directory_entry &e : fs::directory_iterator(tagDir, ec)) {
    std::string name = e.path().filename().string();
    bool rankFile = name.size() == 22 && name.rfind("rank-", 0) == 0 &&
                    name.compare(10, 12, ".safetensors") == 0 &&
                    std::all_of(name.begin() + 5, name.begin() + 10, ::isdigit);
    if (name != kIndex && !rankFile)
      return false;
  }
  return !ec;
}

/// `latest` of a save folder, if there is one: a regular file (a FIFO would
/// block, /dev/zero never end) of a few bytes naming a tag. Throws
/// CheckpointError for anything else.
std::optional<std::string> readLatest(const std::string &dir) {
  std::error_code ec;
  std::string path = dir + "/" + kLatest;
  if (!fs::exists(fs::symlink_status(path, ec)))
    return std::nullopt;
  try {
    io::requireRegularFile(path);
  } catch (const std::exception &e) {
    throw CheckpointError(std::string(e.what()) + " (" + kLatest + " names the newest tag)");
  }
  uintmax_t size = fs::file_size(path, ec);
  if (ec || size > 4096)
    throw CheckpointError(path + ": " + (ec ? ec.message() : std::to_string(size) + " bytes") +
                          "; " + kLatest + " holds one tag name (step-N)");
  std::ifstream in(path);
  std::string tag((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!tag.empty() && (tag.back() == '\n' || tag.back() == ' '))
    tag.pop_back();
  if (tag.empty() || tag.find('/') != std::string::npos || tag == "." || tag == "..")
    throw CheckpointError(path + ": does not name a tag");
  return tag;
}

/// Whether the checkpoint in `tagDir` is the save that followed `latest`'s
/// tag: its index records that tag as previous_tag. An index written before
/// dsrt recorded it (no previous_tag) counts as following, as it did then.
bool followsLatest(const fs::path &tagDir, const std::string &latest) {
  try {
    std::string where = (tagDir / kIndex).string();
    io::requireRegularFile(where);
    std::ifstream in(where);
    json index = json::parse(in);
    if (!index.contains("previous_tag"))
      return true;
    const json &prev = index.at("previous_tag");
    return prev.is_string() && prev.get<std::string>() == latest;
  } catch (const std::exception &) {
    return false;
  }
}

std::string readSmallFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

std::string tagFor(int64_t step) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "step-%08lld", (long long)step);
  return buf;
}

ReplicaWriter replicaWriter(const Executor &exec, const std::vector<std::string> *hosts) {
  const int d = exec.rank(), s = exec.stage(), t = exec.tpRank();
  if (!hosts)
    return {d == 0 && t == 0, d == 0};
  // World rank of (dp index, stage, tp rank): tp innermost, then stages.
  const int pp = exec.pp(), tp = exec.tp();
  auto world = [&](int dd, int tt) { return (dd * pp + s) * tp + tt; };
  const std::string &mine = hosts->at(size_t(world(d, t)));
  ReplicaWriter w{true, true};
  for (int dd = 0; dd <= d; ++dd)
    for (int tt = 0; tt < tp; ++tt) {
      if (world(dd, tt) >= world(d, t) || hosts->at(size_t(world(dd, tt))) != mine)
        continue;
      w.whole = false;
      if (tt == t)
        w.tpPart = false;
    }
  return w;
}

bool isFolderWriter(const Layout &layout, int rank) {
  if (!layout.nodeLocal)
    return rank == 0;
  const std::string &mine = layout.hosts.at(size_t(rank));
  return std::find(layout.hosts.begin(), layout.hosts.end(), mine) - layout.hosts.begin() ==
         rank;
}

std::vector<Piece> ownedPieces(const Executor &exec, ReplicaWriter writer) {
  std::vector<Piece> pieces;
  for (const Tensor *t : exec.stateTensors()) {
    if (t->dtype != dsc::plan::F32)
      throw CheckpointError("tensor '" + t->name + "' is not float32; checkpoints hold the " +
                            "float32 training state");
    // Replicated over the dp group: written by the ranks `writer` names
    // (dp index 0, and of a tensor whole on every tp rank, tp rank 0).
    if (t->shards <= 1 && !(t->tpDim < 0 ? writer.whole : writer.tpPart))
      continue;
    // A ZeRO chunk, a tp part's runs, or both.
    for (const TpRun &r : heldRuns(*t, exec.rank(), exec.tpRank())) {
      Piece p{t->name, kindOf(t->role), wholeShape(*t), r.whole, r.count,
              exec.inNvme(*t) ? nullptr : t->f32() + r.part, nullptr};
      if (exec.inNvme(*t))
        p.read = [&exec, t, part = r.part](int64_t first, int64_t n, float *dst) {
          exec.readState(*t, part + first, n, dst);
        };
      pieces.push_back(std::move(p));
    }
  }
  return pieces;
}

namespace {
/// Calls f(data, first, n) over a piece's elements: its memory at once, or
/// the NVMe tier's in slices of 4 MiB (the state is never in memory whole).
template <typename F> void forEachSlice(const Piece &p, F &&f) {
  if (p.data) {
    f(p.data, int64_t(0), p.count);
    return;
  }
  constexpr int64_t kSlice = int64_t(1) << 20;
  std::vector<float> buf(size_t(std::min(kSlice, p.count)));
  for (int64_t at = 0; at < p.count; at += kSlice) {
    int64_t n = std::min(kSlice, p.count - at);
    p.read(at, n, buf.data());
    f(buf.data(), at, n);
  }
}

// Whether process `pid` may be the one that wrote a file last modified at
// `mtime` (seconds since the epoch) and may still write it: it exists, is
// not a zombie, and started before the file was last written. A PID that
// was reused since (by any process, another dsrt rank included) started
// later; a killed rank its parent has not reaped yet is a zombie.
bool mayStillWrite(pid_t pid, double mtime) {
  if (::kill(pid, 0) != 0 && errno == ESRCH)
    return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')'); // the command name may hold spaces and ')'
  if (close == std::string::npos)
    return true; // no /proc: keep the file, as kill() alone would
  std::istringstream rest(text.substr(close + 1));
  std::string state, field;
  rest >> state;
  if (state == "Z" || state == "X")
    return false;
  for (int i = 4; i < 22 && rest >> field;) // fields 4..21, then starttime (22)
    ++i;
  unsigned long long ticks = 0;
  if (!(rest >> ticks))
    return true;
  std::ifstream procStat("/proc/stat");
  std::string key;
  unsigned long long bootTime = 0;
  while (procStat >> key)
    if (key == "btime" && procStat >> bootTime)
      break;
  long hz = ::sysconf(_SC_CLK_TCK);
  if (bootTime == 0 || hz <= 0)
    return true;
  double started = double(bootTime) + double(ticks) / double(hz);
  // btime is whole seconds: a second's slack keeps the writer itself.
  return started <= mtime + 1.0;
}
} // namespace

SaveDir::SaveDir(std::string dir, int64_t keep) : dir_(std::move(dir)), keep_(keep) {
  std::error_code ec;
  fs::path d(dir_);
  if (!fs::exists(fs::symlink_status(d, ec))) {
    fs::create_directories(d, ec);
    if (ec)
      throw CheckpointError("--save-dir " + dir_ + ": cannot create it: " + ec.message());
  } else if (!fs::is_directory(d, ec)) {
    throw CheckpointError("--save-dir " + dir_ + ": is not a folder");
  }
  if (!fs::exists(d / kMarker, ec)) {
    // A run killed while it marked the folder leaves the marker's temporary
    // (<marker>.tmp.<pid>, io::writeFileAtomically's name): dsrt's own, so
    // it is removed unless its writer still runs (marking it now).
    // Nothing is removed from a folder that holds anything else.
    const std::string tmpPrefix = std::string(kMarker) + ".tmp.";
    std::vector<std::pair<fs::path, std::string>> temporaries; // path, pid
    bool others = false;
    for (const fs::directory_entry &e : fs::directory_iterator(d, ec)) {
      const std::string name = e.path().filename().string();
      if (digitsBetween(name, tmpPrefix, "") && name.size() - tmpPrefix.size() <= 9 &&
          e.is_regular_file(ec))
        temporaries.push_back({e.path(), name.substr(tmpPrefix.size())});
      else
        others = true;
    }
    if (others)
      throw CheckpointError("--save-dir " + dir_ + ": holds files dsrt did not write (no " +
                            kMarker + " marker); give a new or empty folder");
    for (const auto &[path, pid] : temporaries) {
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0 ||
          !mayStillWrite(pid_t(std::stol(pid)),
                         double(st.st_mtim.tv_sec) + 1e-9 * double(st.st_mtim.tv_nsec)))
        fs::remove(path, ec);
    }
    try {
      std::string text = "dsrt checkpoints (docs/checkpoints.md)\n";
      io::writeFileAtomically((d / kMarker).string(), {{text.data(), text.size()}},
                              io::Existing::Refuse);
    } catch (const io::IoError &e) {
      // Another run may have marked it an instant before: the lock decides.
      if (!fs::exists(d / kMarker, ec))
        throw CheckpointError(std::string("--save-dir: ") + e.what());
    }
  }
  std::string marker = (d / kMarker).string();
  lockFd_ = ::open(marker.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (lockFd_ < 0)
    throw CheckpointError("--save-dir " + dir_ + ": cannot open " + marker + ": " +
                          std::strerror(errno));
  if (::flock(lockFd_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(lockFd_);
    lockFd_ = -1;
    throw CheckpointError("--save-dir " + dir_ + ": " +
                          (err == EWOULDBLOCK
                               ? std::string("another dsrt run is saving into it (it holds the "
                                             "folder's lock); give this run another folder, "
                                             "or wait for that one to end")
                               : std::string("cannot lock it: ") + std::strerror(err)));
  }
}

SaveDir::~SaveDir() {
  if (lockFd_ >= 0)
    ::close(lockFd_);
}

void SaveDir::checkFree(int64_t step) const {
  std::error_code ec;
  fs::path p = fs::path(dir_) / tagFor(step);
  if (fs::exists(fs::symlink_status(p, ec)))
    throw CheckpointError("--save-dir " + dir_ + ": " + tagFor(step) +
                          " exists (an earlier run's checkpoint of that step); dsrt never " +
                          "writes over it: resume from it, or save into another folder");
}

namespace {

/// Writes this rank's pieces as DIR/RANK_FILE (fsynced before renamed).
uint64_t writeRankFile(const std::string &folder, int rank, int64_t step,
                       const std::vector<Piece> &pieces) {
  uint64_t bytes = 0;
  std::vector<io::TensorRef> refs;
  std::map<std::string, std::string> meta{
      {"format", kFormat}, {"rank", std::to_string(rank)}, {"step", std::to_string(step)}};
  bool streamed = false;
  for (const Piece &p : pieces) {
    int64_t numel = numelOf(p.name, p.shape);
    bool whole = p.start == 0 && p.count == numel;
    std::string key = whole ? p.name : p.name + "@" + std::to_string(p.start);
    refs.push_back(
        {key, io::DType::F32, whole ? p.shape : std::vector<int64_t>{p.count}, p.data});
    meta["piece:" + key] = p.name;
    meta["kind:" + key] = p.kind;
    meta["shape:" + key] = shapeText(p.shape);
    meta["start:" + key] = std::to_string(p.start);
    bytes += uint64_t(p.count) * 4;
    streamed |= !p.data;
  }
  if (!streamed) {
    io::writeSafeTensors(folder + "/" + rankFile(rank), refs, meta);
    return bytes;
  }
  // State on NVMe: copied into the checkpoint a slice at a time.
  io::streamSafeTensors(folder + "/" + rankFile(rank), refs, meta, [&](io::AtomicFile &file) {
    for (const Piece &p : pieces)
      forEachSlice(p, [&](const float *data, int64_t, int64_t n) {
        file.write(data, size_t(n) * 4);
      });
  });
  return bytes;
}

/// What rank `rank` wrote into `folder`: its file's pieces (as
/// writeRankFile names them) and the file's SHA-256 (read back from the
/// page cache by the rank that wrote it, so no rank reads another's file),
/// as the JSON every rank all-gathers for the index.
std::string rankEntry(const std::string &folder, int rank, const std::vector<Piece> &pieces) {
  ordered_json list = ordered_json::array();
  for (const Piece &p : pieces) {
    int64_t numel = numelOf(p.name, p.shape);
    bool whole = p.start == 0 && p.count == numel;
    list.push_back({{"name", p.name},
                    {"kind", p.kind},
                    {"shape", p.shape},
                    {"key", whole ? p.name : p.name + "@" + std::to_string(p.start)},
                    {"start", p.start},
                    {"count", p.count}});
  }
  ordered_json e = {{"file", rankFile(rank)},
                    {"sha256", io::sha256File(folder + "/" + rankFile(rank))},
                    {"pieces", std::move(list)}};
  return e.dump();
}

/// index.json from every rank's entry (rankEntry), in rank order.
std::string buildIndex(const std::vector<std::string> &rankEntries, const std::string &tag,
                       const Progress &progress, const Layout &layout,
                       const std::optional<std::string> &previous) {
  const int ranks = int(rankEntries.size());
  std::map<std::string, ordered_json> entries;
  ordered_json files = ordered_json::object();
  for (const std::string &text : rankEntries) {
    ordered_json r = ordered_json::parse(text);
    std::string file = r.at("file").get<std::string>();
    // Each rank file's SHA-256, so that a changed value is found when it is
    // read.
    files[file] = {{"sha256", r.at("sha256")}};
    for (const ordered_json &p : r.at("pieces")) {
      ordered_json &e = entries[p.at("name").get<std::string>()];
      if (e.is_null())
        e = {{"kind", p.at("kind")},
             {"dtype", "F32"},
             {"shape", p.at("shape")},
             {"pieces", ordered_json::array()}};
      e["pieces"].push_back(
          {{"file", file}, {"key", p.at("key")}, {"start", p.at("start")}, {"count", p.at("count")}});
    }
  }
  ordered_json tensors = ordered_json::object();
  for (auto &[name, e] : entries)
    tensors[name] = std::move(e);
  ordered_json index = {
      {"format", kFormat},
      {"version", kVersion},
      {"producer", "dsrt"},
      {"tag", tag},
      {"step", progress.step},
      {"applied_steps", progress.appliedSteps},
      {"seed", progress.seed},
      {"train_batch_size", progress.trainBatchSize},
      {"micro_batch_size", progress.microBatchSize},
      {"layout",
       {{"dp", layout.dp},
        {"pp", layout.pp},
        {"zero_stage", layout.zeroStage},
        {"precision", layout.precision},
        {"ranks", ranks}}},
      {"plan_sha256", layout.planSha256},
  };
  if (progress.scaler) {
    const LossScalerState &st = *progress.scaler;
    index["loss_scaler"] = {{"scale", st.scale},
                            {"iteration", st.iteration},
                            {"last_overflow_iteration", st.lastOverflowIteration},
                            {"hysteresis", st.hysteresis},
                            {"skipped_steps", st.skippedSteps}};
  } else {
    index["loss_scaler"] = nullptr;
  }
  if (progress.lastEval)
    index["eval"] = {{"step", progress.lastEval->step},
                     {"loss", progress.lastEval->loss},
                     {"batches", progress.lastEval->batches}};
  else
    index["eval"] = nullptr;
  index["previous_tag"] = previous ? ordered_json(*previous) : ordered_json(nullptr);
  // Saved into each host's own folder: this folder holds only its host's
  // rank files (all hosts' folders copied together make the whole).
  if (layout.nodeLocal)
    index["node_local"] = true;
  index["config"] = ordered_json::parse(layout.configJson.empty() ? "{}" : layout.configJson);
  index["files"] = std::move(files);
  index["tensors"] = std::move(tensors);
  return index.dump(1) + "\n";
}

} // namespace

struct Saver::Pending {
  Progress progress;
  std::string tag, partial, final;
  std::chrono::steady_clock::time_point start;
  double blocked = 0;
  std::thread writer;
  std::atomic<bool> done{false};
  std::string error; // the writer's, read after done
  uint64_t bytes = 0;
  std::string entry; // rankEntry of this rank's file
};

/// The first NaN or infinity of `pieces` (or a negative Adam second
/// moment), as an error message; empty when all are finite.
std::string firstNonFinite(const std::vector<Piece> &pieces, int64_t step) {
  for (const Piece &p : pieces) {
    bool square = isSecondMoment(p.name);
    std::string found;
    forEachSlice(p, [&](const float *data, int64_t first, int64_t n) {
      for (int64_t i = 0; i < n && found.empty(); ++i) {
        float v = data[i];
        if (!unusable(v, square))
          continue;
        found = "step " + std::to_string(step) + ": the " + p.kind + " '" + p.name +
                "' holds " + valueText(v) + " at element " + std::to_string(p.start + first + i) +
                " after the update; the run diverged, and no checkpoint is written (the last "
                "one written stays `latest`)";
      }
    });
    if (!found.empty())
      return found;
  }
  return std::string();
}

Saver::Saver(std::string dir, int64_t keep, bool async, Layout layout, comm::Communicator &world,
             bool continues)
    : dir_(std::move(dir)), keep_(keep), async_(async), layout_(std::move(layout)),
      world_(world) {
  if (layout_.nodeLocal && layout_.hosts.size() != size_t(world_.size()))
    throw CheckpointError("checkpoint.use_node_local_storage: the hosts of the " +
                          std::to_string(world_.size()) +
                          " ranks are not known (dsrt's launcher tells its ranks; a plain "
                          "mpirun does not): start the run with dsrt --hostfile");
  writer_ = isFolderWriter(layout_, world_.rank());
  if (!continues)
    for (const auto &tag : tagsIn(dir_))
      othersTags_.insert(tag.second);
}

Saver::~Saver() {
  if (pending_ && pending_->writer.joinable())
    pending_->writer.join();
}

std::optional<SaveResult> Saver::save(const std::vector<Piece> &pieces,
                                      const Progress &progress) {
  std::optional<SaveResult> previous = finish();
  auto p = std::make_unique<Pending>();
  p->start = std::chrono::steady_clock::now();
  p->progress = progress;
  p->tag = tagFor(progress.step);
  p->final = dir_ + "/" + p->tag;
  // dsrt's own partial folder: a crashed earlier save of this tag leaves it
  // behind; it is never taken for a checkpoint (no tag name, no `latest`)
  // and is replaced here.
  p->partial = dir_ + "/." + p->tag + ".partial";
  // A state that is no longer finite (an update that diverged) is never
  // saved: resuming from it could only train NaN, and `latest` must keep
  // naming the last good checkpoint. Every rank checks its own pieces; the
  // vote below stops all of them alike.
  std::string error = firstNonFinite(pieces, progress.step);
  if (writer_ && error.empty()) {
    try {
      std::error_code ec;
      if (fs::exists(fs::symlink_status(p->final, ec)))
        throw CheckpointError(p->tag + " exists; not written over");
      fs::remove_all(p->partial, ec);
      if (ec)
        throw CheckpointError("cannot remove " + p->partial + ", which an interrupted save " +
                              "of this tag left: " + ec.message() +
                              " (remove it by hand, then run again)");
      if (!fs::create_directory(p->partial, ec))
        throw CheckpointError("cannot create " + p->partial + ": " +
                              (ec ? ec.message() : std::string("it still exists")));
    } catch (const std::exception &e) {
      error = e.what();
    }
  }
  pending_ = std::move(p);
  Pending &q = *pending_;
  if (world_.blockingAllReduceScalar(error.empty() ? 0.0 : 1.0, comm::ReduceOp::Max) != 0.0) {
    if (writer_) {
      std::error_code ec;
      fs::remove_all(q.partial, ec);
    }
    pending_.reset();
    throw CheckpointError("checkpoint " + dir_ + "/" + tagFor(progress.step) + ": " +
                          (error.empty() ? "another rank could not save (its state is not "
                                           "finite, or a folder's writer could not create it)"
                                         : error));
  }
  // The NVMe tier's state goes into the file from the disk, before the
  // next step changes it: saved synchronously (a snapshot would need it
  // all in memory).
  bool fromNvme = std::any_of(pieces.begin(), pieces.end(), [](const Piece &p) { return !p.data; });
  if (!async_ || fromNvme) {
    try {
      q.bytes = writeRankFile(q.partial, world_.rank(), progress.step, pieces);
      q.entry = rankEntry(q.partial, world_.rank(), pieces);
    } catch (const std::exception &e) {
      q.error = e.what();
    }
    q.done = true;
    commit(q);
    SaveResult r{q.final, progress.step, q.bytes, 0, 0};
    r.seconds = r.blocked =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - q.start).count();
    r.bytes = uint64_t(world_.blockingAllReduceScalar(double(q.bytes), comm::ReduceOp::Sum));
    pending_.reset();
    return r;
  }
  // Asynchronous: a snapshot in the staging buffer, written by a thread.
  size_t total = 0;
  for (const Piece &piece : pieces)
    total += size_t(piece.count);
  if (staging_.size() < total)
    staging_.resize(total);
  std::vector<Piece> snapshot = pieces;
  size_t at = 0;
  for (Piece &piece : snapshot) {
    std::memcpy(staging_.data() + at, piece.data, size_t(piece.count) * 4);
    piece.data = staging_.data() + at;
    at += size_t(piece.count);
  }
  q.blocked = std::chrono::duration<double>(std::chrono::steady_clock::now() - q.start).count();
  int rank = world_.rank();
  q.writer = std::thread([&q, rank, snapshot = std::move(snapshot)] {
    try {
      q.bytes = writeRankFile(q.partial, rank, q.progress.step, snapshot);
      q.entry = rankEntry(q.partial, rank, snapshot);
    } catch (const std::exception &e) {
      q.error = e.what();
    }
    q.done = true;
  });
  return previous;
}

std::optional<SaveResult> Saver::poll() {
  if (!pending_)
    return std::nullopt;
  // Every rank has a save in flight at the same steps; commit when all
  // are written.
  double written = world_.blockingAllReduceScalar(pending_->done ? 1.0 : 0.0, comm::ReduceOp::Min);
  if (written == 0.0)
    return std::nullopt;
  return finish();
}

std::optional<SaveResult> Saver::finish() {
  if (!pending_)
    return std::nullopt;
  Pending &q = *pending_;
  auto wait = std::chrono::steady_clock::now();
  if (q.writer.joinable())
    q.writer.join();
  q.blocked += std::chrono::duration<double>(std::chrono::steady_clock::now() - wait).count();
  std::unique_ptr<Pending> held = std::move(pending_);
  commit(q);
  SaveResult r{q.final, q.progress.step, 0,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - q.start).count(),
               q.blocked};
  r.bytes = uint64_t(world_.blockingAllReduceScalar(double(q.bytes), comm::ReduceOp::Sum));
  return r;
}

void Saver::commit(Pending &q) {
  bool root = writer_;
  std::string error = q.error;
  auto agree = [&](const char *what) {
    double failed = world_.blockingAllReduceScalar(error.empty() ? 0.0 : 1.0, comm::ReduceOp::Max);
    if (failed != 0.0) {
      if (root) {
        std::error_code ec;
        fs::remove_all(q.partial, ec);
      }
      throw CheckpointError("checkpoint " + q.final + ": " +
                            (error.empty() ? std::string("another rank failed while ") + what
                                           : error));
    }
  };
  agree("writing its file");
  // Every rank's pieces and checksum: no rank reads another's file (on
  // node-local storage it could not).
  std::vector<std::string> entries = world_.blockingAllGatherText(q.entry);
  if (root) {
    try {
      // The tag `latest` names now: a reader takes this save over it only
      // if it follows it (a kill between the rename and `latest`), never a
      // tag an older resume abandoned.
      std::optional<std::string> previous = readLatest(dir_);
      std::string text = buildIndex(entries, q.tag, q.progress, layout_, previous);
      io::writeFileAtomically(q.partial + "/" + kIndex, {{text.data(), text.size()}},
                              io::Existing::Refuse);
      io::syncDir(q.partial);
      if (::renameat2(AT_FDCWD, q.partial.c_str(), AT_FDCWD, q.final.c_str(),
                      RENAME_NOREPLACE) != 0)
        throw CheckpointError("cannot rename " + q.partial + " to " + q.final + ": " +
                              std::strerror(errno));
      io::syncDir(dir_);
      removeLeftovers(dir_);
      std::string latest = q.tag + "\n";
      io::writeFileAtomically(dir_ + "/" + kLatest, {{latest.data(), latest.size()}});
    } catch (const std::exception &e) {
      error = e.what();
    }
  }
  agree("a folder's writer wrote the index");
  if (root) {
    try {
      // --keep K: the oldest complete tags go, only now that the new one is
      // complete and named by `latest` (on every host: a host whose commit
      // failed still has the tag the others would resume from). Each leaves
      // the tag names first
      // (renamed to .step-N.deleting): a kill during a removal must not
      // leave a tag with its index but not all its files.
      // A fresh run's --keep counts and removes only its own tags: the
      // checkpoints of a run before it in the folder are kept.
      if (keep_ > 0) {
        auto tags = tagsIn(dir_);
        tags.erase(std::remove_if(tags.begin(), tags.end(),
                                  [&](const auto &t) { return othersTags_.count(t.second); }),
                   tags.end());
        for (size_t i = 0; i + size_t(keep_) < tags.size(); ++i) {
          if (tags[i].second == q.tag)
            continue;
          std::error_code ec;
          fs::path old = fs::path(dir_) / tags[i].second;
          fs::path doomed = fs::path(dir_) / ("." + tags[i].second + kDeleting);
          // A tag holding a file dsrt did not write (a `dsrt export` saved
          // there) is kept whole: --keep deletes only dsrt's own files.
          if (!onlyDsrtFiles(old)) {
            std::fprintf(stderr, "dsrt: note: --keep %lld: %s holds files dsrt did not write; "
                                 "it is kept\n",
                         (long long)keep_, old.c_str());
            continue;
          }
          if (fs::exists(old / kIndex, ec) &&
              ::rename(old.c_str(), doomed.c_str()) == 0)
            fs::remove_all(doomed, ec);
        }
      }
    } catch (const std::exception &e) {
      error = e.what();
    }
  }
  agree("a folder's writer removed older checkpoints");
}

struct Reader::Open {
  io::SafeTensorsFile file;
};

Reader::Reader(Reader &&) noexcept = default;
Reader::~Reader() = default;

Reader Reader::open(const std::string &path) {
  Reader r;
  std::error_code ec;
  fs::path p(path);
  if (!fs::is_directory(p, ec))
    throw CheckpointError("checkpoint " + path + ": no such folder");
  if (!fs::exists(p / kIndex, ec)) {
    // A save commits when its folder is renamed to the tag (every file and
    // the index are on disk by then); `latest` is replaced after that. A
    // kill between the two leaves a complete tag newer than the one
    // `latest` names (no `latest` at all after the first save): that tag
    // is the newest checkpoint, and a run resumed from it can save the
    // steps after it into the same folder.
    std::string newest;
    int64_t newestStep = -1, namedStep = -1;
    std::vector<std::pair<int64_t, std::string>> tags;
    if (fs::exists(p / kMarker, ec))
      tags = tagsIn(p.string());
    for (const auto &[step, name] : tags)
      if (fs::exists(p / name / kIndex, ec))
        newest = name, newestStep = step;
    bool hasLatest = fs::exists(fs::symlink_status(p / kLatest, ec));
    if (!hasLatest && newest.empty())
      throw CheckpointError("checkpoint " + path + ": neither a checkpoint (no " + kIndex +
                            ") nor a --save-dir (no " + kLatest + ")");
    std::string tag;
    if (hasLatest) {
      tag = *readLatest(p.string());
      std::string digits = tag.rfind("step-", 0) == 0 ? tag.substr(5) : "";
      if (!digits.empty() && digits.size() <= 18 &&
          std::all_of(digits.begin(), digits.end(), ::isdigit))
        namedStep = std::stoll(digits);
      // What `latest` names must be there: a missing or junk name is an
      // error, never a silent fallback to another tag.
      if (namedStep < 0 || !fs::exists(p / tag / kIndex, ec))
        throw CheckpointError("checkpoint " + path + ": " + kLatest + " names " + tag +
                              (namedStep < 0 ? ", not a checkpoint tag (step-N)"
                                             : ", which has no " + std::string(kIndex)) +
                              "; give the checkpoint as " + path + "/step-N");
      // A newer complete tag is taken only where it is the save after the
      // one `latest` names (a kill between its rename and the update of
      // `latest`): one that an older resume abandoned names another.
      if (newestStep > namedStep && followsLatest(p / newest, tag))
        tag = newest;
    } else {
      tag = newest;
    }
    p /= tag;
  }
  r.path_ = p.string();
  std::string where = (p / kIndex).string();
  try {
    io::requireRegularFile(where);
    r.index_ = parseStrict(readSmallFile(where), where);
    if (r.index_.value("format", "") != kFormat)
      throw CheckpointError(where + ": not a dsc checkpoint index (format is not '" +
                            std::string(kFormat) + "')");
    if (r.index_.value("version", 0) != kVersion)
      throw CheckpointError(where + ": version " + r.index_.value("version", json()).dump() +
                            "; this dsrt reads version " + std::to_string(kVersion));
    Progress &g = r.progress_;
    g.step = intField(r.index_, "step", where);
    g.appliedSteps = intField(r.index_, "applied_steps", where);
    intField(r.index_, "seed", where, /*nonNegative=*/true);
    g.seed = r.index_.at("seed").get<uint64_t>();
    g.trainBatchSize = intField(r.index_, "train_batch_size", where);
    g.microBatchSize = intField(r.index_, "micro_batch_size", where);
    if (g.step < 1 || g.appliedSteps < 0 || g.appliedSteps > g.step)
      throw CheckpointError(where + ": step " + std::to_string(g.step) + " and applied_steps " +
                            std::to_string(g.appliedSteps) + " are inconsistent");
    const json &ls = r.index_.at("loss_scaler");
    if (!ls.is_null()) {
      LossScalerState s;
      s.scale = ls.at("scale").get<double>();
      s.iteration = intField(ls, "iteration", where);
      s.lastOverflowIteration = intField(ls, "last_overflow_iteration", where);
      s.hysteresis = intField(ls, "hysteresis", where);
      s.skippedSteps = intField(ls, "skipped_steps", where);
      g.scaler = s;
    }
    // The last validation loss (absent in checkpoints from before dsrt
    // evaluated).
    if (auto ev = r.index_.find("eval"); ev != r.index_.end() && !ev->is_null()) {
      Progress::Eval e;
      e.step = intField(*ev, "step", where);
      e.batches = intField(*ev, "batches", where);
      if (!ev->contains("loss") || !ev->at("loss").is_number())
        throw CheckpointError(where + ": eval.loss must be a number");
      e.loss = ev->at("loss").get<double>();
      g.lastEval = e;
    }
    for (const auto &[name, e] : r.index_.at("tensors").items()) {
      std::string at = where + ": tensor '" + name + "'";
      Tensor t;
      t.kind = e.at("kind").get<std::string>();
      if (e.at("dtype").get<std::string>() != "F32")
        throw CheckpointError(at + ": dtype is not F32");
      for (const json &d : e.at("shape"))
        if (!d.is_number_unsigned())
          throw CheckpointError(at + ": its shape " + e.at("shape").dump() +
                                " must hold non-negative integers");
      t.shape = e.at("shape").get<std::vector<int64_t>>();
      t.numel = numelOf(at, t.shape);
      std::vector<PieceRef> refs;
      for (const json &pj : e.at("pieces")) {
        PieceRef pr{pj.at("file").get<std::string>(), pj.at("key").get<std::string>(),
                    intField(pj, "start", at), intField(pj, "count", at)};
        if (pr.file.find('/') != std::string::npos || pr.file.empty() || pr.file[0] == '.')
          throw CheckpointError(at + ": piece file '" + pr.file + "' is not a file name");
        if (pr.start < 0 || pr.count <= 0 || pr.start > t.numel - pr.count)
          throw CheckpointError(at + ": piece [" + std::to_string(pr.start) + ", +" +
                                std::to_string(pr.count) + ") lies outside its " +
                                std::to_string(t.numel) + " elements");
        refs.push_back(std::move(pr));
      }
      std::sort(refs.begin(), refs.end(), [](const PieceRef &a, const PieceRef &b) {
        return a.start != b.start ? a.start < b.start : a.count < b.count;
      });
      // The pieces tile the tensor: no gap, no partial overlap. A piece
      // repeated whole is a tensor two pipeline stages hold (a tied
      // embedding); its copies are compared when it is read.
      std::vector<PieceRef> primary, copies;
      int64_t covered = 0;
      for (PieceRef &pr : refs) {
        if (!primary.empty() && pr.start == primary.back().start &&
            pr.count == primary.back().count) {
          copies.push_back(std::move(pr));
          continue;
        }
        if (pr.start != covered)
          throw CheckpointError(at + (pr.start > covered ? ": elements [" +
                                                               std::to_string(covered) + ", " +
                                                               std::to_string(pr.start) +
                                                               ") are in no piece"
                                                         : ": pieces overlap at element " +
                                                               std::to_string(pr.start)));
        covered = pr.start + pr.count;
        primary.push_back(std::move(pr));
      }
      if (covered != t.numel)
        throw CheckpointError(at + ": elements [" + std::to_string(covered) + ", " +
                              std::to_string(t.numel) + ") are in no piece");
      r.tensors_[name] = std::move(t);
      r.pieces_[name] = std::move(primary);
      if (!copies.empty())
        r.copies_[name] = std::move(copies);
    }
    // The rank files' checksums (checkpoints written before dsrt recorded
    // them have none).
    if (r.index_.contains("files"))
      for (const auto &[file, f] : r.index_.at("files").items())
        r.sha256_[file] = f.at("sha256").get<std::string>();
    r.nodeLocal_ = r.index_.value("node_local", false);
  } catch (const json::exception &e) {
    throw CheckpointError(where + ": " + e.what());
  } catch (const io::IoError &e) {
    throw CheckpointError(e.what());
  }
  return r;
}

void Reader::read(const std::string &name, int64_t start, int64_t count, float *dst) const {
  auto it = pieces_.find(name);
  if (it == pieces_.end())
    throw CheckpointError("checkpoint " + path_ + ": no tensor '" + name + "'");
  int64_t next = start, end = start + count;
  auto c = copies_.find(name);
  for (const PieceRef &primary : it->second) {
    if (next >= end)
      break;
    if (primary.start + primary.count <= next)
      continue;
    if (primary.start > next)
      break; // a gap
    // A node-local folder holds only its host's files: a piece whose file
    // is on another host is read from a copy here, if there is one.
    const PieceRef *chosen = &primary;
    if (nodeLocal_ && !present(primary.file) && c != copies_.end())
      for (const PieceRef &q : c->second)
        if (q.start == primary.start && present(q.file)) {
          chosen = &q;
          break;
        }
    const PieceRef &p = *chosen;
    const float *piece = pieceData(name, p);
    int64_t upto = std::min(end, p.start + p.count);
    const float *src = piece + (next - p.start);
    std::memcpy(dst + (next - start), src, size_t(upto - next) * 4);
    // Another stage's (or host's) copy of the same piece must hold the
    // same values.
    if (c != copies_.end())
      for (const PieceRef &q : c->second)
        if (q.start == p.start && &q != &p && (!nodeLocal_ || present(q.file)) &&
            std::memcmp(pieceData(name, q) + (next - p.start), src, size_t(upto - next) * 4))
          throw CheckpointError("checkpoint " + path_ + ": the copies of '" + name + "' in " +
                                p.file + " and " + q.file + " differ");
    // Drop the pages behind the copy: a load's peak is the arena, not the
    // arena plus the checkpoint.
    uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
    uintptr_t b = (uintptr_t(src) + page - 1) / page * page;
    uintptr_t e = uintptr_t(src + (upto - next)) / page * page;
    if (b < e)
      ::madvise(reinterpret_cast<void *>(b), e - b, MADV_DONTNEED);
    next = upto;
  }
  if (next < end)
    throw CheckpointError("checkpoint " + path_ + ": elements [" + std::to_string(next) + ", " +
                          std::to_string(end) + ") of '" + name +
                          "' are in no piece (a rank's file or index entry is missing)");
}

bool Reader::present(const std::string &file) const {
  auto [it, fresh] = present_.try_emplace(file, false);
  if (fresh) {
    std::error_code ec;
    it->second = fs::is_regular_file(fs::path(path_) / file, ec);
  }
  return it->second;
}

const float *Reader::pieceData(const std::string &name, const PieceRef &p) const {
  auto &slot = open_[p.file];
  if (!slot) {
    std::string file = path_ + "/" + p.file;
    try {
      io::requireRegularFile(file);
      // A file changed since the save, or one from another checkpoint,
      // must not load: its checksum (recorded in index.json) and the step
      // in its own header are checked before any value is used.
      if (auto h = sha256_.find(p.file); h != sha256_.end() && io::sha256File(file) != h->second)
        throw CheckpointError(file + ": its SHA-256 differs from the one index.json recorded " +
                              "when dsrt saved it (the file changed after the save)");
      slot = std::make_unique<Open>(Open{io::SafeTensorsFile::open(file)});
    } catch (const io::IoError &e) {
      throw CheckpointError(std::string(e.what()) + " (a piece of '" + name + "')");
    }
    const auto &meta = slot->file.metadata();
    auto step = meta.find("step");
    if (step == meta.end() || step->second != std::to_string(progress_.step)) {
      std::string held = step == meta.end() ? "no step" : "step " + step->second;
      slot.reset();
      throw CheckpointError(file + ": holds " + held + ", and the checkpoint is of step " +
                            std::to_string(progress_.step) +
                            " (a rank file of another checkpoint?)");
    }
  }
  const io::TensorRef *t = slot->file.find(p.key);
  if (!t || t->dtype != io::DType::F32 || t->numel() != p.count)
    throw CheckpointError("checkpoint " + path_ + ": " + p.file + " has no float32 '" + p.key +
                          "' of " + std::to_string(p.count) + " elements");
  return static_cast<const float *>(t->data);
}

void Reader::writeTo(const std::string &name, io::AtomicFile &file) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw CheckpointError("checkpoint " + path_ + ": no tensor '" + name + "'");
  constexpr int64_t kSlice = int64_t(1) << 20; // 4 MiB of float32
  int64_t numel = it->second.numel;
  std::vector<float> buf(size_t(std::min(kSlice, numel)));
  for (int64_t at = 0; at < numel; at += kSlice) {
    int64_t n = std::min(kSlice, numel - at);
    read(name, at, n, buf.data());
    file.write(buf.data(), size_t(n) * 4);
  }
}

/// 1-bit LAMB's flat momentum's padding (only where the ranks pad it).
static bool isOneBitPadding(const std::string &name) {
  return endsWith(name, "/exp_avg_padding");
}

/// The 1-bit optimizers' error-feedback buffers, and 1-bit LAMB's padding:
/// sized by the data-parallel ranks' padding.
static bool isOneBitError(const std::string &name) {
  return endsWith(name, "/worker_error") || endsWith(name, "/server_error") ||
         isOneBitPadding(name);
}

std::string restore(Executor &exec, const Reader &ckpt) {
  const auto &all = ckpt.tensors();
  std::set<std::string> held;
  // 1-bit Adam's errors saved on another number of ranks (other chunks,
  // other padding): all of them start from zero, as DeepSpeed resets them
  // on every load (onebit/adam.py load_state_dict); on as many ranks they
  // are restored exactly.
  bool resetAll = false;
  for (Tensor *t : exec.stateTensors()) {
    auto it = all.find(t->name);
    resetAll |= it != all.end() && isOneBitError(t->name) && it->second.shape != wholeShape(*t);
  }
  int64_t resetErrors = 0, resetPadding = 0;
  for (Tensor *t : exec.stateTensors()) {
    std::string kind = kindOf(t->role);
    auto it = all.find(t->name);
    // (1-bit LAMB's padding exists only where the ranks pad.)
    if (resetAll && isOneBitError(t->name) && (it != all.end() || isOneBitPadding(t->name))) {
      std::fill(t->f32(), t->f32() + t->numel, 0.0f);
      held.insert(t->name);
      ++(isOneBitPadding(t->name) ? resetPadding : resetErrors);
      continue;
    }
    // Saved on one rank, which compresses nothing: the errors the plan's
    // ranks keep start from zero, as on another number of ranks.
    if (it == all.end() && isOneBitError(t->name)) {
      std::fill(t->f32(), t->f32() + t->numel, 0.0f);
      held.insert(t->name);
      ++(isOneBitPadding(t->name) ? resetPadding : resetErrors);
      continue;
    }
    if (it == all.end())
      throw CheckpointError("checkpoint " + ckpt.path() + ": has no " + kind + " '" + t->name +
                            "', which the plan trains (a checkpoint of another model or "
                            "optimizer?)");
    std::vector<int64_t> shape = wholeShape(*t);
    if (it->second.shape != shape || it->second.kind != kind)
      throw CheckpointError("checkpoint " + ckpt.path() + ": '" + t->name + "' is " +
                            it->second.kind + " " + io::formatShape(it->second.shape) +
                            ", the plan's is " + kind + " " + io::formatShape(shape));
    // As the plan's own weights: a NaN or infinity (or a negative second
    // moment, whose square root is NaN) can only train NaN.
    bool square = isSecondMoment(t->name);
    auto check = [&](const float *v, int64_t first, int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        if (unusable(v[i], square))
          throw CheckpointError("checkpoint " + ckpt.path() + ": the " + kind + " '" + t->name +
                                "' holds " + valueText(v[i]) +
                                (t->shards > 1 ? " (in this rank's shard, element "
                                               : " (element ") +
                                std::to_string(first + i) +
                                "): resuming could only train NaN; resume from an earlier tag");
    };
    if (exec.inNvme(*t)) {
      // Into the NVMe tier a slice at a time: zeros first (a ZeRO chunk's
      // padding), then this rank's runs.
      constexpr int64_t kSlice = int64_t(1) << 20;
      std::vector<float> buf(size_t(std::min(kSlice, std::max<int64_t>(t->numel, 1))));
      std::fill(buf.begin(), buf.end(), 0.0f);
      for (int64_t at = 0; at < t->numel; at += kSlice)
        exec.writeState(*t, at, std::min(kSlice, t->numel - at), buf.data());
      for (const TpRun &r : heldRuns(*t, exec.rank(), exec.tpRank()))
        for (int64_t at = 0; at < r.count; at += kSlice) {
          int64_t n = std::min(kSlice, r.count - at);
          ckpt.read(t->name, r.whole + at, n, buf.data());
          check(buf.data(), r.part + at, n);
          exec.writeState(*t, r.part + at, n, buf.data());
        }
      held.insert(t->name);
      continue;
    }
    // A ZeRO chunk's padding stays zero, as when the run started.
    std::fill(t->f32(), t->f32() + t->numel, 0.0f);
    for (const TpRun &r : heldRuns(*t, exec.rank(), exec.tpRank()))
      ckpt.read(t->name, r.whole, r.count, t->f32() + r.part);
    check(t->f32(), 0, t->numel);
    held.insert(t->name);
  }
  // Nothing saved may be left out: a parameter or state the plan does not
  // have means another model or optimizer. (A pipeline rank holds only its
  // stage's tensors: its parameters are checked against every stage's.)
  std::set<std::string> planParams;
  for (const auto &[name, shape] : exec.allWeights())
    planParams.insert(name);
  int64_t droppedErrors = 0;
  for (const auto &[name, t] : all) {
    bool known = exec.pipelined() ? (t.kind != "param" || planParams.count(name))
                                   : held.count(name) > 0 || (resetAll && isOneBitPadding(name));
    // Errors of several ranks, resumed on one (which compresses nothing,
    // so its plan keeps none): dropped, as a reset would zero them.
    if (!known && isOneBitError(name)) {
      droppedErrors += !isOneBitPadding(name);
      continue;
    }
    if (!known)
      throw CheckpointError("checkpoint " + ckpt.path() + ": " + t.kind + " '" + name +
                            "' is not in the plan (a checkpoint of another model or optimizer?)");
  }
  std::string note = exec.restoreProgress(ckpt.progress().appliedSteps, ckpt.progress().scaler);
  if (resetErrors)
    note += std::string(note.empty() ? "" : "; ") + std::to_string(resetErrors) +
            " 1-bit error buffers (worker and server) were saved on another number of "
            "data-parallel ranks (or not at all: one rank keeps none) and start from zero, as "
            "DeepSpeed's 1-bit optimizers reset them on every load";
  if (droppedErrors)
    note += std::string(note.empty() ? "" : "; ") + std::to_string(droppedErrors) +
            " 1-bit error buffers (worker and server) of the saved run are dropped: this plan "
            "runs on one data-parallel rank, which compresses nothing and keeps none";
  if (resetPadding || (resetAll && std::any_of(all.begin(), all.end(), [&](const auto &e) {
                         return isOneBitPadding(e.first);
                       })))
    note += std::string(note.empty() ? "" : "; ") +
            "1-bit LAMB's flat momentum padding starts from zero (the ranks pad it otherwise)";
  return note;
}

int64_t exportWeights(const Reader &ckpt, const std::string &out) {
  std::vector<io::TensorRef> refs;
  for (const auto &[name, t] : ckpt.tensors())
    if (t.kind == "param" || t.kind == "frozen")
      refs.push_back({name, io::DType::F32, t.shape, nullptr});
  io::checkNewFile(out, "-o");
  io::streamSafeTensors(out, refs, io::weightsMetadata(ckpt.progress().step),
                        [&](io::AtomicFile &file) {
                          for (const io::TensorRef &r : refs)
                            ckpt.writeTo(r.name, file);
                        });
  return int64_t(refs.size());
}

} // namespace dsrt::checkpoint
