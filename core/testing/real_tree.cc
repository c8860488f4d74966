#include "core/testing/real_tree.h"

#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ardma::testing {

namespace fsys = std::filesystem;

absl::Status CopyRealTree(const std::string& from, const std::string& to) {
  std::error_code ec;
  if (fsys::exists(to, ec)) return absl::AlreadyExistsError(absl::StrCat(to, " exists"));
  fsys::copy(from, to, fsys::copy_options::recursive | fsys::copy_options::copy_symlinks, ec);
  if (ec) return absl::InternalError(absl::StrCat("copying ", from, ": ", ec.message()));
  std::vector<fsys::path> host_links;
  for (auto it = fsys::recursive_directory_iterator(to, ec);
       !ec && it != fsys::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_symlink()) host_links.push_back(it->path());
  }
  if (ec) return absl::InternalError(absl::StrCat("walking ", to, ": ", ec.message()));
  for (const fsys::path& p : host_links) fsys::remove(p, ec);
  return AddLinks(to);
}

absl::Status AddLinks(const std::string& dir) {
  std::error_code ec;
  std::string sub, file;
  for (const auto& e : fsys::directory_iterator(dir, ec)) {
    if (!e.is_directory()) continue;
    for (const auto& f : fsys::recursive_directory_iterator(e.path(), ec)) {
      if (f.is_regular_file()) {
        sub = e.path().filename().string();
        file = f.path().string().substr(dir.size() + 1);
        break;
      }
    }
    if (!file.empty()) break;
  }
  if (file.empty()) return absl::NotFoundError(absl::StrCat(dir, " has no subdirectory with files"));
  for (const auto& [target, link] : std::vector<std::pair<std::string, std::string>>{
           {file, "link to file"},
           {sub, "dirlink"},
           {"dirlink", "link-to-link"},
           {"nowhere", "dangling"},
           {"..", sub + "/up"}}) {
    fsys::create_symlink(target, dir + "/" + link, ec);
    if (ec) return absl::InternalError(absl::StrCat("linking ", link, ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace ardma::testing
