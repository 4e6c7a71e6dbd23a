//===- OutputDir.h - folders and files the tools may write ------*- C++ -*-===//
//
// dsc and dsrt never write over a file they did not create, never delete
// one, and never leave a folder half replaced:
//
//  * A plan folder (dsc -o DIR) is written into a staging folder beside DIR
//    and renamed into place whole. DIR may be missing, empty, or an earlier
//    plan: a folder whose marker file (.dsc-plan) lists every entry in it.
//    Anything else in DIR is the user's, and dsc refuses to touch it.
//  * A run folder (dsrt --out DIR) must be new or empty; dsrt marks it
//    (.dsrt-run) with the run's token so the ranks that dsrt's launcher
//    starts can tell the folder it made for them from an earlier run's.
//  * A single output file (dsrt --export-onnx, dsc -o FILE.mlir) is written
//    through a temporary and renamed into place only if no file of that
//    name exists (renameat2's RENAME_NOREPLACE), so a check made at start-up
//    cannot be raced by the end of a long run.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_IO_OUTPUTDIR_H
#define DSRT_IO_OUTPUTDIR_H

#include "io/FileUtil.h"

#include <ctime>
#include <string>
#include <vector>

namespace dsrt::io {

/// The marker of a plan folder: one line per entry dsc wrote.
constexpr const char *kPlanMarker = ".dsc-plan";
/// The marker of a run folder: the token of the run that made it.
constexpr const char *kRunMarker = ".dsrt-run";

/// A folder built beside `target` and moved into its place by commit().
class StagedDir {
public:
  /// Checks that `target` may be replaced (see the file comment) and
  /// creates the staging folder in its parent. `what` names the folder in
  /// messages ("-o"). Throws IoError naming the entries that are not dsc's.
  StagedDir(std::string target, std::string what);
  StagedDir(const StagedDir &) = delete;
  StagedDir &operator=(const StagedDir &) = delete;
  /// Removes the staging folder unless commit() moved it into place.
  ~StagedDir();

  /// Where to write the folder's files.
  const std::string &path() const { return staging_; }
  /// Writes the marker (listing every file written into path()), then
  /// moves the folder into place; an earlier plan there is moved aside and
  /// its listed files deleted only after the new one is in place.
  void commit();

private:
  std::string target_, what_, staging_;
  bool replacing_ = false, committed_ = false;
};

/// Throws IoError unless `dir` is absent, an empty folder, or a plan
/// folder that dsc wrote (its marker lists every entry). `what` names it.
void checkReplaceablePlanDir(const std::string &dir, const std::string &what);

/// True if `inner` is `outer` or lies under it (both made absolute and
/// normal; symbolic links resolved where they exist).
bool isWithin(const std::string &inner, const std::string &outer);

/// The folder a run writes into, claimed for the run of `token`:
///  * `outOrEmpty` empty: a new ./runs/<YYYYmmdd-HHMMSS> from `now` (local
///    time), with -1, -2, ... when that name is taken; returns its path.
///  * otherwise that folder, created with its parents if missing. An
///    existing folder must be empty, or already claimed with this same
///    `token` (the launcher's folder, seen by its rank 0). Anything else is
///    an IoError: dsrt never writes into a folder that holds other files.
/// Writes the marker with `token`. Throws IoError.
std::string makeRunDir(const std::string &outOrEmpty, const std::string &token = "",
                       std::time_t now = std::time(nullptr));

/// A token for makeRunDir, unique to this process and moment.
std::string newRunToken();

/// Throws IoError if `path` exists (or is a dangling symbolic link): the
/// early check of a file written at the end of a run with
/// writeFileAtomically(..., Existing::Refuse). `what` names the flag
/// ("--export-onnx").
void checkNewFile(const std::string &path, const std::string &what);

/// checkNewFile, and the file's folder exists and this process may create
/// files in it: what a file written at the end of a run (a report) must
/// hold before the run starts. Throws IoError naming `what`.
void checkFileCanBeMade(const std::string &path, const std::string &what);

} // namespace dsrt::io

#endif // DSRT_IO_OUTPUTDIR_H
