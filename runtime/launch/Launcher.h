//===- Launcher.h - dsrt starts and supervises its ranks --------*- C++ -*-===//
//
// `dsrt PLAN --hostfile hosts` (or a plan compiled for dp > 1) makes dsrt the
// launcher of a multi-rank run, with DeepSpeed's launcher semantics on top of
// OpenMPI's mpirun:
//
//  * the ranks come from the hostfile and the selection flags (Hostfile.h),
//    or, without a hostfile, are the plan's ranks on localhost; their
//    number must equal the plan's dp (pp x dp for a pipeline plan, whose
//    rank w is stage w % pp: mpirun's by-slot mapping fills a host's slots
//    with neighbouring stages first);
//  * the run folder is decided once (--out, or runs/<timestamp>) and passed
//    to every rank as an explicit --out; RUNDIR/ranks.txt lists
//    "rank host slot" before anything starts;
//  * mpirun starts the same dsrt with the same arguments minus the launcher
//    flags, on every host through its own ssh launcher; each rank sees
//    OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE and knows it is a rank;
//  * every rank's stdout and stderr are kept in RUNDIR/logs/1/rank.N/ (mpirun
//    --output-filename); rank 0's output is relayed to the terminal, and the
//    other ranks' own "dsrt: error:" lines too (each distinct line once);
//  * dsrt waits for mpirun, forwards SIGINT/SIGTERM to it, and turns its
//    report of a failed rank into one line: "rank 2 on HOST was killed by
//    signal 9 (Killed); all ranks were stopped (logs in RUNDIR/logs)".
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_LAUNCH_LAUNCHER_H
#define DSRT_LAUNCH_LAUNCHER_H

#include "runtime/launch/Hostfile.h"
#include "runtime/launch/Remote.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
} // namespace CLI

namespace dsrt::launch {

/// The launcher-only flags of dsrt. They never reach the ranks.
struct LaunchOptions {
  std::string hostfile;
  Selection selection;
  SshOptions ssh;
  /// --max-restarts: after a lost host, continue from the latest checkpoint
  /// on the hosts that remain, at most this many times.
  int64_t maxRestarts = 0;

  /// Adds --hostfile, --include, --exclude, --num_nodes, --num_ranks,
  /// --ssh_port, --ssh_args and --max-restarts to dsrt's command line
  /// (group "Launcher"), and keeps `app` to read its options' arity.
  void addTo(CLI::App &app);
  bool anyGiven() const;
  const CLI::App *app = nullptr;
};

/// What the launcher needs from dsrt's own command line.
struct LaunchRequest {
  std::string planDir;           // the plan directory (its plan.pb gives dp, pp)
  std::string out;               // --out as given ("" when not given)
  int64_t threads = 0;           // --threads (0: not given)
  std::vector<std::string> argv; // dsrt's argv, argv[0] included
  std::string saveDir;           // --save-dir ("": none)
  /// The newest complete checkpoint under a save folder (its SAVE_DIR/TAG
  /// path and step), or nullopt when it holds none yet.
  std::function<std::optional<std::pair<std::string, int64_t>>(const std::string &)>
      latestCheckpoint;
};

/// The ranks a plan runs on: dp per pipeline stage, pp stages (1: not a
/// pipeline plan).
struct PlanRanks {
  uint32_t dp = 1, pp = 1, tp = 1;
  bool nodeLocal = false; // checkpoint.use_node_local_storage
  int64_t microBatchSize = 0, microBatches = 1; // samples per micro-batch, per step
  /// "micro-batch 8 x 4 accumulation steps: global batch 96" ("" when the
  /// plan does not say its micro-batch size).
  std::string batchText() const;
  size_t ranks() const { return size_t(dp) * pp * tp; }
  /// "dp=2", "pp=4 x dp=2 = 8 ranks", "dp=2 x tp=2 = 4 ranks".
  std::string describe() const;
  /// How to recompile for n ranks: "`dsc ... --dp 4`", "`dsc ... --pp 4
  /// --dp 2`".
  std::string recompileFor(size_t n) const;
};

/// "1 rank", "3 ranks": `n` with the word for its number.
std::string plural(size_t n, const char *one, const char *many);

/// The dp and pp of PLANDIR/plan.pb (0 counts as 1; a pipeline plan's dp
/// from its stages when the top level has none), or nullopt when it cannot
/// be read or parsed: dsrt's own plan checks then report why.
std::optional<PlanRanks> readPlanRanks(const std::string &planDir);
/// readPlanRanks(planDir)->dp.
std::optional<uint32_t> readPlanDp(const std::string &planDir);

/// Where mpirun placed this process: OpenMPI's OMPI_COMM_WORLD_{RANK,SIZE,
/// LOCAL_SIZE}, or PMI_{RANK,SIZE} and MPI_LOCALNRANKS of MPICH's and Slurm's
/// launchers. The one reader of these variables: the launcher decides from
/// it whether this dsrt is a rank, dsrt gives it to the communicator (which
/// checks MPI agrees) and shares the node's cores by localSize.
struct RankEnv {
  int rank = 0;      // in the world
  int size = 1;      // ranks in the world
  int localSize = 1; // ranks on this node (1 when the launcher does not say)
};
/// The environment of a process mpirun started, or nullopt when none did
/// (no world size set). A size or rank that is not a number (the rank in
/// [0, size)) is nullopt too: dsrt then runs as one process, and a plan for
/// several ranks is refused by its rank count.
std::optional<RankEnv> rankEnvironment();

/// This process's rank when it runs under mpirun (rankEnvironment()'s).
std::optional<int> mpiRank();

/// The environment variable through which dsrt's launcher gives its ranks
/// the token of the run folder it made for them (io::makeRunDir).
constexpr const char *kRunTokenEnv = "DSRT_RUN_TOKEN";
/// The variable through which the launcher tells the ranks every world
/// rank's host, comma-separated (set for hostfile runs).
constexpr const char *kRankHostsEnv = "DSRT_RANK_HOSTS";
/// Every world rank's host as the launcher placed them, or nullopt where
/// no launcher said (a plain mpirun) or the list does not have `worldSize`
/// names. A dsrt launch without a hostfile runs on one host and says
/// nothing: that is `localSize == worldSize`.
std::optional<std::vector<std::string>> rankHosts(int worldSize);

/// The token of the run this rank belongs to, or "" when no dsrt launcher
/// started it (a plain mpirun or a single process).
std::string runToken();

/// Writes this process's pid to RUNDIR/ranks/RANK.pid (nothing when `runDir`
/// is empty or no dsrt launcher started this rank: the folder is then not
/// the launcher's), so that a test or a person can find the rank processes, and
/// arranges that exit() writes the exit status to RUNDIR/ranks/RANK.exit:
/// mpirun does not always say which rank failed (a rank that fails while
/// the others still start), the launcher then reads these. Throws
/// LaunchError if the pid file cannot be written.
void writeRankPidFile(const std::string &runDir, int rank);

/// Makes this dsrt the launcher when it is not itself a rank (neither
/// OMPI_COMM_WORLD_SIZE nor PMI_SIZE set) and --hostfile is given or the plan needs more than
/// one rank (a plan
/// that cannot be read is left to dsrt's own checks): starts
/// the ranks through mpirun, relays their output, waits, and returns 0 when
/// every rank succeeded. Returns nullopt when this process should simply run
/// the plan (one rank, or a rank of an mpirun job). Throws LaunchError (or
/// dsrt::io::IoError for the run folder) with one clear message otherwise,
/// including a failed rank.
std::optional<int> launchIfNeeded(const LaunchOptions &options, const LaunchRequest &request);

//===----------------------------------------------------------------------===//
// Building blocks, public for the tests.
//===----------------------------------------------------------------------===//

/// The arguments of every rank: `argv` without argv[0], the launcher flags
/// (`--flag value` and `--flag=value`) and any --out, then `--out runDir`.
std::vector<std::string> rankArguments(const std::vector<std::string> &argv,
                                       const std::string &runDir);

/// A note when a tensor-parallel group (world ranks g*tp .. g*tp+tp-1)
/// has ranks on more than one host: its all-reduces then cross the
/// network. A note, not an error: such a run is correct, only slower.
std::optional<std::string> tpGroupsAcrossHosts(const std::vector<RankSlot> &ranks, uint32_t tp);

/// True for localhost, 127.x.x.x, ::1, this machine's host name (full or
/// up to the first '.') and the addresses of its interfaces.
bool isLocalHost(const std::string &host);

/// CPUs this process may run on.
int availableCores();

struct MpirunSetup {
  std::string mpirun;            // path of mpirun
  std::vector<RankSlot> ranks;   // rank r runs on ranks[r].host
  bool fromHostfile = false;     // --host h1:n1,... instead of -np alone
  std::string runDir;            // absolute run folder
  std::string dsrt;              // absolute path of the dsrt binary
  std::vector<std::string> args; // rankArguments(...)
  bool root = false;             // uid 0: --allow-run-as-root
  int cores = 1;                 // cores of this machine
  bool userThreads = false;      // --threads given: no OMP_NUM_THREADS
  bool relayFromFiles = true;    // rank 0 is local: ":nocopy" + file relay
  std::string runToken;          // -x DSRT_RUN_TOKEN (the run folder's owner)
  // With a host other than this one (Remote.h): mpirun's settings for
  // remote hosts (--mca NAME VALUE: the ssh command, the daemons'
  // keep-alives) and the variables every rank gets (-x NAME=VALUE).
  std::vector<std::pair<std::string, std::string>> mca;
  std::vector<ForwardedVar> forward;
  // -x DSRT_RANK_HOSTS=h0,h1,...: each world rank's host (from a hostfile).
  std::string rankHosts;
};

/// The mpirun command line:
///   mpirun [--allow-run-as-root] [--oversubscribe] -np N [--host h1:n1,...]
///          --bind-to none --map-by slot [-x OMP_NUM_THREADS=T]
///          [-x DSRT_RUN_TOKEN=TOKEN] [--mca NAME VALUE...] [-x NAME=VALUE...]
///          --output-filename RUNDIR/logs[:nocopy] DSRT ARGS...
/// --oversubscribe when more ranks run on this machine than it has cores;
/// T = cores / (most ranks on one host), at least 1.
std::vector<std::string> buildMpirunCommand(const MpirunSetup &setup);

/// A failed rank as mpirun reports it on its stderr.
struct RankFailure {
  /// LostDaemon: mpirun lost its daemon on `node`; Unreachable: it could
  /// not start one there (rank -1 for both).
  enum Kind { Signal, ExitStatus, MpiAbort, NoFinalize, LostDaemon, Unreachable } kind =
      ExitStatus;
  int rank = 0;
  std::string node;       // mpirun's node name, when it says
  int code = 0;           // signal number, exit status or MPI_Abort code
  std::string signalName; // "Killed", when mpirun says
  std::string detail;     // LostDaemon, Unreachable: what happened, and how it was found
};

/// The failure one of mpirun's messages (OpenMPI 4.1's help texts) reports,
/// if any: "process rank R with PID P on node N exited on signal S (NAME)",
/// "exited with non-zero status ... Process name: [[J,1],R] Exit code: C",
/// "MPI_ABORT was invoked on rank R ... with errorcode C", "process rank R
/// ... exiting improperly".
std::optional<RankFailure> parseMpirunFailure(const std::string &text);

/// The first rank (by time) that recorded a non-zero exit status in
/// RUNDIR/ranks/RANK.exit (see writeRankPidFile), if any.
std::optional<RankFailure> failureFromExitFiles(const std::string &runDir);

/// "rank 2 on localhost was killed by signal 9 (Killed); all ranks were
/// stopped (logs in LOGS)"; the host is ranks[rank].host.
std::string describeFailure(const RankFailure &failure, const std::vector<RankSlot> &ranks,
                            const std::string &logsDir);

struct SuperviseResult {
  bool ok = false;
  std::string error; // one line, without "dsrt: error: ", when !ok
  /// The hosts whose loss ended the run: a rank's host when the rank was
  /// killed by a signal, a host whose daemon was lost or that could not be
  /// reached, the hosts of ranks silent past --comm-timeout. Empty when a
  /// rank ended the run by itself (an error, an exit): a restart would
  /// meet it again.
  std::vector<std::string> lostHosts;
};

/// Runs `command` (an mpirun command line) and waits for it. mpirun's stdout
/// goes to `out`; its stderr to `err`, except the messages that report a
/// failed rank, which become `error` (or, when mpirun names no rank, the
/// ranks' exit files); all of its stderr is also kept in
/// RUNDIR/logs/mpirun.stderr. With `relayFromFiles`, rank 0's
/// RUNDIR/logs/*/rank.0/{stdout,stderr} are relayed to `out` / `err` as they
/// grow, and the other ranks' "dsrt: error:" lines to `err`, each distinct
/// line once. SIGINT and SIGTERM are forwarded to mpirun meanwhile.
SuperviseResult superviseMpirun(const std::vector<std::string> &command,
                                const std::vector<RankSlot> &ranks, const std::string &runDir,
                                bool relayFromFiles, std::FILE *out, std::FILE *err);

} // namespace dsrt::launch

#endif // DSRT_LAUNCH_LAUNCHER_H
