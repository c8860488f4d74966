#include "core/active/parking_lot.h"

#include <utility>
#include <vector>

#include "core/status_macros.h"

namespace ardma {

std::shared_ptr<ParkingLot::Entry> ParkingLot::Park(std::string_view key,
                                                    std::shared_ptr<Responder> responder,
                                                    absl::Time deadline, ResumeFn resume,
                                                    absl::Time resume_at) {
  auto entry = std::make_shared<Entry>();
  entry->key = std::string(key);
  entry->responder = std::move(responder);
  entry->deadline = deadline;
  entry->resume = std::move(resume);
  entry->resume_at = resume_at;
  absl::MutexLock lock(&mu_);
  queues_[entry->key].push_back(entry);
  ++size_;
  return entry;
}

void ParkingLot::FunctionReturned(const std::shared_ptr<Entry>& entry, const absl::Status& status) {
  std::optional<absl::StatusOr<std::string>> answer;
  bool resume = false;
  std::function<void(absl::Time)> listener;
  {
    absl::MutexLock lock(&mu_);
    entry->function_running = false;
    if (entry->early_result.has_value()) {
      // Woken while still running: the wake result stands even if the function then failed,
      // because the waker has already handed this request whatever it granted.
      answer = std::move(*entry->early_result);
    } else if (entry->resume_requested) {
      resume = status.ok();
      if (!status.ok()) answer = status;
    } else if (!status.ok() && entry->queued) {
      auto& queue = queues_[entry->key];
      std::erase(queue, entry);
      if (queue.empty()) queues_.erase(entry->key);
      entry->queued = false;
      --size_;
      answer = status;
    }
    if (entry->queued && !answer.has_value() && !resume) listener = listener_;  // it waits
  }
  if (answer.has_value()) entry->responder->Respond(std::move(*answer));
  if (resume) entry->resume();
  if (listener) listener(entry->NextEvent());
}

bool ParkingLot::Resume(std::string_view key) {
  std::shared_ptr<Entry> resume_now;
  bool found = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = queues_.find(ToAbsl(key));
    if (it == queues_.end()) return false;
    auto& queue = it->second;
    for (auto e = queue.begin(); e != queue.end();) {
      bool dead = !(*e)->responder->Alive();
      if (!dead && (*e)->resume == nullptr) {
        ++e;  // waits for a Wake: leave it
        continue;
      }
      std::shared_ptr<Entry> taken = std::move(*e);
      e = queue.erase(e);
      taken->queued = false;
      --size_;
      if (dead) continue;  // its connection is gone: forget it
      found = true;
      if (taken->function_running) {
        taken->resume_requested = true;  // FunctionReturned resumes it
      } else {
        resume_now = std::move(taken);
      }
      break;
    }
    if (queue.empty()) queues_.erase(it);
  }
  if (resume_now != nullptr) resume_now->resume();
  return found;
}

bool ParkingLot::Wake(std::string_view key, std::string_view result) {
  std::shared_ptr<Entry> woken;
  std::vector<std::shared_ptr<Entry>> expired;
  bool delivered = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = queues_.find(ToAbsl(key));
    if (it == queues_.end()) return false;
    auto& queue = it->second;
    absl::Time now = absl::Now();
    while (!queue.empty() && !delivered) {
      std::shared_ptr<Entry> candidate = std::move(queue.front());
      queue.pop_front();
      candidate->queued = false;
      --size_;
      if (!candidate->responder->Alive()) continue;  // its connection is gone
      if (candidate->function_running) {
        // Woken before its function returned: FunctionReturned delivers this.
        candidate->early_result = std::string(result);
        delivered = true;
      } else if (candidate->deadline < now) {
        expired.push_back(std::move(candidate));
      } else {
        woken = std::move(candidate);
        delivered = true;
      }
    }
    if (queue.empty()) queues_.erase(it);
  }
  for (auto& e : expired)
    e->responder->Respond(absl::DeadlineExceededError("parked request expired"));
  if (woken != nullptr) woken->responder->Respond(std::string(result));
  return delivered;
}

int ParkingLot::Expire(absl::Time now) {
  std::vector<std::shared_ptr<Entry>> expired, resumed;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = queues_.begin(); it != queues_.end();) {
      auto& queue = it->second;
      std::erase_if(queue, [&](const std::shared_ptr<Entry>& e) {
        if (e->function_running) return false;
        bool dead = !e->responder->Alive();
        bool resume = !dead && e->deadline >= now && e->resume != nullptr && e->resume_at <= now;
        if (!dead && !resume && e->deadline >= now) return false;
        e->queued = false;
        --size_;
        if (resume) {
          resumed.push_back(e);
        } else if (!dead) {
          expired.push_back(e);
        }
        return true;
      });
      if (queue.empty()) {
        queues_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (auto& e : expired)
    e->responder->Respond(absl::DeadlineExceededError("parked request expired"));
  for (auto& e : resumed) e->resume();
  return static_cast<int>(expired.size() + resumed.size());
}

absl::Time ParkingLot::NextEvent() const {
  absl::MutexLock lock(&mu_);
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [key, queue] : queues_) {
    for (const std::shared_ptr<Entry>& e : queue) {
      if (!e->function_running) next = std::min(next, e->NextEvent());
    }
  }
  return next;
}

void ParkingLot::SetEventListener(std::function<void(absl::Time)> listener) {
  absl::MutexLock lock(&mu_);
  listener_ = std::move(listener);
}

size_t ParkingLot::size() const {
  absl::MutexLock lock(&mu_);
  return size_;
}

}  // namespace ardma
