#include "core/testing/server_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/client/client.h"
#include "core/testing/run_command.h"
#include "gtest/gtest.h"

namespace ardma::testing {

std::string TempPath(const std::string& name) {
  // Per test; outside a test (a benchmark) per call.
  static std::atomic<int> calls{0};
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string which = test != nullptr ? std::string(test->name()) : std::to_string(calls++);
  std::replace(which.begin(), which.end(), '/', '_');  // parameterised tests: "Name/param"
  return (std::filesystem::temp_directory_path() /
          (name + "." + std::to_string(::getpid()) + "." + which))
      .string();
}

uint64_t ResidentBytes(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

std::map<std::string, uint64_t> ResidentByMapping(pid_t pid) {
  std::map<std::string, uint64_t> rss;
  std::ifstream in(absl::StrCat("/proc/", pid, "/smaps"));
  std::string mapping;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find('-') < line.find(' ')) {
      // "start-end perms offset dev inode   path": the range and the path name the mapping.
      std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
      mapping = fields[0];
      if (fields.size() > 5) absl::StrAppend(&mapping, " ", fields[5]);
    } else if (line.rfind("Rss:", 0) == 0) {
      rss[mapping] = std::stoull(line.substr(4)) * 1024;
    }
  }
  return rss;
}

std::string LargestGrowth(const std::map<std::string, uint64_t>& before,
                          const std::map<std::string, uint64_t>& after, int count) {
  std::vector<std::pair<int64_t, std::string>> growth;
  for (const auto& [name, bytes] : after) {
    auto was = before.find(name);
    int64_t grew = static_cast<int64_t>(bytes) -
                   static_cast<int64_t>(was == before.end() ? 0 : was->second);
    if (grew > 0) growth.emplace_back(grew, name);
  }
  std::sort(growth.rbegin(), growth.rend());
  std::string out;
  for (int i = 0; i < count && i < static_cast<int>(growth.size()); ++i) {
    absl::StrAppend(&out, i > 0 ? "; " : "", "+", growth[i].first >> 10, " KiB ",
                    growth[i].second);
  }
  return out.empty() ? "no mapping grew" : out;
}

uint64_t StatOf(Client& client, const std::string& name) {
  absl::StatusOr<std::vector<wire::StatsEntry>> stats = client.Stats();
  if (!stats.ok()) return UINT64_MAX;
  for (const auto& [key, value] : *stats) {
    if (key == name) return value;
  }
  return UINT64_MAX;
}

ServerProcess::ServerProcess(std::vector<std::string> extra) {
  port_file_ = TempPath("ardmad_port");
  std::filesystem::remove(port_file_);
  std::vector<std::string> args = {BinDir() + "/ardmad", "--listen", "127.0.0.1:0",
                                   "--port-file",        port_file_};
  // ARDMA_TEST_SERVER_LOGS=1 keeps the servers' informational lines (debugging a test).
  if (std::getenv("ARDMA_TEST_SERVER_LOGS") == nullptr) args.push_back("--quiet");
  args.insert(args.end(), extra.begin(), extra.end());
  pid_ = ::fork();
  if (pid_ == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    std::ifstream in(port_file_);
    if (in >> address_) break;
    int status;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);  // a stopped process ignores SIGKILL until continued
  Kill(SIGKILL);
}

void ServerProcess::Signal(int signal) {
  if (pid_ > 0) ::kill(pid_, signal);
}

bool ServerProcess::Freeze() {
  if (pid_ <= 0) return false;
  ::kill(pid_, SIGSTOP);
  // Delivery is asynchronous: wait for state T in /proc/PID/stat ("pid (comm) T ...").
  for (int i = 0; i < 5000; ++i) {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T') {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return false;
}

int KillAndWait(pid_t* pid, int signal) {
  if (*pid <= 0) return -1;
  ::kill(*pid, signal);
  int status = 0;
  ::waitpid(*pid, &status, 0);
  *pid = -1;
  return status;
}

std::optional<int> ServerProcess::Exited() {
  if (pid_ <= 0) return std::nullopt;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
  pid_ = -1;
  std::filesystem::remove(port_file_);
  return status;
}

int ServerProcess::Kill(int signal) {
  int status = KillAndWait(&pid_, signal);
  std::filesystem::remove(port_file_);
  return status;
}

}  // namespace ardma::testing
