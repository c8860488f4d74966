#include "services/monitor/monitor_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/active/active_library.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/net/socket_connect.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/monitor/publication.h"
#include "services/monitor/socket_daemon.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(monitor);

namespace ardma::monitor {
namespace {

constexpr uint32_t kMaxResponse = 16u << 20;

Poller::Traffic ClientTraffic(Client& client) {
  ClientCounters& c = client.counters();
  return {c.round_trips.load(), c.bytes_sent.load() + c.bytes_received.load()};
}

ClientOptions ClientOptionsFor(const PollerOptions& options) {
  ClientOptions c;
  c.timeout = options.timeout;
  c.connect_timeout = options.timeout;
  c.connect_attempts = 1;
  return c;
}

class RdmaSyncPoller : public Poller {
 public:
  RdmaSyncPoller(PollerOptions options, std::unique_ptr<Client> client)
      : Poller(std::move(options)), client_(std::move(client)) {
    if (!options_.procfs.empty()) {
      wire::ByteWriter w(&args_);
      w.Str16(options_.procfs);
    }
  }

  absl::StatusOr<LoadSample> Poll() override {
    ARDMA_ASSIGN_OR_RETURN(
        std::string bytes,
        Invoke(*client_, Mode::kActive, active_libraries::monitor(), "monitor.sample", args_));
    return DecodeSample(bytes);
  }
  Traffic traffic() const override { return ClientTraffic(*client_); }

 private:
  std::unique_ptr<Client> client_;
  std::string args_;
};

class RdmaAsyncPoller : public Poller {
 public:
  RdmaAsyncPoller(PollerOptions options, std::unique_ptr<Client> client)
      : Poller(std::move(options)), client_(std::move(client)) {}

  absl::StatusOr<LoadSample> Poll() override {
    if (bytes_ == 0) {
      ARDMA_ASSIGN_OR_RETURN(std::string head,
                             Explain(client_->Read(0, kPublicationHeaderBytes, options_.region)));
      ARDMA_ASSIGN_OR_RETURN(PublicationHeader header, ParsePublicationHeader(head));
      bytes_ = PublicationBytes(header.slot_size);
    }
    for (int attempt = 0;; ++attempt) {
      ARDMA_ASSIGN_OR_RETURN(
          std::string region,
          Explain(client_->Read(0, static_cast<uint32_t>(bytes_), options_.region)));
      absl::StatusOr<Published> published = ParsePublication(region);
      if (published.ok()) return DecodeSample(published->payload);
      if (!absl::IsUnavailable(published.status()) || attempt >= options_.torn_retries) {
        bytes_ = 0;  // the layout may have changed (a restarted agent): read the header again
        return published.status();
      }
      ++torn_reads_;
    }
  }
  Traffic traffic() const override { return ClientTraffic(*client_); }

 private:
  // A server without the agent has no such region.
  absl::StatusOr<std::string> Explain(absl::StatusOr<std::string> read) {
    if (absl::IsNotFound(read.status()) || absl::IsOutOfRange(read.status())) {
      return absl::FailedPreconditionError(
          absl::StrCat(options_.address, " publishes no load samples in region ", options_.region,
                       " (start ardmad with --monitor-interval): ", read.status().message()));
    }
    return read;
  }

  std::unique_ptr<Client> client_;
  uint64_t bytes_ = 0;
};

class SocketPoller : public Poller {
 public:
  explicit SocketPoller(PollerOptions options) : Poller(std::move(options)) {}
  ~SocketPoller() override { Close(); }

  absl::Status Open() {
    ARDMA_ASSIGN_OR_RETURN(fd_, ConnectSocket(options_.address, options_.timeout));
    timeval tv{};
    int64_t us = absl::ToInt64Microseconds(options_.timeout);
    tv.tv_sec = us / 1000000;
    tv.tv_usec = us % 1000000;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return absl::OkStatus();
  }

  absl::StatusOr<LoadSample> Poll() override {
    if (fd_ < 0) ARDMA_RETURN_IF_ERROR(Open());
    absl::StatusOr<std::string> response = Exchange();
    if (!response.ok()) {
      Close();  // the next poll reconnects
      return response.status();
    }
    return DecodeSample(*response);
  }
  Traffic traffic() const override { return traffic_; }

 private:
  absl::StatusOr<std::string> Exchange() {
    char request = options_.scheme == Scheme::kSocketSync ? kSocketSync : kSocketAsync;
    ARDMA_RETURN_IF_ERROR(SendAll(fd_, std::string_view(&request, 1)));
    ++traffic_.round_trips;
    char head[5];
    ARDMA_RETURN_IF_ERROR(RecvExactly(fd_, head, sizeof(head)));
    uint32_t length;
    std::memcpy(&length, head + 1, 4);
    if (length > kMaxResponse) return absl::DataLossError("monitord: response too large");
    std::string body(length, '\0');
    ARDMA_RETURN_IF_ERROR(RecvExactly(fd_, body.data(), length));
    traffic_.bytes += 1 + sizeof(head) + length;
    if (head[0] != 0) return absl::FailedPreconditionError(absl::StrCat("monitord: ", body));
    return body;
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  int fd_ = -1;
  Traffic traffic_;
};

}  // namespace

const char* SchemeName(Scheme scheme) {
  switch (scheme) {
    case Scheme::kRdmaSync:
      return "rdma-sync";
    case Scheme::kRdmaAsync:
      return "rdma-async";
    case Scheme::kSocketSync:
      return "socket-sync";
    case Scheme::kSocketAsync:
      return "socket-async";
  }
  return "?";
}

absl::StatusOr<Scheme> ParseScheme(std::string_view text) {
  for (Scheme s : kAllSchemes) {
    if (text == SchemeName(s)) return s;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown scheme '", ToAbsl(text), "' (rdma-sync, rdma-async, socket-sync or socket-async)"));
}

absl::StatusOr<std::unique_ptr<Poller>> Poller::Connect(const PollerOptions& options) {
  if (IsRdma(options.scheme)) {
    ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Client> client,
                           Client::Connect(options.address, ClientOptionsFor(options)));
    if (options.scheme == Scheme::kRdmaSync) {
      return std::make_unique<RdmaSyncPoller>(options, std::move(client));
    }
    return std::make_unique<RdmaAsyncPoller>(options, std::move(client));
  }
  auto poller = std::make_unique<SocketPoller>(options);
  ARDMA_RETURN_IF_ERROR(poller->Open());
  return poller;
}

double WeightedLoad(const Figures& f, double connections, const LoadWeights& w) {
  auto unit = [](double x) { return std::clamp(x, 0.0, 1.0); };
  double network = (f.net_rx_bytes_per_s + f.net_tx_bytes_per_s) / w.network_capacity;
  return w.cpu * unit(f.cpu_busy) + w.memory * unit(f.memory_used) + w.network * unit(network) +
         w.connections * unit(connections / w.max_connections);
}

Balancer::Balancer(size_t backends, LoadWeights weights, uint64_t seed)
    : backends_(backends), weights_(weights), rng_(seed) {}

void Balancer::Update(size_t i, const LoadSample& sample) {
  Backend& b = backends_.at(i);
  b.figures = ComputeFigures(b.last ? &*b.last : nullptr, sample);
  b.last = sample;
  b.up = true;
}

void Balancer::MarkDown(size_t i) { backends_.at(i).up = false; }

void Balancer::SetConnections(size_t i, double connections) {
  backends_.at(i).connections = connections;
}

std::optional<double> Balancer::Load(size_t i) const {
  const Backend& b = backends_.at(i);
  if (!b.up) return std::nullopt;
  return WeightedLoad(b.figures, b.connections, weights_);
}

const Figures* Balancer::figures(size_t i) const {
  const Backend& b = backends_.at(i);
  return b.up ? &b.figures : nullptr;
}

absl::StatusOr<size_t> Balancer::LeastLoaded() const {
  std::optional<size_t> best;
  double best_load = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < backends_.size(); ++i) {
    std::optional<double> load = Load(i);
    if (load && *load < best_load) {
      best = i;
      best_load = *load;
    }
  }
  if (!best) return absl::FailedPreconditionError("no back end has reported its load");
  return *best;
}

absl::StatusOr<size_t> Balancer::PowerOfTwo() {
  std::vector<size_t> up;
  for (size_t i = 0; i < backends_.size(); ++i) {
    if (backends_[i].up) up.push_back(i);
  }
  if (up.empty()) return absl::FailedPreconditionError("no back end has reported its load");
  if (up.size() == 1) return up[0];
  std::uniform_int_distribution<size_t> pick(0, up.size() - 1);
  size_t a = pick(rng_), b = pick(rng_);
  while (b == a) b = pick(rng_);
  size_t x = up[std::min(a, b)], y = up[std::max(a, b)];
  return *Load(y) < *Load(x) ? y : x;
}

}  // namespace ardma::monitor
