// UcxAddressCheck: unpacks a client's UCX worker address in a process of its own before the server
// gives it to UCX. UCX 1.13 asserts (and so aborts the process) on some malformed addresses
// (`address.c: Assertion ... addr version 15`: 17 of 20 random ones), and the address arrives in
// UCX_CONNECT from any client that may connect. The checker is this program started again
// (/proc/self/exe, caught before main by a constructor in ucx_address_check.cc) with a UCP context
// made with the server's own options, so it unpacks an address exactly as the server would: it
// creates an endpoint to the address and closes it at once. An address that ends or hangs the
// checker is refused, and a new checker is started for the next one.
//
// Owned by the UcxServer. Thread-safe; checks are one at a time (a new connection waits for the
// one before it: about 0.1 ms for a good address, 10-30 ms for one that needs a new checker).
//
//   UcxAddressCheck check(options);
//   ARDMA_RETURN_IF_ERROR(check.Check(address));  // InvalidArgument: malformed
//   ... ucp_ep_create(address) ...
#ifndef ARDMA_CORE_SERVER_UCX_ADDRESS_CHECK_H_
#define ARDMA_CORE_SERVER_UCX_ADDRESS_CHECK_H_

#include <sys/types.h>

#include <cstdint>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/ucx/ucx_context.h"

namespace ardma {

class UcxAddressCheck {
 public:
  // The checker's UCP context is made with `options`: the server's.
  explicit UcxAddressCheck(const UcxContextOptions& options) : options_(options) {}
  ~UcxAddressCheck();  // ends the checker
  UcxAddressCheck(const UcxAddressCheck&) = delete;
  UcxAddressCheck& operator=(const UcxAddressCheck&) = delete;

  // Starts the checker now rather than at the first Check.
  absl::Status Warm();
  // OK if an endpoint to `address` could be made; InvalidArgument if UCX refused the address or
  // it ended or hung the checker; Internal if no checker could be started.
  absl::Status Check(std::string_view address);
  // Checkers started after one ended or hung.
  uint64_t restarts() const;

 private:
  absl::Status StartLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Kills and reaps the checker; returns how it ended, for the message.
  std::string StopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const UcxContextOptions options_;
  mutable absl::Mutex mu_;
  pid_t pid_ ABSL_GUARDED_BY(mu_) = -1;
  int fd_ ABSL_GUARDED_BY(mu_) = -1;  // our end of the socket pair
  uint64_t restarts_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_UCX_ADDRESS_CHECK_H_
