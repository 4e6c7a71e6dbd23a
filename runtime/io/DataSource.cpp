//===- DataSource.cpp - the training data a run reads ---------------------===//
#include "runtime/io/DataSource.h"

#include "io/FileUtil.h"
#include "runtime/io/Npy.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

namespace fs = std::filesystem;

namespace dsrt::io {

int64_t InputSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t InputSpec::bytes() const { return numel() * int64_t(dtypeSize(dtype)); }

namespace {

[[noreturn]] void fail(const std::string &message) { throw IoError(message); }

class SyntheticSource : public DataSource {
public:
  SyntheticSource(const std::vector<InputSpec> &inputs, int64_t batch)
      : inputs_(inputs), batch_(batch) {}
  void load(int64_t k, const std::vector<void *> &into) override {
    for (size_t j = 0; j < into.size(); ++j) {
      const InputSpec &t = inputs_[j];
      if (t.dtype != DType::F32 && t.dtype != DType::I64) { // masks and the like: zero
        std::memset(into[j], 0, size_t(t.bytes()));
        continue;
      }
      int64_t bound = t.indexBound > 0 ? t.indexBound : 2;
      for (int64_t i = 0, n = t.numel(); i < n; ++i) {
        uint64_t r = mix(uint64_t(k) * 0x9E3779B97F4A7C15ull + j * 0xD1B54A32D192ED03ull +
                         uint64_t(i));
        if (t.dtype == DType::F32)
          static_cast<float *>(into[j])[i] = float(double(r >> 11) / double(1ull << 53) * 2.0 - 1.0);
        else
          static_cast<int64_t *>(into[j])[i] = int64_t(r % uint64_t(bound));
      }
    }
  }
  int64_t itemsPerMicroBatch() const override { return batch_; }
  const char *itemName() const override { return "samples"; }

private:
  static uint64_t mix(uint64_t z) { // SplitMix64's finalizer
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::vector<InputSpec> inputs_;
  int64_t batch_;
};

class NpyFolder : public DataSource {
  /// Every value of an index input is in [0, indexBound) or the label its
  /// loss skips, checked before training (as a token file's ids are): one
  /// out of range would otherwise end the run at the step that reads it.
  static void checkIndices(const NpyArray &a, const std::string &path, const InputSpec &t,
                           bool int32) {
    if (!t.checkValues || t.indexBound <= 0 || (t.dtype != DType::I64 && t.dtype != DType::I32))
      return;
    int64_t width = int32 || t.dtype == DType::I32 ? 4 : 8, count = 1;
    for (int64_t d : a.shape)
      count *= d;
    int64_t row = a.shape.empty() ? 1 : count / std::max<int64_t>(a.shape[0], 1);
    const char *data = static_cast<const char *>(a.data());
    int64_t bad = 0, first = -1, firstValue = 0;
    for (int64_t i = 0; i < count; ++i) {
      int64_t v;
      if (width == 4) {
        int32_t w;
        std::memcpy(&w, data + i * 4, 4);
        v = w;
      } else {
        std::memcpy(&v, data + i * 8, 8);
      }
      if ((v < 0 || v >= t.indexBound) && !(t.ignoreIndex && v == *t.ignoreIndex)) {
        if (first < 0) {
          first = i;
          firstValue = v;
        }
        ++bad;
      }
    }
    if (!bad)
      return;
    std::string allowed = "[0, " + std::to_string(t.indexBound) + ")" +
                          (t.ignoreIndex ? " or " + std::to_string(*t.ignoreIndex) +
                                               ", the label its loss skips"
                                         : "");
    fail(path + ": sample " + std::to_string(first / row) + ", element " +
         std::to_string(first % row) + " is " + std::to_string(firstValue) +
         ", outside what input '" + t.name + "' indexes (the model's embedding rows or loss " +
         "classes): " + allowed + "; " + std::to_string(bad) + " of the " +
         std::to_string(count) + " values are (data made for another vocabulary?)");
  }

public:
  NpyFolder(const std::string &dir, const std::vector<InputSpec> &inputs, int64_t batch)
      : inputs_(inputs), batch_(batch) {
    for (const InputSpec &t : inputs) {
      std::string path = (fs::path(dir) / (t.name + ".npy")).string();
      if (!fs::exists(path))
        fail(path + ": missing; the plan's input '" + t.name + "' is read from it");
      arrays_.push_back(std::make_unique<NpyArray>(readNpy(path)));
      const NpyArray &a = *arrays_.back();
      widen_.push_back(checkInputDType(a, path, t.dtype, t.name));
      std::vector<int64_t> want(t.shape.begin() + (t.shape.empty() ? 0 : 1), t.shape.end());
      std::vector<int64_t> have(a.shape.begin() + (a.shape.empty() ? 0 : 1), a.shape.end());
      if (a.shape.empty() || have != want) {
        want.insert(want.begin(), -1);
        fail(path + ": shape " + formatShape(a.shape) + ", the input '" + t.name + "' needs [N" +
             formatShape(want).substr(3));
      }
      if (a.shape[0] < batch)
        fail(path + ": " + std::to_string(a.shape[0]) + " samples, fewer than one micro-batch (" +
             std::to_string(batch) + ")");
      if (samples_ && a.shape[0] != samples_)
        fail(path + ": " + std::to_string(a.shape[0]) + " samples, but the other inputs have " +
             std::to_string(samples_));
      samples_ = a.shape[0];
      checkIndices(a, path, t, widen_.back());
    }
  }
  void load(int64_t k, const std::vector<void *> &into) override {
    for (size_t j = 0; j < into.size(); ++j) {
      const NpyArray &a = *arrays_[j];
      int64_t row = inputs_[j].numel() / batch_;
      for (int64_t i = 0; i < batch_; ++i) {
        int64_t src = (k * batch_ + i) % samples_;
        if (widen_[j]) {
          // A version 2/3 .npy header need not leave the data 4-byte
          // aligned: read each int32 with memcpy.
          auto *from = static_cast<const char *>(a.data()) + src * row * 4;
          int64_t *to = static_cast<int64_t *>(into[j]) + i * row;
          for (int64_t e = 0; e < row; ++e) {
            int32_t v;
            std::memcpy(&v, from + e * 4, 4);
            to[e] = v;
          }
        } else {
          size_t bytes = size_t(inputs_[j].bytes() / batch_);
          std::memcpy(static_cast<char *>(into[j]) + i * bytes,
                      static_cast<const char *>(a.data()) + src * bytes, bytes);
        }
      }
    }
  }
  int64_t itemsPerMicroBatch() const override { return batch_; }
  const char *itemName() const override { return "samples"; }
  int64_t microBatchesHeld() const override { return samples_ / batch_; }

private:
  std::vector<InputSpec> inputs_;
  std::vector<std::unique_ptr<NpyArray>> arrays_;
  std::vector<bool> widen_; // int32 file for an int64 input
  int64_t batch_, samples_ = 0;
};

class TokenSource : public DataSource {
public:
  TokenSource(const std::string &path, std::optional<TokenWidth> width,
              const std::vector<InputSpec> &inputs, int64_t batch, bool pipelineStage)
      : file_(TokenFile::open(path, width)), batch_(batch) {
    bool ok = pipelineStage ? inputs.size() <= 2 : inputs.size() == 2;
    for (const InputSpec &t : inputs)
      ok = ok && t.dtype == DType::I64 && t.shape.size() == 2 &&
           t.shape[1] == inputs[0].shape[1];
    if (!ok)
      fail(path + ": a token file feeds a model with two int64 [batch, seq] inputs (tokens and "
                  "next-token targets); this plan's inputs differ, give --data a folder of .npy "
                  "files named after them");
    // The targets are the input named like targets/labels, else the second.
    auto isTarget = [](const std::string &n) {
      return n.find("target") != std::string::npos || n.find("label") != std::string::npos;
    };
    if (inputs.size() == 2) {
      bool swap = isTarget(inputs[0].name) && !isTarget(inputs[1].name);
      tokens_ = swap ? 1 : 0;
      targets_ = swap ? 0 : 1;
    } else if (inputs.size() == 1) {
      (isTarget(inputs[0].name) ? targets_ : tokens_) = 0;
    }
    if (inputs.empty())
      return; // a middle stage: nothing to load
    seq_ = inputs[0].shape[1];
    windows_ = (file_.size() - 1) / seq_;
    if (windows_ < batch)
      fail(path + ": " + std::to_string(file_.size()) + " tokens, too few for one micro-batch of " +
           std::to_string(batch) + " x " + std::to_string(seq_) + " (+1) tokens");
    // Every id against the vocabulary, once, before the first step: a bad
    // id would otherwise surface only at the step that reads it.
    for (const InputSpec &t : inputs)
      if (t.indexBound > 0)
        bound_ = bound_ ? std::min(bound_, t.indexBound) : t.indexBound;
    if (bound_ > 0)
      file_.checkIds(bound_, "the model's vocabulary");
  }
  void load(int64_t k, const std::vector<void *> &into) override {
    if (tokens_ < 0 && targets_ < 0)
      return;
    auto it = ahead_.find(k);
    if (it == ahead_.end())
      it = readWindows(k);
    // Sample i's window holds seq + 1 tokens: the inputs are its first
    // seq, the targets the same shifted by one.
    const int64_t *w = it->second.data();
    for (int64_t i = 0; i < batch_; ++i, w += seq_ + 1) {
      if (tokens_ >= 0)
        std::memcpy(static_cast<int64_t *>(into[size_t(tokens_)]) + i * seq_, w,
                    size_t(seq_) * sizeof(int64_t));
      if (targets_ >= 0)
        std::memcpy(static_cast<int64_t *>(into[size_t(targets_)]) + i * seq_, w + 1,
                    size_t(seq_) * sizeof(int64_t));
    }
    ahead_.erase(it);
  }
  int64_t itemsPerMicroBatch() const override { return batch_ * seq_; }
  const char *itemName() const override { return "tokens"; }
  int64_t microBatchesHeld() const override { return seq_ ? windows_ / batch_ : -1; }
  bool readsDuringRun() const override { return true; }
  void readAhead(const std::vector<int64_t> &ks) override {
    ahead_.clear(); // what an earlier read-ahead held and no load took
    if (tokens_ < 0 && targets_ < 0)
      return;
    for (int64_t k : ks)
      readWindows(k);
  }

private:
  /// Reads and checks micro-batch k's windows into ahead_ (nothing is
  /// kept when they fail).
  std::map<int64_t, std::vector<int64_t>>::iterator readWindows(int64_t k) {
    std::vector<int64_t> ids(size_t(batch_ * (seq_ + 1)));
    for (int64_t i = 0; i < batch_; ++i) {
      int64_t start = ((k * batch_ + i) % windows_) * seq_;
      int64_t *w = ids.data() + i * (seq_ + 1);
      file_.copyWindow(start, seq_ + 1, w);
      // Checked before step 1 too: an id out of range now means the
      // file was rewritten while the run went on.
      for (int64_t j = 0; bound_ > 0 && j <= seq_; ++j)
        if (w[j] >= bound_)
          fail(file_.path() + ": token " + std::to_string(start + j) + " is " +
               std::to_string(w[j]) + ", outside the model's vocabulary of " +
               std::to_string(bound_) +
               ": the file was rewritten during the run (its ids were checked before step 1)");
    }
    return ahead_.insert_or_assign(k, std::move(ids)).first;
  }

  TokenFile file_;
  int tokens_ = -1, targets_ = -1; // positions in the loaded set
  int64_t batch_, seq_ = 0, windows_ = 0;
  int64_t bound_ = 0; // ids must be below it (0: no bound known)
  std::map<int64_t, std::vector<int64_t>> ahead_; // micro-batch -> its windows
};

} // namespace

std::unique_ptr<DataSource> syntheticSource(const std::vector<InputSpec> &inputs, int64_t batch) {
  return std::make_unique<SyntheticSource>(inputs, batch);
}

std::unique_ptr<DataSource> npyFolderSource(const std::string &dir,
                                            const std::vector<InputSpec> &inputs,
                                            int64_t batch) {
  return std::make_unique<NpyFolder>(dir, inputs, batch);
}

std::unique_ptr<DataSource> tokenFileSource(const std::string &path,
                                            std::optional<TokenWidth> width,
                                            const std::vector<InputSpec> &inputs, int64_t batch,
                                            bool pipelineStage) {
  return std::make_unique<TokenSource>(path, width, inputs, batch, pipelineStage);
}

std::unique_ptr<DataSource> openDataSource(const DataOptions &o,
                                           const std::vector<InputSpec> &inputs, int64_t batch,
                                           bool pipelineStage) {
  const std::string &data = o.path;
  if (data.empty() && !o.tokenDtype.empty())
    fail("--token-dtype " + o.tokenDtype + ": applies only to a token file given with --data");
  if (data.empty())
    return syntheticSource(inputs, batch);
  if (!o.tokenDtype.empty() && (fs::is_directory(data) || !fs::exists(data)))
    fail("--token-dtype " + o.tokenDtype + ": applies only to a token file, and " + o.flag + " " + data +
         " is " + (fs::is_directory(data) ? "a folder of .npy files" : "not a file"));
  if (fs::is_directory(data))
    return npyFolderSource(data, inputs, batch);
  if (!fs::exists(data))
    fail(o.flag + " " + data + ": no such file or folder");
  std::optional<TokenWidth> width;
  if (!o.tokenDtype.empty())
    width = parseTokenWidth(o.tokenDtype);
  return tokenFileSource(data, width, inputs, batch, pipelineStage);
}

} // namespace dsrt::io
