//===- hostfile_launch.cpp - fuzz the hostfile parser and the launcher -----===//
//
// Input: four parts separated by NUL bytes:
//   0. a DeepSpeed hostfile;
//   1. dsrt's command line, one argument a line (argv[0] is added): the
//      launcher flags are parsed by LaunchOptions (CLI11), the rest pass;
//   2. mpirun's stderr, for parseMpirunFailure;
//   3. one byte: this machine's cores (1-256) and whether --threads was given.
// Flow: parseHostfileText -> selectRanks -> rankArguments ->
// buildMpirunCommand, and parseMpirunFailure -> describeFailure. Each may
// throw LaunchError (CLI11's ParseError for the flags); nothing else.
//
// Selections over more than kMaxSlots declared slots are not expanded (one
// RankSlot per slot: 65536 slots on each of 100 hosts is 6.5M entries, a
// memory cost, not a parsing question).
//
//===----------------------------------------------------------------------===//
#include "runtime/launch/Hostfile.h"
#include "runtime/launch/Launcher.h"
#include "test/fuzz/FuzzUtil.h"

#include <CLI/CLI.hpp>

using namespace dsrt::launch;

namespace {
constexpr int64_t kMaxSlots = 1 << 16;

std::vector<std::string> lines(const std::string &text) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= text.size() && !text.empty()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) {
      out.push_back(text.substr(begin));
      break;
    }
    out.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<std::string> parts = dsc::fuzz::splitParts(data, size, 4);
  try {
    // The launcher flags, as dsrt parses them.
    std::vector<std::string> argv = {"dsrt"};
    for (std::string &a : lines(parts[1]))
      argv.push_back(std::move(a));
    LaunchOptions options;
    bool flagsOk = true;
    {
      CLI::App app("fuzz");
      app.allow_extras();
      options.addTo(app);
      std::vector<const char *> cargv;
      for (const std::string &a : argv)
        cargv.push_back(a.c_str());
      try {
        app.parse(int(cargv.size()), cargv.data());
      } catch (const CLI::Error &e) {
        dsc::fuzz::note(e.what());
        flagsOk = false;
      }
    }
    std::vector<std::string> args = rankArguments(argv, "/run/dir");
    if (args.size() < 2 || args[args.size() - 2] != "--out" || args.back() != "/run/dir") {
      std::fprintf(stderr, "hostfile_launch: rankArguments does not end with --out RUNDIR\n");
      std::abort();
    }

    std::vector<RankSlot> ranks;
    bool fromHostfile = false;
    try {
      Hostfile hostfile = parseHostfileText(parts[0], "fuzz-hostfile");
      if (hostfile.hosts.empty()) {
        std::fprintf(stderr, "hostfile_launch: a hostfile without hosts was accepted\n");
        std::abort();
      }
      int64_t slots = 0;
      for (const HostEntry &h : hostfile.hosts)
        slots += h.slots;
      if (flagsOk && slots <= kMaxSlots) {
        ranks = selectRanks(hostfile, options.selection);
        fromHostfile = true;
      }
    } catch (const LaunchError &e) {
      dsc::fuzz::note(e.what());
    }
    if (ranks.empty())
      ranks.push_back({"localhost", 0});

    uint8_t misc = parts[3].empty() ? 0 : uint8_t(parts[3][0]);
    MpirunSetup setup;
    setup.mpirun = "/usr/bin/mpirun";
    setup.ranks = ranks;
    setup.fromHostfile = fromHostfile;
    setup.runDir = "/run/dir";
    setup.dsrt = "/usr/bin/dsrt";
    setup.args = args;
    setup.root = misc & 1;
    setup.cores = 1 + (misc >> 1);
    setup.userThreads = misc & 0x80;
    std::vector<std::string> cmd = buildMpirunCommand(setup);
    if (cmd.empty() || cmd.back() != "/run/dir") {
      std::fprintf(stderr, "hostfile_launch: the mpirun command does not end with the rank "
                           "arguments\n");
      std::abort();
    }

    if (std::optional<RankFailure> failure = parseMpirunFailure(parts[2]))
      dsc::fuzz::touch(describeFailure(*failure, ranks, "/run/dir/logs").data(), 1);
  } catch (const LaunchError &e) {
    dsc::fuzz::note(e.what());
  } catch (const std::exception &e) {
    if (!dsc::fuzz::lenient())
      dsc::fuzz::foreignException("hostfile_launch", e);
  }
  return 0;
}
