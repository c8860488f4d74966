#include "core/server/worker_pool.h"

#include <algorithm>

namespace ardma {

WorkerPool::WorkerPool(int threads, size_t queue_capacity) : capacity_(queue_capacity) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
  if (threads > 0) reaper_ = std::thread([this] { Reap(); });
}

WorkerPool::~WorkerPool() { Stop(); }

bool WorkerPool::Submit(Job job) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || queue_.size() >= capacity_ || threads_.empty()) return false;
  if (job.deadline < reaper_wakes_) reaper_cv_.Signal();
  queue_.push_back(std::move(job));
  return true;
}

void WorkerPool::Stop() {
  std::deque<Job> leftover;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    reaper_cv_.Signal();
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
  if (reaper_.joinable()) reaper_.join();
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

void WorkerPool::Reap() {
  std::vector<Job> due;
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    absl::Time now = absl::Now();
    absl::Time next = absl::InfiniteFuture();
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (now > it->deadline) {
        due.push_back(std::move(*it));
        it = queue_.erase(it);
        ++expired_;
      } else {
        next = std::min(next, it->deadline);
        ++it;
      }
    }
    if (!due.empty()) {
      mu_.Unlock();
      for (Job& job : due) {
        if (job.expired) job.expired();
      }
      due.clear();
      mu_.Lock();
      continue;
    }
    reaper_wakes_ = next;
    // Just past the deadline, so the job is late when looked at again.
    reaper_cv_.WaitWithDeadline(&mu_, next + absl::Microseconds(1));
    reaper_wakes_ = absl::InfiniteFuture();
  }
}

}  // namespace ardma
