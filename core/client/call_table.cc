#include "core/client/call_table.h"

#include <utility>

#include "absl/time/clock.h"
#include "core/clock.h"

namespace ardma {

CallTable::CallTable() = default;
CallTable::~CallTable() = default;

absl::Status CallTable::Expect(Expected& expected) {
  absl::MutexLock lock(&mu_);
  if (!failure_.ok()) return failure_;
  for (size_t i = 0; i < expected.ids_.size(); ++i) {
    calls_[expected.ids_[i]] = std::shared_ptr<Call>(std::shared_ptr<Call>(), &expected.calls_[i]);
  }
  return absl::OkStatus();
}

bool CallTable::StepAsReader(Step step, const Call* until_done) {
  reader_active_ = true;
  mu_.Unlock();
  bool clock_due;
  // A caller's own call: steps without the lock until it is answered (or the transport breaks,
  // or the clock is due), so a call that takes many polls takes the lock twice, not per poll.
  do {
    clock_due = step();
  } while (until_done != nullptr && !clock_due &&
           !until_done->done.load(std::memory_order_acquire) &&
           !broken_.load(std::memory_order_acquire));
  mu_.Lock();
  reader_active_ = false;
  changed_.SignalAll();
  return clock_due;
}

absl::Status CallTable::Await(Expected& expected, absl::Time deadline, Step step,
                              absl::Span<ResponsePayload> results) {
  absl::MutexLock lock(&mu_);
  for (Call& call : expected.calls_) {
    bool clock_due = false;  // a step first: most answers come before a clock is worth reading
    while (!call.done.load(std::memory_order_relaxed) && failure_.ok()) {
      if (clock_due && FastNow() >= deadline) break;
      if (!reader_active_) {
        clock_due = StepAsReader(step, &call);
      } else {
        changed_.WaitWithDeadline(&mu_, deadline);
        clock_due = true;
      }
    }
    if (!call.done.load(std::memory_order_relaxed)) {
      // Broken calls are done (with the failure); these are the ones out of time. None stays
      // registered: the table must not refer to an Expected after its Await.
      for (uint64_t id : expected.ids_) calls_.erase(id);
      return failure_.ok() ? absl::DeadlineExceededError("no response in time") : failure_;
    }
  }
  // Every call done; a transport failure reaches the caller as the outer status.
  for (const Call& call : expected.calls_) {
    if (call.transport_failed) return failure_;
  }
  for (size_t i = 0; i < expected.calls_.size(); ++i) {
    results[i] = std::move(expected.calls_[i].result);
  }
  return absl::OkStatus();
}

bool CallTable::ExpectAsync(uint64_t id, absl::Time deadline, ResponseCallback done) {
  absl::Status failure;
  {
    absl::MutexLock lock(&mu_);
    failure = failure_;
    if (failure.ok()) {
      auto call = std::make_shared<Call>();
      call->callback = std::move(done);
      call->deadline = deadline;
      calls_[id] = std::move(call);
      ++async_pending_;
      changed_.SignalAll();  // a background thread waits for work
    }
  }
  if (!failure.ok()) done(failure);
  return failure.ok();
}

void CallTable::FailAsync(uint64_t id, const absl::Status& status) {
  ResponseCallback callback;
  {
    absl::MutexLock lock(&mu_);
    auto it = calls_.find(id);
    if (it == calls_.end() || !it->second->callback) return;
    callback = std::move(it->second->callback);
    calls_.erase(it);
    --async_pending_;
  }
  callback(status);
}

size_t CallTable::async_pending() const {
  absl::MutexLock lock(&mu_);
  return async_pending_;
}

void CallTable::Complete(uint64_t id, ResponsePayload result) {
  ResponseCallback callback;
  {
    absl::MutexLock lock(&mu_);
    auto it = calls_.find(id);
    if (it == calls_.end()) return;  // answered after its caller gave up
    std::shared_ptr<Call> call = std::move(it->second);
    calls_.erase(it);
    if (!call->callback) {
      call->result = std::move(result);
      call->done.store(true, std::memory_order_release);
      changed_.SignalAll();
      return;
    }
    --async_pending_;
    callback = std::move(call->callback);
  }
  // Outside the lock: a callback may issue further calls.
  callback(std::move(result));
}

bool CallTable::Break(const absl::Status& status) {
  std::vector<ResponseCallback> callbacks;
  absl::Status failure;
  bool first;
  {
    absl::MutexLock lock(&mu_);
    first = failure_.ok();
    if (first) {
      failure_ = absl::UnavailableError(status.message());
      broken_.store(true, std::memory_order_release);
    }
    failure = failure_;
    for (auto& [id, call] : calls_) {
      if (call->callback) {
        callbacks.push_back(std::move(call->callback));
      } else {
        call->result = failure_;
        call->transport_failed = true;
        call->done.store(true, std::memory_order_release);
      }
    }
    calls_.clear();
    async_pending_ = 0;
    changed_.SignalAll();
  }
  for (ResponseCallback& callback : callbacks) callback(failure);
  return first;
}

void CallTable::Close() {
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  Break(absl::UnavailableError("connection closed"));
}

absl::Status CallTable::failure() const {
  if (!broken_.load(std::memory_order_acquire)) return absl::OkStatus();  // every call's check
  absl::MutexLock lock(&mu_);
  return failure_;
}

void CallTable::ExpireAsync(absl::Time now) {
  std::vector<ResponseCallback> expired;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = calls_.begin(); it != calls_.end();) {
      if (it->second->callback && it->second->deadline <= now) {
        expired.push_back(std::move(it->second->callback));
        --async_pending_;
        calls_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (ResponseCallback& callback : expired) {
    callback(absl::DeadlineExceededError("no response in time"));
  }
}

absl::Time CallTable::NextAsyncDeadline() const {
  absl::MutexLock lock(&mu_);
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [id, call] : calls_) {
    if (call->callback) next = std::min(next, call->deadline);
  }
  return next;
}

void CallTable::ServeAsync(Step step, absl::Duration idle_tick, bool until_closed) {
  mu_.Lock();
  for (;;) {
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return closed_ || (!until_closed && !failure_.ok());
    };
    auto has_work = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return done() || (async_pending_ > 0 && !reader_active_);
    };
    if (async_pending_ == 0) {
      mu_.Await(absl::Condition(&has_work));  // nothing can expire: no wake-ups while idle
    } else {
      mu_.AwaitWithTimeout(absl::Condition(&has_work), idle_tick);
    }
    if (done()) break;
    bool clock_due = true;
    if (has_work()) clock_due = StepAsReader(step);
    if (clock_due) {
      mu_.Unlock();
      ExpireAsync(absl::Now());
      mu_.Lock();
    }
  }
  mu_.Unlock();
}

}  // namespace ardma
