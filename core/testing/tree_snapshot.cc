#include "core/testing/tree_snapshot.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

namespace ardma::testing {
namespace {

// FNV-1a of a file's bytes.
std::string Hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t h = 1469598103934665603ull;
  char buf[65536];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h = (h ^ static_cast<unsigned char>(buf[i])) * 1099511628211ull;
    }
  }
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(h));
  return out;
}

std::string Line(const std::string& rel, const std::string& path, const SnapshotOptions& o) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return rel + " error: " + std::strerror(errno);
  char mode[8];
  std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
  std::string line = rel;
  if (S_ISLNK(st.st_mode)) {
    char target[4097];
    ssize_t n = ::readlink(path.c_str(), target, sizeof(target) - 1);
    return line + " link -> " + std::string(target, n > 0 ? static_cast<size_t>(n) : 0);
  }
  if (S_ISDIR(st.st_mode)) {
    line += std::string(" dir ") + mode;
  } else if (S_ISREG(st.st_mode)) {
    line += std::string(" file ") + mode + " " + std::to_string(st.st_size) + " " + Hash(path);
  } else {
    line += std::string(" special ") + mode;
  }
  if (o.mtimes) {
    line += " mtime " + std::to_string(static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
                                       st.st_mtim.tv_nsec);
  }
  return line;
}

}  // namespace

std::string TreeSnapshot(const std::string& root, SnapshotOptions options) {
  namespace fsys = std::filesystem;
  std::vector<std::string> lines;
  if (options.root) lines.push_back(Line(".", root, options));
  std::error_code ec;
  for (auto it = fsys::recursive_directory_iterator(root, ec);
       !ec && it != fsys::recursive_directory_iterator(); it.increment(ec)) {
    std::string path = it->path().string();
    lines.push_back(Line("./" + path.substr(root.size() + 1), path, options));
  }
  if (ec) return "error: " + ec.message();
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

}  // namespace ardma::testing
