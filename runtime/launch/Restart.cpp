//===- Restart.cpp - dsrt --max-restarts: where and how a run goes on -----===//
#include "runtime/launch/Restart.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>

namespace fs = std::filesystem;

namespace dsrt::launch {

namespace {

/// The plans a restart can choose: the plan itself and the smaller
/// data-parallel sizes dsc compiled beside it (PLAN/elastic/dpN).
std::vector<std::pair<std::string, PlanRanks>> restartPlans(const std::string &planDir,
                                                            const PlanRanks &plan) {
  std::vector<std::pair<std::string, PlanRanks>> plans = {{planDir, plan}};
  std::error_code ec;
  for (fs::directory_iterator it(fs::path(planDir) / "elastic", ec), end; !ec && it != end;
       it.increment(ec))
    if (std::optional<PlanRanks> r = readPlanRanks(it->path().string()))
      plans.push_back({it->path().string(), *r});
  std::sort(plans.begin(), plans.end(),
            [](const auto &a, const auto &b) { return a.second.ranks() > b.second.ranks(); });
  return plans;
}

} // namespace

Restart planRestart(const LaunchOptions &options, const LaunchRequest &request,
                    const SuperviseResult &failed, bool fromHostfile,
                    std::set<std::string> &lostHosts, const std::vector<RankSlot> &current) {
  Restart next;
  std::string without;
  // Without a hostfile every rank runs here: the same ranks again (the
  // fault was a rank's, not a host's). With one, the lost hosts are left
  // out of the selection.
  std::vector<RankSlot> available = current;
  if (fromHostfile) {
    for (const std::string &host : failed.lostHosts)
      if (lostHosts.insert(host).second)
        without += (without.empty() ? "" : ", ") + host;
    Selection all = options.selection;
    all.numRanks.reset();
    available.clear();
    for (const RankSlot &slot : selectRanks(readHostfile(options.hostfile), all))
      if (!lostHosts.count(slot.host))
        available.push_back(slot);
  }
  std::optional<PlanRanks> top = readPlanRanks(request.planDir);
  if (!top)
    throw LaunchError(failed.error + "; cannot restart: " + request.planDir +
                      "/plan.pb cannot be read any more");
  std::vector<std::pair<std::string, PlanRanks>> plans = restartPlans(request.planDir, *top);
  auto fits = std::find_if(plans.begin(), plans.end(),
                           [&](const auto &p) { return p.second.ranks() <= available.size(); });
  std::string sizes;
  for (const auto &p : plans)
    sizes += (sizes.empty() ? "" : ", ") + std::to_string(p.second.ranks());
  if (fits == plans.end())
    throw LaunchError(failed.error + "; cannot restart: " +
                      plural(available.size(), "slot remains", "slots remain") +
                      (without.empty() ? "" : " without " + without) +
                      ", and the plans compiled for this job need " + sizes +
                      " ranks (an elastic config compiles plans for fewer ranks beside the "
                      "plan: docs/multi-host.md)");
  std::optional<std::pair<std::string, int64_t>> latest = request.latestCheckpoint(request.saveDir);
  if (!latest && fits->first != request.planDir)
    throw LaunchError(failed.error + "; cannot restart on fewer ranks: " + request.saveDir +
                      " holds no complete checkpoint yet to continue from");
  next.ranks.assign(available.begin(), available.begin() + fits->second.ranks());
  next.planRanks = fits->second;
  next.argv = restartArguments(request.argv, *options.app, fits->first,
                               latest ? latest->first : std::string());
  std::set<std::string> hosts;
  for (const RankSlot &r : next.ranks)
    hosts.insert(r.host);
  next.what =
      (without.empty() ? std::string("on the same ") + plural(next.ranks.size(), "rank", "ranks")
                       : "without " + without + ", on " + plural(hosts.size(), "host", "hosts")) +
      ": " + (fits->first == request.planDir ? "the same plan " : "plan ") + fits->first + " (" +
      fits->second.describe() +
      (fits->second.batchText().empty() ? "" : ", " + fits->second.batchText()) + ")" +
      (latest
           ? ", from checkpoint " + latest->first + " (step " + std::to_string(latest->second) + ")"
           : ", from the start (no checkpoint yet)");
  return next;
}

/// dsrt's arguments with the plan (its first positional argument) replaced
/// by `plan` and --init / --resume by `--resume resume` (when not empty).
/// `app` tells which options take a value.
std::vector<std::string> restartArguments(const std::vector<std::string> &argv, const CLI::App &app,
                                          const std::string &plan, const std::string &resume) {
  std::vector<std::string> outArgs = {argv.at(0)};
  bool planSeen = false, positionalOnly = false;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string &arg = argv[i];
    bool option = !positionalOnly && arg.size() > 1 && arg[0] == '-';
    if (!option) {
      outArgs.push_back(planSeen ? arg : plan);
      planSeen = true;
      continue;
    }
    if (arg == "--") {
      positionalOnly = true;
      outArgs.push_back(arg);
      continue;
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    const CLI::Option *opt = app.get_option_no_throw(name);
    bool takesValue = eq == std::string::npos && opt && opt->get_items_expected_max() > 0;
    bool drop = !resume.empty() && (name == "--resume" || name == "--init");
    if (!drop)
      outArgs.push_back(arg);
    if (takesValue && i + 1 < argv.size()) {
      if (!drop)
        outArgs.push_back(argv[i + 1]);
      ++i;
    }
  }
  if (!resume.empty()) {
    outArgs.push_back("--resume");
    outArgs.push_back(resume);
  }
  return outArgs;
}

} // namespace dsrt::launch
