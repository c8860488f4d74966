// ardma-demo: a short tour of a running ardmad: one-sided operations, then the same list walk in
// RDMA mode and in active mode, with round trips and latency for each, over tcp and (when the
// server offers it) over UCX, where RDMA mode's READs are one-sided.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_format.h"
#include "core/cli/client_flags.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/client/remote_context.h"
#include "core/host_port.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "tools/demo_library.h"

namespace {

uint64_t U64(std::string_view bytes, size_t index) {
  uint64_t v = 0;
  std::memcpy(&v, bytes.data() + 8 * index, 8);
  return v;
}

std::string AsArg(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

// The latency of a walk of the list in each mode, for "active mode was N times faster".
struct Speedup {
  double rdma_us = 0, active_us = 0;
  double ratio() const { return rdma_us / active_us; }
};

// Sums the list at `head` `repeats` times in each mode over `client`, printing a row per mode.
absl::StatusOr<Speedup> Walks(ardma::Client& client, uint64_t head, int64_t repeats,
                              const char* transport) {
  const ardma::ActiveLibrary& demo = ardma::active_libraries::demo();
  ardma::ClientCounters& c = client.counters();
  Speedup speedup;
  for (ardma::Mode mode : {ardma::Mode::kRdma, ardma::Mode::kActive}) {
    // One walk first, not counted: a new connection's first call also checks the code is there.
    ARDMA_RETURN_IF_ERROR(
        ardma::Invoke(client, mode, demo, "demo.sum_list", AsArg(head)).status());
    uint64_t rt0 = c.round_trips.load();
    absl::Time t0 = absl::Now();
    std::string result;
    for (int64_t i = 0; i < repeats; ++i) {
      ARDMA_ASSIGN_OR_RETURN(result, ardma::Invoke(client, mode, demo, "demo.sum_list", AsArg(head)));
    }
    double us = absl::ToDoubleMicroseconds(absl::Now() - t0) / static_cast<double>(repeats);
    (mode == ardma::Mode::kActive ? speedup.active_us : speedup.rdma_us) = us;
    std::printf("  %-9s %-7s %12llu %14.1f %14.1f\n", transport, ardma::ModeName(mode),
                static_cast<unsigned long long>(U64(result, 0)),
                static_cast<double>(c.round_trips.load() - rt0) / static_cast<double>(repeats), us);
  }
  return speedup;
}

absl::Status Demo(const std::string& server, int64_t length, int64_t repeats) {
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<ardma::Client> client, ardma::Client::Connect(server));
  ardma::ClientCounters& c = client->counters();
  std::printf("Connected to ardmad at %s (client id %016llx)\n\n", server.c_str(),
              static_cast<unsigned long long>(client->client_id()));

  absl::Time start = absl::Now();
  ARDMA_RETURN_IF_ERROR(client->Ping());
  std::printf("PING                      %8.1f us\n",
              absl::ToDoubleMicroseconds(absl::Now() - start));

  // A word of our own, from the heap's named roots: everything one-sided.
  ardma::RemoteContext ctx(client.get(), {});
  ARDMA_ASSIGN_OR_RETURN(uint64_t counter, ardma::heap::Allocate(ctx, 8));
  ARDMA_RETURN_IF_ERROR(client->Write(counter, AsArg(41)));
  ARDMA_ASSIGN_OR_RETURN(uint64_t old, client->FetchAdd(counter, 1));
  ARDMA_ASSIGN_OR_RETURN(ardma::CasResult cas, client->CompareAndSwap(counter, 42, 100));
  ARDMA_ASSIGN_OR_RETURN(std::string now, client->Read(counter, 8));
  std::printf("WRITE 41, FETCH_ADD 1 (old %llu), CAS 42->100 (%s), READ -> %llu\n\n",
              static_cast<unsigned long long>(old), cas.swapped ? "swapped" : "lost",
              static_cast<unsigned long long>(U64(now, 0)));

  const ardma::ActiveLibrary& demo = ardma::active_libraries::demo();
  uint64_t before = c.round_trips.load();
  ARDMA_RETURN_IF_ERROR(ardma::EnsureLoaded(*client, demo));
  std::printf("Shipped library '%s' (%zu bytes, sha256 %s...) in %llu round trips\n",
              std::string(demo.name()).c_str(), demo.code().size(),
              ardma::wire::HashToHex(demo.hash()).substr(0, 16).c_str(),
              static_cast<unsigned long long>(c.round_trips.load() - before));

  ARDMA_ASSIGN_OR_RETURN(std::string head_bytes,
                         ardma::Invoke(*client, ardma::Mode::kActive, demo, "demo.build_list",
                                       AsArg(static_cast<uint64_t>(length))));
  uint64_t head = U64(head_bytes, 0);
  std::printf("Built a %lld-node linked list on the server in one EXECUTE\n\n",
              static_cast<long long>(length));

  std::printf("Sum the list, %lld times per mode:\n", static_cast<long long>(repeats));
  std::printf("  %-9s %-7s %12s %14s %14s\n", "transport", "mode", "sum", "round trips",
              "latency (us)");
  ARDMA_ASSIGN_OR_RETURN(Speedup tcp, Walks(*client, head, repeats, "tcp"));
  // The same walks over UCX, where RDMA mode's READs are one-sided, when the server offers it.
  std::optional<Speedup> ucx;
  if (!server.starts_with("ucx://") && !server.starts_with("unix:") &&
      !server.starts_with("tls://")) {
    absl::StatusOr<std::unique_ptr<ardma::Client>> over_ucx =
        ardma::Client::Connect("ucx://" + server);
    absl::StatusOr<Speedup> walked =
        over_ucx.ok() ? Walks(**over_ucx, head, repeats, "ucx")
                      : absl::StatusOr<Speedup>(over_ucx.status());
    if (walked.ok()) {
      ucx = *walked;
    } else {
      std::printf("  %-9s (not available: %s)\n", "ucx",
                  std::string(walked.status().message()).c_str());
    }
  }
  std::printf("\nActive mode was %.0fx faster over tcp", tcp.ratio());
  if (ucx.has_value()) std::printf(" and %.0fx over ucx", ucx->ratio());
  std::printf(": the walk ran next to the data.\n");
  if (ucx.has_value()) {
    std::printf("Over ucx RDMA mode reads each node one-sidedly (%.2f us a node); over tcp each "
                "READ is a request the server answers (%.2f us a node).\n",
                ucx->rdma_us / static_cast<double>(length),
                tcp.rdma_us / static_cast<double>(length));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  ardma::ClientFlags client;
  int64_t length = 200;
  int64_t repeats = 20;
  ardma::FlagSet flags("ardma-demo",
                       "Usage: ardma-demo [flags]\n\nA short tour of a running ardmad: one-sided "
                       "operations, then a linked-list walk\nin RDMA mode and in active mode.");
  client.Declare(flags);
  flags.Int("length", &length, "N", "nodes in the list");
  flags.Int("repeats", &repeats, "N", "walks per mode");
  std::vector<std::string> args;
  if (std::optional<int> exit_code = flags.ParseForMain(argc, argv, &args)) return *exit_code;
  if (!args.empty()) {
    std::cerr << "ardma-demo: unexpected argument '" << args[0] << "' (see --help)\n";
    return 2;
  }
  if (absl::Status s = client.Export(); !s.ok()) {
    std::cerr << "ardma-demo: " << s.message() << "\n";
    return 2;
  }
  if (length < 1 || repeats < 1) {
    std::cerr << "ardma-demo: --length and --repeats must be positive\n";
    return 2;
  }
  absl::Status s = Demo(client.server, length, repeats);
  if (!s.ok()) {
    std::cerr << "ardma-demo: " << s.ToString() << "\n";
    return 1;
  }
  return 0;
}
