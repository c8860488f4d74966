#include "core/testing/etcd_process.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cluster/etcd_client.h"
#include "core/testing/server_process.h"
#include "core/testing/wait_until.h"

namespace ardma::testing {
namespace {

// A port the kernel has just handed out on 127.0.0.1 and taken back (etcd cannot bind port 0 and
// say which it got). Another process could take it meanwhile: Start then fails and is retried.
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

}  // namespace

EtcdProcess::EtcdProcess() {
  static int count = 0;
  dir_ = TempPath(absl::StrCat("etcd", ++count));
  for (int attempt = 0; attempt < 3 && endpoint_.empty(); ++attempt) {
    std::filesystem::remove_all(dir_);
    client_port_ = FreePort();
    peer_port_ = FreePort();
    if (!Start()) Kill(SIGKILL);
  }
}

EtcdProcess::~EtcdProcess() {
  Kill(SIGKILL);
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

bool EtcdProcess::Start() {
  std::string client = absl::StrCat("http://127.0.0.1:", client_port_);
  std::string peer = absl::StrCat("http://127.0.0.1:", peer_port_);
  std::vector<std::string> args = {"/usr/bin/etcd",
                                   "--name=test",
                                   "--data-dir=" + dir_ + "/data",
                                   "--listen-client-urls=" + client,
                                   "--advertise-client-urls=" + client,
                                   "--listen-peer-urls=" + peer,
                                   "--initial-advertise-peer-urls=" + peer,
                                   "--initial-cluster=test=" + peer,
                                   "--log-outputs=" + dir_ + ".log",
                                   "--logger=zap"};
  std::filesystem::create_directories(dir_);
  pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);  // the test died before prctl
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  std::string endpoint = absl::StrCat("127.0.0.1:", client_port_);
  bool up = WaitUntil(
      [&] {
        int status;
        if (pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) {
          pid_ = -1;
          return true;  // it exited: stop waiting
        }
        return cluster::EtcdClient::Connect(endpoint, absl::Milliseconds(500)).ok();
      },
      absl::Seconds(20), absl::Milliseconds(50));
  if (!up || pid_ <= 0) return false;
  endpoint_ = endpoint;
  return true;
}

int EtcdProcess::Kill(int signal) { return KillAndWait(&pid_, signal); }

bool EtcdProcess::Restart() {
  Kill(SIGKILL);
  endpoint_.clear();
  return Start();
}

}  // namespace ardma::testing
