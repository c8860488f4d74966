// ScriptedServer: a TCP listener on 127.0.0.1:0 whose thread hands each connection, in turn, to a
// test's function and closes it when the function returns — to play a peer that is not ours
// (an HTTP server, something that answers nonsense, one that says nothing).
//
//   ScriptedServer web([](int fd, int n) { ReadSome(fd); SendAll(fd, "HTTP/1.1 200 OK\r\n..."); });
//   HttpConnection http(web.endpoint());
#ifndef ARDMA_CORE_TESTING_SCRIPTED_SERVER_H_
#define ARDMA_CORE_TESTING_SCRIPTED_SERVER_H_

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace ardma::testing {

class ScriptedServer {
 public:
  // `serve` gets each accepted connection and its number from 0.
  explicit ScriptedServer(std::function<void(int fd, int n)> serve);
  ~ScriptedServer();  // stops accepting; waits for the connection being served
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  const std::string& endpoint() const { return endpoint_; }  // "127.0.0.1:PORT"
  int accepted() const { return accepted_; }

 private:
  std::function<void(int, int)> serve_;
  int fd_ = -1;
  std::string endpoint_;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_SCRIPTED_SERVER_H_
