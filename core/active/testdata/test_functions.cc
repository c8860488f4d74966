// The "test" active-code library (see test_library.h for each function's contract).
#include <chrono>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/active/function_table.h"
#include "core/active/testdata/test_library.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"

namespace {

using ardma::Context;
using ardma::testing::U64At;
using ardma::testing::U64s;

absl::Status NeedArgs(std::string_view args, size_t n) {
  if (args.size() < 8 * n) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", n, " u64 arguments"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Noop(Context&, std::string_view) { return std::string(); }

absl::StatusOr<std::string> Echo(Context&, std::string_view args) { return std::string(args); }

absl::StatusOr<std::string> Add(Context& ctx, std::string_view args) {
  ARDMA_RETURN_IF_ERROR(NeedArgs(args, 2));
  ARDMA_ASSIGN_OR_RETURN(uint64_t old, ctx.FetchAdd(U64At(args, 0), U64At(args, 1)));
  return U64s({old});
}

absl::StatusOr<std::string> CallDouble(Context& ctx, std::string_view args) {
  return ctx.Call("test2.double", args);
}

absl::StatusOr<std::string> Fail(Context&, std::string_view) {
  return absl::InvalidArgumentError("test.fail asked to fail");
}

absl::StatusOr<std::string> Spin(Context& ctx, std::string_view args) {
  ARDMA_RETURN_IF_ERROR(NeedArgs(args, 1));
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(U64At(args, 0));
  uint64_t reads = 0;
  while (std::chrono::steady_clock::now() < end) {
    ARDMA_RETURN_IF_ERROR(ctx.ReadU64(ardma::heap::kDataStart).status());
    ++reads;
  }
  return U64s({reads});
}

absl::StatusOr<std::string> Sleep(Context&, std::string_view args) {
  ARDMA_RETURN_IF_ERROR(NeedArgs(args, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(U64At(args, 0)));
  return std::string();
}

// Loops without touching memory or the context, so no deadline check can end it: shipped code
// gone wrong. UINT64_MAX: for ever.
absl::StatusOr<std::string> Busy(Context&, std::string_view args) {
  ARDMA_RETURN_IF_ERROR(NeedArgs(args, 1));
  uint64_t ms = U64At(args, 0);
  auto start = std::chrono::steady_clock::now();
  volatile uint64_t turns = 0;
  while (ms == UINT64_MAX ||
         std::chrono::steady_clock::now() - start < std::chrono::milliseconds(ms)) {
    turns = turns + 1;
  }
  return U64s({turns});
}

absl::StatusOr<std::string> Park(Context& ctx, std::string_view args) {
  ARDMA_RETURN_IF_ERROR(ctx.Park(args));
  return std::string("not the answer: a parked request is answered by its waker");
}

absl::StatusOr<std::string> Wake(Context& ctx, std::string_view args) {
  ARDMA_RETURN_IF_ERROR(NeedArgs(args, 1));
  uint64_t key_len = U64At(args, 0);
  if (args.size() < 8 + key_len) return absl::InvalidArgumentError("key longer than the args");
  ARDMA_ASSIGN_OR_RETURN(bool woke, ctx.Wake(args.substr(8, key_len), args.substr(8 + key_len)));
  return U64s({woke ? 1u : 0u});
}

absl::StatusOr<std::string> ViewSum(Context& ctx, std::string_view args) {
  ARDMA_RETURN_IF_ERROR(NeedArgs(args, 2));
  uint64_t addr = U64At(args, 0), len = U64At(args, 1);
  std::string copy;
  std::string_view bytes;
  if (ctx.IsLocal()) {
    ARDMA_ASSIGN_OR_RETURN(bytes, ctx.View(addr, len));
  } else {
    ARDMA_ASSIGN_OR_RETURN(copy, ctx.Read(addr, len));
    bytes = copy;
  }
  uint64_t sum = 0;
  for (unsigned char c : bytes) sum += c;
  return U64s({sum});
}

// Waits, with Context::Backoff, until the word at addr is 0 (like a lock waiter).
absl::StatusOr<std::string> WaitZero(Context& ctx, std::string_view args) {
  ARDMA_RETURN_IF_ERROR(NeedArgs(args, 2));
  uint64_t rounds = U64At(args, 1);
  for (uint64_t round = 0; round <= rounds; ++round) {
    ARDMA_ASSIGN_OR_RETURN(uint64_t word, ctx.ReadU64(U64At(args, 0)));
    if (word == 0) return U64s({round});
    ARDMA_RETURN_IF_ERROR(ctx.Backoff(static_cast<int>(round)));
  }
  return absl::UnavailableError("test.wait_zero: the word stayed set");
}

// Phase 0: adds 1 at addr and parks on "resumable", to be run again after `after_us` (or when
// test.resume is called) as phase 1, which adds 100 and answers 1.
absl::StatusOr<std::string> Resumable(Context& ctx, std::string_view args) {
  ARDMA_RETURN_IF_ERROR(NeedArgs(args, 3));
  uint64_t addr = U64At(args, 0), after_us = U64At(args, 1), phase = U64At(args, 2);
  if (phase == 1) {
    ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(addr, 100).status());
    return U64s({1});
  }
  ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(addr, 1).status());
  std::string again = U64s({addr, after_us, 1});
  return ctx.Park("resumable", {.resumable = true,
                                .resume_at = absl::Now() + absl::Microseconds(after_us),
                                .resume_args = again})
                 .ok()
             ? std::string("parked")
             : std::string("park failed");
}

absl::StatusOr<std::string> ResumeParked(Context& ctx, std::string_view) {
  ARDMA_ASSIGN_OR_RETURN(bool resumed, ctx.Resume("resumable"));
  return U64s({resumed ? 1u : 0u});
}

// Registers test.add(addr, 1) to run when this connection closes (and a second hook that it then
// removes again).
absl::StatusOr<std::string> AddOnClose(Context& ctx, std::string_view args) {
  ARDMA_RETURN_IF_ERROR(NeedArgs(args, 1));
  ARDMA_RETURN_IF_ERROR(ctx.OnClose("add", "test.add", U64s({U64At(args, 0), 1})));
  ARDMA_RETURN_IF_ERROR(ctx.OnClose("removed", "test.add", U64s({U64At(args, 0), 1000})));
  ARDMA_RETURN_IF_ERROR(ctx.OnClose("removed", "", ""));
  return std::string();
}

// Throws what its argument names (1: std::runtime_error, 2: std::bad_alloc, 3: an int): shipped
// code that does not catch must cost its request, not the server.
absl::StatusOr<std::string> Throw(Context&, std::string_view args) {
  ARDMA_RETURN_IF_ERROR(NeedArgs(args, 1));
  switch (U64At(args, 0)) {
    case 1:
      throw std::runtime_error("thrown by test.throw");
    case 2:
      throw std::bad_alloc();
    default:
      throw 42;
  }
}

// Ends the process it runs in (1: a null dereference, 2: abort(), 3: a null dereference while
// holding the lock word at args[1], taken with its lock owner's token): only for servers that run
// native code in isolated workers (ardmad --isolate), where it costs the request and a worker.
absl::StatusOr<std::string> Crash(Context& ctx, std::string_view args) {
  ARDMA_RETURN_IF_ERROR(NeedArgs(args, 1));
  if (U64At(args, 0) == 0) return std::string();  // not this time
  if (U64At(args, 0) == 2) std::abort();
  if (U64At(args, 0) == 3) {
    ARDMA_RETURN_IF_ERROR(NeedArgs(args, 2));
    ARDMA_ASSIGN_OR_RETURN(ardma::CasResult cas,
                           ctx.CompareAndSwap(U64At(args, 1), 0, ctx.lock_owner().token));
    if (!cas.swapped) return absl::AbortedError("test.crash: the word was taken");
  }
  volatile int* nowhere = nullptr;
  return U64s({static_cast<uint64_t>(*nowhere)});
}

// "slot=N" or "member=ID", a newline, the function, a newline, its args: what it answers.
absl::StatusOr<std::string> Peer(Context& ctx, std::string_view args) {
  size_t first = args.find('\n');
  size_t second = first == std::string_view::npos ? first : args.find('\n', first + 1);
  if (second == std::string_view::npos) {
    return absl::InvalidArgumentError("test.peer: TARGET\\nFUNCTION\\nARGS");
  }
  std::string_view target = args.substr(0, first);
  std::string_view function = args.substr(first + 1, second - first - 1);
  ardma::PeerTarget to;
  if (target.rfind("slot=", 0) == 0) {
    to = ardma::PeerTarget::Slot(
        static_cast<uint32_t>(std::strtoul(std::string(target.substr(5)).c_str(), nullptr, 10)));
  } else if (target.rfind("member=", 0) == 0) {
    to = ardma::PeerTarget::Member(std::string(target.substr(7)));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("test.peer: bad target '", std::string(target), "'"));
  }
  return ctx.CallPeer(to, function, args.substr(second + 1));
}

absl::StatusOr<std::string> Who(Context& ctx, std::string_view) {
  return std::string(ctx.CalledByPeer() ? "peer" : "client");
}

}  // namespace

ARDMA_ACTIVE_LIBRARY(test, {"test.noop", &Noop}, {"test.echo", &Echo}, {"test.add", &Add},
                     {"test.call_double", &CallDouble}, {"test.fail", &Fail}, {"test.spin", &Spin},
                     {"test.sleep", &Sleep}, {"test.park", &Park}, {"test.wake", &Wake},
                     {"test.view_sum", &ViewSum}, {"test.wait_zero", &WaitZero},
                     {"test.resumable", &Resumable}, {"test.resume", &ResumeParked},
                     {"test.add_on_close", &AddOnClose}, {"test.throw", &Throw},
                     {"test.busy", &Busy}, {"test.crash", &Crash}, {"test.peer", &Peer},
                     {"test.who", &Who});
