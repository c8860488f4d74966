// UCX's own costs, measured in the same run as core_bench's operations, so the client library's
// share is a ratio on one machine at one time (this machine's round trips vary by 4x over the day):
//
//   BM_UcxOwnAmRoundTrip  an active message to a worker whose thread echoes it: the floor under
//                         PING and EXECUTE (a request and its answer are one message each)
//   BM_UcxOwnGet/8        ucp_get of 8 bytes from a peer's shared-memory allocation, the peer's
//                         thread idle: the floor under READ
//   BM_UcxOwnAtomic       ucp fetch-add on it: the floor under FETCH_ADD and CAS
//
// Two workers of one process, each with its own thread, over whatever UCX_TLS allows (shared
// memory on one host by default), as ucx_perftest measures them between two processes.
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "core/ucx/ucx_context.h"

namespace ardma {
namespace {

constexpr unsigned kPingId = 7;
constexpr unsigned kPongId = 8;
constexpr size_t kMessageBytes = 64;  // a PING frame's size

// Two workers: `near` is the benchmark's thread, `far` has a thread of its own that progresses
// its worker (echoing pings) until stopped.
struct Pair {
  std::unique_ptr<UcxContext> near, far;
  ucp_ep_h to_far = nullptr, to_near = nullptr;
  UcxContext::Mapping memory;
  ucp_rkey_h rkey = nullptr;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> pongs{0};
  std::thread thread;

  ~Pair() {
    stop = true;
    if (thread.joinable()) thread.join();
    if (rkey != nullptr) ucp_rkey_destroy(rkey);
    if (to_far != nullptr) near->CloseEndpoint(to_far, absl::Milliseconds(100));
    if (to_near != nullptr) far->CloseEndpoint(to_near, absl::Milliseconds(100));
    if (memory.memh != nullptr) far->Unmap(memory.memh);
  }
};

ucs_status_t OnPing(void* arg, const void* /*header*/, size_t /*header_length*/, void* data,
                    size_t length, const ucp_am_recv_param_t* /*param*/) {
  auto* pair = static_cast<Pair*>(arg);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_EAGER;
  ucs_status_ptr_t r = ucp_am_send_nbx(pair->to_near, kPongId, nullptr, 0, data, length, &param);
  if (UCS_PTR_IS_PTR(r)) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(pair->far->worker());
    ucp_request_free(r);
  }
  return UCS_OK;
}

ucs_status_t OnPong(void* arg, const void*, size_t, void*, size_t, const ucp_am_recv_param_t*) {
  static_cast<Pair*>(arg)->pongs.fetch_add(1, std::memory_order_relaxed);
  return UCS_OK;
}

// The pair, or null with the benchmark skipped.
std::unique_ptr<Pair> MakePair(benchmark::State& state) {
  auto pair = std::make_unique<Pair>();
  auto fail = [&](const absl::Status& s) {
    state.SkipWithError(s.ToString().c_str());
    return nullptr;
  };
  absl::StatusOr<std::unique_ptr<UcxContext>> near = UcxContext::Create({});
  if (!near.ok()) return fail(near.status());
  absl::StatusOr<std::unique_ptr<UcxContext>> far = UcxContext::Create({});
  if (!far.ok()) return fail(far.status());
  pair->near = *std::move(near);
  pair->far = *std::move(far);
  absl::StatusOr<std::string> near_address = pair->near->WorkerAddress();
  absl::StatusOr<std::string> far_address = pair->far->WorkerAddress();
  if (!near_address.ok()) return fail(near_address.status());
  if (!far_address.ok()) return fail(far_address.status());
  if (absl::Status s = pair->far->SetAmHandler(kPingId, OnPing, pair.get()); !s.ok()) {
    return fail(s);
  }
  if (absl::Status s = pair->near->SetAmHandler(kPongId, OnPong, pair.get()); !s.ok()) {
    return fail(s);
  }
  // Each side's wire-up needs the other's progress: the far thread runs meanwhile.
  pair->thread = std::thread([p = pair.get()] {
    while (!p->stop.load(std::memory_order_relaxed)) ucp_worker_progress(p->far->worker());
  });
  absl::StatusOr<ucp_ep_h> to_near = pair->far->Connect(*near_address, absl::InfinitePast());
  if (!to_near.ok()) return fail(to_near.status());
  pair->to_near = *to_near;
  absl::StatusOr<ucp_ep_h> to_far =
      pair->near->Connect(*far_address, absl::Now() + absl::Seconds(10));
  if (!to_far.ok()) return fail(to_far.status());
  pair->to_far = *to_far;
  absl::StatusOr<UcxContext::Mapping> memory = pair->far->Allocate(1 << 20);
  if (!memory.ok()) return fail(memory.status());
  pair->memory = *memory;
  std::memset(pair->memory.base, 0, pair->memory.size);
  absl::StatusOr<std::string> packed = pair->far->PackRkey(pair->memory.memh);
  if (!packed.ok()) return fail(packed.status());
  ucs_status_t s = ucp_ep_rkey_unpack(pair->to_far, packed->data(), &pair->rkey);
  if (s != UCS_OK) return fail(UcsError(s, "ucp_ep_rkey_unpack"));
  return pair;
}

// Progresses `near` until `request` completes; false on failure.
bool Complete(Pair& pair, ucs_status_ptr_t request) {
  if (request == nullptr) return true;
  if (UCS_PTR_IS_ERR(request)) return false;
  ucs_status_t s;
  while ((s = ucp_request_check_status(request)) == UCS_INPROGRESS) {
    ucp_worker_progress(pair.near->worker());
  }
  ucp_request_free(request);
  return s == UCS_OK;
}

void BM_UcxOwnAmRoundTrip(benchmark::State& state) {
  std::unique_ptr<Pair> pair = MakePair(state);
  if (pair == nullptr) return;
  char message[kMessageBytes] = {};
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_EAGER;
  for (auto _ : state) {
    uint64_t want = pair->pongs.load(std::memory_order_relaxed) + 1;
    if (!Complete(*pair, ucp_am_send_nbx(pair->to_far, kPingId, nullptr, 0, message,
                                         sizeof(message), &param))) {
      state.SkipWithError("ucp_am_send failed");
      break;
    }
    while (pair->pongs.load(std::memory_order_relaxed) < want) {
      ucp_worker_progress(pair->near->worker());
    }
  }
  state.counters["round_trips/op"] = 1;
  state.counters["bytes/op"] = 2 * kMessageBytes;
}
BENCHMARK(BM_UcxOwnAmRoundTrip)->UseRealTime();

void BM_UcxOwnGet(benchmark::State& state) {
  std::unique_ptr<Pair> pair = MakePair(state);
  if (pair == nullptr) return;
  const auto len = static_cast<size_t>(state.range(0));
  std::string buffer(len, '\0');
  ucp_request_param_t param{};
  auto remote = reinterpret_cast<uint64_t>(pair->memory.base);
  for (auto _ : state) {
    if (!Complete(*pair, ucp_get_nbx(pair->to_far, buffer.data(), len, remote, pair->rkey,
                                     &param))) {
      state.SkipWithError("ucp_get failed");
      break;
    }
  }
  state.counters["round_trips/op"] = 1;
  state.counters["bytes/op"] = static_cast<double>(len);
}
BENCHMARK(BM_UcxOwnGet)->Arg(8)->Arg(4096)->UseRealTime();

void BM_UcxOwnAtomic(benchmark::State& state) {
  std::unique_ptr<Pair> pair = MakePair(state);
  if (pair == nullptr) return;
  uint64_t operand = 1, reply = 0;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
  param.datatype = ucp_dt_make_contig(8);
  param.reply_buffer = &reply;
  auto remote = reinterpret_cast<uint64_t>(pair->memory.base);
  for (auto _ : state) {
    if (!Complete(*pair, ucp_atomic_op_nbx(pair->to_far, UCP_ATOMIC_OP_ADD, &operand, 1, remote,
                                           pair->rkey, &param))) {
      state.SkipWithError("ucp atomic failed");
      break;
    }
  }
  state.counters["round_trips/op"] = 1;
  state.counters["bytes/op"] = 0;
}
BENCHMARK(BM_UcxOwnAtomic)->UseRealTime();

}  // namespace
}  // namespace ardma
