//===- Restart.h - dsrt --max-restarts: where and how a run goes on -*- C++ -*-===//
//
// After a run ended by a lost host, the launcher (Launcher.cpp) restarts
// it: without the lost hosts, on the largest plan of the job that fits the
// slots left (the plan, or one dsc compiled beside it for fewer ranks in
// PLAN/elastic from the config's elasticity section), from the newest
// complete checkpoint of --save-dir. docs/multi-host.md, "Elastic restart".
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_LAUNCH_RESTART_H
#define DSRT_LAUNCH_RESTART_H

#include "runtime/launch/Launcher.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dsrt::launch {

/// What a restart runs: the ranks, the plan, dsrt's arguments, and the
/// line that says so.
struct Restart {
  std::vector<RankSlot> ranks;
  std::optional<PlanRanks> planRanks;
  std::vector<std::string> argv;
  std::string what;
};

/// The restart after `failed` (whose lostHosts are added to `lostHosts`,
/// every host lost so far). Throws LaunchError, with `failed`'s error
/// first, when no plan of the job fits the slots left or a smaller plan
/// has no checkpoint to start from.
Restart planRestart(const LaunchOptions &options, const LaunchRequest &request,
                    const SuperviseResult &failed, bool fromHostfile,
                    std::set<std::string> &lostHosts, const std::vector<RankSlot> &current);

/// dsrt's arguments for a restart: the plan (the first positional
/// argument) replaced by `plan`, and --init / --resume by `--resume resume`
/// when `resume` is not empty. `app` (dsrt's parser) tells which options
/// take a value.
std::vector<std::string> restartArguments(const std::vector<std::string> &argv,
                                          const CLI::App &app, const std::string &plan,
                                          const std::string &resume);

} // namespace dsrt::launch

#endif // DSRT_LAUNCH_RESTART_H
