// Invoke: one entry point that runs an active function in either mode, so every service and every
// benchmark compares the two honestly, from one algorithm.
//
//   Mode::kActive  ships the library if the server lacks it (EnsureLoaded), then one EXECUTE:
//                  one round trip, whatever the function does.
//   Mode::kRdma    runs the very same function here over a RemoteContext: each memory operation
//                  (or batch) is a round trip.
//
//   ARDMA_DECLARE_ACTIVE_LIBRARY(dht);
//   auto r = ardma::Invoke(*client, ardma::Mode::kActive, ardma::active_libraries::dht(),
//                          "dht.get", key);
//
// Thread-safe to the extent Client is.
#ifndef ARDMA_CORE_CLIENT_INVOKE_H_
#define ARDMA_CORE_CLIENT_INVOKE_H_

#include <future>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/active/active_library.h"
#include "core/client/client.h"

namespace ardma {

enum class Mode { kActive, kRdma };
const char* ModeName(Mode mode);
// "active" or "rdma".
absl::StatusOr<Mode> ParseMode(std::string_view text);

// Makes sure the server holds `library` and every library it depends on (dependencies first):
// HAS_CODE, then LOAD if missing. Remembered per Client until it reconnects.
absl::Status EnsureLoaded(Client& client, const ActiveLibrary& library);

// Runs `function` (exported by `library` or one of its dependencies) on `args`.
absl::StatusOr<std::string> Invoke(Client& client, Mode mode, const ActiveLibrary& library,
                                   std::string_view function, std::string_view args,
                                   const CallOptions& options = {});

// The same without waiting: in active mode the request is sent before this returns (after the
// library is made sure of), so calls to several servers leave at once from one thread; the
// future's get() tries once more, waiting, as Invoke's call would, if the connection broke (an
// asynchronous call is not retried) or the server lost the library meanwhile. In RDMA
// mode the function runs on a thread of its own. `client` and `library` must outlive the future.
std::future<absl::StatusOr<std::string>> InvokeAsync(Client& client, Mode mode,
                                                     const ActiveLibrary& library,
                                                     std::string function, std::string args,
                                                     const CallOptions& options = {});

}  // namespace ardma

#endif  // ARDMA_CORE_CLIENT_INVOKE_H_
