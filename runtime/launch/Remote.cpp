//===- Remote.cpp - ssh, environment and leftovers of a multi-host run ----===//

#include "runtime/launch/Remote.h"

#include "runtime/launch/Hostfile.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace dsrt::launch {
namespace fs = std::filesystem;

void SshOptions::addTo(CLI::App &app, const char *group) {
  app.add_option_function<int>(
         "--ssh_port", [this](const int &p) { port = p; },
         "the port of the hosts' sshd (DeepSpeed's --ssh_port)")
      ->check(CLI::Range(1, 65535))
      ->group(group);
  app.add_option("--ssh_args", args,
                 "options for every ssh that starts a host's daemon, as one string: "
                 "\"-F ~/cluster/ssh_config -i KEY\" (dsrt adds -tt, BatchMode=yes, "
                 "ConnectTimeout=10 and ServerAliveInterval=5 x 3, which -T and the same -o "
                 "here override)")
      ->group(group);
}

std::optional<std::string> sshAgent(const SshOptions &ssh) {
  const char *user = std::getenv("OMPI_MCA_plm_rsh_agent");
  if (user && *user) {
    if (ssh.given())
      throw LaunchError(std::string(ssh.port ? "--ssh_port" : "--ssh_args") +
                        ": OMPI_MCA_plm_rsh_agent is set too (\"" + user +
                        "\"), and mpirun would take only one of them: unset it, or leave " +
                        (ssh.port ? "--ssh_port" : "--ssh_args") + " out");
    return std::nullopt;
  }
  for (char c : ssh.args)
    if (c == '"' || c == '\'' || c == '\\' || c == '\t' || c == '\n')
      throw LaunchError("--ssh_args \"" + ssh.args +
                        "\": mpirun splits the ssh command at spaces and takes quotes and "
                        "backslashes literally; give paths without spaces (or put the "
                        "options in an ssh config file and pass -F FILE)");
  // -tt first (a -T in ARGS undoes it): with a terminal, the daemon gets
  // SIGHUP when its host's sshd ends the session, as it does for a client
  // lost behind a cut link (ClientAliveInterval); without one a daemon
  // blocked on its lost link to mpirun stayed for TCP's retries (minutes).
  std::string agent = "ssh -tt";
  if (!ssh.args.empty())
    agent += " " + ssh.args;
  if (ssh.port)
    agent += " -p " + std::to_string(*ssh.port);
  agent += " -o BatchMode=yes -o ConnectTimeout=" + std::to_string(kSshConnectTimeout) +
           " -o ServerAliveInterval=" + std::to_string(kSshAliveInterval) +
           " -o ServerAliveCountMax=" + std::to_string(kSshAliveCount);
  return agent;
}

std::vector<std::pair<std::string, std::string>> remoteMcaParams(const SshOptions &ssh) {
  std::vector<std::pair<std::string, std::string>> mca;
  if (std::optional<std::string> agent = sshAgent(ssh))
    mca.emplace_back("plm_rsh_agent", *agent);
  for (auto [name, value] : {std::pair{"oob_tcp_keepalive_time", kKeepaliveTime},
                             std::pair{"oob_tcp_keepalive_intvl", kKeepaliveIntvl},
                             std::pair{"oob_tcp_keepalive_probes", kKeepaliveProbes}})
    if (!std::getenv((std::string("OMPI_MCA_") + name).c_str()))
      mca.emplace_back(name, std::to_string(value));
  return mca;
}

namespace {

bool validName(const std::string &name) {
  if (name.empty() || std::isdigit((unsigned char)name[0]))
    return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum((unsigned char)c) || c == '_'; });
}

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

/// DeepSpeed's .deepspeed_env: NAME=VALUE per line.
void readEnvFile(const fs::path &path, std::map<std::string, ForwardedVar> &vars) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    return;
  std::ifstream in(path);
  if (!in)
    throw LaunchError(path.string() + ": cannot read");
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::string text = trim(line);
    if (text.empty() || text[0] == '#')
      continue;
    std::string where = path.string() + ":" + std::to_string(n);
    size_t eq = text.find('=');
    if (eq == std::string::npos)
      throw LaunchError(where + ": \"" + text +
                        "\": expected NAME=VALUE (DeepSpeed's .deepspeed_env, whose variables "
                        "every rank gets)");
    std::string name = trim(text.substr(0, eq)), value = trim(text.substr(eq + 1));
    if (!validName(name))
      throw LaunchError(where + ": \"" + name +
                        "\" is not a variable name (letters, digits and _, not starting "
                        "with a digit)");
    vars[name] = {name, value, where};
  }
}

} // namespace

std::vector<ForwardedVar> forwardedEnvironment(const std::vector<std::string> &setByDsrt) {
  static const char *const kPrefixes[] = {"DSRT_", "NCCL_",   "UCX_",  "OMP_",
                                          "CUDA_", "ONEDNN_", "DNNL_", "OPENBLAS_"};
  std::map<std::string, ForwardedVar> vars;
  for (char **e = environ; e && *e; ++e) {
    std::string entry = *e;
    size_t eq = entry.find('=');
    if (eq == std::string::npos)
      continue;
    std::string name = entry.substr(0, eq);
    bool wanted = name == "LD_LIBRARY_PATH" ||
                  std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                              [&](const char *p) { return name.rfind(p, 0) == 0; });
    if (wanted && validName(name))
      vars[name] = {name, entry.substr(eq + 1), "environment"};
  }
  const char *file = std::getenv("DS_ENV_FILE");
  std::string fileName = file && *file ? file : ".deepspeed_env";
  if (const char *home = std::getenv("HOME"); home && *home)
    readEnvFile(fs::path(home) / fileName, vars);
  readEnvFile(fs::path(".") / fileName, vars);
  std::vector<ForwardedVar> out;
  for (auto &[name, var] : vars)
    if (std::find(setByDsrt.begin(), setByDsrt.end(), name) == setByDsrt.end())
      out.push_back(var);
  return out;
}

void becomeSubreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

std::optional<ProcessState> processState(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // pid (comm) state ppid ...: comm may hold spaces and parentheses.
  size_t close = text.rfind(')');
  ProcessState s;
  if (close == std::string::npos ||
      std::sscanf(text.c_str() + close + 1, " %c %ld", &s.state, &s.ppid) != 2)
    return std::nullopt;
  return s;
}

namespace {

/// The children of this process, with their command lines.
std::map<pid_t, std::string> listChildren() {
  std::map<pid_t, std::string> kids;
  const pid_t self = ::getpid();
  std::error_code ec;
  for (const fs::directory_entry &d : fs::directory_iterator("/proc", ec)) {
    const std::string name = d.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit))
      continue;
    std::optional<ProcessState> st = processState(std::stol(name));
    if (!st || st->ppid != self)
      continue;
    std::ifstream cmd(d.path() / "cmdline");
    std::string line((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    std::replace(line.begin(), line.end(), '\0', ' ');
    if (line.size() > 200)
      line = line.substr(0, 200) + "...";
    kids[pid_t(std::stol(name))] = trim(line).empty() ? "(exited)" : trim(line);
  }
  return kids;
}

/// Reaps every child that has exited; true when none is left.
bool reapExited() {
  for (;;) {
    pid_t p = ::waitpid(-1, nullptr, WNOHANG);
    if (p > 0)
      continue;
    return p < 0 && errno == ECHILD;
  }
}

} // namespace

std::vector<std::string> stopChildren(int graceMs) {
  std::vector<std::string> stopped;
  std::set<pid_t> termed;
  auto start = std::chrono::steady_clock::now();
  bool killed = false;
  for (;;) {
    if (reapExited())
      break;
    std::map<pid_t, std::string> kids = listChildren();
    if (kids.empty())
      break;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count();
    for (auto &[pid, cmd] : kids) {
      if (termed.insert(pid).second) {
        stopped.push_back(std::to_string(pid) + ": " + cmd);
        ::kill(pid, SIGTERM);
      } else if (ms >= graceMs) {
        ::kill(pid, SIGKILL);
        killed = true;
      }
    }
    // SIGKILL cannot be refused: a child still listed a while after it is
    // a zombie of another parent's making or gone; give up after 2 s more.
    if (killed && ms >= graceMs + 2000)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return stopped;
}

bool isLocalAddress(const std::string &host) {
  in_addr v4{};
  in6_addr v6{};
  bool is4 = ::inet_pton(AF_INET, host.c_str(), &v4) == 1;
  bool is6 = !is4 && ::inet_pton(AF_INET6, host.c_str(), &v6) == 1;
  if (!is4 && !is6)
    return false;
  ifaddrs *list = nullptr;
  if (::getifaddrs(&list) != 0)
    return false;
  bool found = false;
  for (ifaddrs *a = list; a && !found; a = a->ifa_next) {
    if (!a->ifa_addr)
      continue;
    if (is4 && a->ifa_addr->sa_family == AF_INET)
      found = std::memcmp(&reinterpret_cast<sockaddr_in *>(a->ifa_addr)->sin_addr, &v4,
                          sizeof v4) == 0;
    else if (is6 && a->ifa_addr->sa_family == AF_INET6)
      found = std::memcmp(&reinterpret_cast<sockaddr_in6 *>(a->ifa_addr)->sin6_addr, &v6,
                          sizeof v6) == 0;
  }
  ::freeifaddrs(list);
  return found;
}

} // namespace dsrt::launch
