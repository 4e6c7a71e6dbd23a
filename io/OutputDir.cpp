//===- OutputDir.cpp - folders and files the tools may write --------------===//
#include "io/OutputDir.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dsrt::io {
namespace {

namespace fs = std::filesystem;

/// The plan folders of dsc before it wrote a marker: exactly these files.
const std::set<std::string> kLegacyPlanFiles = {"plan.pb", "weights.safetensors", "model.onnx",
                                                "manifest.txt"};

std::vector<std::string> entriesOf(const fs::path &dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec)
    throw IoError(dir.string() + ": cannot list: " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

/// The first line of `path` if it is a regular file (a FIFO would block).
std::string firstLine(const fs::path &path) {
  std::error_code ec;
  std::string line;
  if (fs::is_regular_file(path, ec)) {
    std::ifstream in(path);
    std::getline(in, line);
  }
  return line;
}

std::set<std::string> markerNames(const fs::path &dir) {
  std::set<std::string> names;
  std::error_code ec;
  if (!fs::is_regular_file(dir / kPlanMarker, ec))
    return names;
  std::ifstream in(dir / kPlanMarker);
  for (std::string line; std::getline(in, line);)
    if (!line.empty())
      names.insert(line);
  return names;
}

/// "a, b, c and 4 more" for messages.
std::string listSome(const std::vector<std::string> &names) {
  std::string s;
  size_t shown = std::min<size_t>(names.size(), 4);
  for (size_t i = 0; i < shown; ++i)
    s += (i ? ", " : "") + names[i];
  if (names.size() > shown)
    s += " and " + std::to_string(names.size() - shown) + " more";
  return s;
}

void fsyncDir(const fs::path &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

fs::path parentOf(const fs::path &p) {
  fs::path parent = fs::absolute(p).lexically_normal().parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

/// absolute, normal, with symbolic links resolved as far as the path exists.
fs::path resolved(const std::string &p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p), ec);
  return ec ? fs::absolute(p).lexically_normal() : r;
}

} // namespace

void checkReplaceablePlanDir(const std::string &dir, const std::string &what) {
  std::error_code ec;
  fs::file_status st = fs::symlink_status(dir, ec);
  if (!fs::exists(st))
    return;
  if (fs::is_symlink(st))
    throw IoError(what + " " + dir + ": is a symbolic link; give the folder it points to");
  if (!fs::is_directory(st))
    throw IoError(what + " " + dir + ": exists and is not a folder; dsc writes a plan folder "
                                     "there and never replaces a file it did not create");
  std::vector<std::string> entries = entriesOf(dir);
  if (entries.empty())
    return;
  bool marked = fs::exists(fs::path(dir) / kPlanMarker);
  std::set<std::string> ours =
      marked ? markerNames(dir) : (fs::exists(fs::path(dir) / "plan.pb") ? kLegacyPlanFiles
                                                                         : std::set<std::string>{});
  std::vector<std::string> foreign;
  for (const std::string &name : entries)
    if (name != kPlanMarker && !ours.count(name))
      foreign.push_back(name);
  if (foreign.empty())
    return;
  // A plan folder (-o), or another folder dsc writes whole (--timeline).
  const bool plan = what == "-o";
  const std::string is = plan ? "a dsc plan" : "dsc's output",
                    earlier = plan ? "an earlier plan" : "its earlier output";
  if (ours.empty())
    throw IoError(what + " " + dir + ": is a folder that is not empty and not " + is + " (it " +
                  "holds " + listSome(foreign) + "); dsc writes " + (plan ? "a plan" : "it") +
                  " only into a new or empty folder, or over " + earlier + ": choose another " +
                  what);
  throw IoError(what + " " + dir + ": is " + is + ", but it also holds " + listSome(foreign) +
                ", which dsc did not write; dsc replaces " + (plan ? "a plan" : "such a") +
                " folder only as a whole: move those files out, or choose another " + what);
}

bool isWithin(const std::string &inner, const std::string &outer) {
  fs::path a = resolved(inner), b = resolved(outer);
  auto [mismatch, _] = std::mismatch(b.begin(), b.end(), a.begin(), a.end());
  return mismatch == b.end();
}

StagedDir::StagedDir(std::string target, std::string what)
    : target_(std::move(target)), what_(std::move(what)) {
  checkReplaceablePlanDir(target_, what_);
  std::error_code ec;
  replacing_ = fs::exists(target_, ec);
  fs::path parent = parentOf(target_);
  fs::create_directories(parent, ec);
  if (ec)
    throw IoError(what_ + " " + target_ + ": cannot create its parent folder " + parent.string() +
                  ": " + ec.message());
  fs::path name = fs::absolute(target_).lexically_normal().filename();
  if (name.empty() || name == "." || name == "..")
    name = fs::absolute(target_).lexically_normal().parent_path().filename();
  staging_ = (parent / ("." + name.string() + ".dsc-staging." + std::to_string(::getpid())))
                 .string();
  if (::mkdir(staging_.c_str(), 0755) != 0)
    throw IoError(staging_ + ": cannot create the staging folder of " + target_ + ": " +
                  std::strerror(errno));
}

StagedDir::~StagedDir() {
  if (committed_)
    return;
  std::error_code ec;
  fs::remove_all(staging_, ec); // only what this process wrote there
}

void StagedDir::commit() {
  // The marker lists what this plan is made of, so a later dsc may replace
  // exactly that.
  std::string list;
  for (const std::string &name : entriesOf(staging_))
    list += name + "\n";
  writeFileAtomically(staging_ + "/" + kPlanMarker, {{list.data(), list.size()}});
  fsyncDir(staging_);

  fs::path target = fs::absolute(target_).lexically_normal();
  if (target.filename().empty())
    target = target.parent_path();
  fs::path aside;
  if (replacing_) {
    // Checked again: the folder may have changed while dsc compiled.
    checkReplaceablePlanDir(target_, what_);
    if (entriesOf(target).empty()) {
      if (::rmdir(target.c_str()) != 0)
        throw IoError(target_ + ": cannot replace the empty folder: " + std::strerror(errno));
    } else {
      aside = target.parent_path() /
              ("." + target.filename().string() + ".dsc-old." + std::to_string(::getpid()));
      if (::rename(target.c_str(), aside.c_str()) != 0)
        throw IoError(target_ + ": cannot move the earlier plan aside to " + aside.string() +
                      ": " + std::strerror(errno));
    }
  }
  if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) != 0) {
    int err = errno;
    if (!aside.empty()) // put the earlier plan back
      ::rename(aside.c_str(), target.c_str());
    throw IoError(target_ + ": cannot move the new plan " + staging_ + " into place: " +
                  std::strerror(err));
  }
  committed_ = true;
  fsyncDir(target.parent_path());
  if (!aside.empty()) {
    // Only the files the earlier plan's marker (or dsc's old layout) names;
    // the folder goes only if that empties it.
    std::set<std::string> names = fs::exists(aside / kPlanMarker) ? markerNames(aside)
                                                                  : kLegacyPlanFiles;
    names.insert(kPlanMarker);
    for (const std::string &name : names)
      ::unlink((aside / name).c_str());
    ::rmdir(aside.c_str());
  }
}

std::string newRunToken() {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::to_string(::getpid()) + "-" +
         std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
}

std::string makeRunDir(const std::string &outOrEmpty, const std::string &token,
                       std::time_t now) {
  std::string mark = token.empty() ? newRunToken() : token;
  auto claim = [&](const std::string &dir) {
    std::string text = mark + "\n";
    writeFileAtomically(dir + "/" + kRunMarker, {{text.data(), text.size()}},
                        Existing::Refuse);
    return dir;
  };
  std::error_code ec;
  if (!outOrEmpty.empty()) {
    fs::path dir(outOrEmpty);
    fs::file_status st = fs::status(dir, ec);
    if (fs::exists(st) && !fs::is_directory(st))
      throw IoError(outOrEmpty + ": exists and is not a directory; choose another --out");
    if (fs::exists(st)) {
      std::vector<std::string> entries = entriesOf(dir);
      if (entries.empty())
        return claim(outOrEmpty);
      std::string owner = firstLine(dir / kRunMarker);
      if (!token.empty() && owner == token)
        return outOrEmpty; // the launcher made it for this run
      std::string whose = std::find(entries.begin(), entries.end(), "plan.pb") != entries.end()
                              ? "it is a plan folder"
                          : !owner.empty() ? "it holds an earlier run"
                                           : "it holds " + listSome(entries);
      throw IoError(outOrEmpty + ": exists and is not empty (" + whose + "); dsrt writes a " +
                    "run only into a new or empty folder and never over files it did not " +
                    "create: choose another --out, or omit --out to get a new runs/<time> " +
                    "folder");
    }
    fs::create_directories(dir, ec);
    if (ec)
      throw IoError(outOrEmpty + ": cannot create the run directory: " + ec.message());
    return claim(outOrEmpty);
  }
  fs::create_directories("runs", ec);
  if (ec)
    throw IoError("runs: cannot create the runs directory: " + ec.message());
  std::tm local;
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  // mkdir either claims a name or fails with EEXIST, so concurrent runs
  // started in the same second still get distinct directories.
  for (int suffix = 0;; ++suffix) {
    std::string dir = std::string("runs/") + stamp;
    if (suffix > 0)
      dir += "-" + std::to_string(suffix);
    if (fs::create_directory(dir, ec))
      return claim(dir);
    if (ec)
      throw IoError(dir + ": cannot create the run directory: " + ec.message());
  }
}

void checkNewFile(const std::string &path, const std::string &what) {
  std::error_code ec;
  fs::file_status st = fs::symlink_status(path, ec);
  if (fs::exists(st))
    throw IoError(what + " " + path + ": exists; dsrt never writes over a file it did not " +
                  "create in this run: give a new file name");
}

void checkFileCanBeMade(const std::string &path, const std::string &what) {
  checkNewFile(path, what);
  fs::path parent = fs::absolute(path).parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec))
    throw IoError(what + " " + path + ": the folder " + parent.string() +
                  " does not exist; create it or give a file in an existing folder");
  if (::access(parent.c_str(), W_OK | X_OK) != 0)
    throw IoError(what + " " + path + ": cannot create files in " + parent.string() + " (" +
                  std::strerror(errno) + ")");
}

} // namespace dsrt::io
