// WorkerPool: threads that run EXECUTE (and LOAD) jobs too long to run on an I/O thread.
//
// Jobs wait in a bounded FIFO queue. A job whose deadline passes while it waits is not run: its
// `expired` callback is (the Active RDMA paper's expiry), called by a reaper thread when the deadline
// passes, so a caller hears DEADLINE_EXCEEDED on time even when every worker is stuck in a long
// run. Submit fails when the queue is full, so a flood of requests gets RESOURCE_EXHAUSTED instead
// of unbounded memory. Stop finishes the jobs already running, expires the ones still queued, and
// joins the threads.
// Thread-safe.
#ifndef ARDMA_CORE_SERVER_WORKER_POOL_H_
#define ARDMA_CORE_SERVER_WORKER_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ardma {

class WorkerPool {
 public:
  struct Job {
    absl::Time deadline = absl::InfiniteFuture();
    std::function<void()> run;
    std::function<void()> expired;  // called instead of run once the deadline has passed
  };

  WorkerPool(int threads, size_t queue_capacity);
  ~WorkerPool();  // Stop()
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False when the queue is full or the pool is stopped; the job is then not taken.
  bool Submit(Job job);
  void Stop();

  size_t queued() const;
  uint64_t expired_count() const;

 private:
  void Loop();
  void Reap();  // the reaper thread: expires queued jobs as their deadlines pass

  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t expired_ ABSL_GUARDED_BY(mu_) = 0;
  absl::CondVar reaper_cv_;
  // When the reaper next looks at the queue: Submit wakes it only for a job due before that.
  absl::Time reaper_wakes_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::vector<std::thread> threads_;
  std::thread reaper_;
};

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_WORKER_POOL_H_
