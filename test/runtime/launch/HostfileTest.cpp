//===- HostfileTest.cpp - DeepSpeed hostfile parsing and rank selection ---===//
//
// Every rule of the hostfile format and of --include / --exclude /
// --num_nodes / --num_ranks, and every error message, word for word.
//
//===----------------------------------------------------------------------===//
#include "runtime/launch/Hostfile.h"

#include "TestDir.h"

#include <gtest/gtest.h>

using namespace dsrt::launch;
using dsrt::io::test::TestDir;

namespace {

std::string parseError(const std::string &text) {
  return DSRT_ERROR_OF(LaunchError, parseHostfileText(text, "hosts"));
}

std::string selectError(const std::string &text, const Selection &selection) {
  Hostfile hostfile = parseHostfileText(text, "hosts");
  return DSRT_ERROR_OF(LaunchError, selectRanks(hostfile, selection));
}

std::vector<RankSlot> select(const std::string &text, const Selection &selection) {
  return selectRanks(parseHostfileText(text, "hosts"), selection);
}

Selection include(const std::string &spec) {
  Selection s;
  s.include = spec;
  return s;
}

Selection exclude(const std::string &spec) {
  Selection s;
  s.exclude = spec;
  return s;
}

Selection counts(std::optional<int64_t> nodes, std::optional<int64_t> ranks) {
  Selection s;
  s.numNodes = nodes;
  s.numRanks = ranks;
  return s;
}

const char *kTwoHosts = "worker-0 slots=4\nworker-1 slots=4\n";
const char *kThreeHosts = "a slots=2\nb slots=3\nc slots=1\n";

} // namespace

//===----------------------------------------------------------------------===//
// The format
//===----------------------------------------------------------------------===//

TEST(Hostfile, HostsInFileOrderWithLineNumbers) {
  Hostfile h = parseHostfileText("worker-1 slots=2\nworker-0 slots=8\n", "hosts");
  ASSERT_EQ(h.hosts.size(), 2u);
  EXPECT_EQ(h.hosts[0].name, "worker-1");
  EXPECT_EQ(h.hosts[0].slots, 2);
  EXPECT_EQ(h.hosts[0].line, 1);
  EXPECT_EQ(h.hosts[1].name, "worker-0");
  EXPECT_EQ(h.hosts[1].slots, 8);
  EXPECT_EQ(h.hosts[1].line, 2);
  EXPECT_EQ(h.path, "hosts");
}

TEST(Hostfile, CommentsBlankLinesAndWhitespace) {
  Hostfile h = parseHostfileText("# the cluster\n"
                                 "\n"
                                 "   \t\n"
                                 "  node.example.com\tslots=4   # trailing comment\n"
                                 "#node2 slots=4\n"
                                 "node_2 slots=1#no space before it\n"
                                 "10.0.0.7 slots=007\r\n"
                                 "last slots=3",
                                 "hosts");
  ASSERT_EQ(h.hosts.size(), 3u + 1u);
  EXPECT_EQ(h.hosts[0].name, "node.example.com");
  EXPECT_EQ(h.hosts[0].slots, 4);
  EXPECT_EQ(h.hosts[0].line, 4);
  EXPECT_EQ(h.hosts[1].name, "node_2");
  EXPECT_EQ(h.hosts[1].slots, 1);
  EXPECT_EQ(h.hosts[2].name, "10.0.0.7");
  EXPECT_EQ(h.hosts[2].slots, 7);
  EXPECT_EQ(h.hosts[3].name, "last");
  EXPECT_EQ(h.hosts[3].line, 8);
}

TEST(Hostfile, DuplicateHost) {
  EXPECT_EQ(parseError("a slots=1\nb slots=1\na slots=2\n"),
            "hosts:3: \"a slots=2\": duplicate host 'a' (already on line 1) (each line is "
            "'hostname slots=N')");
}

TEST(Hostfile, SlotCounts) {
  EXPECT_EQ(parseError("a slots=0"), "hosts:1: \"a slots=0\": slots=0: the slot count must be "
                                     "at least 1 (each line is 'hostname slots=N')");
  EXPECT_EQ(parseError("a slots=-2"), "hosts:1: \"a slots=-2\": slots=-2: the slot count must "
                                      "be at least 1 (each line is 'hostname slots=N')");
  EXPECT_EQ(parseError("a slots=four"), "hosts:1: \"a slots=four\": slots=four: the slot count "
                                        "is not a number (each line is 'hostname slots=N')");
  EXPECT_EQ(parseError("a slots=+4"), "hosts:1: \"a slots=+4\": slots=+4: the slot count is not "
                                      "a number (each line is 'hostname slots=N')");
  EXPECT_EQ(parseError("a slots="),
            "hosts:1: \"a slots=\": slots= has no count (each line is 'hostname slots=N')");
  EXPECT_EQ(parseError("a slots=4x"), "hosts:1: \"a slots=4x\": slots=4x: unexpected 'x' after "
                                      "the slot count (each line is 'hostname slots=N')");
  EXPECT_EQ(parseError("a slots=4,5"), "hosts:1: \"a slots=4,5\": slots=4,5: unexpected ',5' "
                                       "after the slot count (each line is 'hostname slots=N')");
  EXPECT_EQ(parseError("a slots=99999999999999999999"),
            "hosts:1: \"a slots=99999999999999999999\": slots=99999999999999999999: too many "
            "slots (at most 65536 per host) (each line is 'hostname slots=N')");
  EXPECT_EQ(parseHostfileText("a slots=65536", "hosts").hosts[0].slots, 65536);
  EXPECT_EQ(parseError("a slots=65537"), "hosts:1: \"a slots=65537\": slots=65537: too many "
                                         "slots (at most 65536 per host) (each line is "
                                         "'hostname slots=N')");
}

TEST(Hostfile, MissingOrMisspelledSlots) {
  EXPECT_EQ(parseError("# two hosts\nworker-0\n"),
            "hosts:2: \"worker-0\": missing slots=N after the host name (each line is "
            "'hostname slots=N')");
  EXPECT_EQ(parseError("worker-0 # slots=4\n"),
            "hosts:1: \"worker-0 # slots=4\": missing slots=N after the host name (each line "
            "is 'hostname slots=N')");
  EXPECT_EQ(parseError("worker-0 4\n"), "hosts:1: \"worker-0 4\": expected slots=N after the "
                                        "host name, not '4' (each line is 'hostname slots=N')");
  EXPECT_EQ(parseError("worker-0 slots = 4\n"),
            "hosts:1: \"worker-0 slots = 4\": expected slots=N after the host name, not "
            "'slots' (each line is 'hostname slots=N')");
  EXPECT_EQ(parseError("worker-0 max_slots=4\n"),
            "hosts:1: \"worker-0 max_slots=4\": expected slots=N after the host name, not "
            "'max_slots=4' (each line is 'hostname slots=N')");
}

TEST(Hostfile, JunkAfterTheCount) {
  EXPECT_EQ(parseError("host slots=4 foo"), "hosts:1: \"host slots=4 foo\": unexpected 'foo' "
                                            "after slots=4 (each line is 'hostname slots=N')");
  EXPECT_EQ(parseError("host slots=4 slots=8"),
            "hosts:1: \"host slots=4 slots=8\": unexpected 'slots=8' after slots=4 (each line "
            "is 'hostname slots=N')");
}

TEST(Hostfile, HostNames) {
  const char *allowed = " (each line is 'hostname slots=N')";
  std::string chars = ": only letters, digits, '.', '_' and '-' are allowed";
  EXPECT_EQ(parseError("a;rm slots=1"),
            "hosts:1: \"a;rm slots=1\": invalid host name 'a;rm'" + chars + allowed);
  EXPECT_EQ(parseError("$(reboot) slots=1"),
            "hosts:1: \"$(reboot) slots=1\": invalid host name '$(reboot)'" + chars + allowed);
  EXPECT_EQ(parseError("`x` slots=1"),
            "hosts:1: \"`x` slots=1\": invalid host name '`x`'" + chars + allowed);
  EXPECT_EQ(parseError("user@host slots=1"),
            "hosts:1: \"user@host slots=1\": invalid host name 'user@host'" + chars + allowed);
  EXPECT_EQ(parseError("host:22 slots=1"),
            "hosts:1: \"host:22 slots=1\": invalid host name 'host:22'" + chars + allowed);
  EXPECT_EQ(parseError("h\xc3\xa9 slots=1"),
            "hosts:1: \"h\xc3\xa9 slots=1\": invalid host name 'h\xc3\xa9'" + chars + allowed);
  EXPECT_EQ(parseError("-oProxyCommand=x slots=1"),
            "hosts:1: \"-oProxyCommand=x slots=1\": invalid host name '-oProxyCommand=x': it "
            "starts with '-'" +
                std::string(allowed));
  // A space splits words: the second word of "my host slots=1" is no slots=.
  EXPECT_EQ(parseError("my host slots=1"),
            "hosts:1: \"my host slots=1\": expected slots=N after the host name, not 'host'" +
                std::string(allowed));
}

TEST(Hostfile, EmptyFile) {
  const char *error =
      "hosts: no hosts (the file is empty or only comments; each line is 'hostname slots=N')";
  EXPECT_EQ(parseError(""), error);
  EXPECT_EQ(parseError("\n\n  \n"), error);
  EXPECT_EQ(parseError("# worker-0 slots=4\n"), error);
}

TEST(Hostfile, ReadFromDisk) {
  TestDir dir;
  dsrt::io::test::writeBytes(dir.file("hosts"), "a slots=2\n");
  Hostfile h = readHostfile(dir.file("hosts"));
  EXPECT_EQ(h.path, dir.file("hosts"));
  ASSERT_EQ(h.hosts.size(), 1u);
  EXPECT_EQ(h.hosts[0].slots, 2);

  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, readHostfile(dir.file("nope"))),
            "--hostfile " + dir.file("nope") + ": cannot open: No such file or directory");
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, readHostfile(dir.path())),
            "--hostfile " + dir.path() + ": is a folder, not a hostfile");
  dsrt::io::test::writeBytes(dir.file("bad"), "a slots=2\nb slots=x\n");
  EXPECT_EQ(DSRT_ERROR_OF(LaunchError, readHostfile(dir.file("bad"))),
            dir.file("bad") + ":2: \"b slots=x\": slots=x: the slot count is not a number "
                              "(each line is 'hostname slots=N')");
}

//===----------------------------------------------------------------------===//
// Selection
//===----------------------------------------------------------------------===//

TEST(Selection, EverySlotInHostfileOrder) {
  std::vector<RankSlot> want = {{"a", 0}, {"a", 1}, {"b", 0}, {"b", 1}, {"b", 2}, {"c", 0}};
  EXPECT_EQ(select(kThreeHosts, {}), want);
}

TEST(Selection, IncludeHostsAndSlots) {
  // A host alone: all its slots; ':' lists slots; '@' separates hosts. The
  // result keeps the hostfile's order, slots ascending and once.
  std::vector<RankSlot> want = {{"a", 0}, {"a", 1}, {"b", 0}, {"b", 2}};
  EXPECT_EQ(select(kThreeHosts, include("b:2,0,2@a")), want);
  want = {{"c", 0}};
  EXPECT_EQ(select(kThreeHosts, include("c")), want);
  want = {{"b", 1}};
  EXPECT_EQ(select(kThreeHosts, include("b:1")), want);
  // The same host twice: the union.
  want = {{"b", 0}, {"b", 2}};
  EXPECT_EQ(select(kThreeHosts, include("b:2@b:0")), want);
  want = {{"b", 0}, {"b", 1}, {"b", 2}};
  EXPECT_EQ(select(kThreeHosts, include("b:2@b")), want);
}

TEST(Selection, ExcludeHostsAndSlots) {
  std::vector<RankSlot> want = {{"a", 0}, {"a", 1}, {"b", 0}, {"b", 2}};
  EXPECT_EQ(select(kThreeHosts, exclude("c@b:1")), want);
  want = {{"a", 1}, {"b", 0}, {"b", 1}, {"b", 2}, {"c", 0}};
  EXPECT_EQ(select(kThreeHosts, exclude("a:0")), want);
  // Excluding every slot of a host drops the host.
  want = {{"b", 0}, {"b", 1}, {"b", 2}, {"c", 0}};
  EXPECT_EQ(select(kThreeHosts, exclude("a:0,1")), want);
}

TEST(Selection, ExcludeEverything) {
  EXPECT_EQ(selectError(kThreeHosts, exclude("a@b@c:0")),
            "--exclude 'a@b@c:0': excludes every slot of hosts, no ranks are left");
}

TEST(Selection, IncludeAndExcludeAreMutuallyExclusive) {
  Selection s = include("a");
  s.exclude = "b";
  EXPECT_EQ(selectError(kThreeHosts, s),
            "--include and --exclude are mutually exclusive (DeepSpeed's rule): give one of "
            "them");
}

TEST(Selection, UnknownHostsAndSlots) {
  EXPECT_EQ(selectError(kThreeHosts, include("a@zz:0")),
            "--include 'a@zz:0': host 'zz' is not in hosts (its hosts: a, b, c)");
  EXPECT_EQ(selectError(kThreeHosts, exclude("zz")),
            "--exclude 'zz': host 'zz' is not in hosts (its hosts: a, b, c)");
  EXPECT_EQ(selectError(kThreeHosts, include("b:3")),
            "--include 'b:3': no slot 3 on host 'b', which has slots 0 to 2 (slots=3 on "
            "hosts:2)");
  EXPECT_EQ(selectError(kThreeHosts, exclude("c:0,1")),
            "--exclude 'c:0,1': no slot 1 on host 'c', which has slots 0 to 0 (slots=1 on "
            "hosts:3)");
  EXPECT_EQ(selectError(kThreeHosts, include("b:99999999999")),
            "--include 'b:99999999999': no slot 99999999999 on host 'b', which has slots 0 to 2 "
            "(slots=3 on hosts:2)");
  std::string many;
  for (int i = 0; i < 10; ++i)
    many += "h" + std::to_string(i) + " slots=1\n";
  EXPECT_EQ(selectError(many, include("x")),
            "--include 'x': host 'x' is not in hosts (its hosts: h0, h1, h2, h3, h4, h5, h6, "
            "h7, ...)");
}

TEST(Selection, SyntaxErrors) {
  const char *syntax = " (the syntax is host[:slot,slot...][@host[:slot...]...])";
  EXPECT_EQ(selectError(kThreeHosts, include("a@@b")),
            std::string("--include 'a@@b': empty host name") + syntax);
  EXPECT_EQ(selectError(kThreeHosts, include("a@")),
            std::string("--include 'a@': empty host name") + syntax);
  EXPECT_EQ(selectError(kThreeHosts, include(":0")),
            std::string("--include ':0': empty host name") + syntax);
  EXPECT_EQ(selectError(kThreeHosts, include("b:")),
            std::string("--include 'b:': empty slot index in 'b:'") + syntax);
  EXPECT_EQ(selectError(kThreeHosts, exclude("b:0,,1")),
            std::string("--exclude 'b:0,,1': empty slot index in 'b:0,,1'") + syntax);
  EXPECT_EQ(selectError(kThreeHosts, include("b:x")),
            std::string("--include 'b:x': slot 'x' is not a number") + syntax);
  EXPECT_EQ(selectError(kThreeHosts, include("b:-1")),
            std::string("--include 'b:-1': slot '-1' is not a number") + syntax);
  EXPECT_EQ(selectError(kThreeHosts, include("b:0:1")),
            std::string("--include 'b:0:1': more than one ':' in 'b:0:1'") + syntax);
}

TEST(Selection, NumNodesTakesTheFirstHosts) {
  std::vector<RankSlot> want = {{"a", 0}, {"a", 1}, {"b", 0}, {"b", 1}, {"b", 2}};
  EXPECT_EQ(select(kThreeHosts, counts(2, std::nullopt)), want);
  EXPECT_EQ(select(kThreeHosts, counts(3, std::nullopt)).size(), 6u);
  EXPECT_EQ(selectError(kThreeHosts, counts(4, std::nullopt)),
            "--num_nodes 4: hosts has only 3 hosts");
  EXPECT_EQ(selectError("a slots=1", counts(2, std::nullopt)),
            "--num_nodes 2: hosts has only 1 host");
  EXPECT_EQ(selectError(kThreeHosts, counts(0, std::nullopt)), "--num_nodes 0: must be at least 1");
}

TEST(Selection, NumRanksIsTheTotalInHostfileOrder) {
  // Not per node (DeepSpeed's --num_gpus): 3 ranks fill a, then one of b.
  std::vector<RankSlot> want = {{"a", 0}, {"a", 1}, {"b", 0}};
  EXPECT_EQ(select(kThreeHosts, counts(std::nullopt, 3)), want);
  EXPECT_EQ(select(kThreeHosts, counts(std::nullopt, 6)).size(), 6u);
  want = {{"worker-0", 0}};
  EXPECT_EQ(select(kTwoHosts, counts(std::nullopt, 1)), want);
  // With --num_nodes: the first ranks of the first hosts.
  want = {{"a", 0}, {"a", 1}, {"b", 0}, {"b", 1}};
  EXPECT_EQ(select(kThreeHosts, counts(2, 4)), want);
}

TEST(Selection, MoreRanksThanSlots) {
  EXPECT_EQ(selectError(kThreeHosts, counts(std::nullopt, 7)),
            "--num_ranks 7: 7 ranks asked but only 6 slots in hosts");
  EXPECT_EQ(selectError(kThreeHosts, counts(1, 3)),
            "--num_ranks 3: 3 ranks asked but only 2 slots in the first 1 host of hosts "
            "(--num_nodes)");
  EXPECT_EQ(selectError(kThreeHosts, counts(2, 6)),
            "--num_ranks 6: 6 ranks asked but only 5 slots in the first 2 hosts of hosts "
            "(--num_nodes)");
  EXPECT_EQ(selectError("a slots=1", counts(std::nullopt, 2)),
            "--num_ranks 2: 2 ranks asked but only 1 slot in hosts");
  EXPECT_EQ(selectError(kThreeHosts, counts(std::nullopt, 0)), "--num_ranks 0: must be at least 1");
  EXPECT_EQ(selectError(kThreeHosts, counts(std::nullopt, -3)),
            "--num_ranks -3: must be at least 1");
}

TEST(Selection, CountsDoNotCombineWithIncludeExclude) {
  Selection s = include("a");
  s.numNodes = 1;
  EXPECT_EQ(selectError(kThreeHosts, s),
            "--num_nodes cannot be combined with --include (DeepSpeed's rule: choose hosts and "
            "slots either with --include/--exclude or with --num_nodes/--num_ranks)");
  s = exclude("a");
  s.numRanks = 2;
  EXPECT_EQ(selectError(kThreeHosts, s),
            "--num_ranks cannot be combined with --exclude (DeepSpeed's rule: choose hosts and "
            "slots either with --include/--exclude or with --num_nodes/--num_ranks)");
}
