//===- LauncherTest.cpp - the mpirun launcher of dsrt ---------------------===//
//
// The ranks' arguments, the exact mpirun command line, mpirun's failure
// reports, the launcher's errors before mpirun starts, the pid files of the
// ranks, and the supervision of real mpirun jobs whose ranks are /bin/sh
// (exit statuses, kill -9, the relay of rank 0's output and of the ranks'
// "dsrt: error:" lines, SIGTERM forwarding). The mpirun tests are skipped
// where OpenMPI's mpirun is not installed.
//
//===----------------------------------------------------------------------===//
#include "runtime/launch/Launcher.h"
#include "runtime/launch/Restart.h"

#include "TestDir.h"
#include "io/FileUtil.h"
#include "plan.pb.h"

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

using namespace dsrt::launch;
using dsrt::io::test::readBytes;
using dsrt::io::test::TestDir;
using dsrt::io::test::writeBytes;
namespace fs = std::filesystem;

namespace {

/// Sets (or, with nullptr, unsets) an environment variable for one scope.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

private:
  const char *name_;
  std::optional<std::string> old_;
};

bool haveMpirun() {
  static const bool have = std::system("command -v mpirun >/dev/null 2>&1") == 0;
  return have;
}

std::vector<RankSlot> localRanks(int n) {
  std::vector<RankSlot> ranks;
  for (int r = 0; r < n; ++r)
    ranks.push_back({"localhost", r});
  return ranks;
}

/// `script`, then this rank's exit status 0 recorded in RUNDIR/ranks as
/// dsrt's ranks record it (the launcher checks that every rank ran).
std::string finishing(const std::string &runDir, const std::string &script) {
  return script + "; mkdir -p " + runDir + "/ranks && echo 0 > " + runDir +
         "/ranks/$OMPI_COMM_WORLD_RANK.exit";
}

/// mpirun running `script` with /bin/sh -c on `np` local ranks.
std::vector<std::string> shJob(int np, const std::string &runDir, const std::string &script,
                               bool nocopy = true) {
  return {"mpirun",
          "--allow-run-as-root",
          "--oversubscribe",
          "-np",
          std::to_string(np),
          "--bind-to",
          "none",
          "--output-filename",
          runDir + "/logs" + (nocopy ? ":nocopy" : ""),
          "/bin/sh",
          "-c",
          script};
}

/// What superviseMpirun wrote to its out and err streams.
struct Captured {
  SuperviseResult result;
  std::string out, err;
  double seconds = 0;
};

std::string readAll(std::FILE *f) {
  std::fflush(f);
  std::rewind(f);
  std::string text;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, f))
    text.append(buf, n);
  std::fclose(f);
  return text;
}

Captured supervise(const std::vector<std::string> &command, int np, const std::string &runDir,
                   bool relay = true) {
  std::FILE *out = std::tmpfile();
  std::FILE *err = std::tmpfile();
  auto start = std::chrono::steady_clock::now();
  Captured c;
  c.result = superviseMpirun(command, localRanks(np), runDir, relay, out, err);
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  c.out = readAll(out);
  c.err = readAll(err);
  return c;
}

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

/// The value after -x in an mpirun command.
std::string threadsOf(const std::vector<std::string> &command) {
  auto x = std::find(command.begin(), command.end(), "-x");
  return x == command.end() || x + 1 == command.end() ? "" : *(x + 1);
}

} // namespace

//===----------------------------------------------------------------------===//
// Arguments and the command line
//===----------------------------------------------------------------------===//

TEST(RankEnvironment, OpenMpiPmiAndNone) {
  ScopedEnv a("OMPI_COMM_WORLD_SIZE", nullptr), b("OMPI_COMM_WORLD_RANK", nullptr),
      c("OMPI_COMM_WORLD_LOCAL_SIZE", nullptr), d("PMI_SIZE", nullptr), e("PMI_RANK", nullptr),
      f("MPI_LOCALNRANKS", nullptr);
  EXPECT_FALSE(rankEnvironment());
  {
    ScopedEnv size("OMPI_COMM_WORLD_SIZE", "4"), rank("OMPI_COMM_WORLD_RANK", "3"),
        local("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
    std::optional<RankEnv> env = rankEnvironment();
    ASSERT_TRUE(env);
    EXPECT_EQ(env->rank, 3);
    EXPECT_EQ(env->size, 4);
    EXPECT_EQ(env->localSize, 2);
    EXPECT_EQ(mpiRank(), 3);
  }
  {
    ScopedEnv size("PMI_SIZE", "2"), rank("PMI_RANK", "1");
    std::optional<RankEnv> env = rankEnvironment();
    ASSERT_TRUE(env);
    EXPECT_EQ(env->rank, 1);
    EXPECT_EQ(env->localSize, 1); // not said: 1
  }
  for (const char *bad : {"", "x", "4", "-1", "1x"}) {
    ScopedEnv size("OMPI_COMM_WORLD_SIZE", "4"), rank("OMPI_COMM_WORLD_RANK", bad);
    EXPECT_FALSE(rankEnvironment()) << "rank '" << bad << "'";
  }
}

TEST(RankArguments, DropLauncherFlagsAndPassTheRunFolder) {
  std::vector<std::string> argv = {
      "dsrt",        "plan", "--hostfile",  "hosts",     "--data",    "d",        "--include=a@b",
      "--num_ranks", "2",    "--out",       "mine",      "--exclude", "x",        "--num_nodes=1",
      "--steps",     "3",    "--out=other", "--threads", "2",         "--profile"};
  std::vector<std::string> want = {"plan",      "--data", "d",         "--steps", "3",
                                   "--threads", "2",      "--profile", "--out",   "/abs/run"};
  EXPECT_EQ(rankArguments(argv, "/abs/run"), want);
  want = {"--out", "/r"};
  EXPECT_EQ(rankArguments({"dsrt"}, "/r"), want);
}

/// A restart's arguments: the plan replaced wherever it stands among the
/// options, --init / --resume replaced by the checkpoint, every other
/// option (a flag, a value that looks like the plan) kept.
TEST(RankArguments, RestartReplacesThePlanAndTheResumePoint) {
  CLI::App app;
  std::string plan, data, init, resume, out;
  int64_t steps = 0;
  bool profile = false;
  app.add_option("plan", plan);
  app.add_option("--data", data);
  app.add_option("--init", init);
  app.add_option("--resume", resume);
  app.add_option("--out", out);
  app.add_option("--steps", steps);
  app.add_flag("--profile", profile);
  std::vector<std::string> argv = {"dsrt", "--profile", "--data", "plan", "plan",
                                   "--init=w.safetensors", "--steps", "40"};
  std::vector<std::string> want = {"dsrt",    "--profile", "--data", "plan",
                                   "plan/elastic/dp2", "--steps", "40", "--resume",
                                   "ck/step-00000010"};
  EXPECT_EQ(restartArguments(argv, app, "plan/elastic/dp2", "ck/step-00000010"), want);
  argv = {"dsrt", "plan", "--resume", "old", "--steps", "40"};
  want = {"dsrt", "plan/elastic/dp3", "--steps", "40", "--resume", "ck/step-00000015"};
  EXPECT_EQ(restartArguments(argv, app, "plan/elastic/dp3", "ck/step-00000015"), want);
  // No checkpoint yet: the same start again.
  want = {"dsrt", "plan", "--resume", "old", "--steps", "40"};
  EXPECT_EQ(restartArguments(argv, app, "plan", ""), want);
}

TEST(MpirunCommand, LocalRanks) {
  MpirunSetup s;
  s.mpirun = "/usr/bin/mpirun";
  s.ranks = localRanks(2);
  s.runDir = "/r";
  s.dsrt = "/bin/dsrt";
  s.args = {"plan", "--out", "/r"};
  s.root = true;
  s.cores = 2;
  std::vector<std::string> want = {"/usr/bin/mpirun",
                                   "--allow-run-as-root",
                                   "-np",
                                   "2",
                                   "--bind-to",
                                   "none",
                                   "--map-by",
                                   "slot",
                                   "-x",
                                   "OMP_NUM_THREADS=1",
                                   "--output-filename",
                                   "/r/logs:nocopy",
                                   "/bin/dsrt",
                                   "plan",
                                   "--out",
                                   "/r"};
  EXPECT_EQ(buildMpirunCommand(s), want);

  // More ranks than cores: --oversubscribe; --threads given: no OMP_NUM_THREADS.
  s.ranks = localRanks(4);
  s.root = false;
  s.userThreads = true;
  want = {"/usr/bin/mpirun",
          "--oversubscribe",
          "-np",
          "4",
          "--bind-to",
          "none",
          "--map-by",
          "slot",
          "--output-filename",
          "/r/logs:nocopy",
          "/bin/dsrt",
          "plan",
          "--out",
          "/r"};
  EXPECT_EQ(buildMpirunCommand(s), want);

  // Threads per rank: the cores shared by the ranks, at least 1.
  s.userThreads = false;
  s.cores = 16;
  s.ranks = localRanks(3);
  EXPECT_EQ(threadsOf(buildMpirunCommand(s)), "OMP_NUM_THREADS=5");
  s.cores = 2;
  EXPECT_EQ(threadsOf(buildMpirunCommand(s)), "OMP_NUM_THREADS=1");
}

TEST(MpirunCommand, Hostfile) {
  MpirunSetup s;
  s.mpirun = "mpirun";
  s.ranks = {{"node-a", 0}, {"node-a", 1}, {"node-b", 0}, {"node-b", 2}, {"node-b", 3}};
  s.fromHostfile = true;
  s.runDir = "/r";
  s.dsrt = "/bin/dsrt";
  s.args = {"plan", "--out", "/r"};
  s.cores = 12;
  s.relayFromFiles = false; // rank 0 is remote: mpirun copies every rank's output
  std::vector<std::string> want = {"mpirun",
                                   "-np",
                                   "5",
                                   "--host",
                                   "node-a:2,node-b:3",
                                   "--bind-to",
                                   "none",
                                   "--map-by",
                                   "slot",
                                   "-x",
                                   "OMP_NUM_THREADS=4",
                                   "--output-filename",
                                   "/r/logs",
                                   "/bin/dsrt",
                                   "plan",
                                   "--out",
                                   "/r"};
  EXPECT_EQ(buildMpirunCommand(s), want);

  // Only the ranks on this machine count against its cores.
  s.ranks = {{"localhost", 0}, {"localhost", 1}, {"localhost", 2}, {"node-b", 0}};
  s.cores = 2;
  s.relayFromFiles = true;
  want = {"mpirun",
          "--oversubscribe",
          "-np",
          "4",
          "--host",
          "localhost:3,node-b:1",
          "--bind-to",
          "none",
          "--map-by",
          "slot",
          "-x",
          "OMP_NUM_THREADS=1",
          "--output-filename",
          "/r/logs:nocopy",
          "/bin/dsrt",
          "plan",
          "--out",
          "/r"};
  EXPECT_EQ(buildMpirunCommand(s), want);
}

TEST(LocalHost, Names) {
  EXPECT_TRUE(isLocalHost("localhost"));
  EXPECT_TRUE(isLocalHost("127.0.0.1"));
  EXPECT_TRUE(isLocalHost("::1"));
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof name - 1), 0);
  EXPECT_TRUE(isLocalHost(name));
  EXPECT_FALSE(isLocalHost("surely-not-this-machine.example"));
  EXPECT_GE(availableCores(), 1);
}

//===----------------------------------------------------------------------===//
// mpirun's failure reports (OpenMPI 4.1's texts)
//===----------------------------------------------------------------------===//

TEST(MpirunFailure, Signal) {
  std::optional<RankFailure> f = parseMpirunFailure(
      "--------------------------------------------------------------------------\n"
      "mpirun noticed that process rank 2 with PID 0 on node vm exited on signal 9 (Killed).\n"
      "--------------------------------------------------------------------------\n");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, RankFailure::Signal);
  EXPECT_EQ(f->rank, 2);
  EXPECT_EQ(f->node, "vm");
  EXPECT_EQ(f->code, 9);
  EXPECT_EQ(f->signalName, "Killed");
  EXPECT_EQ(describeFailure(*f, localRanks(3), "runs/x/logs"),
            "rank 2 on localhost was killed by signal 9 (Killed); all ranks were stopped (logs "
            "in runs/x/logs)");

  // Without the name in parentheses, and a rank the launcher does not know.
  f = parseMpirunFailure("mpirun noticed that process rank 5 with PID 77 on node n2 exited on "
                         "signal 11.");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->signalName, "");
  EXPECT_EQ(describeFailure(*f, localRanks(2), "L"),
            "rank 5 on n2 was killed by signal 11 (Segmentation fault); all ranks were stopped "
            "(logs in L)");
}

TEST(MpirunFailure, NonZeroExitStatus) {
  std::optional<RankFailure> f = parseMpirunFailure(
      "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
      "the job to be terminated. The first process to do so was:\n"
      "\n"
      "  Process name: [[12438,1],1]\n"
      "  Exit code:    3\n");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, RankFailure::ExitStatus);
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->code, 3);
  std::vector<RankSlot> ranks = {{"a", 0}, {"b", 0}};
  EXPECT_EQ(describeFailure(*f, ranks, "/r/logs"),
            "rank 1 on b exited with status 3; all ranks were stopped (logs in /r/logs)");
}

TEST(MpirunFailure, MpiAbortAndNoFinalize) {
  std::optional<RankFailure> f = parseMpirunFailure(
      "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\n"
      "with errorcode 7.\n\nNOTE: invoking MPI_ABORT causes Open MPI to kill all MPI "
      "processes.\n");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, RankFailure::MpiAbort);
  EXPECT_EQ(describeFailure(*f, localRanks(2), "L"),
            "rank 1 on localhost called MPI_Abort with error code 7; all ranks were stopped "
            "(logs in L)");

  f = parseMpirunFailure("mpirun has exited due to process rank 0 with PID 4242 on\n"
                         "node vm exiting improperly. There are three reasons this could "
                         "occur:\n");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, RankFailure::NoFinalize);
  EXPECT_EQ(describeFailure(*f, localRanks(2), "L"),
            "rank 0 on localhost exited before the other ranks finished (without "
            "MPI_Finalize); all ranks were stopped (logs in L)");
}

/// A rank number beyond int (a garbled report, found by the hostfile_launch
/// fuzzer) made std::stoi throw out of the launcher; it is no match now.
TEST(MpirunFailure, NumbersBeyondIntAreNoMatch) {
  EXPECT_FALSE(parseMpirunFailure("MPI_ABORT was invoked on rank 3333333333 in communicator "
                                  "MPI_COMM_WORLD with errorcode 1"));
  EXPECT_FALSE(parseMpirunFailure("MPI_ABORT was invoked on rank 1 in communicator "
                                  "MPI_COMM_WORLD with errorcode 99999999999"));
  std::optional<RankFailure> f = parseMpirunFailure(
      "MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD with errorcode 7");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rank, 2);
  EXPECT_EQ(f->code, 7);
}

TEST(MpirunFailure, FirstReportWinsAndOthersAreNotFailures) {
  std::optional<RankFailure> f = parseMpirunFailure(
      "  Process name: [[1,1],0]\n  Exit code:    1\n"
      "process rank 3 with PID 9 on node x exited on signal 15 (Terminated).\n"
      "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
      "the job to be terminated. The first process to do so was:\n\n"
      "  Process name: [[1,1],2]\n  Exit code:    4\n");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, RankFailure::Signal);
  EXPECT_EQ(f->rank, 3);
  EXPECT_FALSE(parseMpirunFailure("Primary job  terminated normally, but 1 process returned\n"
                                  "a non-zero exit code. Per user-direction, the job has been "
                                  "aborted.\n"));
  EXPECT_FALSE(parseMpirunFailure("mpirun was unable to launch the specified application as it "
                                  "could not access\nor execute an executable:\n"));
}

//===----------------------------------------------------------------------===//
// The rank side
//===----------------------------------------------------------------------===//

TEST(RankSide, MpiRankFromTheEnvironment) {
  ScopedEnv size("OMPI_COMM_WORLD_SIZE", "4");
  {
    ScopedEnv rank("OMPI_COMM_WORLD_RANK", nullptr);
    EXPECT_FALSE(mpiRank());
  }
  {
    ScopedEnv rank("OMPI_COMM_WORLD_RANK", "3");
    EXPECT_EQ(mpiRank(), 3);
  }
  {
    ScopedEnv rank("OMPI_COMM_WORLD_RANK", "x");
    EXPECT_FALSE(mpiRank());
  }
}

TEST(RankSide, ExitStatusFile) {
  TestDir dir;
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ScopedEnv token(kRunTokenEnv, "t");
    writeRankPidFile(dir.path() + "/run", 2);
    std::exit(5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 5);
  EXPECT_EQ(readBytes(dir.file("run/ranks/2.exit")), "5\n");
  std::optional<RankFailure> f = failureFromExitFiles(dir.path() + "/run");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, RankFailure::ExitStatus);
  EXPECT_EQ(f->rank, 2);
  EXPECT_EQ(f->code, 5);

  // Status 0 is no failure; of two failures the earlier file wins.
  writeBytes(dir.file("run/ranks/0.exit"), "0\n");
  writeBytes(dir.file("run/ranks/3.exit"), "1\n");
  auto setTime = [&](const char *file, time_t seconds) {
    struct utimbuf times = {seconds, seconds};
    ASSERT_EQ(::utime(dir.file(file).c_str(), &times), 0);
  };
  setTime("run/ranks/2.exit", 2000000000);
  setTime("run/ranks/3.exit", 1900000000);
  f = failureFromExitFiles(dir.path() + "/run");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rank, 3);
  EXPECT_EQ(f->code, 1);
  EXPECT_FALSE(failureFromExitFiles(dir.file("nowhere")));
}

TEST(RankSide, PidFile) {
  TestDir dir;
  {
    // A rank that dsrt's launcher did not start writes nothing into --out:
    // the folder is not one the launcher made for it.
    ScopedEnv token(kRunTokenEnv, nullptr);
    writeRankPidFile(dir.path() + "/run", 3);
    EXPECT_FALSE(fs::exists(dir.file("run")));
  }
  ScopedEnv token(kRunTokenEnv, "t");
  writeRankPidFile(dir.path() + "/run", 3);
  EXPECT_EQ(readBytes(dir.file("run/ranks/3.pid")), std::to_string(::getpid()) + "\n");
  EXPECT_FALSE(fs::exists(dir.file("run/ranks/3.pid.tmp")));
  writeRankPidFile("", 0); // no run folder: nothing
  writeBytes(dir.file("file"), "x");
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, writeRankPidFile(dir.file("file"), 0)),
            dir.file("file") + "/ranks: cannot create: Not a directory");
}

//===----------------------------------------------------------------------===//
// launchIfNeeded: the decisions and errors before mpirun starts
//===----------------------------------------------------------------------===//

/// Writes `plan` as DIR/plan.pb with its plan.sha256, as dsc would: the
/// launcher reads a plan only through the executor's checks.
void writePlanFile(const std::string &dir, const dsc::plan::Plan &plan) {
  fs::create_directories(dir);
  writeBytes(dir + "/plan.pb", plan.SerializeAsString());
  dsrt::io::writeChecksums(dir, {{"plan.pb", dsrt::io::sha256File(dir + "/plan.pb")},
                           {"weights.safetensors", std::string(64, '0')}});
}

/// Writes DIR/plan.pb with only `dp` set, all the launcher reads.
void writePlan(const std::string &dir, uint32_t dp) {
  dsc::plan::Plan plan;
  plan.set_format_version(1);
  plan.set_dp(dp);
  writePlanFile(dir, plan);
}

TEST(PlanDp, ReadFromPlanPb) {
  TestDir dir;
  writePlan(dir.file("dp4"), 4);
  EXPECT_EQ(readPlanDp(dir.file("dp4")), 4u);
  writePlan(dir.file("dp0"), 0);
  EXPECT_EQ(readPlanDp(dir.file("dp0")), 1u);
  EXPECT_FALSE(readPlanDp(dir.file("missing")));
  fs::create_directories(dir.file("garbage"));
  writeBytes(dir.file("garbage/plan.pb"), "garbage\377\377\377\377");
  EXPECT_FALSE(readPlanDp(dir.file("garbage")));
  // A plan changed after dsc wrote it is not trusted either (dsrt's own
  // checks then say why).
  writePlan(dir.file("edited"), 4);
  dsc::plan::Plan edited;
  edited.set_format_version(1);
  edited.set_dp(8);
  writeBytes(dir.file("edited/plan.pb"), edited.SerializeAsString());
  EXPECT_FALSE(readPlanDp(dir.file("edited")));
}

/// Writes DIR/plan.pb of a pipeline: pp stage plans of `dp` each (the top
/// level without dp, as dsc may write it).
void writePipelinePlan(const std::string &dir, uint32_t pp, uint32_t dp) {
  dsc::plan::Plan plan;
  plan.set_format_version(1);
  plan.set_pp(pp);
  for (uint32_t s = 0; s < pp; ++s) {
    dsc::plan::Plan *stage = plan.add_stages();
    stage->set_dp(dp);
    stage->set_stage(s);
  }
  writePlanFile(dir, plan);
}

TEST(PlanDp, PipelinePlansNeedPpTimesDpRanks) {
  TestDir dir;
  writePipelinePlan(dir.file("pp4"), 4, 2);
  std::optional<PlanRanks> r = readPlanRanks(dir.file("pp4"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->pp, 4u);
  EXPECT_EQ(r->dp, 2u);
  EXPECT_EQ(r->ranks(), 8u);
  EXPECT_EQ(r->describe(), "pp=4 x dp=2 = 8 ranks");
  EXPECT_EQ(r->recompileFor(12), "`dsc ... --pp 4 --dp 3`");
  EXPECT_EQ(r->recompileFor(6), "`dsc ... --pp P --dp D` with P x D = 6");
  EXPECT_EQ(readPlanDp(dir.file("pp4")), 2u);
  writePlan(dir.file("dp2"), 2);
  r = readPlanRanks(dir.file("dp2"));
  EXPECT_EQ(r->ranks(), 2u);
  EXPECT_EQ(r->describe(), "dp=2");
  EXPECT_EQ(r->recompileFor(3), "`dsc ... --dp 3`");
}

class LaunchDecision : public ::testing::Test {
protected:
  /// A request to run a plan compiled for `dp` (0: no plan.pb at all).
  LaunchRequest request(uint32_t dp, const std::string &out = "") {
    LaunchRequest r;
    r.planDir = dir_.file("plan-dp" + std::to_string(dp));
    if (dp)
      writePlan(r.planDir, dp);
    r.out = out;
    r.argv = {"dsrt", r.planDir, "--data", "data"};
    return r;
  }
  /// A request to run a pipeline plan of pp stages x dp.
  LaunchRequest pipeline(uint32_t pp, uint32_t dp, const std::string &out = "") {
    LaunchRequest r;
    r.planDir = dir_.file("plan-pp" + std::to_string(pp) + "-dp" + std::to_string(dp));
    writePipelinePlan(r.planDir, pp, dp);
    r.out = out;
    r.argv = {"dsrt", r.planDir, "--data", "data"};
    return r;
  }
  ScopedEnv size_{"OMPI_COMM_WORLD_SIZE", nullptr};
  ScopedEnv rank_{"OMPI_COMM_WORLD_RANK", nullptr};
  ScopedEnv pmiSize_{"PMI_SIZE", nullptr};
  ScopedEnv pmiRank_{"PMI_RANK", nullptr};
  TestDir dir_;
};

TEST_F(LaunchDecision, OneRankRunsInProcess) {
  LaunchOptions none;
  EXPECT_FALSE(launchIfNeeded(none, request(1)));
  LaunchOptions one;
  one.selection.numRanks = 1;
  EXPECT_FALSE(launchIfNeeded(one, request(1)));
  // A plan that cannot be read: dsrt's own checks report it.
  LaunchOptions hostfile;
  hostfile.hostfile = dir_.file("hosts");
  writeBytes(hostfile.hostfile, "localhost slots=2\n");
  EXPECT_FALSE(launchIfNeeded(hostfile, request(0)));
}

/// `dsc --dp 100000` then dsrt would have started mpirun -np 100000 here.
TEST_F(LaunchDecision, RanksBeyondWhatThisMachineCanRun) {
  int cores = availableCores();
  uint32_t many = uint32_t(8 * cores + 1);
  std::string error = DSRT_ERROR_OF(LaunchError, launchIfNeeded(LaunchOptions(), request(many)));
  EXPECT_EQ(error, "the plan needs " + std::to_string(many) + " ranks and " +
                       std::to_string(many) + " of them would run on this machine, which has " +
                       std::to_string(cores) + (cores == 1 ? " core" : " cores") +
                       ": dsrt starts at most 8 ranks per core; give a --hostfile with more "
                       "machines, or recompile with `dsc ... --dp " +
                       std::to_string(8 * cores) + "`");
  // A hostfile that puts them on this machine is bounded the same way.
  LaunchOptions hostfile;
  hostfile.hostfile = dir_.file("hosts");
  writeBytes(hostfile.hostfile, "localhost slots=" + std::to_string(many) + "\n");
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(hostfile, request(many))), error);
}

TEST_F(LaunchDecision, UnderMpirunThisIsARank) {
  ScopedEnv size("OMPI_COMM_WORLD_SIZE", "2");
  ScopedEnv rank("OMPI_COMM_WORLD_RANK", "1");
  EXPECT_FALSE(launchIfNeeded(LaunchOptions(), request(2)));
  LaunchOptions options;
  options.hostfile = "hosts";
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, request(2))),
            "--hostfile: this dsrt already runs under mpirun (rank 1 of 2); the launcher flags "
            "are for a dsrt started without mpirun, which starts the ranks itself");
  options = LaunchOptions();
  options.selection.numRanks = 2;
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, request(2))),
            "--num_ranks: this dsrt already runs under mpirun (rank 1 of 2); the launcher flags "
            "are for a dsrt started without mpirun, which starts the ranks itself");
}

TEST_F(LaunchDecision, UnderAnotherMpiLauncher) {
  ScopedEnv size("PMI_SIZE", "4");
  ScopedEnv rank("PMI_RANK", "3");
  EXPECT_EQ(mpiRank(), 3);
  EXPECT_FALSE(launchIfNeeded(LaunchOptions(), request(4)));
  LaunchOptions options;
  options.selection.include = "a";
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, request(4))),
            "--include: this dsrt already runs under mpirun (rank 3 of 4); the launcher flags "
            "are for a dsrt started without mpirun, which starts the ranks itself");
}

TEST_F(LaunchDecision, WithoutHostfile) {
  LaunchOptions options;
  options.selection.include = "localhost:0";
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, request(2))),
            "--include: needs --hostfile (without one, dsrt runs the plan's dp ranks on "
            "localhost)");
  options = LaunchOptions();
  options.selection.numNodes = 1;
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, request(1))),
            "--num_nodes: needs --hostfile (without one, dsrt runs the plan's dp ranks on "
            "localhost)");
  options = LaunchOptions();
  options.selection.numRanks = 3;
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, request(2))),
            "--num_ranks 3: the plan was compiled for dp=2; without --hostfile dsrt runs the "
            "plan's 2 ranks on localhost (recompile with `dsc ... --dp 3` to run 3)");
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, request(1))),
            "--num_ranks 3: the plan was compiled for dp=1; without --hostfile dsrt runs the "
            "plan's 1 rank on localhost (recompile with `dsc ... --dp 3` to run 3)");
  options.selection.numRanks = 0;
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, request(2))),
            "--num_ranks 0: must be at least 1");
}

TEST_F(LaunchDecision, RanksMustEqualThePlansDp) {
  writeBytes(dir_.file("hosts"), "localhost slots=4\n");
  LaunchOptions options;
  options.hostfile = dir_.file("hosts");
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, request(2))),
            "the plan was compiled for dp=2 but the hostfile selection gives 4 ranks: recompile "
            "with `dsc ... --dp 4` or select 2 ranks with --num_ranks 2");
  options.selection.numRanks = 1;
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, request(2))),
            "the plan was compiled for dp=2 but the hostfile selection gives 1 rank: recompile "
            "with `dsc ... --dp 1` or select 2 ranks with --num_ranks 2");
  options.selection.numRanks.reset();
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, request(8))),
            "the plan was compiled for dp=8 but the hostfile selection gives 4 ranks: recompile "
            "with `dsc ... --dp 4` or give the hostfile selection 8 slots");
  // Hostfile and selection errors come first.
  options.selection.include = "nohost";
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, request(2))),
            "--include 'nohost': host 'nohost' is not in " + dir_.file("hosts") +
                " (its hosts: localhost)");
  options = LaunchOptions();
  options.hostfile = dir_.file("missing");
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, request(2))),
            "--hostfile " + dir_.file("missing") + ": cannot open: No such file or directory");
}

TEST_F(LaunchDecision, PipelinePlansNeedPpTimesDpRanks) {
  writeBytes(dir_.file("hosts"), "localhost slots=4\n");
  LaunchOptions options;
  options.hostfile = dir_.file("hosts");
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, pipeline(2, 1))),
            "the plan was compiled for pp=2 x dp=1 = 2 ranks but the hostfile selection gives 4 "
            "ranks: recompile with `dsc ... --pp 2 --dp 2` or select 2 ranks with --num_ranks 2");
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, pipeline(4, 2))),
            "the plan was compiled for pp=4 x dp=2 = 8 ranks but the hostfile selection gives 4 "
            "ranks: recompile with `dsc ... --pp 4 --dp 1` or give the hostfile selection 8 "
            "slots");
  options.selection.numRanks = 3;
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, pipeline(4, 1))),
            "the plan was compiled for pp=4 x dp=1 = 4 ranks but the hostfile selection gives 3 "
            "ranks: recompile with `dsc ... --pp P --dp D` with P x D = 3 or select 4 ranks "
            "with --num_ranks 4");
  LaunchOptions local;
  local.selection.numRanks = 2;
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(local, pipeline(2, 2))),
            "--num_ranks 2: the plan was compiled for pp=2 x dp=2 = 4 ranks; without --hostfile "
            "dsrt runs the plan's 4 ranks on localhost (recompile with `dsc ... --pp 2 --dp 1` "
            "to run 2)");
  local = LaunchOptions();
  local.selection.include = "localhost:0";
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(local, pipeline(2, 1))),
            "--include: needs --hostfile (without one, dsrt runs the plan's 2 ranks on "
            "localhost)");
  // pp=4 x dp=1 on "localhost slots=4" (or on localhost without a
  // hostfile) passes the rank checks and reaches mpirun: 4 ranks.
  fs::create_directories(dir_.file("empty-bin"));
  ScopedEnv path("PATH", dir_.file("empty-bin").c_str());
  const std::string missing = "mpirun: not found on PATH; dsrt starts the ranks of a multi-rank "
                              "run with OpenMPI's mpirun: install openmpi-bin (apt-get install "
                              "openmpi-bin)";
  options.selection.numRanks.reset();
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(options, pipeline(4, 1))), missing);
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(LaunchOptions(), pipeline(2, 1))), missing);
}

TEST_F(LaunchDecision, MpirunMissing) {
  fs::create_directories(dir_.file("empty-bin"));
  ScopedEnv path("PATH", dir_.file("empty-bin").c_str());
  std::string run = dir_.file("run");
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(LaunchOptions(), request(2, run))),
            "mpirun: not found on PATH; dsrt starts the ranks of a multi-rank run with OpenMPI's "
            "mpirun: install openmpi-bin (apt-get install openmpi-bin)");
  EXPECT_FALSE(fs::exists(run)); // no run folder for a run that never started
}

TEST_F(LaunchDecision, RunFolderWithAColon) {
  if (!haveMpirun())
    GTEST_SKIP() << "mpirun is not installed";
  std::string run = dir_.file("a:b");
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, launchIfNeeded(LaunchOptions(), request(2, run))),
            "--out " + run +
                ": contains ':', which mpirun's --output-filename does not accept; choose "
                "another --out");
  EXPECT_FALSE(fs::exists(run));
}

//===----------------------------------------------------------------------===//
// Supervision of real mpirun jobs (ranks are /bin/sh)
//===----------------------------------------------------------------------===//

class Supervise : public ::testing::Test {
protected:
  void SetUp() override {
    if (!haveMpirun())
      GTEST_SKIP() << "mpirun is not installed";
  }
  TestDir dir_;
  std::string run() const { return dir_.file("run"); }
  std::string stopped() const { return "; all ranks were stopped (logs in " + run() + "/logs)"; }
};

TEST_F(Supervise, SuccessRelaysRankZeroAndKeepsEveryRanksLogs) {
  Captured c = supervise(shJob(3, run(),
                               finishing(run(), "echo \"out $OMPI_COMM_WORLD_RANK\"; "
                                                "echo \"err $OMPI_COMM_WORLD_RANK\" >&2")),
                         3, run());
  EXPECT_TRUE(c.result.ok) << c.result.error;
  EXPECT_EQ(c.result.error, "");
  EXPECT_EQ(c.out, "out 0\n");
  EXPECT_EQ(c.err, "err 0\n");
  for (int r = 0; r < 3; ++r) {
    std::string dir = run() + "/logs/1/rank." + std::to_string(r);
    EXPECT_EQ(readBytes(dir + "/stdout"), "out " + std::to_string(r) + "\n");
    EXPECT_EQ(readBytes(dir + "/stderr"), "err " + std::to_string(r) + "\n");
  }
  EXPECT_TRUE(fs::exists(run() + "/logs/mpirun.stderr"));
}

TEST_F(Supervise, WithoutNocopyEveryRankReachesTheTerminal) {
  Captured c =
      supervise(shJob(2, run(), finishing(run(), "echo \"out $OMPI_COMM_WORLD_RANK\""), false), 2,
                run(), false);
  EXPECT_TRUE(c.result.ok) << c.result.error;
  EXPECT_EQ(count(c.out, "out 0\n"), 1u);
  EXPECT_EQ(count(c.out, "out 1\n"), 1u);
  EXPECT_EQ(readBytes(run() + "/logs/1/rank.1/stdout"), "out 1\n");
}

/// An mpirun that exits 0 without running the ranks (a wrapper, a broken
/// installation) reported success before.
TEST_F(Supervise, SuccessWithoutRanksIsAFailure) {
  Captured c = supervise(shJob(2, run(), "true"), 2, run());
  EXPECT_FALSE(c.result.ok);
  EXPECT_EQ(c.result.error, "mpirun exited with status 0, but rank 0 never ran to its end (no " +
                                run() + "/ranks/0.exit): the run did not happen" + stopped());
  Captured one = supervise(shJob(2, run(), "[ $OMPI_COMM_WORLD_RANK = 1 ] || { " +
                                               finishing(run(), "true") + "; }"),
                           2, run());
  EXPECT_FALSE(one.result.ok);
  EXPECT_NE(one.result.error.find("rank 1 never ran to its end"), std::string::npos)
      << one.result.error;
}

TEST_F(Supervise, NonZeroExitStopsTheOtherRanks) {
  // mpirun names the rank when the others were running (hence the sleep).
  Captured c = supervise(
      shJob(3, run(), "if [ $OMPI_COMM_WORLD_RANK = 1 ]; then sleep 5; exit 3; fi; exec sleep 60"),
      3, run());
  EXPECT_FALSE(c.result.ok);
  EXPECT_EQ(c.result.error, "rank 1 on localhost exited with status 3" + stopped());
  EXPECT_LT(c.seconds, 40);
  // mpirun's own banners are replaced by that one line.
  EXPECT_EQ(c.err.find("Primary job"), std::string::npos) << c.err;
  EXPECT_EQ(c.err.find("non-zero status"), std::string::npos) << c.err;
  EXPECT_NE(readBytes(run() + "/logs/mpirun.stderr").find("Exit code:    3"), std::string::npos);
}

TEST_F(Supervise, EarlyExitNamedByTheRanksExitFile) {
  // A rank that fails while the others start: mpirun only says that "1
  // process returned a non-zero exit code"; the exit file dsrt's ranks write
  // at exit (writeRankPidFile) names it. Here the shell writes it.
  Captured c =
      supervise(shJob(3, run(),
                      "if [ $OMPI_COMM_WORLD_RANK = 1 ]; then mkdir -p " + run() +
                          "/ranks; echo 4 > " + run() + "/ranks/1.exit; exit 4; fi; exec sleep 60"),
                3, run());
  EXPECT_FALSE(c.result.ok);
  EXPECT_EQ(c.result.error, "rank 1 on localhost exited with status 4" + stopped());
  EXPECT_EQ(c.err, "");
}

TEST_F(Supervise, EarlyExitWithoutExitFile) {
  Captured c =
      supervise(shJob(3, run(), "if [ $OMPI_COMM_WORLD_RANK = 1 ]; then exit 3; fi; exec sleep 60"),
                3, run());
  EXPECT_FALSE(c.result.ok);
  // Either mpirun names the rank, or it does not and the message says so.
  if (c.result.error.rfind("rank 1", 0) != 0) {
    EXPECT_EQ(c.result.error, "a rank exited with status 3 (mpirun did not say which; each "
                              "rank's stderr is in " +
                                  run() + "/logs/1/rank.N/stderr)" + stopped());
  } else {
    EXPECT_EQ(c.result.error, "rank 1 on localhost exited with status 3" + stopped());
  }
}

TEST_F(Supervise, KilledRank) {
  // As above: the sleep lets every rank start, so mpirun names the one killed.
  Captured c = supervise(
      shJob(3, run(),
            "if [ $OMPI_COMM_WORLD_RANK = 2 ]; then sleep 5; kill -9 $$; fi; exec sleep 60"),
      3, run());
  EXPECT_FALSE(c.result.ok);
  EXPECT_EQ(c.result.error, "rank 2 on localhost was killed by signal 9 (Killed)" + stopped());
  EXPECT_LT(c.seconds, 40);
  EXPECT_EQ(c.err.find("mpirun noticed"), std::string::npos) << c.err;
}

TEST_F(Supervise, RankErrorLinesAreRelayedOnce) {
  Captured c = supervise(shJob(3, run(),
                               "echo 'dsrt: error: data.bin: no such file' >&2; "
                               "echo \"noise $OMPI_COMM_WORLD_RANK\" >&2; "
                               "if [ $OMPI_COMM_WORLD_RANK = 2 ]; then "
                               "echo 'dsrt: error: only rank 2' >&2; mkdir -p " +
                                   run() + "/ranks; echo 1 > " + run() +
                                   "/ranks/2.exit; exit 1; fi; exec sleep 60"),
                         3, run());
  EXPECT_FALSE(c.result.ok);
  EXPECT_EQ(c.result.error, "rank 2 on localhost exited with status 1" + stopped());
  EXPECT_EQ(count(c.err, "dsrt: error: data.bin: no such file\n"), 1u) << c.err;
  EXPECT_EQ(count(c.err, "dsrt: error: only rank 2\n"), 1u) << c.err;
  EXPECT_EQ(count(c.err, "noise 0\n"), 1u) << c.err; // rank 0's stderr, all of it
  EXPECT_EQ(count(c.err, "noise 2"), 0u) << c.err;   // the others': only their errors
  EXPECT_EQ(readBytes(run() + "/logs/1/rank.2/stderr"),
            "dsrt: error: data.bin: no such file\nnoise 2\ndsrt: error: only rank 2\n");
}

TEST_F(Supervise, UnknownMpirunFailurePassesThrough) {
  Captured c = supervise({"mpirun", "--allow-run-as-root", "-np", "1", "--output-filename",
                          run() + "/logs:nocopy", dir_.file("no-such-program")},
                         1, run());
  EXPECT_FALSE(c.result.ok);
  EXPECT_EQ(c.result.error.rfind("mpirun failed with exit status ", 0), 0u) << c.result.error;
  EXPECT_NE(c.result.error.find("(its messages are above and in " + run() +
                                "/logs/mpirun.stderr); all ranks were stopped"),
            std::string::npos)
      << c.result.error;
  EXPECT_NE(c.err.find(dir_.file("no-such-program")), std::string::npos) << c.err;
}

TEST_F(Supervise, CommandThatCannotRun) {
  Captured c = supervise({dir_.file("no-mpirun")}, 1, run());
  EXPECT_FALSE(c.result.ok);
  EXPECT_EQ(c.result.error, "cannot run " + dir_.file("no-mpirun") + ": No such file or directory");
}

TEST_F(Supervise, SigtermIsForwardedToMpirun) {
  std::thread sender([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));
    ::kill(::getpid(), SIGTERM);
  });
  Captured c = supervise(shJob(2, run(), "exec sleep 60"), 2, run());
  sender.join();
  EXPECT_FALSE(c.result.ok);
  EXPECT_EQ(c.result.error, "interrupted by SIGTERM" + stopped().replace(0, 1, ":"));
  EXPECT_LT(c.seconds, 40);
}

//===----------------------------------------------------------------------===//
// Real MPI ranks (MpiChild.c): what mpirun reports for each way to fail
//===----------------------------------------------------------------------===//

#ifdef DSRT_MPI_CHILD
class MpiRanks : public Supervise {
protected:
  Captured run3(const char *mode) {
    return supervise({"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "3", "--bind-to",
                      "none", "--output-filename", run() + "/logs:nocopy", DSRT_MPI_CHILD, mode,
                      run()},
                     3, run());
  }
  void expectOneErrorLine(const Captured &c) { EXPECT_EQ(c.err, "dsrt: error: rank 1 failed\n"); }
};

TEST_F(MpiRanks, Success) {
  Captured c = run3("none");
  EXPECT_TRUE(c.result.ok) << c.result.error;
  EXPECT_EQ(c.out, "");
  EXPECT_EQ(c.err, "");
}

TEST_F(MpiRanks, MpiAbort) {
  Captured c = run3("abort");
  // OpenMPI 4.1 sometimes loses the MPI_ABORT message of a rank that ends at
  // once ("ORTE_ERROR_LOG: ... show_help.c"); then the rank that printed the
  // first error is named.
  if (c.result.error.find("MPI_Abort") == std::string::npos)
    EXPECT_EQ(c.result.error,
              "rank 1 on localhost stopped with status 7 after the error above" + stopped());
  else
    EXPECT_EQ(c.result.error, "rank 1 on localhost called MPI_Abort with error code 7" + stopped());
  expectOneErrorLine(c);
}

TEST_F(MpiRanks, NonZeroExit) {
  Captured c = run3("exit");
  EXPECT_EQ(c.result.error, "rank 1 on localhost exited with status 3" + stopped());
  expectOneErrorLine(c);
}

TEST_F(MpiRanks, ExitWithoutFinalize) {
  Captured c = run3("exit0");
  EXPECT_EQ(c.result.error, "rank 1 on localhost exited before the other ranks finished "
                            "(without MPI_Finalize)" +
                                stopped());
  expectOneErrorLine(c);
}

TEST_F(MpiRanks, Killed) {
  Captured c = run3("kill");
  EXPECT_EQ(c.result.error, "rank 1 on localhost was killed by signal 9 (Killed)" + stopped());
  expectOneErrorLine(c);
}
#endif

//===----------------------------------------------------------------------===//
// Remote hosts (Remote.h)
//===----------------------------------------------------------------------===//

TEST(Remote, SshAgentBoundsAndTheUsersOptions) {
  ScopedEnv noAgent("OMPI_MCA_plm_rsh_agent", nullptr);
  SshOptions ssh;
  EXPECT_EQ(sshAgent(ssh), "ssh -tt -o BatchMode=yes -o ConnectTimeout=10 "
                           "-o ServerAliveInterval=5 -o ServerAliveCountMax=3");
  // The user's options come first: ssh keeps the first value of each.
  ssh.args = "-F /etc/cluster/ssh_config -o ConnectTimeout=30";
  ssh.port = 2222;
  EXPECT_EQ(sshAgent(ssh), "ssh -tt -F /etc/cluster/ssh_config -o ConnectTimeout=30 -p 2222 "
                           "-o BatchMode=yes -o ConnectTimeout=10 -o ServerAliveInterval=5 "
                           "-o ServerAliveCountMax=3");
  ssh.args = "-i '/my keys/id'";
  try {
    sshAgent(ssh);
    FAIL() << "a quote was accepted";
  } catch (const LaunchError &e) {
    EXPECT_NE(std::string(e.what()).find("mpirun splits the ssh command at spaces"),
              std::string::npos)
        << e.what();
  }
}

TEST(Remote, UsersOwnRshAgent) {
  ScopedEnv agent("OMPI_MCA_plm_rsh_agent", "ssh -F /mine");
  EXPECT_FALSE(sshAgent(SshOptions{}).has_value());
  SshOptions ssh;
  ssh.port = 22;
  EXPECT_THROW(sshAgent(ssh), LaunchError);
  // Its keep-alives stay dsrt's unless set too.
  ScopedEnv keep("OMPI_MCA_oob_tcp_keepalive_time", "60");
  std::vector<std::pair<std::string, std::string>> want = {
      {"oob_tcp_keepalive_intvl", "5"}, {"oob_tcp_keepalive_probes", "3"}};
  EXPECT_EQ(remoteMcaParams(SshOptions{}), want);
}

TEST(Remote, ForwardedEnvironmentAndDeepSpeedEnvFile) {
  TestDir dir;
  std::string file = dir.file("ds_env");
  writeBytes(file, "# the cluster's\n\nNCCL_IB_HCA = mlx5_0\nMY_SETTING=a=b\n");
  ScopedEnv envFile("DS_ENV_FILE", file.c_str());
  ScopedEnv a("DSRT_TEST_FORWARDED", "1"), b("NCCL_DEBUG", "INFO"),
      c("SOME_OTHER_VARIABLE", "x"), d("OMP_NUM_THREADS", "7"), e("NCCL_IB_HCA", "mlx4");
  std::map<std::string, ForwardedVar> got;
  for (const ForwardedVar &v : forwardedEnvironment({"OMP_NUM_THREADS"}))
    got[v.name] = v;
  EXPECT_EQ(got["DSRT_TEST_FORWARDED"].value, "1");
  EXPECT_EQ(got["NCCL_DEBUG"].source, "environment");
  EXPECT_EQ(got.count("SOME_OTHER_VARIABLE"), 0u);
  EXPECT_EQ(got.count("OMP_NUM_THREADS"), 0u); // dsrt sets it per host
  // The file's win over the environment's, as DeepSpeed's do.
  EXPECT_EQ(got["NCCL_IB_HCA"].value, "mlx5_0");
  EXPECT_EQ(got["NCCL_IB_HCA"].source, file + ":3");
  EXPECT_EQ(got["MY_SETTING"].value, "a=b");

  writeBytes(file, "NCCL_DEBUG=INFO\nexport FOO\n");
  try {
    forwardedEnvironment({});
    FAIL() << "a line without '=' was accepted";
  } catch (const LaunchError &err) {
    EXPECT_EQ(std::string(err.what()),
              file + ":2: \"export FOO\": expected NAME=VALUE (DeepSpeed's .deepspeed_env, "
                     "whose variables every rank gets)");
  }
}

TEST(Remote, MpirunCommandForOtherHosts) {
  MpirunSetup s;
  s.mpirun = "mpirun";
  s.ranks = {{"10.0.0.1", 0}, {"10.0.0.2", 0}};
  s.fromHostfile = true;
  s.runDir = "/r";
  s.dsrt = "/bin/dsrt";
  s.args = {"plan", "--out", "/r"};
  s.cores = 2;
  s.userThreads = true;
  s.relayFromFiles = false;
  s.mca = {{"plm_rsh_agent", "ssh -tt"}, {"oob_tcp_keepalive_time", "10"}};
  s.forward = {{"NCCL_DEBUG", "INFO", "environment"}};
  std::vector<std::string> want = {
      "mpirun",  "-np",         "2",     "--host",        "10.0.0.1:1,10.0.0.2:1",
      "--bind-to", "none",      "--map-by", "slot",       "--mca",
      "plm_rsh_agent", "ssh -tt", "--mca", "oob_tcp_keepalive_time", "10",
      "-x",      "NCCL_DEBUG=INFO", "--output-filename", "/r/logs", "/bin/dsrt",
      "plan",    "--out",       "/r"};
  EXPECT_EQ(buildMpirunCommand(s), want);
}

TEST(Remote, LostDaemonAndUnreachableHosts) {
  std::optional<RankFailure> f = parseMpirunFailure(
      "ORTE has lost communication with a remote daemon.\n\n"
      "  HNP daemon   : [[49577,0],0] on node h1\n"
      "  Remote daemon: [[49577,0],1] on node node-b\n\n"
      "This is usually due to either a failure of the TCP network\n");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, RankFailure::LostDaemon);
  std::vector<RankSlot> ranks = {{"node-a", 0}, {"node-a", 1}, {"node-b", 0}, {"node-b", 1}};
  EXPECT_EQ(describeFailure(*f, ranks, "L"),
            "lost host node-b (ranks 2, 3): mpirun lost contact with its daemon there (found "
            "by the daemons' keep-alives: the host or its link is down); all ranks were "
            "stopped (logs in L)");
}

TEST(Remote, LocalAddresses) {
  EXPECT_TRUE(isLocalAddress("127.0.0.1"));
  EXPECT_TRUE(isLocalHost("127.0.0.1"));
  EXPECT_FALSE(isLocalAddress("198.18.255.254"));
  EXPECT_FALSE(isLocalAddress("not-an-address"));
}

/// A grandchild orphaned by its parent is reparented to the subreaper,
/// which stops it: SIGTERM, then SIGKILL for one that ignores it.
TEST(Remote, SubreaperStopsWhatIsLeft) {
  becomeSubreaper();
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::fork() == 0) {
      ::signal(SIGTERM, SIG_IGN);
      for (;;)
        ::pause();
    }
    ::_exit(0);
  }
  ::waitpid(child, nullptr, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> stopped = stopChildren(300);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_LT(s, 3.0);
  EXPECT_TRUE(stopChildren(300).empty());
}

TEST(Remote, TensorParallelGroupsAcrossHosts) {
  std::vector<RankSlot> twoByTwo = {{"a", 0}, {"a", 1}, {"b", 0}, {"b", 1}};
  EXPECT_FALSE(tpGroupsAcrossHosts(twoByTwo, 2));
  EXPECT_FALSE(tpGroupsAcrossHosts(twoByTwo, 1));
  std::vector<RankSlot> fourByOne = {{"a", 0}, {"b", 0}, {"c", 0}, {"d", 0}};
  EXPECT_EQ(tpGroupsAcrossHosts(fourByOne, 2),
            "2 tensor-parallel groups span hosts (ranks 0-1 on a and b, ...): each such group's "
            "all-reduces, two per layer and step, cross the network; give every host a "
            "multiple of tp=2 slots to keep each group inside a host");
  std::vector<RankSlot> threeAndOne = {{"a", 0}, {"a", 1}, {"a", 2}, {"b", 0}};
  EXPECT_EQ(tpGroupsAcrossHosts(threeAndOne, 2),
            "1 tensor-parallel group spans hosts (ranks 2-3 on a and b): each such group's "
            "all-reduces, two per layer and step, cross the network; give every host a "
            "multiple of tp=2 slots to keep each group inside a host");
}
