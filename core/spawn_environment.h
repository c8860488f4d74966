// SpawnEnvironment: this process's environment with some variables set (any earlier setting of
// them dropped), in the form posix_spawn takes — for the processes ardmad starts as itself again
// (/proc/self/exe): trial loads, isolated workers, the UCX address check.
//
//   SpawnEnvironment env({{"ARDMA_NATIVE_TRIAL_FD", "3"}});
//   ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, env.get());
#ifndef ARDMA_CORE_SPAWN_ENVIRONMENT_H_
#define ARDMA_CORE_SPAWN_ENVIRONMENT_H_

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ardma {

class SpawnEnvironment {
 public:
  explicit SpawnEnvironment(
      std::initializer_list<std::pair<std::string_view, std::string>> variables);
  SpawnEnvironment(const SpawnEnvironment&) = delete;
  SpawnEnvironment& operator=(const SpawnEnvironment&) = delete;

  // NAME=VALUE strings, null-terminated; valid as long as this object.
  char** get() { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

}  // namespace ardma

#endif  // ARDMA_CORE_SPAWN_ENVIRONMENT_H_
