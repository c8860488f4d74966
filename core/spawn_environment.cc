#include "core/spawn_environment.h"

#include <algorithm>

extern char** environ;

namespace ardma {

SpawnEnvironment::SpawnEnvironment(
    std::initializer_list<std::pair<std::string_view, std::string>> variables) {
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    bool replaced = std::any_of(variables.begin(), variables.end(), [entry](const auto& v) {
      return entry.size() > v.first.size() && entry.substr(0, v.first.size()) == v.first &&
             entry[v.first.size()] == '=';
    });
    if (!replaced) strings_.emplace_back(entry);
  }
  for (const auto& [name, value] : variables) {
    strings_.push_back(std::string(name) + "=" + value);
  }
  for (std::string& s : strings_) pointers_.push_back(s.data());
  pointers_.push_back(nullptr);
}

}  // namespace ardma
