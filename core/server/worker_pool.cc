#include "core/server/worker_pool.h"

namespace ardma {

WorkerPool::WorkerPool(int threads, size_t queue_capacity) : capacity_(queue_capacity) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

WorkerPool::~WorkerPool() { Stop(); }

bool WorkerPool::Submit(Job job) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || queue_.size() >= capacity_ || threads_.empty()) return false;
  queue_.push_back(std::move(job));
  return true;
}

void WorkerPool::Stop() {
  std::deque<Job> leftover;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    leftover.swap(queue_);
    absl::Time now = absl::Now();
    for (const Job& job : leftover) {
      if (now > job.deadline) ++expired_;
    }
  }
  for (Job& job : leftover) {
    if (job.expired) job.expired();
  }
  for (std::thread& t : threads_) t.join();
}

size_t WorkerPool::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

uint64_t WorkerPool::expired_count() const {
  absl::MutexLock lock(&mu_);
  return expired_;
}

void WorkerPool::Loop() {
  for (;;) {
    Job job;
    bool expired;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WorkerPool* p)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) { return p->stopping_ || !p->queue_.empty(); },
          this));
      if (queue_.empty()) return;  // stopping
      job = std::move(queue_.front());
      queue_.pop_front();
      expired = absl::Now() > job.deadline;
      if (expired) ++expired_;
    }
    if (expired) {
      if (job.expired) job.expired();
    } else {
      job.run();
    }
  }
}

}  // namespace ardma
