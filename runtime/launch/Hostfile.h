//===- Hostfile.h - DeepSpeed hostfiles and rank selection ------*- C++ -*-===//
//
// `dsrt PLAN --hostfile hosts` reads DeepSpeed's hostfile format:
//
//     # comment
//     worker-0 slots=4     # trailing comments too
//     worker-1 slots=4
//
// and DeepSpeed's selection flags: --include / --exclude
// (`host1:0,1@host2`: hosts separated by '@', a host alone means all its
// slots; mutually exclusive), --num_nodes N (the first N hosts). dsrt's
// --num_ranks N is the TOTAL number of ranks, taken in hostfile order
// (DeepSpeed's --num_gpus counts per node instead). As in DeepSpeed,
// --num_nodes / --num_ranks cannot be combined with --include / --exclude.
// The result is the ordered list of ranks: rank r runs on ranks[r].host in
// its slot ranks[r].slot. A slot is only a rank's place on its host (a CPU
// rank has no device): the count per host decides how many ranks a host gets.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_LAUNCH_HOSTFILE_H
#define DSRT_LAUNCH_HOSTFILE_H

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dsrt::launch {

/// Every launcher failure that is the user's to fix; the message names the
/// place (the hostfile and line, or the flag).
class LaunchError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// One `hostname slots=N` line.
struct HostEntry {
  std::string name;
  int slots = 0;
  int line = 0; // 1-based line number in the hostfile
};

struct Hostfile {
  std::string path;             // as given, for messages
  std::vector<HostEntry> hosts; // in file order, never empty
};

/// The most slots one host may declare.
constexpr int kMaxSlotsPerHost = 65536;

/// Parses hostfile text; `path` only names it in messages. Throws LaunchError
/// ("PATH:LINE: \"LINE\": problem") for a duplicate host, a slot count that
/// is missing, not a positive integer or followed by junk, anything after the
/// count, a host name outside [A-Za-z0-9._-] or starting with '-', and a file
/// without hosts.
Hostfile parseHostfileText(const std::string &text, const std::string &path);

/// Reads and parses the hostfile at `path` (errors as above, plus a file that
/// cannot be read).
Hostfile readHostfile(const std::string &path);

/// DeepSpeed's selection flags; empty or nullopt when not given.
struct Selection {
  std::string include;
  std::string exclude;
  std::optional<int64_t> numNodes;
  std::optional<int64_t> numRanks;
};

/// One rank's place.
struct RankSlot {
  std::string host;
  int slot = 0;
  bool operator==(const RankSlot &other) const { return host == other.host && slot == other.slot; }
};

/// Applies `selection` to `hostfile`: include/exclude, then the first
/// --num_nodes hosts, then the first --num_ranks slots, hosts in hostfile
/// order and slots ascending. Throws LaunchError naming the flag.
std::vector<RankSlot> selectRanks(const Hostfile &hostfile, const Selection &selection);

} // namespace dsrt::launch

#endif // DSRT_LAUNCH_HOSTFILE_H
