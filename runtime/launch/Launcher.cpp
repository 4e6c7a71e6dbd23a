//===- Launcher.cpp - dsrt starts and supervises its ranks ----------------===//
//
// OpenMPI 4.1's mpirun, as this file relies on it:
//  * `--output-filename DIR` writes DIR/1/rank.N/{stdout,stderr} for every
//    rank AND copies every rank's output to mpirun's own stdout/stderr; with
//    `DIR:nocopy` it only writes the files. When rank 0 runs on this machine
//    the launcher uses :nocopy and relays rank 0's files itself (one rank on
//    the terminal, not N interleaved); otherwise (rank 0 remote, its files
//    are written there) it lets mpirun copy every rank's output.
//  * A failed rank ends the job; mpirun reports it in a help block framed by
//    lines of 74 dashes (help-orterun.txt, help-mpi-api.txt) and exits
//    non-zero. Those blocks are parsed (parseMpirunFailure) and replaced by
//    one line; any other block or line passes through unchanged.
//  * On SIGINT/SIGTERM mpirun stops every rank and exits 1.
//
//===----------------------------------------------------------------------===//
#include "runtime/launch/Launcher.h"
#include "runtime/launch/Restart.h"

#include "io/FileUtil.h"
#include "runtime/io/Metrics.h"
#include "io/OutputDir.h"
#include "config/CliChecks.h"
#include "plan/Limits.h"
#include "plan/PlanFile.h"

#include "plan.pb.h"

#include <omp.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <cerrno>
#include <csignal>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dsrt::launch {
namespace fs = std::filesystem;

namespace {

/// Flags of the launcher only; with --out, they are not passed to the ranks
/// as given (--out is passed as the launcher decided it).
constexpr const char *kLauncherOnlyFlags[] = {
    "--hostfile", "--include",  "--exclude",      "--num_nodes",     "--num_ranks",
    "--ssh_port", "--ssh_args", "--max-restarts", "--max_restarts",  "--out"};

/// OpenMPI frames its help messages with lines of 74 dashes.
bool isHelpRule(const std::string &line) { return line == std::string(74, '-'); }


/// `s` with every run of whitespace replaced by one space.
std::string squeezeSpaces(const std::string &s) {
  std::string r;
  for (char c : s) {
    bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (!space)
      r += c;
    else if (!r.empty() && r.back() != ' ')
      r += ' ';
  }
  return r;
}

std::string shellQuote(const std::string &arg) {
  bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
    return std::isalnum((unsigned char)c) || std::strchr("@%+=:,./_-", c);
  });
  if (plain)
    return arg;
  std::string quoted = "'";
  for (char c : arg)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string findOnPath(const std::string &name) {
  const char *path = std::getenv("PATH");
  if (!path)
    return "";
  std::string dirs = path;
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos)
      end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return "";
}

void writeTextFile(const std::string &path, const std::string &text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.flush();
  if (!f)
    throw LaunchError(path + ": cannot write: " + std::strerror(errno));
}

//===----------------------------------------------------------------------===//
// mpirun's stderr
//===----------------------------------------------------------------------===//

/// Splits mpirun's stderr into lines and help blocks: a block reporting a
/// failed rank becomes `failure()`, the "Primary job terminated normally"
/// banner and the help-aggregation notes are dropped, everything else goes
/// to `err` unchanged.
class MpirunStderr {
public:
  explicit MpirunStderr(std::FILE *err) : err_(err) {}

  void feed(const char *data, size_t size) {
    partial_.append(data, size);
    for (size_t nl; (nl = partial_.find('\n')) != std::string::npos;) {
      line(partial_.substr(0, nl));
      partial_.erase(0, nl + 1);
    }
  }

  void finish() {
    if (!partial_.empty())
      line(partial_);
    partial_.clear();
    if (inBlock_)
      emitBlock();
    inBlock_ = false;
  }

  /// mpirun's report, or else what its ssh clients said of a host they
  /// could not reach or lost.
  const std::optional<RankFailure> &failure() const { return failure_ ? failure_ : ssh_; }
  /// mpirun said that a process returned a non-zero exit code.
  bool sawNonZeroBanner() const { return nonZeroBanner_; }
  /// From now on nothing reaches the terminal (it is all in
  /// logs/mpirun.stderr): once a rank failed or the run was interrupted,
  /// what mpirun says while it ends the job (its own crash in
  /// PMIx_Finalize when a host is lost, with a backtrace) is noise beside
  /// dsrt's one line.
  void quiet() { quiet_ = true; }

private:
  void line(const std::string &text) {
    if (inBlock_) {
      block_.push_back(text);
      if (isHelpRule(text))
        closeBlock();
      return;
    }
    if (isHelpRule(text)) {
      inBlock_ = true;
      block_ = {text};
      return;
    }
    sshLine(text);
    // "[host:pid] 3 more processes have sent help message help-mpi-api.txt /
    // mpi-abort", "Set MCA parameter "orte_base_help_aggregate" to 0 ...",
    // and "[host:pid] [[J,0],0] ORTE_ERROR_LOG: Data unpack would read past
    // end of buffer in file .../show_help.c": a help message of a rank that
    // was lost because the rank ended first (it happens with MPI_Abort).
    if (text.find("sent help message") != std::string::npos ||
        text.find("orte_base_help_aggregate") != std::string::npos ||
        (text.find("ORTE_ERROR_LOG") != std::string::npos &&
         text.find("show_help.c") != std::string::npos) ||
        quiet_)
      return;
    std::fprintf(err_, "%s\n", text.c_str());
    std::fflush(err_);
  }

  void closeBlock() {
    inBlock_ = false;
    std::string text;
    for (const std::string &l : block_)
      text += l + "\n";
    if (squeezeSpaces(text).find("Primary job terminated normally, but") != std::string::npos) {
      nonZeroBanner_ = true;
      block_.clear();
      return;
    }
    if (std::optional<RankFailure> f = parseMpirunFailure(text)) {
      if (!failure_)
        failure_ = f;
      block_.clear();
      return;
    }
    // Its generic list of causes, when ssh said which host and why.
    if (ssh_ && squeezeSpaces(text).find("ORTE was unable to reliably start one or more "
                                         "daemons") != std::string::npos) {
      block_.clear();
      return;
    }
    emitBlock();
  }

  /// ssh's own messages (at its default LogLevel, INFO): a host lost
  /// mid-run (ServerAliveInterval x ServerAliveCountMax without an answer),
  /// or one it cannot reach at start (ConnectTimeout, refused, unknown).
  void sshLine(const std::string &text) {
    static const std::regex timeout(R"(Timeout, server (\S+) not responding)");
    static const std::regex connect(R"(ssh: connect to host (\S+) port (\d+): (.+))");
    static const std::regex resolve(R"(ssh: Could not resolve hostname ([^:\s]+): (.+))");
    std::smatch m;
    if (ssh_)
      return;
    if (std::regex_search(text, m, timeout))
      ssh_ = RankFailure{RankFailure::LostDaemon, -1, m[1], 0, "",
                         "its ssh connection got no answer to " +
                             std::to_string(kSshAliveCount) + " keep-alives " +
                             std::to_string(kSshAliveInterval) +
                             " s apart (the host or its link is down)"};
    else if (std::regex_search(text, m, connect))
      ssh_ = RankFailure{RankFailure::Unreachable, -1, m[1], 0, "",
                         "ssh cannot reach it on port " + m[2].str() + ": " + m[3].str() +
                             " (is the host up and its sshd running? --ssh_port sets the "
                             "port)"};
    else if (std::regex_search(text, m, resolve))
      ssh_ = RankFailure{RankFailure::Unreachable, -1, m[1], 0, "",
                         "ssh cannot resolve the name: " + m[2].str()};
  }

  void emitBlock() {
    for (const std::string &l : quiet_ ? std::vector<std::string>() : block_)
      std::fprintf(err_, "%s\n", l.c_str());
    std::fflush(err_);
    block_.clear();
  }

  std::FILE *err_;
  std::string partial_;
  bool inBlock_ = false;
  std::vector<std::string> block_;
  std::optional<RankFailure> failure_;
  bool nonZeroBanner_ = false;
  bool quiet_ = false;
  std::optional<RankFailure> ssh_;
};

//===----------------------------------------------------------------------===//
// The ranks' log files
//===----------------------------------------------------------------------===//

/// A file read as it grows; it may not exist yet.
class FileTail {
public:
  explicit FileTail(std::string path) : path_(std::move(path)) {}
  ~FileTail() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  FileTail(const FileTail &) = delete;
  FileTail &operator=(const FileTail &) = delete;

  /// Appends what the file gained since the last call.
  void read(std::string &into) {
    if (fd_ < 0 && (fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC)) < 0)
      return;
    char buf[65536];
    for (ssize_t n; (n = ::read(fd_, buf, sizeof buf)) > 0;)
      into.append(buf, size_t(n));
  }

private:
  std::string path_;
  int fd_ = -1;
};

/// Relays RUNDIR/logs/<job>/rank.0/{stdout,stderr} to `out` / `err`, and
/// the other ranks' "dsrt: error:" lines to `err`; an error line that was
/// already shown (the same from every rank) is shown once.
class RankRelay {
public:
  RankRelay(std::string logsDir, size_t numRanks, std::FILE *out, std::FILE *err)
      : logsDir_(std::move(logsDir)), numRanks_(numRanks), out_(out), err_(err) {}

  void poll() {
    if (!findJobDir())
      return;
    std::string bytes;
    stdout0_->read(bytes);
    if (!bytes.empty()) {
      std::fwrite(bytes.data(), 1, bytes.size(), out_);
      std::fflush(out_);
    }
    for (size_t r = 0; r < numRanks_; ++r) {
      stderr_[r]->read(partial_[r]);
      for (size_t nl; (nl = partial_[r].find('\n')) != std::string::npos;) {
        stderrLine(r, partial_[r].substr(0, nl));
        partial_[r].erase(0, nl + 1);
      }
    }
  }

  /// The rank whose "dsrt: error:" line came first (lowest rank first
  /// within one poll).
  std::optional<size_t> firstErrorRank() const { return firstErrorRank_; }
  /// The ranks that printed a "dsrt: error:" line.
  const std::set<size_t> &errorRanks() const { return errorRanks_; }
  /// The ranks that rank `r`'s communication timeout named as silent
  /// ("rank 3 did not arrive", "ranks 2, 3 did not arrive": MpiCommunicator).
  std::set<size_t> silentTo(size_t r) const {
    auto it = silent_.find(r);
    return it == silent_.end() ? std::set<size_t>() : it->second;
  }

  /// After mpirun exited: the rest of the files, unfinished lines included.
  void finish() {
    poll();
    for (size_t r = 0; r < partial_.size(); ++r)
      if (!partial_[r].empty())
        stderrLine(r, partial_[r]);
  }

private:
  /// mpirun names the job folder by its job number (1 for the first job).
  bool findJobDir() {
    if (stdout0_)
      return true;
    std::error_code ec;
    std::optional<long> job;
    for (fs::directory_iterator it(logsDir_, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (it->is_directory(ec) && !name.empty() &&
          std::all_of(name.begin(), name.end(), ::isdigit) && name.size() < 10 &&
          (!job || std::stol(name) < *job))
        job = std::stol(name);
    }
    if (!job)
      return false;
    std::string dir = logsDir_ + "/" + std::to_string(*job) + "/rank.";
    stdout0_ = std::make_unique<FileTail>(dir + "0/stdout");
    for (size_t r = 0; r < numRanks_; ++r)
      stderr_.push_back(std::make_unique<FileTail>(dir + std::to_string(r) + "/stderr"));
    partial_.resize(numRanks_);
    return true;
  }

  void stderrLine(size_t rank, const std::string &line) {
    bool error = line.rfind("dsrt: error:", 0) == 0;
    if (error && !firstErrorRank_)
      firstErrorRank_ = rank;
    if (error)
      errorRanks_.insert(rank);
    static const std::regex silent(R"(; ranks? ([0-9]+(?:, [0-9]+)*) did not arrive)");
    std::smatch m;
    if (error && std::regex_search(line, m, silent)) {
      std::string list = m[1];
      for (size_t at = 0; at < list.size();) {
        size_t end = list.find(',', at);
        if (end == std::string::npos)
          end = list.size();
        size_t r = 0;
        auto [ptr, ec] = std::from_chars(list.data() + at, list.data() + end, r);
        if (ec == std::errc() && r < numRanks_)
          silent_[rank].insert(r);
        at = end + 2;
      }
    }
    if (error && !shownErrors_.insert(line).second)
      return;
    if (rank == 0 || error) {
      std::fprintf(err_, "%s\n", line.c_str());
      std::fflush(err_);
    }
  }

  std::string logsDir_;
  size_t numRanks_;
  std::FILE *out_, *err_;
  std::unique_ptr<FileTail> stdout0_;
  std::vector<std::unique_ptr<FileTail>> stderr_;
  std::vector<std::string> partial_;
  std::set<std::string> shownErrors_;
  std::optional<size_t> firstErrorRank_;
  std::map<size_t, std::set<size_t>> silent_;
  std::set<size_t> errorRanks_;
};

//===----------------------------------------------------------------------===//
// Signals
//===----------------------------------------------------------------------===//

volatile sig_atomic_t gMpirunPid = 0;
volatile sig_atomic_t gSignal = 0;

void forwardSignal(int sig) {
  gSignal = sig;
  pid_t pid = gMpirunPid;
  if (pid > 0)
    ::kill(pid, sig);
}

/// Forwards SIGINT and SIGTERM to mpirun while it lives.
class SignalForwarding {
public:
  SignalForwarding() {
    gSignal = 0;
    gMpirunPid = 0;
    struct sigaction action = {};
    action.sa_handler = forwardSignal;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &oldInt_);
    ::sigaction(SIGTERM, &action, &oldTerm_);
  }
  ~SignalForwarding() {
    gMpirunPid = 0;
    ::sigaction(SIGINT, &oldInt_, nullptr);
    ::sigaction(SIGTERM, &oldTerm_, nullptr);
  }
  void setChild(pid_t pid) {
    gMpirunPid = pid;
    if (gSignal) // arrived before the pid was known
      ::kill(pid, gSignal);
  }

private:
  struct sigaction oldInt_ = {}, oldTerm_ = {};
};

/// Reads what is available on a non-blocking fd; false at end of file.
bool drainFd(int fd, std::string &into) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, size_t(n));
      continue;
    }
    if (n == 0)
      return false;
    if (errno == EINTR)
      continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Options and rank side
//===----------------------------------------------------------------------===//

void LaunchOptions::addTo(CLI::App &app) {
  const char *group = "Launcher (multi-rank runs through OpenMPI's mpirun)";
  app.add_option("--hostfile", hostfile,
                 "DeepSpeed hostfile, one 'hostname slots=N' per line: dsrt starts the "
                 "plan's ranks there with mpirun")
      ->group(group);
  app.add_option("--include", selection.include,
                 "only these hosts and slots: host1:0,1@host2 (a host alone: all its slots)")
      ->group(group);
  app.add_option("--exclude", selection.exclude,
                 "every host and slot but these (the syntax of --include)")
      ->group(group);
  app.add_option_function<int64_t>(
         "--num_nodes", [this](const int64_t &n) { selection.numNodes = n; },
         "use the first N hosts of the hostfile")
      ->check(cli::integer<int64_t>(1, limits::kMaxRanks))
      ->group(group);
  app.add_option_function<int64_t>(
         "--num_ranks", [this](const int64_t &n) { selection.numRanks = n; },
         "the TOTAL number of ranks, taken in hostfile order (DeepSpeed's --num_gpus "
         "counts per node); it must equal the plan's dp (x pp for a pipeline plan)")
      ->check(cli::integer<int64_t>(1, limits::kMaxRanks))
      ->group(group);
  ssh.addTo(app, group);
  app.add_option("--max-restarts,--max_restarts", maxRestarts,
                 "after a lost host (a rank killed, a host or link down), continue from the "
                 "newest checkpoint in --save-dir on the hosts that remain, with the plan "
                 "for fewer ranks dsc compiled beside it (elasticity), at most N times "
                 "(default 0)")
      ->check(cli::integer<int64_t>(0, 1000))
      ->group(group);
  this->app = &app;
}

bool LaunchOptions::anyGiven() const {
  return !hostfile.empty() || !selection.include.empty() || !selection.exclude.empty() ||
         selection.numNodes || selection.numRanks || ssh.given() || maxRestarts;
}

namespace {
/// The first of `names` set in the environment, or null.
const char *firstEnv(std::initializer_list<const char *> names) {
  for (const char *name : names)
    if (const char *v = std::getenv(name))
      return v;
  return nullptr;
}
/// `text` as an integer in [min, 2^30], or nullopt.
std::optional<int> envInt(const char *text, long min) {
  if (!text || !*text)
    return std::nullopt;
  char *end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*end || v < min || v > (1L << 30))
    return std::nullopt;
  return int(v);
}
} // namespace

std::optional<RankEnv> rankEnvironment() {
  const char *size = firstEnv({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"});
  if (!size)
    return std::nullopt;
  RankEnv env;
  std::optional<int> n = envInt(size, 1);
  std::optional<int> rank = envInt(firstEnv({"OMPI_COMM_WORLD_RANK", "PMI_RANK"}), 0);
  if (!n || !rank || *rank >= *n)
    return std::nullopt;
  env.size = *n;
  env.rank = *rank;
  env.localSize =
      envInt(firstEnv({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}), 1).value_or(1);
  return env;
}

std::optional<int> mpiRank() {
  if (std::optional<RankEnv> env = rankEnvironment())
    return env->rank;
  return std::nullopt;
}

namespace {
/// Where exit() records this rank's status (see writeRankPidFile).
char gExitFile[4096];

void recordExitStatus(int status, void *) {
  int fd = ::open(gExitFile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  std::string text = std::to_string(status) + "\n";
  (void)!::write(fd, text.data(), text.size());
  ::close(fd);
}
} // namespace

std::optional<std::vector<std::string>> rankHosts(int worldSize) {
  std::vector<std::string> hosts;
  if (const char *list = std::getenv(kRankHostsEnv)) {
    std::string text = list;
    for (size_t at = 0; at <= text.size();) {
      size_t end = std::min(text.find(',', at), text.size());
      hosts.push_back(text.substr(at, end - at));
      at = end + 1;
    }
  } else if (std::optional<RankEnv> env = rankEnvironment();
             !env || env->localSize == env->size) {
    hosts.assign(size_t(std::max(1, worldSize)), "localhost");
  }
  if (hosts.size() != size_t(worldSize) ||
      std::any_of(hosts.begin(), hosts.end(), [](const std::string &h) { return h.empty(); }))
    return std::nullopt;
  return hosts;
}

std::string runToken() {
  const char *token = std::getenv(kRunTokenEnv);
  return token ? token : "";
}

void writeRankPidFile(const std::string &runDir, int rank) {
  if (runDir.empty() || runToken().empty())
    return;
  fs::path dir = fs::path(runDir) / "ranks";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw LaunchError(dir.string() + ": cannot create: " + ec.message());
  std::string path = (dir / (std::to_string(rank) + ".pid")).string();
  writeTextFile(path + ".tmp", std::to_string(::getpid()) + "\n");
  if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0)
    throw LaunchError(path + ": cannot write: " + std::strerror(errno));
  std::string exitFile = (dir / (std::to_string(rank) + ".exit")).string();
  if (exitFile.size() < sizeof gExitFile && !gExitFile[0]) {
    std::memcpy(gExitFile, exitFile.c_str(), exitFile.size() + 1);
    ::on_exit(recordExitStatus, nullptr);
  }
}

std::optional<RankFailure> failureFromExitFiles(const std::string &runDir) {
  std::optional<RankFailure> first;
  struct timespec firstTime = {};
  std::error_code ec;
  for (fs::directory_iterator it(fs::path(runDir) / "ranks", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    size_t dot = name.find(".exit");
    if (dot == 0 || dot == std::string::npos || dot + 5 != name.size() ||
        !std::all_of(name.begin(), name.begin() + dot, ::isdigit) || dot > 9)
      continue;
    std::ifstream in(it->path());
    int status = 0;
    struct stat st = {};
    if (!(in >> status) || status == 0 || ::stat(it->path().c_str(), &st) != 0)
      continue;
    int rank = 0; // at most 9 digits: fits
    std::from_chars(name.data(), name.data() + dot, rank);
    bool earlier = !first || st.st_mtim.tv_sec < firstTime.tv_sec ||
                   (st.st_mtim.tv_sec == firstTime.tv_sec &&
                    (st.st_mtim.tv_nsec < firstTime.tv_nsec ||
                     (st.st_mtim.tv_nsec == firstTime.tv_nsec && rank < first->rank)));
    if (earlier) {
      first = RankFailure{RankFailure::ExitStatus, rank, "", status, ""};
      firstTime = st.st_mtim;
    }
  }
  return first;
}

//===----------------------------------------------------------------------===//
// Building blocks
//===----------------------------------------------------------------------===//

std::optional<PlanRanks> readPlanRanks(const std::string &planDir) {
  // The executor's reader and ranks rule (plan/PlanFile.h): the
  // same checks (a regular file, its size, version and checksum, no unknown
  // field) before the launcher trusts a number in it.
  try {
    dsc::plan::Plan plan = readPlanFile(planDir).plan;
    PlanShape shape = planShape(plan, planDir + "/plan.pb");
    PlanRanks r;
    r.dp = shape.dp;
    r.pp = shape.pp;
    r.tp = shape.tp;
    r.nodeLocal = plan.run_settings().checkpoint_node_local();
    r.microBatchSize = plan.micro_batch_size();
    int64_t m = r.pp > 1 ? plan.pipeline_micro_batches() : plan.program().micro_batches();
    r.microBatches = m > 0 ? m : 1;
    return r;
  } catch (const PlanError &) {
    return std::nullopt;
  }
}

std::optional<uint32_t> readPlanDp(const std::string &planDir) {
  std::optional<PlanRanks> r = readPlanRanks(planDir);
  return r ? std::optional<uint32_t>(r->dp) : std::nullopt;
}

std::string PlanRanks::describe() const {
  std::string tpText = tp > 1 ? " x tp=" + std::to_string(tp) : std::string();
  if (pp <= 1)
    return "dp=" + std::to_string(dp) + tpText +
           (tp > 1 ? " = " + std::to_string(ranks()) + " ranks" : std::string());
  return "pp=" + std::to_string(pp) + " x dp=" + std::to_string(dp) + tpText + " = " +
         std::to_string(ranks()) + " ranks";
}

std::string plural(size_t n, const char *one, const char *many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string PlanRanks::batchText() const {
  if (microBatchSize <= 0)
    return "";
  return "micro-batch " + std::to_string(microBatchSize) + " x " +
         std::to_string(microBatches) + " accumulation steps: global batch " +
         std::to_string(microBatchSize * microBatches * int64_t(dp));
}

std::string PlanRanks::recompileFor(size_t n) const {
  if (tp > 1)
    return "`dsc ... --tp " + std::to_string(tp) + " --dp D` with D x " + std::to_string(tp) +
           " = " + std::to_string(n);
  if (pp <= 1)
    return "`dsc ... --dp " + std::to_string(n) + "`";
  if (n % pp == 0)
    return "`dsc ... --pp " + std::to_string(pp) + " --dp " + std::to_string(n / pp) + "`";
  return "`dsc ... --pp P --dp D` with P x D = " + std::to_string(n);
}

std::vector<std::string> rankArguments(const std::vector<std::string> &argv,
                                       const std::string &runDir) {
  std::vector<std::string> args;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string &arg = argv[i];
    bool drop = false;
    for (const char *flag : kLauncherOnlyFlags) {
      if (arg == flag) {
        ++i; // and its value
        drop = true;
      } else if (arg.rfind(std::string(flag) + "=", 0) == 0) {
        drop = true;
      }
      if (drop)
        break;
    }
    if (!drop)
      args.push_back(arg);
  }
  args.push_back("--out");
  args.push_back(runDir);
  return args;
}

bool isLocalHost(const std::string &host) {
  if (host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0)
    return true;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0)
    return false;
  std::string self = name;
  return host == self || host == self.substr(0, self.find('.')) || isLocalAddress(host);
}

int availableCores() {
  // OMP_PROC_BIND (close, spread, true: the usual HPC setting) makes the
  // OpenMP runtime bind this, its initial thread, to one place as it
  // starts, so the affinity mask then names one CPU; the places it made
  // from the mask before are the CPUs the kernels' threads may use.
  if (omp_get_proc_bind() != omp_proc_bind_false) {
    int cpus = 0;
    for (int p = 0; p < omp_get_num_places(); ++p)
      cpus += omp_get_place_num_procs(p);
    if (cpus > 0)
      return cpus;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? int(n) : 1;
}

std::vector<std::string> buildMpirunCommand(const MpirunSetup &setup) {
  std::vector<std::string> hosts; // in rank order
  std::map<std::string, int> perHost;
  for (const RankSlot &r : setup.ranks)
    if (perHost[r.host]++ == 0)
      hosts.push_back(r.host);
  int localRanks = 0, mostPerHost = 1;
  for (const auto &[host, n] : perHost) {
    if (!setup.fromHostfile || isLocalHost(host))
      localRanks += n;
    mostPerHost = std::max(mostPerHost, n);
  }

  std::vector<std::string> cmd = {setup.mpirun};
  if (setup.root)
    cmd.push_back("--allow-run-as-root");
  if (localRanks > setup.cores)
    cmd.push_back("--oversubscribe");
  cmd.insert(cmd.end(), {"-np", std::to_string(setup.ranks.size())});
  if (setup.fromHostfile) {
    std::string list;
    for (const std::string &host : hosts)
      list += (list.empty() ? "" : ",") + host + ":" + std::to_string(perHost[host]);
    cmd.insert(cmd.end(), {"--host", list});
  }
  cmd.insert(cmd.end(), {"--bind-to", "none", "--map-by", "slot"});
  if (!setup.userThreads)
    cmd.insert(cmd.end(),
               {"-x", "OMP_NUM_THREADS=" + std::to_string(std::max(1, setup.cores / mostPerHost))});
  if (!setup.runToken.empty())
    cmd.insert(cmd.end(), {"-x", std::string(kRunTokenEnv) + "=" + setup.runToken});
  for (const auto &[name, value] : setup.mca)
    cmd.insert(cmd.end(), {"--mca", name, value});
  for (const ForwardedVar &v : setup.forward)
    cmd.insert(cmd.end(), {"-x", v.name + "=" + v.value});
  if (!setup.rankHosts.empty())
    cmd.insert(cmd.end(), {"-x", std::string(kRankHostsEnv) + "=" + setup.rankHosts});
  cmd.insert(cmd.end(), {"--output-filename",
                         setup.runDir + "/logs" + (setup.relayFromFiles ? ":nocopy" : "")});
  cmd.push_back(setup.dsrt);
  cmd.insert(cmd.end(), setup.args.begin(), setup.args.end());
  return cmd;
}

std::optional<RankFailure> parseMpirunFailure(const std::string &text) {
  std::string flat = squeezeSpaces(text);
  static const std::regex signal(
      R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)(?: \(([^)]*)\))?)");
  static const std::regex exitStatus(
      R"(exited with non-zero status.*?Process name: \[\[\d+,\d+\],(\d+)\] Exit code: (-?\d+))");
  static const std::regex abort(
      R"(MPI_ABORT was invoked on rank (\d+) in communicator \S+ with errorcode (-?\d+))");
  static const std::regex noFinalize(
      R"(process rank (\d+) with PID \d+ on node (\S+) exiting improperly)");
  static const std::regex lostDaemon(
      R"(ORTE has lost communication with a remote daemon\..*?Remote daemon: \[\[\d+,\d+\],\d+\] on node (\S+))");

  std::optional<RankFailure> first;
  size_t firstAt = std::string::npos;
  // A number that does not fit an int (a garbled report) is no match:
  // std::stoi would throw out of the launcher instead.
  auto number = [](const std::ssub_match &s, int &out) {
    const char *b = &*s.first, *e = b + s.length();
    auto [ptr, ec] = std::from_chars(b, e, out);
    return ec == std::errc() && ptr == e;
  };
  auto consider = [&](const std::regex &re, auto make) {
    std::smatch m;
    if (std::regex_search(flat, m, re) && size_t(m.position(0)) < firstAt)
      if (std::optional<RankFailure> f = make(m)) {
        firstAt = size_t(m.position(0));
        first = f;
      }
  };
  auto withCode = [&](RankFailure::Kind kind, const std::smatch &m, int codeGroup,
                      std::string node, std::string what) -> std::optional<RankFailure> {
    int rank = 0, code = 0;
    if (!number(m[1], rank) || (codeGroup && !number(m[codeGroup], code)))
      return std::nullopt;
    return RankFailure{kind, rank, std::move(node), code, std::move(what)};
  };
  consider(signal, [&](const std::smatch &m) {
    return withCode(RankFailure::Signal, m, 3, m[2], m[4]);
  });
  consider(exitStatus, [&](const std::smatch &m) {
    return withCode(RankFailure::ExitStatus, m, 2, "", "");
  });
  consider(abort, [&](const std::smatch &m) {
    return withCode(RankFailure::MpiAbort, m, 2, "", "");
  });
  consider(noFinalize, [&](const std::smatch &m) {
    return withCode(RankFailure::NoFinalize, m, 0, m[2], "");
  });
  consider(lostDaemon, [&](const std::smatch &m) -> std::optional<RankFailure> {
    return RankFailure{RankFailure::LostDaemon, -1, m[1], 0, "",
                       "mpirun lost contact with its daemon there (found by the daemons' "
                       "keep-alives: the host or its link is down)"};
  });
  return first;
}

std::string describeFailure(const RankFailure &failure, const std::vector<RankSlot> &ranks,
                            const std::string &logsDir) {
  std::string host = failure.rank >= 0 && size_t(failure.rank) < ranks.size()
                         ? ranks[failure.rank].host
                         : (failure.node.empty() ? "an unknown host" : failure.node);
  std::string who = "rank " + std::to_string(failure.rank) + " on " + host;
  std::string what;
  switch (failure.kind) {
  case RankFailure::Signal: {
    std::string name = failure.signalName;
    if (name.empty())
      name = ::strsignal(failure.code);
    what = who + " was killed by signal " + std::to_string(failure.code) + " (" + name + ")";
    break;
  }
  case RankFailure::ExitStatus:
    what = who + " exited with status " + std::to_string(failure.code);
    break;
  case RankFailure::MpiAbort:
    what = who + " called MPI_Abort with error code " + std::to_string(failure.code);
    break;
  case RankFailure::NoFinalize:
    what = who + " exited before the other ranks finished (without MPI_Finalize)";
    break;
  case RankFailure::LostDaemon:
  case RankFailure::Unreachable: {
    std::string list;
    size_t n = 0;
    for (size_t r = 0; r < ranks.size(); ++r)
      if (ranks[r].host == failure.node)
        list += (n++ ? ", " : "") + std::to_string(r);
    what = (failure.kind == RankFailure::LostDaemon ? "lost host " : "cannot start on host ") +
           failure.node +
           (n ? std::string(n > 1 ? " (ranks " : " (rank ") + list + ")" : std::string()) +
           ": " + failure.detail;
    break;
  }
  }
  return what + "; all ranks were stopped (logs in " + logsDir + ")";
}

//===----------------------------------------------------------------------===//
// Supervision
//===----------------------------------------------------------------------===//

namespace {

constexpr std::chrono::seconds kStopGrace{10}, kSignalGrace{5}, kKillGrace{5};
constexpr int kOrphanGraceMs = 3000;

/// Whether rank `r`, started on this host, has ended: its pid file names
/// no process, or a zombie.
bool localRankEnded(const std::string &runDir, size_t r) {
  std::ifstream in(runDir + "/ranks/" + std::to_string(r) + ".pid");
  long pid = 0;
  if (!(in >> pid) || pid <= 0)
    return false;
  std::optional<ProcessState> st = processState(pid);
  return !st || st->state == 'Z';
}

/// "lost rank 3 on h2 (...); " for the ranks that the ranks on this host
/// timed out waiting for, on other hosts; "" when there are none.
std::string lostRanks(const RankRelay &relay, const std::vector<RankSlot> &ranks,
                      std::vector<std::string> *hosts = nullptr) {
  std::map<std::string, std::vector<size_t>> byHost;
  std::set<size_t> lost;
  for (size_t r = 0; r < ranks.size(); ++r)
    if (isLocalHost(ranks[r].host))
      for (size_t s : relay.silentTo(r))
        if (!isLocalHost(ranks[s].host) && lost.insert(s).second)
          byHost[ranks[s].host].push_back(s);
  if (lost.empty())
    return "";
  std::string text;
  for (auto &[host, list] : byHost) {
    if (hosts)
      hosts->push_back(host);
    std::string numbers;
    for (size_t r : list)
      numbers += (numbers.empty() ? "" : ", ") + std::to_string(r);
    text += std::string(text.empty() ? "" : " and ") + (list.size() > 1 ? "ranks " : "rank ") +
            numbers + " on " + host;
  }
  return "lost " + text +
         " (no answer to the ranks on this host within --comm-timeout: the host or its link "
         "is down, or the ranks froze); ";
}

} // namespace

SuperviseResult superviseMpirun(const std::vector<std::string> &command,
                                const std::vector<RankSlot> &ranks, const std::string &runDir,
                                bool relayFromFiles, std::FILE *out, std::FILE *err) {
  std::string logsDir = runDir + "/logs";
  std::error_code ec;
  fs::create_directories(logsDir, ec);
  if (ec)
    return {false, logsDir + ": cannot create: " + ec.message()};
  std::ofstream stderrLog(logsDir + "/mpirun.stderr", std::ios::binary | std::ios::trunc);

  std::vector<char *> argv;
  for (const std::string &arg : command)
    argv.push_back(const_cast<char *>(arg.c_str()));
  argv.push_back(nullptr);

  // mpirun's session directory under a folder of this launch's own: two
  // mpiruns started at the same moment under one TMPDIR race to create the
  // shared "ompi.<host>.<uid>" folder, and OpenMPI 4.1's loser fails ("A
  // call to mkdir was unable to create the desired directory ... File
  // exists"). A user's OMPI_MCA_orte_tmpdir_base is kept.
  std::string sessionBase;
  if (!std::getenv("OMPI_MCA_orte_tmpdir_base")) {
    std::string pattern = (fs::temp_directory_path(ec) / "dsrt-mpi-XXXXXX").string();
    if (ec)
      pattern = "/tmp/dsrt-mpi-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()))
      sessionBase = buf.data();
  }
  struct RemoveAfter {
    const std::string &dir;
    ~RemoveAfter() {
      std::error_code ignored;
      if (!dir.empty())
        fs::remove_all(dir, ignored);
    }
  } removeSessionBase{sessionBase};

  int outPipe[2] = {-1, -1}, errPipe[2] = {-1, -1}, execPipe[2] = {-1, -1};
  auto closePipes = [&] {
    for (int fd : {outPipe[0], outPipe[1], errPipe[0], errPipe[1], execPipe[0], execPipe[1]})
      if (fd >= 0)
        ::close(fd);
  };
  if (::pipe2(outPipe, O_CLOEXEC) || ::pipe2(errPipe, O_CLOEXEC) || ::pipe2(execPipe, O_CLOEXEC)) {
    std::string error = std::string("cannot create pipes for mpirun: ") + std::strerror(errno);
    closePipes();
    return {false, error};
  }
  std::fflush(out);
  std::fflush(err);

  SignalForwarding forwarding;
  becomeSubreaper();
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    std::string error = std::string("cannot start mpirun: ") + std::strerror(errno);
    closePipes();
    return {false, error};
  }
  if (pid == 0) {
    // mpirun gets its own process group: a Ctrl-C on the terminal reaches
    // only dsrt, which forwards it once. If dsrt dies, mpirun is stopped.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent)
      ::_exit(127);
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGINT, &dfl, nullptr);
    ::sigaction(SIGTERM, &dfl, nullptr);
    int devNull = ::open("/dev/null", O_RDONLY);
    if (devNull >= 0)
      ::dup2(devNull, 0);
    ::dup2(outPipe[1], 1);
    ::dup2(errPipe[1], 2);
    if (!sessionBase.empty())
      ::setenv("OMPI_MCA_orte_tmpdir_base", sessionBase.c_str(), 1);
    ::execvp(argv[0], argv.data());
    int error = errno;
    (void)!::write(execPipe[1], &error, sizeof error);
    ::_exit(127);
  }
  forwarding.setChild(pid);
  ::close(outPipe[1]);
  ::close(errPipe[1]);
  ::close(execPipe[1]);
  int execError = 0;
  ssize_t got;
  while ((got = ::read(execPipe[0], &execError, sizeof execError)) < 0 && errno == EINTR) {
  }
  ::close(execPipe[0]);
  if (got == sizeof execError) {
    ::close(outPipe[0]);
    ::close(errPipe[0]);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return {false, "cannot run " + command[0] + ": " + std::strerror(execError)};
  }

  ::fcntl(outPipe[0], F_SETFL, O_NONBLOCK);
  ::fcntl(errPipe[0], F_SETFL, O_NONBLOCK);
  MpirunStderr mpirunStderr(err);
  RankRelay relay(logsDir, ranks.size(), out, err);
  bool outOpen = true, errOpen = true;
  int status = 0;
  auto pump = [&]() {
    std::string bytes;
    if (outOpen) {
      outOpen = drainFd(outPipe[0], bytes);
      if (!bytes.empty()) {
        std::fwrite(bytes.data(), 1, bytes.size(), out);
        std::fflush(out);
      }
    }
    if (errOpen) {
      bytes.clear();
      errOpen = drainFd(errPipe[0], bytes);
      stderrLog.write(bytes.data(), std::streamsize(bytes.size()));
      stderrLog.flush();
      mpirunStderr.feed(bytes.data(), bytes.size());
    }
    if (relayFromFiles)
      relay.poll();
  };
  // Once mpirun reported a failed rank, or dsrt forwarded a signal, mpirun
  // ends the job within a second or two; with a host lost it waits for
  // that host's daemon for ever. kStopGrace later its process group gets
  // SIGTERM, kKillGrace after that SIGKILL (docs/multi-host.md).
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> failedAt, termAt;
  bool killed = false;
  auto note = [&](const std::string &text) {
    stderrLog << "dsrt: " << text << "\n";
    stderrLog.flush();
  };
  for (;;) {
    pollfd fds[2] = {{outOpen ? outPipe[0] : -1, POLLIN, 0},
                     {errOpen ? errPipe[0] : -1, POLLIN, 0}};
    ::poll(fds, 2, 100); // also the pace of the file relay
    pump();
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid)
      break;
    if (done < 0 && errno != EINTR)
      return {false, std::string("cannot wait for mpirun: ") + std::strerror(errno)};
    // mpirun's report of an aborted rank can be lost ("ORTE_ERROR_LOG:
    // Data unpack would read past end of buffer ... show_help.c") when the
    // rank ends first: a rank here that printed its error and ended counts.
    bool rankFailed = false;
    if (!failedAt)
      for (size_t r : relay.errorRanks())
        rankFailed = rankFailed || (isLocalHost(ranks[r].host) && localRankEnded(runDir, r));
    if (!failedAt && (mpirunStderr.failure() || gSignal || rankFailed)) {
      failedAt = Clock::now();
      mpirunStderr.quiet();
    }
    // After a Ctrl-C the user waits: a shorter grace.
    const std::chrono::seconds grace = gSignal ? kSignalGrace : kStopGrace;
    if (failedAt && !termAt && Clock::now() - *failedAt >= grace) {
      note("mpirun still runs " + std::to_string(grace.count()) +
           " s after the failure: SIGTERM to its process group");
      ::kill(-pid, SIGTERM);
      termAt = Clock::now();
    } else if (termAt && !killed && Clock::now() - *termAt >= kKillGrace) {
      note("mpirun still runs: SIGKILL to its process group");
      ::kill(-pid, SIGKILL);
      killed = true;
    }
  }
  // mpirun has exited: what is left in the pipes (a process it left behind
  // may hold them open, so do not wait for their end) and in the files.
  pump();
  ::close(outPipe[0]);
  ::close(errPipe[0]);
  mpirunStderr.finish();
  if (relayFromFiles)
    relay.finish();
  // What mpirun left on this host (an ssh client to a lost host, a rank
  // of a killed mpirun) was reparented to dsrt, its subreaper.
  for (const std::string &left : stopChildren(kOrphanGraceMs))
    note("stopped a process mpirun left behind: " + left);
  int signal = gSignal;

  std::string stopped = "all ranks were stopped (logs in " + logsDir + ")";
  if (signal)
    return {false, std::string("interrupted by ") + (signal == SIGINT ? "SIGINT" : "SIGTERM") +
                       ": " + stopped};
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    // mpirun can exit 0 without having run a rank (a broken installation, a
    // wrapper script): every rank on this machine must have left its exit
    // status, 0, in the run folder (remote ranks write theirs elsewhere).
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (!isLocalHost(ranks[r].host))
        continue;
      std::ifstream in(runDir + "/ranks/" + std::to_string(r) + ".exit");
      int rankStatus = -1;
      if (!(in >> rankStatus))
        return {false, "mpirun exited with status 0, but rank " + std::to_string(r) +
                           " never ran to its end (no " + runDir + "/ranks/" +
                           std::to_string(r) + ".exit): the run did not happen; " + stopped};
      if (rankStatus != 0)
        return {false, "rank " + std::to_string(r) + " exited with status " +
                           std::to_string(rankStatus) + " though mpirun reported success; " +
                           stopped};
    }
    return {true, ""};
  }
  std::vector<std::string> lost; // the hosts a restart leaves out
  auto result = [&lost](std::string error) {
    std::sort(lost.begin(), lost.end());
    lost.erase(std::unique(lost.begin(), lost.end()), lost.end());
    return SuperviseResult{false, std::move(error), lost};
  };
  if (const std::optional<RankFailure> &failure = mpirunStderr.failure()) {
    std::string error = (failure->rank >= 0 ? lostRanks(relay, ranks, &lost) : "") +
                        describeFailure(*failure, ranks, logsDir);
    if (failure->kind == RankFailure::Signal && size_t(failure->rank) < ranks.size())
      lost.push_back(ranks[failure->rank].host);
    if (failure->kind == RankFailure::LostDaemon || failure->kind == RankFailure::Unreachable)
      lost.push_back(failure->node);
    return result(error);
  }
  // mpirun says only "1 process returned a non-zero exit code" when a rank
  // fails while the others are still starting; the ranks' exit files say
  // which (local ranks, or every rank on a shared file system).
  // mpirun ended (or was stopped by dsrt, above) without naming the rank.
  const bool ended = WIFEXITED(status) || termAt;
  if (ended)
    if (std::optional<RankFailure> failure = failureFromExitFiles(runDir))
      return result(lostRanks(relay, ranks, &lost) + describeFailure(*failure, ranks, logsDir));
  // mpirun's report was lost (see MpirunStderr::line): the rank that
  // printed the first error is the likely culprit.
  if (ended && relay.firstErrorRank())
    return result(lostRanks(relay, ranks, &lost) + "rank " +
                       std::to_string(*relay.firstErrorRank()) + " on " +
                       ranks[*relay.firstErrorRank()].host + " stopped" +
                       // mpirun exits with the status of the rank that failed.
                       (WIFEXITED(status) && WEXITSTATUS(status) != 0
                            ? " with status " + std::to_string(WEXITSTATUS(status))
                            : std::string()) +
                       " after the error above" +
                       (termAt ? "; mpirun did not end the job and was stopped " : "; ") +
                       stopped);
  if (WIFEXITED(status) && mpirunStderr.sawNonZeroBanner())
    return {false, "a rank exited with status " + std::to_string(WEXITSTATUS(status)) +
                       " (mpirun did not say which; each rank's stderr is in " + logsDir +
                       "/1/rank.N/stderr); " + stopped};
  if (WIFSIGNALED(status))
    return {false, "mpirun was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                       ::strsignal(WTERMSIG(status)) + "); " + stopped};
  return {false, "mpirun failed with exit status " + std::to_string(WEXITSTATUS(status)) +
                     " (its messages are above and in " + logsDir + "/mpirun.stderr); " + stopped};
}

//===----------------------------------------------------------------------===//
// The launcher
//===----------------------------------------------------------------------===//

std::optional<std::string> tpGroupsAcrossHosts(const std::vector<RankSlot> &ranks, uint32_t tp) {
  if (tp <= 1)
    return std::nullopt;
  size_t split = 0, groups = ranks.size() / tp;
  std::string first;
  for (size_t g = 0; g < groups; ++g) {
    std::vector<std::string> hosts;
    for (size_t r = g * tp; r < (g + 1) * tp; ++r)
      if (std::find(hosts.begin(), hosts.end(), ranks[r].host) == hosts.end())
        hosts.push_back(ranks[r].host);
    if (hosts.size() < 2)
      continue;
    if (split++ == 0) {
      first = "ranks " + std::to_string(g * tp) + "-" + std::to_string((g + 1) * tp - 1) +
              " on ";
      for (size_t i = 0; i < hosts.size(); ++i)
        first += (i ? " and " : "") + hosts[i];
    }
  }
  if (!split)
    return std::nullopt;
  return plural(split, "tensor-parallel group spans", "tensor-parallel groups span") +
         " hosts (" + first + (split > 1 ? ", ..." : "") +
         "): each such group's all-reduces, two per layer and step, cross the network; give "
         "every host a multiple of tp=" +
         std::to_string(tp) + " slots to keep each group inside a host";
}

namespace {

/// One mpirun of the job: its run folder and how it ended.
struct Attempt {
  std::string runDir;
  SuperviseResult result;
};

Attempt runAttempt(const LaunchOptions &options, const LaunchRequest &request,
                   const std::vector<RankSlot> &ranks, const PlanRanks &planRanksIn,
                   bool fromHostfile, const std::vector<std::string> &argv,
                   const std::string &out) {
  const PlanRanks *planRanks = &planRanksIn;
  MpirunSetup setup;
  setup.mpirun = findOnPath("mpirun");
  if (setup.mpirun.empty())
    throw LaunchError("mpirun: not found on PATH; dsrt starts the ranks of a multi-rank run "
                      "with OpenMPI's mpirun: install openmpi-bin (apt-get install "
                      "openmpi-bin)");

  // The run folder, decided once for every rank. mpirun reads what follows
  // a ':' in --output-filename as options.
  std::string where = out.empty() ? "runs" : out;
  if (fs::absolute(where).string().find(':') != std::string::npos)
    throw LaunchError((out.empty() ? "the run folder " : "--out ") +
                      fs::absolute(where).string() +
                      ": contains ':', which mpirun's --output-filename does not accept; "
                      "choose another --out");
  // A new or empty folder, marked with this run's token: its ranks may
  // write into it, and nothing an earlier run left is ever deleted.
  setup.runToken = io::newRunToken();
  std::string runDir = io::makeRunDir(out, setup.runToken);
  std::string absRunDir = fs::absolute(runDir).lexically_normal().string();
  if (absRunDir.size() > 1 && absRunDir.back() == '/')
    absRunDir.pop_back();
  // A pipeline's ranks also say their stage and data-parallel index, a
  // tensor-parallel plan's their tp rank (tp innermost: world rank w is tp
  // rank w % tp; w / tp is stage (w / tp) % pp of dp index (w / tp) / pp).
  bool pipeline = planRanks->pp > 1, tensor = planRanks->tp > 1;
  std::string table = std::string("rank host slot") + (pipeline ? " stage dp_index" : "") +
                      (tensor ? (pipeline ? " tp_rank" : " dp_index tp_rank") : "") + "\n";
  for (size_t r = 0; r < ranks.size(); ++r) {
    size_t rest = r / planRanks->tp;
    table += std::to_string(r) + " " + ranks[r].host + " " + std::to_string(ranks[r].slot);
    if (pipeline)
      table += " " + std::to_string(rest % planRanks->pp) + " " +
               std::to_string(rest / planRanks->pp);
    if (tensor)
      table += (pipeline ? "" : " " + std::to_string(rest)) + " " +
               std::to_string(r % planRanks->tp);
    table += "\n";
  }
  writeTextFile(runDir + "/ranks.txt", table);
  if (std::optional<std::string> split = tpGroupsAcrossHosts(ranks, planRanks->tp))
    std::fprintf(stderr, "dsrt: note: %s\n", split->c_str());

  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  setup.dsrt = ec ? fs::absolute(argv.at(0)).string() : self.string();
  setup.ranks = ranks;
  setup.fromHostfile = fromHostfile;
  setup.runDir = absRunDir;
  setup.args = rankArguments(argv, absRunDir);
  setup.root = ::getuid() == 0;
  setup.cores = availableCores();
  setup.userThreads = request.threads > 0;
  setup.relayFromFiles = !fromHostfile || isLocalHost(ranks[0].host);
  if (fromHostfile)
    for (const RankSlot &r : ranks)
      setup.rankHosts += (setup.rankHosts.empty() ? "" : ",") + r.host;
  bool remote = fromHostfile && std::any_of(ranks.begin(), ranks.end(), [](const RankSlot &r) {
                  return !isLocalHost(r.host);
                });
  if (remote) {
    setup.mca = remoteMcaParams(options.ssh);
    std::vector<std::string> setByDsrt = {kRunTokenEnv};
    if (!setup.userThreads)
      setByDsrt.push_back("OMP_NUM_THREADS");
    setup.forward = forwardedEnvironment(setByDsrt);
  } else if (options.ssh.given()) {
    throw LaunchError(std::string(options.ssh.port ? "--ssh_port" : "--ssh_args") +
                      ": every rank runs on this machine, so no ssh is started; leave it out");
  }
  std::vector<std::string> command = buildMpirunCommand(setup);

  std::string commandLine;
  for (const std::string &arg : command)
    commandLine += (commandLine.empty() ? "" : " ") + shellQuote(arg);
  fs::create_directories(runDir + "/logs", ec);
  writeTextFile(runDir + "/logs/mpirun.cmd", commandLine + "\n");

  std::string hosts;
  std::map<std::string, int> perHost;
  for (const RankSlot &r : ranks)
    ++perHost[r.host];
  for (const RankSlot &r : ranks)
    if (perHost.count(r.host)) {
      hosts += (hosts.empty() ? "" : ", ") + r.host + " (" + std::to_string(perHost[r.host]) + ")";
      perHost.erase(r.host);
    }
  std::printf("dsrt: starting %s with mpirun on %s; run folder %s, ranks in %s/ranks.txt, "
              "every rank's output in %s/logs%s\n",
              plural(ranks.size(), "rank", "ranks").c_str(), hosts.c_str(), runDir.c_str(),
              runDir.c_str(), runDir.c_str(), setup.relayFromFiles ? " (rank 0's follows)" : "");
  std::fflush(stdout);

  Attempt attempt;
  attempt.runDir = runDir;
  attempt.result = superviseMpirun(command, ranks, runDir, setup.relayFromFiles, stdout, stderr);
  return attempt;
}


} // namespace

std::optional<int> launchIfNeeded(const LaunchOptions &options, const LaunchRequest &request) {
  const Selection &selection = options.selection;
  std::string firstFlag = !options.hostfile.empty()        ? "--hostfile"
                          : !selection.include.empty()     ? "--include"
                          : !selection.exclude.empty()     ? "--exclude"
                          : selection.numNodes.has_value() ? "--num_nodes"
                                                           : "--num_ranks";
  if (const char *size = firstEnv({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})) {
    if (options.anyGiven()) {
      std::optional<int> rank = mpiRank();
      throw LaunchError(firstFlag + ": this dsrt already runs under mpirun (rank " +
                        (rank ? std::to_string(*rank) : std::string("?")) + " of " + size +
                        "); the launcher flags are for a dsrt started without mpirun, which "
                        "starts the ranks itself");
    }
    return std::nullopt;
  }

  std::optional<PlanRanks> planRanks = readPlanRanks(request.planDir);
  if (!planRanks)
    return std::nullopt; // dsrt's plan checks say what is wrong with it
  // A plan runs on tp x pp x dp ranks, tp innermost: world rank w is tp
  // rank w % tp of stage (w / tp) % pp, so mpirun's by-slot mapping puts a
  // tensor-parallel group, then neighbouring stages, on one host first.
  size_t need = planRanks->ranks();
  std::vector<RankSlot> ranks;
  bool fromHostfile = !options.hostfile.empty();
  if (options.maxRestarts) {
    std::string flag = "--max-restarts " + std::to_string(options.maxRestarts);
    if (request.saveDir.empty())
      throw LaunchError(flag + ": a restart continues from the newest checkpoint: give "
                        "--save-dir DIR and --save-interval K");
    if (need == 1 && !fromHostfile)
      throw LaunchError(flag + ": the plan runs on one rank, in this process; restarts are "
                        "for runs dsrt starts with mpirun (dp > 1, or --hostfile)");
    if (planRanks->nodeLocal && fromHostfile)
      throw LaunchError(flag + ": the plan saves checkpoints on node-local storage "
                        "(checkpoint.use_node_local_storage), and a lost host takes its "
                        "ranks' pieces with it; save to a folder every host shares");
  }
  if (fromHostfile) {
    Hostfile hostfile = readHostfile(options.hostfile);
    ranks = selectRanks(hostfile, selection);
    if (ranks.size() != need) {
      Selection all = selection;
      all.numRanks.reset();
      size_t available = selectRanks(hostfile, all).size();
      std::string fix = available >= need ? "select " + plural(need, "rank", "ranks") +
                                                " with --num_ranks " + std::to_string(need)
                                          : "give the hostfile selection " +
                                                plural(need, "slot", "slots");
      throw LaunchError("the plan was compiled for " + planRanks->describe() +
                        " but the hostfile selection gives " +
                        plural(ranks.size(), "rank", "ranks") + ": recompile with " +
                        planRanks->recompileFor(ranks.size()) + " or " + fix);
    }
  } else {
    if (!selection.include.empty() || !selection.exclude.empty() || selection.numNodes)
      throw LaunchError(firstFlag + ": needs --hostfile (without one, dsrt runs the plan's " +
                        (planRanks->pp > 1 || planRanks->tp > 1 ? plural(need, "rank", "ranks") : "dp ranks") +
                        " on localhost)");
    if (selection.numRanks) {
      int64_t asked = *selection.numRanks;
      if (asked < 1)
        throw LaunchError("--num_ranks " + std::to_string(asked) + ": must be at least 1");
      if (size_t(asked) != need)
        throw LaunchError("--num_ranks " + std::to_string(asked) +
                          ": the plan was compiled for " + planRanks->describe() +
                          "; without --hostfile dsrt runs the plan's " +
                          plural(need, "rank", "ranks") + " on localhost (recompile with " +
                          planRanks->recompileFor(size_t(asked)) + " to run " +
                          std::to_string(asked) + ")");
    }
    if (need == 1)
      return std::nullopt; // one rank: this process runs the plan
    for (size_t r = 0; r < need; ++r)
      ranks.push_back({"localhost", int(r)});
  }

  // What this machine can run: ranks beyond a few per core only thrash
  // (and a plan for --dp 100000 would start 100000 processes).
  size_t here = 0;
  for (const RankSlot &r : ranks)
    here += !fromHostfile || isLocalHost(r.host);
  int cores = availableCores();
  if (here > size_t(limits::kMaxRanksPerCore) * size_t(cores))
    throw LaunchError("the plan needs " + plural(need, "rank", "ranks") + " and " +
                      std::to_string(here) + " of them would run on this machine, which has " +
                      plural(size_t(cores), "core", "cores") + ": dsrt starts at most " +
                      std::to_string(limits::kMaxRanksPerCore) +
                      " ranks per core; give a --hostfile with more machines, or recompile with " +
                      planRanks->recompileFor(size_t(limits::kMaxRanksPerCore) * size_t(cores)));

  std::vector<std::string> argv = request.argv;
  std::string planDir = request.planDir, out = request.out;
  std::set<std::string> lostHosts;
  std::string firstRunDir; // RUN: the restarts run in RUN/restart-K
  for (int64_t restart = 0;; ++restart) {
    Attempt attempt =
        runAttempt(options, request, ranks, *planRanks, fromHostfile, argv, out);
    if (firstRunDir.empty())
      firstRunDir = attempt.runDir;
    if (attempt.result.ok) {
      std::printf("dsrt: all %s finished; logs in %s/logs\n",
                  plural(ranks.size(), "rank", "ranks").c_str(), attempt.runDir.c_str());
      return 0;
    }
    // Only a lost host is restarted: a rank's own error would come again.
    if (options.maxRestarts && attempt.result.lostHosts.empty())
      throw LaunchError(attempt.result.error +
                        " (not restarted: a rank ended the run by itself, and a restart would "
                        "meet the same error)");
    if (restart >= options.maxRestarts)
      throw LaunchError(attempt.result.error +
                        (options.maxRestarts ? " (no restart left of --max-restarts " +
                                                   std::to_string(options.maxRestarts) + ")"
                                             : std::string()));
    std::fprintf(stderr, "dsrt: %s\n", attempt.result.error.c_str());
    Restart next = planRestart(options, request, attempt.result, fromHostfile, lostHosts, ranks);
    std::printf("dsrt: restart %lld of %lld: %s\n", (long long)(restart + 1),
                (long long)options.maxRestarts, next.what.c_str());
    std::fflush(stdout);
    ranks = next.ranks;
    planRanks = next.planRanks;
    argv = next.argv;
    out = firstRunDir + "/restart-" + std::to_string(restart + 1);
  }
}

} // namespace dsrt::launch
