//===- Hostfile.cpp - DeepSpeed hostfiles and rank selection --------------===//
#include "runtime/launch/Hostfile.h"

#include "io/FileUtil.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace dsrt::launch {
namespace {

constexpr const char *kLineFormat = "each line is 'hostname slots=N'";

bool isSpace(char c) { return c == ' ' || c == '\t'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }

bool isHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || isDigit(c) || c == '.' || c == '_' ||
         c == '-';
}

std::vector<std::string> splitWords(const std::string &s) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && isSpace(s[i]))
      ++i;
    size_t start = i;
    while (i < s.size() && !isSpace(s[i]))
      ++i;
    if (i > start)
      words.push_back(s.substr(start, i - start));
  }
  return words;
}

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t at = s.find(sep, start);
    parts.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos)
      return parts;
    start = at + 1;
  }
}

/// Why `name` is not a host name, or "" if it is one.
std::string hostNameProblem(const std::string &name) {
  if (name[0] == '-')
    return "invalid host name '" + name + "': it starts with '-'";
  for (char c : name)
    if (!isHostChar(c))
      return "invalid host name '" + name + "': only letters, digits, '.', '_' and '-' are allowed";
  return "";
}

/// The slot count of `word` ("slots=N"), or throws through `fail`.
template <typename Fail> int parseSlots(const std::string &word, Fail fail) {
  std::string value = word.substr(std::strlen("slots="));
  if (value.empty())
    fail("slots= has no count");
  size_t start = value[0] == '-' ? 1 : 0;
  size_t end = start;
  while (end < value.size() && isDigit(value[end]))
    ++end;
  if (end == start)
    fail(word + ": the slot count is not a number");
  if (end < value.size())
    fail(word + ": unexpected '" + value.substr(end) + "' after the slot count");
  std::string digits = value.substr(start, end - start);
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
  bool zero = digits == "0";
  if (value[0] == '-' || zero)
    fail(word + ": the slot count must be at least 1");
  if (digits.size() > 6 || std::stoi(digits) > kMaxSlotsPerHost)
    fail(word + ": too many slots (at most " + std::to_string(kMaxSlotsPerHost) + " per host)");
  return std::stoi(digits);
}

/// "a, b, c" (at most 8 names, then ", ...").
std::string hostList(const Hostfile &hostfile) {
  std::string list;
  for (size_t i = 0; i < hostfile.hosts.size(); ++i) {
    if (i == 8)
      return list + ", ...";
    list += (i ? ", " : "") + hostfile.hosts[i].name;
  }
  return list;
}

/// The slots one --include / --exclude names per host.
struct HostSlots {
  bool all = false;
  std::set<int> slots;
};

/// Parses `value` of `flag` (host[:slot,slot...][@host...]) against the
/// hostfile's hosts.
std::map<std::string, HostSlots> parseHostSpec(const std::string &flag, const std::string &value,
                                               const Hostfile &hostfile) {
  std::string place = flag + " '" + value + "': ";
  const char *syntax = " (the syntax is host[:slot,slot...][@host[:slot...]...])";
  std::map<std::string, HostSlots> spec;
  for (const std::string &part : split(value, '@')) {
    size_t colon = part.find(':');
    std::string name = part.substr(0, colon);
    if (name.empty())
      throw LaunchError(place + "empty host name" + syntax);
    auto host = std::find_if(hostfile.hosts.begin(), hostfile.hosts.end(),
                             [&](const HostEntry &h) { return h.name == name; });
    if (host == hostfile.hosts.end())
      throw LaunchError(place + "host '" + name + "' is not in " + hostfile.path +
                        " (its hosts: " + hostList(hostfile) + ")");
    HostSlots &entry = spec[name];
    if (colon == std::string::npos) {
      entry.all = true;
      continue;
    }
    std::string slots = part.substr(colon + 1);
    if (slots.find(':') != std::string::npos)
      throw LaunchError(place + "more than one ':' in '" + part + "'" + syntax);
    for (const std::string &item : split(slots, ',')) {
      if (item.empty())
        throw LaunchError(place + "empty slot index in '" + part + "'" + syntax);
      if (!std::all_of(item.begin(), item.end(), isDigit))
        throw LaunchError(place + "slot '" + item + "' is not a number" + syntax);
      if (item.size() > 6 || std::stoi(item) >= host->slots)
        throw LaunchError(place + "no slot " + item + " on host '" + name +
                          "', which has slots 0 to " + std::to_string(host->slots - 1) +
                          " (slots=" + std::to_string(host->slots) + " on " + hostfile.path + ":" +
                          std::to_string(host->line) + ")");
      entry.slots.insert(std::stoi(item));
    }
  }
  return spec;
}

} // namespace

Hostfile parseHostfileText(const std::string &text, const std::string &path) {
  Hostfile hostfile;
  hostfile.path = path;
  std::map<std::string, int> lineOf;
  std::istringstream in(text);
  std::string raw;
  for (int lineNo = 1; std::getline(in, raw); ++lineNo) {
    if (!raw.empty() && raw.back() == '\r')
      raw.pop_back();
    auto fail = [&](const std::string &problem) {
      throw LaunchError(path + ":" + std::to_string(lineNo) + ": \"" + raw + "\": " + problem +
                        " (" + kLineFormat + ")");
    };
    std::vector<std::string> words = splitWords(raw.substr(0, raw.find('#')));
    if (words.empty())
      continue;
    const std::string &name = words[0];
    std::string problem = hostNameProblem(name);
    if (!problem.empty())
      fail(problem);
    if (words.size() == 1)
      fail("missing slots=N after the host name");
    if (words[1].rfind("slots=", 0) != 0)
      fail("expected slots=N after the host name, not '" + words[1] + "'");
    int slots = parseSlots(words[1], fail);
    if (words.size() > 2)
      fail("unexpected '" + words[2] + "' after " + words[1]);
    auto [it, inserted] = lineOf.emplace(name, lineNo);
    if (!inserted)
      fail("duplicate host '" + name + "' (already on line " + std::to_string(it->second) + ")");
    hostfile.hosts.push_back({name, slots, lineNo});
  }
  if (hostfile.hosts.empty())
    throw LaunchError(path + ": no hosts (the file is empty or only comments; " + kLineFormat +
                      ")");
  return hostfile;
}

Hostfile readHostfile(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw LaunchError("--hostfile " + path + ": is a folder, not a hostfile");
  try {
    io::requireRegularFile(path); // a FIFO would block the read
  } catch (const io::IoError &e) {
    throw LaunchError(std::string("--hostfile ") + e.what());
  }
  // A hostfile lists machines: a few KiB. Anything far larger is not one.
  constexpr std::uintmax_t kMaxBytes = 16 << 20;
  if (std::filesystem::file_size(path, ec) > kMaxBytes)
    throw LaunchError("--hostfile " + path + ": larger than 16 MiB, not a hostfile");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw LaunchError("--hostfile " + path + ": cannot open: " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad())
    throw LaunchError("--hostfile " + path + ": cannot read: " + std::strerror(errno));
  return parseHostfileText(text.str(), path);
}

std::vector<RankSlot> selectRanks(const Hostfile &hostfile, const Selection &selection) {
  bool filter = !selection.include.empty() || !selection.exclude.empty();
  if (!selection.include.empty() && !selection.exclude.empty())
    throw LaunchError("--include and --exclude are mutually exclusive (DeepSpeed's "
                      "rule): give one of them");
  for (auto [flag, given] : {std::pair{"--num_nodes", selection.numNodes},
                             std::pair{"--num_ranks", selection.numRanks}}) {
    if (!given)
      continue;
    int64_t value = *given;
    if (filter)
      throw LaunchError(std::string(flag) + " cannot be combined with " +
                        (selection.include.empty() ? "--exclude" : "--include") +
                        " (DeepSpeed's rule: choose hosts and slots either with "
                        "--include/--exclude or with --num_nodes/--num_ranks)");
    if (value < 1)
      throw LaunchError(std::string(flag) + " " + std::to_string(value) + ": must be at least 1");
  }

  // Slots per host, in hostfile order.
  std::vector<std::pair<std::string, std::vector<int>>> hosts;
  std::map<std::string, HostSlots> spec;
  if (!selection.include.empty())
    spec = parseHostSpec("--include", selection.include, hostfile);
  if (!selection.exclude.empty())
    spec = parseHostSpec("--exclude", selection.exclude, hostfile);
  for (const HostEntry &host : hostfile.hosts) {
    auto named = spec.find(host.name);
    std::vector<int> slots;
    for (int s = 0; s < host.slots; ++s) {
      bool listed = named != spec.end() && (named->second.all || named->second.slots.count(s));
      if (selection.include.empty() ? !listed : listed)
        slots.push_back(s);
    }
    if (!slots.empty())
      hosts.emplace_back(host.name, std::move(slots));
  }
  if (hosts.empty())
    throw LaunchError("--exclude '" + selection.exclude + "': excludes every slot of " +
                      hostfile.path + ", no ranks are left");

  if (selection.numNodes) {
    if (*selection.numNodes > int64_t(hosts.size()))
      throw LaunchError("--num_nodes " + std::to_string(*selection.numNodes) + ": " +
                        hostfile.path + " has only " + std::to_string(hosts.size()) +
                        (hosts.size() == 1 ? " host" : " hosts"));
    hosts.resize(*selection.numNodes);
  }

  std::vector<RankSlot> ranks;
  for (const auto &[name, slots] : hosts)
    for (int s : slots)
      ranks.push_back({name, s});
  if (selection.numRanks) {
    int64_t asked = *selection.numRanks;
    if (asked > int64_t(ranks.size())) {
      std::string where = !selection.numNodes
                              ? hostfile.path
                              : "the first " + std::to_string(*selection.numNodes) +
                                    (*selection.numNodes == 1 ? " host" : " hosts") + " of " +
                                    hostfile.path + " (--num_nodes)";
      throw LaunchError("--num_ranks " + std::to_string(asked) + ": " + std::to_string(asked) +
                        " ranks asked but only " + std::to_string(ranks.size()) +
                        (ranks.size() == 1 ? " slot in " : " slots in ") + where);
    }
    ranks.resize(asked);
  }
  return ranks;
}

} // namespace dsrt::launch
