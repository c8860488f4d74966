// RemoteContext: Context on a client. Every operation is a round trip to ardmad (a batch of reads
// or of writes is one), and Call runs the called function right here, over this same context, from
// the libraries the client links: in RDMA mode all logic stays on the client. View, Park and Wake
// need the data to be local and fail with FAILED_PRECONDITION.
//
// The whole operation (the function and everything it Calls) has the timeout of a call made with
// `options`, counted from the first time it waits (an operation that never waits reads no clock):
// past it, Backoff fails with DEADLINE_EXCEEDED, so an RDMA-mode operation that waits on a lock
// held by a slow client gives up like an active-mode one does.
//
// Borrows the Client and the libraries for its lifetime. One thread at a time.
#ifndef ARDMA_CORE_CLIENT_REMOTE_CONTEXT_H_
#define ARDMA_CORE_CLIENT_REMOTE_CONTEXT_H_

#include <initializer_list>

#include "absl/container/inlined_vector.h"
#include "core/active/active_library.h"
#include "core/client/client.h"
#include "core/clock.h"
#include "core/context/context.h"

namespace ardma {

class RemoteContext : public Context {
 public:
  // `libraries` resolve Call; each library's dependencies are searched too.
  // (A few libraries, kept without an allocation: a context is made per operation.)
  using Libraries = absl::InlinedVector<const ActiveLibrary*, 2>;
  RemoteContext(Client* client, std::initializer_list<const ActiveLibrary*> libraries,
                CallOptions options = {})
      : client_(client),
        libraries_(libraries),
        options_(options),
        deadline_(LazyDeadline::After(client->TimeoutFor(options))) {}

  bool IsLocal() const override { return false; }

 protected:
  absl::Status DoReadBatch(std::span<const ReadOp> ops) override;
  absl::Status DoWriteBatch(std::span<const WriteOp> ops) override;
  absl::StatusOr<CasResult> DoCompareAndSwap(RegionId region, uint64_t addr, uint64_t expected,
                                             uint64_t desired) override;
  absl::StatusOr<uint64_t> DoFetchAdd(RegionId region, uint64_t addr, uint64_t delta) override;
  absl::StatusOr<std::string_view> DoView(RegionId region, uint64_t addr, uint64_t len) override;
  absl::StatusOr<std::string> DoCall(std::string_view function, std::string_view args) override;
  absl::Status DoPark(std::string_view key, const ParkOptions& options) override;
  absl::StatusOr<bool> DoResume(std::string_view key) override;
  absl::Status DoOnClose(std::string_view key, std::string_view function,
                         std::string_view args) override;
  absl::StatusOr<bool> DoWake(std::string_view key, std::string_view result) override;
  absl::Status DoBackoff(absl::Duration delay) override;  // sleeps on the calling thread
  LockOwner DoLockOwner() override { return client_->lock_owner(); }

 private:
  Client* const client_;
  const Libraries libraries_;
  const CallOptions options_;
  LazyDeadline deadline_;  // read from the clock when the operation first waits (DoBackoff)
  int depth_ = 0;
};

}  // namespace ardma

#endif  // ARDMA_CORE_CLIENT_REMOTE_CONTEXT_H_
