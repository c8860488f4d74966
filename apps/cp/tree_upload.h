// Batched tree uploads for ardma-cp: directories, small files, symbolic links and attribute
// changes go to the server many per request (dfs.batch), in order, while the caller reads the next
// files; each change's result is reported as cp reports it. One batch is in flight at a time, so a
// directory always exists before the batch that fills it runs.
#ifndef ARDMA_APPS_CP_TREE_UPLOAD_H_
#define ARDMA_APPS_CP_TREE_UPLOAD_H_

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "apps/cp/copier.h"
#include "services/dfs/dfs_client.h"

namespace ardma::cp {

class TreeUpload {
 public:
  // Files up to this size travel in batches; bigger ones stream (DfsClient::Upload).
  static constexpr uint64_t kMaxBatchedFile = 1u << 20;

  TreeUpload(dfs::DfsClient* fs, Copier* copier, bool verbose);
  ~TreeUpload();  // drains

  // Queues one change; `src` and `dst` are what -v and error messages show.
  void Add(dfs::BatchKind kind, uint8_t flags, uint32_t mode, uint64_t mtime_ns,
           const Location& dst, std::string data, const std::string& src_display);
  // Waits until everything queued has been applied and reported.
  void Drain();

 private:
  struct Pending {
    dfs::BatchKind kind;
    uint8_t flags;
    uint32_t mode;
    uint64_t mtime_ns;
    std::string path, data, src_display, dst_display;
  };
  void Submit();  // hands the batch being built to the sender
  void SendLoop();
  void Report(const Pending& p, const absl::Status& s);

  dfs::DfsClient* fs_;
  Copier* copier_;
  const bool verbose_;
  std::vector<Pending> building_;  // caller's thread only
  uint64_t building_bytes_ = 0;
  std::vector<std::string> failed_dirs_;  // sender thread only: their contents are not reported

  absl::Mutex mu_;
  std::vector<Pending> ready_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sender_;
};

}  // namespace ardma::cp

#endif  // ARDMA_APPS_CP_TREE_UPLOAD_H_
