#include "core/testing/heap_churn.h"

#include <cmath>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/memory/heap.h"

namespace ardma::testing {
namespace {

void Failed(ChurnShared& shared, const std::string& what) {
  if (shared.failures.fetch_add(1) == 0) {
    absl::MutexLock lock(&shared.mu);
    shared.first_failure = what;
  }
}

}  // namespace

std::vector<uint64_t> ChurnWorker(Context& ctx, const ChurnOptions& o, ChurnShared& shared) {
  const uint64_t limit = o.region * 6 / 10;
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> log_size(std::log(16.0),
                                                  std::log(static_cast<double>(o.max_size)));
  std::vector<std::pair<uint64_t, uint64_t>> mine;  // address, size
  auto free_one = [&] {
    size_t i = rng() % mine.size();
    if (absl::Status s = heap::Free(ctx, mine[i].first); !s.ok()) {
      Failed(shared, absl::StrCat("free: ", s.ToString()));
    }
    shared.live -= mine[i].second;
    mine[i] = mine.back();
    mine.pop_back();
  };
  while (shared.churned.load() < 20 * o.region) {
    uint64_t size = static_cast<uint64_t>(std::exp(log_size(rng)));
    while (shared.live.load() + size > limit && !mine.empty()) free_one();
    if (shared.live.fetch_add(size) + size > limit) {  // the others hold it: wait
      shared.live -= size;
      std::this_thread::yield();
      continue;
    }
    absl::StatusOr<uint64_t> a = heap::Allocate(ctx, size);
    if (!a.ok()) {
      Failed(shared, absl::StrCat(size, " bytes at ", shared.live.load(), " live: ",
                                  a.status().ToString()));
      shared.live -= size;
      continue;
    }
    mine.emplace_back(*a, size);
    shared.churned += size;
    if (rng() % 2 == 0) free_one();
  }
  std::vector<uint64_t> held;
  if (o.free_at_end) {
    while (!mine.empty()) free_one();
  } else {
    for (const auto& [addr, size] : mine) held.push_back(addr);
  }
  return held;
}

}  // namespace ardma::testing
