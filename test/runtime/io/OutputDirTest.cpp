//===- OutputDirTest.cpp - plan and run folders, files never written over -===//
#include "io/OutputDir.h"

#include "TestDir.h"

#include <filesystem>

using namespace dsrt::io;
using dsrt::io::test::readBytes;
using dsrt::io::test::TestDir;
using dsrt::io::test::writeBytes;
namespace fs = std::filesystem;

namespace {

/// Runs the test body with `dir` as the working directory.
class InDir {
public:
  explicit InDir(const std::string &dir) : saved_(fs::current_path()) { fs::current_path(dir); }
  ~InDir() { fs::current_path(saved_); }

private:
  fs::path saved_;
};

std::string stampOf(std::time_t t) {
  std::tm local;
  localtime_r(&t, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &local);
  return buf;
}

/// A plan folder as dsc writes it: the files, then commit().
void writePlan(const std::string &dir, const std::string &content) {
  StagedDir staged(dir, "-o");
  for (const char *name : {"plan.pb", "weights.safetensors", "manifest.txt"})
    writeBytes(staged.path() + "/" + name, content);
  staged.commit();
}

size_t entries(const std::string &dir) {
  size_t n = 0;
  for (auto it = fs::directory_iterator(dir); it != fs::directory_iterator(); ++it)
    ++n;
  return n;
}

} // namespace

TEST(RunDir, TimestampedUnderRunsWithSuffixesWhenTaken) {
  TestDir dir;
  InDir cwd(dir.path());
  std::time_t t = 1700000000;
  std::string stamp = stampOf(t);
  EXPECT_EQ(makeRunDir("", "", t), "runs/" + stamp);
  EXPECT_EQ(makeRunDir("", "", t), "runs/" + stamp + "-1");
  EXPECT_EQ(makeRunDir("", "", t), "runs/" + stamp + "-2");
  EXPECT_TRUE(fs::is_directory("runs/" + stamp + "-2"));
  EXPECT_TRUE(fs::exists("runs/" + stamp + "-2/" + kRunMarker));
  std::string now = makeRunDir("");
  EXPECT_EQ(now.rfind("runs/20", 0), 0u) << now;
  EXPECT_TRUE(fs::is_directory(now));
}

TEST(RunDir, NewOrEmptyOnly) {
  TestDir dir;
  std::string out = dir.file("a/b/run");
  EXPECT_EQ(makeRunDir(out), out);
  EXPECT_TRUE(fs::is_directory(out));
  // The folder of an earlier run (even one that failed before writing
  // metrics: its logs are kept) is never reused.
  EXPECT_NE(DSRT_ERROR_OF(IoError, makeRunDir(out)).find("exists and is not empty (it holds an "
                                                          "earlier run)"),
            std::string::npos);
  std::string empty = dir.file("empty");
  fs::create_directory(empty);
  EXPECT_EQ(makeRunDir(empty), empty);

  // A user's folder: nothing in it is touched.
  std::string mine = dir.file("mine");
  fs::create_directory(mine);
  writeBytes(mine + "/weights.safetensors", "precious");
  EXPECT_EQ(DSRT_ERROR_OF(IoError, makeRunDir(mine)),
            mine + ": exists and is not empty (it holds weights.safetensors); dsrt writes a run "
                   "only into a new or empty folder and never over files it did not create: "
                   "choose another --out, or omit --out to get a new runs/<time> folder");
  EXPECT_EQ(readBytes(mine + "/weights.safetensors"), "precious");
  EXPECT_EQ(entries(mine), 1u);

  // A plan folder as --out.
  std::string plan = dir.file("plan");
  writePlan(plan, "x");
  EXPECT_NE(DSRT_ERROR_OF(IoError, makeRunDir(plan)).find("(it is a plan folder)"),
            std::string::npos);

  std::string file = dir.file("plain");
  writeBytes(file, "x");
  EXPECT_EQ(DSRT_ERROR_OF(IoError, makeRunDir(file)),
            file + ": exists and is not a directory; choose another --out");
  std::string under = file + "/run";
  EXPECT_EQ(DSRT_ERROR_OF(IoError, makeRunDir(under))
                .rfind(under + ": cannot create the run directory: ", 0),
            0u);
}

TEST(RunDir, TheLaunchersFolderIsItsRanks) {
  TestDir dir;
  std::string out = dir.file("run");
  std::string token = newRunToken();
  EXPECT_EQ(makeRunDir(out, token), out);
  writeBytes(out + "/ranks.txt", "rank host slot\n");
  // Rank 0 of that run finds the launcher's folder; another run does not.
  EXPECT_EQ(makeRunDir(out, token), out);
  EXPECT_FALSE(DSRT_ERROR_OF(IoError, makeRunDir(out, newRunToken())).empty());
  EXPECT_FALSE(DSRT_ERROR_OF(IoError, makeRunDir(out)).empty());
  EXPECT_EQ(readBytes(out + "/ranks.txt"), "rank host slot\n");
}

TEST(PlanDir, WrittenWholeAndReplacedOnlyWhenItIsAPlan) {
  TestDir dir;
  std::string plan = dir.file("out/plan");
  writePlan(plan, "one");
  EXPECT_EQ(readBytes(plan + "/plan.pb"), "one");
  EXPECT_EQ(readBytes(plan + "/" + kPlanMarker),
            "manifest.txt\nplan.pb\nweights.safetensors\n");
  writePlan(plan, "two");
  EXPECT_EQ(readBytes(plan + "/plan.pb"), "two");
  // Nothing is left beside it: no staging folder, no old plan.
  EXPECT_EQ(entries(dir.file("out")), 1u);

  // A file the user put into the plan folder stops the replacement.
  writeBytes(plan + "/notes.txt", "mine");
  EXPECT_EQ(DSRT_ERROR_OF(IoError, StagedDir(plan, "-o")),
            "-o " + plan + ": is a dsc plan, but it also holds notes.txt, which dsc did not "
                           "write; dsc replaces a plan folder only as a whole: move those "
                           "files out, or choose another -o");
  EXPECT_EQ(readBytes(plan + "/plan.pb"), "two");
}

TEST(PlanDir, NeverIntoAUsersFolderOrOverAFile) {
  TestDir dir;
  // `cp m.onnx model.onnx && dsc model.onnx -o .`: the folder is the user's.
  writeBytes(dir.file("model.onnx"), "the user's model");
  {
    InDir cwd(dir.path());
    EXPECT_EQ(DSRT_ERROR_OF(IoError, StagedDir(".", "-o")),
              "-o .: is a folder that is not empty and not a dsc plan (it holds model.onnx); "
              "dsc writes a plan only into a new or empty folder, or over an earlier plan: "
              "choose another -o");
  }
  EXPECT_EQ(readBytes(dir.file("model.onnx")), "the user's model");
  EXPECT_EQ(DSRT_ERROR_OF(IoError, StagedDir(dir.file("model.onnx"), "-o")),
            "-o " + dir.file("model.onnx") +
                ": exists and is not a folder; dsc writes a plan folder there and never "
                "replaces a file it did not create");
  // An empty folder is taken; a symbolic link is refused.
  fs::create_directory(dir.file("empty"));
  writePlan(dir.file("empty"), "p");
  EXPECT_EQ(readBytes(dir.file("empty/plan.pb")), "p");
  fs::create_directory_symlink(dir.file("empty"), dir.file("link"));
  EXPECT_NE(DSRT_ERROR_OF(IoError, StagedDir(dir.file("link"), "-o")).find("symbolic link"),
            std::string::npos);
}

TEST(PlanDir, AnUncommittedPlanLeavesNothing) {
  TestDir dir;
  std::string plan = dir.file("plan");
  writePlan(plan, "old");
  {
    StagedDir staged(plan, "-o");
    writeBytes(staged.path() + "/plan.pb", "half");
  } // a compile error: no commit
  EXPECT_EQ(readBytes(plan + "/plan.pb"), "old");
  EXPECT_EQ(entries(dir.path()), 1u);
}

TEST(PlanDir, IsWithin) {
  TestDir dir;
  fs::create_directories(dir.file("a/b"));
  EXPECT_TRUE(isWithin(dir.file("a/b/m.onnx"), dir.file("a")));
  EXPECT_TRUE(isWithin(dir.file("a"), dir.file("a/")));
  EXPECT_TRUE(isWithin(dir.file("a/b/../m.onnx"), dir.file("a")));
  EXPECT_FALSE(isWithin(dir.file("ab/m.onnx"), dir.file("a")));
  EXPECT_FALSE(isWithin(dir.file("m.onnx"), dir.file("a")));
}

TEST(NewFile, NeverWrittenOver) {
  TestDir dir;
  std::string path = dir.file("model.onnx");
  writeBytes(path, "source");
  EXPECT_EQ(DSRT_ERROR_OF(IoError, checkNewFile(path, "--export-onnx")),
            "--export-onnx " + path + ": exists; dsrt never writes over a file it did not "
                                      "create in this run: give a new file name");
  // Even when it appears after the check, the write does not replace it.
  std::string data = "trained";
  EXPECT_EQ(DSRT_ERROR_OF(IoError, writeFileAtomically(path, {{data.data(), data.size()}},
                                                       Existing::Refuse)),
            path + ": exists; not written over (the new file was not kept)");
  EXPECT_EQ(readBytes(path), "source");
  EXPECT_EQ(entries(dir.path()), 1u); // no temporary left
  std::string fresh = dir.file("new.onnx");
  checkNewFile(fresh, "--export-onnx");
  writeFileAtomically(fresh, {{data.data(), data.size()}}, Existing::Refuse);
  EXPECT_EQ(readBytes(fresh), "trained");
}

TEST(NewFile, TheTemporaryNeverTruncatesAFileItDidNotMake) {
  TestDir dir;
  std::string path = dir.file("w.safetensors");
  // A file named like the old fixed temporary is someone else's.
  writeBytes(path + ".tmp", "not dsrt's");
  std::string data = "x";
  writeFileAtomically(path, {{data.data(), data.size()}});
  EXPECT_EQ(readBytes(path + ".tmp"), "not dsrt's");
  EXPECT_EQ(readBytes(path), "x");
}
