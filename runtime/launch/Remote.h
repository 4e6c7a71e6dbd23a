//===- Remote.h - ssh, environment and leftovers of a multi-host run -*- C++ -*-===//
//
// What dsrt's launcher adds for ranks on other hosts (docs/multi-host.md):
//  * the ssh command mpirun starts its daemons with (its plm_rsh_agent):
//    the user's --ssh_args and --ssh_port, then dsrt's bounds, BatchMode
//    (no prompt that would wait for ever), a terminal (the daemon ends
//    with its session), a connect timeout (an
//    unreachable host fails in seconds, not TCP's minutes) and server
//    keep-alives (a cut link ends the daemon's ssh, so mpirun learns of it);
//  * the environment the ranks on other hosts get: mpirun passes nothing
//    by itself, so dsrt forwards the variables that steer the ranks and
//    DeepSpeed's .deepspeed_env;
//  * what a failed run leaves behind on this host: dsrt becomes the child
//    subreaper of what it starts, so an ssh client or a rank that mpirun
//    leaves is reparented to dsrt (not PID 1), which stops and reaps it.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_LAUNCH_REMOTE_H
#define DSRT_LAUNCH_REMOTE_H

#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace CLI {
class App;
} // namespace CLI

namespace dsrt::launch {

/// --ssh_port and --ssh_args.
struct SshOptions {
  std::optional<int> port;
  std::string args;
  bool given() const { return port.has_value() || !args.empty(); }
  void addTo(CLI::App &app, const char *group);
};

/// dsrt's bounds on every ssh it has mpirun start. ssh keeps the first
/// value it reads of an option, so the same -o in --ssh_args wins.
constexpr int kSshConnectTimeout = 10;
constexpr int kSshAliveInterval = 5, kSshAliveCount = 3;

/// The ssh command mpirun starts its remote daemons with:
///   ssh -tt [ARGS] [-p PORT] -o BatchMode=yes -o ConnectTimeout=10
///       -o ServerAliveInterval=5 -o ServerAliveCountMax=3
/// mpirun splits it at spaces and knows no quoting: ARGS with a quote, a
/// backslash or a tab is a LaunchError that says so. A user's own
/// OMPI_MCA_plm_rsh_agent beside --ssh_args/--ssh_port is a LaunchError
/// (one of the two would be ignored); alone it is kept (nullopt).
std::optional<std::string> sshAgent(const SshOptions &ssh);

/// mpirun's OOB keep-alives (oob_tcp_keepalive_*), set for a run with
/// other hosts: a daemon whose host or link is lost is found within
/// time + intvl x probes = 25 s (OpenMPI's defaults: 300 + 20 x 9 = 480 s),
/// by mpirun, which ends the job, and by the daemon, which ends itself.
constexpr int kKeepaliveTime = 10, kKeepaliveIntvl = 5, kKeepaliveProbes = 3;

/// mpirun's --mca settings for a run with other hosts: plm_rsh_agent
/// (sshAgent) and the keep-alives; each one the user set as
/// OMPI_MCA_<name> is left out (theirs applies).
std::vector<std::pair<std::string, std::string>> remoteMcaParams(const SshOptions &ssh);

/// A variable the ranks on other hosts get, and where it came from.
struct ForwardedVar {
  std::string name, value, source; // source: "environment" or FILE:LINE
};

/// The variables mpirun passes to every rank (`-x NAME=VALUE`), but those
/// in `setByDsrt`: from this environment, LD_LIBRARY_PATH and every
/// variable named DSRT_*, NCCL_*, UCX_*, OMP_*, CUDA_*, ONEDNN_*, DNNL_*,
/// OPENBLAS_* (the ones that steer dsrt, its libraries and its ranks);
/// then the lines NAME=VALUE of DeepSpeed's .deepspeed_env in the home
/// folder and in the current folder (the latter's win; blank lines and
/// #-comments skipped; DS_ENV_FILE names another file, as in DeepSpeed). A
/// line without '=' or with a bad name is a LaunchError naming FILE:LINE.
std::vector<ForwardedVar> forwardedEnvironment(const std::vector<std::string> &setByDsrt);

/// Makes this process the child subreaper of its descendants
/// (PR_SET_CHILD_SUBREAPER): an orphan among them is reparented here.
void becomeSubreaper();

/// Stops every remaining child of this process (mpirun's orphans after it
/// exited): SIGTERM, SIGKILL for those alive `graceMs` later, and reaps
/// them, with the children that appear meanwhile. Returns "PID: COMMAND"
/// of each, for the logs.
std::vector<std::string> stopChildren(int graceMs);

/// The state letter ('R', 'S', 'Z', ...) and parent of process `pid`, from
/// /proc/PID/stat; nullopt when there is no such process.
struct ProcessState {
  char state = 0;
  long ppid = 0;
};
std::optional<ProcessState> processState(long pid);

/// True when `host` is an address of one of this machine's interfaces.
bool isLocalAddress(const std::string &host);

} // namespace dsrt::launch

#endif // DSRT_LAUNCH_REMOTE_H
