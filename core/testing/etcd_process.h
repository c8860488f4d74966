// EtcdProcess: a real etcd (Debian's /usr/bin/etcd) for a test: on two free loopback ports, its
// data in a fresh directory of its own. Killed (SIGKILL) and its directory removed when destroyed;
// it also dies with the test process (PR_SET_PDEATHSIG), so a crashed test leaves none behind.
#ifndef ARDMA_CORE_TESTING_ETCD_PROCESS_H_
#define ARDMA_CORE_TESTING_ETCD_PROCESS_H_

#include <sys/types.h>

#include <string>

namespace ardma::testing {

class EtcdProcess {
 public:
  // Starts etcd and waits (up to 20 s) until it answers; endpoint() is empty if it did not.
  EtcdProcess();
  ~EtcdProcess();
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // "127.0.0.1:PORT", its client endpoint.
  const std::string& endpoint() const { return endpoint_; }
  pid_t pid() const { return pid_; }
  // Sends `signal`, waits for the process to end; its wait status (-1 if none runs).
  int Kill(int signal);
  // Starts it again on the same ports and data (after Kill); false if it does not answer.
  bool Restart();

 private:
  bool Start();

  std::string dir_;
  int client_port_ = 0;
  int peer_port_ = 0;
  std::string endpoint_;
  pid_t pid_ = -1;
};

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_ETCD_PROCESS_H_
