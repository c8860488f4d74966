// ardma-cp's copying, with GNU cp's rules: what a source is (links followed or not: -P, -L, -H),
// what may overwrite what, modes under the umask, -p/--preserve, -n, -f, -v, special files.
// DFS to DFS runs on the server (a file in one request, a tree in one); a local tree goes up in
// batches of many small files per request (dfs.batch, one batch in flight while the next is read);
// big files stream as pipelined writes; downloads as pipelined reads.
#ifndef ARDMA_APPS_CP_COPIER_H_
#define ARDMA_APPS_CP_COPIER_H_

#include <sys/stat.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "services/dfs/dfs_client.h"

namespace ardma::cp {

// Which symbolic links a copy follows: GNU cp's -P (none), -H (those named on the command line)
// and -L (all). kDefault is cp's default: -P with -r, otherwise -L.
enum class Deref { kDefault, kNever, kCommandLine, kAlways };

struct Options {
  bool recursive = false, no_clobber = false, force = false, verbose = false, progress = false;
  Deref deref = Deref::kDefault;
  bool preserve_mode = false, preserve_timestamps = false;
  bool default_modes = false;  // --no-preserve=mode: new copies get 0666 (0777) less the umask
  bool update = false;         // -u: a file replaces only an older one
};

// A command-line operand: dfs:/PATH names a file in the server's file system, anything else a
// local file.
struct Location {
  bool remote = false;
  std::string path;     // DFS path or local path
  std::string display;  // as the user wrote it
};
Location ParseLocation(const std::string& arg);
// `dir`/`name`, keeping the dfs: prefix.
Location Join(const Location& dir, const std::string& name);
std::string Basename(const std::string& path);
// A name as GNU cp shows it in messages (quotearg's shell-escape-always style): 'name', "it's",
// 'tab'$'\t''here'; bytes above 0x7f are escaped unless the locale is UTF-8.
std::string Quoted(std::string_view name);
// The strerror(3) text cp prints for a DFS error ("No such file or directory", ...).
using dfs::ErrnoText;

class TreeUpload;

class Copier {
 public:
  Copier(dfs::DfsClient* fs, Options o);
  ~Copier();

  // What a location is, without following a final link (nullopt: nothing there, and why in
  // `why` if given).
  std::optional<dfs::FileType> Kind(const Location& l, absl::Status* why = nullptr);
  // Copies the command-line source `src` to exactly `dst`; errors are reported on stderr as cp
  // reports them, and the copy goes on with the rest.
  void CopyOperand(const Location& src, const Location& dst);
  // cp --parents: makes the directories `rel` (SOURCE as given, less leading slashes) names
  // before its last component under `dir`, as its source's are (modes, -v lines). False if one
  // cannot be made (reported).
  bool MakeParents(const Location& src, const Location& dir, const std::string& rel);
  // Finishes batched work and reports its errors.
  void Finish();
  // Reports an error as "ardma-cp: MESSAGE" and remembers that something failed.
  void Fail(const std::string& message);
  bool failed() const;

 private:
  struct Source;  // a source's type, mode, times and (for a DFS path) its resolved path
  friend class TreeUpload;

  absl::StatusOr<Source> StatSource(const Location& src, bool follow);
  void Copy(const Location& src, const Location& dst, bool top);
  void CopyDir(const Location& src, const Location& dst, const Source& info);
  void CopyLink(const Location& src, const Location& dst);
  absl::Status CopyFile(const Location& src, const Location& dst, const Source& info, bool exists);
  absl::Status Upload(const Location& src, const Location& dst, const Source& info);
  absl::Status Download(const Location& src, const Location& dst, const Source& info);
  void UploadTree(const Location& src, const Location& dst, const Source& info, bool fresh);
  void Verbose(const Location& src, const Location& dst);
  void Progress(const std::string& name, uint64_t done, uint64_t total);
  // The mode a new copy gets: the source's, under the umask unless modes are preserved.
  uint32_t NewMode(uint32_t source_mode, bool dir = false) const;

  dfs::DfsClient* fs_;
  Options o_;
  uint32_t umask_;
  mutable absl::Mutex out_mu_;  // stdout / stderr lines from here and the batch sender
  bool failed_ ABSL_GUARDED_BY(out_mu_) = false;
  std::unique_ptr<TreeUpload> upload_;
  bool fresh_ = false;  // copying into a directory this run made
  // cp -r d d/sub: the copy into itself goes entry by entry, and the destination's inode (once
  // made) is refused as a source with this message.
  bool self_copy_pending_ = false, self_copy_hit_ = false;
  uint64_t self_copy_ino_ = 0;
  std::string self_copy_message_;
};

}  // namespace ardma::cp

#endif  // ARDMA_APPS_CP_COPIER_H_
