#include "python/src/client.h"

#include <pybind11/stl.h>

#include <fstream>
#include <iterator>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/client/remote_context.h"
#include "core/cluster/member.h"
#include "core/cluster/router.h"
#include "core/memory/heap.h"
#include "python/src/bytes_arg.h"
#include "python/src/errors.h"

namespace ardma::python {

Client& PyClient::Single(const char* what) const {
  if (one == nullptr) {
    Check(absl::FailedPreconditionError(absl::StrCat(what, " needs one server's address; ", address,
                                                     " is a cluster's (its services route "
                                                     "by key: use Dht, Lock and List on it)")));
  }
  return *one;
}

Mode ModeFromString(const std::string& mode) { return Take(ParseMode(mode)); }

namespace {

absl::Duration Seconds(double seconds) { return absl::Seconds(seconds); }

std::shared_ptr<PyClient> Connect(const std::string& address, const std::string& auth_file,
                                  double timeout, double connect_timeout) {
  ClientOptions options = Take(OptionsWithAuthFile(auth_file));
  options.timeout = Seconds(timeout);
  options.connect_timeout = Seconds(connect_timeout);
  auto client = std::make_shared<PyClient>();
  client->address = address;
  client->servers = Unlocked([&] { return cluster::ConnectServers(address, options); });
  if (!cluster::IsClusterAddress(address)) {
    client->one = Take(client->servers->All()).at(0);
  }
  return client;
}

// A Batch of operations sent as one flight. The results come back in the order the operations
// were added: bytes for a read, None for a write, (swapped, observed) for a CAS, the old value for
// a fetch-add.
class PyBatch {
 public:
  explicit PyBatch(std::shared_ptr<PyClient> client)
      : client_(std::move(client)), batch_(client_->Single("a batch").Batch()) {}

  PyBatch& Read(uint64_t addr, uint32_t len, uint32_t region) {
    batch_.Read(addr, len, region);
    kinds_.push_back(Kind::kRead);
    return *this;
  }
  PyBatch& Write(uint64_t addr, const Bytes& data, uint32_t region) {
    batch_.Write(addr, data.value, region);
    kinds_.push_back(Kind::kWrite);
    return *this;
  }
  PyBatch& Cas(uint64_t addr, uint64_t expected, uint64_t desired, uint32_t region) {
    batch_.CompareAndSwap(addr, expected, desired, region);
    kinds_.push_back(Kind::kCas);
    return *this;
  }
  PyBatch& FetchAdd(uint64_t addr, uint64_t delta, uint32_t region) {
    batch_.FetchAdd(addr, delta, region);
    kinds_.push_back(Kind::kFetchAdd);
    return *this;
  }
  py::list Send() {
    Batch::Result result = Unlocked([&] { return batch_.Send(); });
    py::list out;
    size_t read = 0, cas = 0, fetch_add = 0;
    for (Kind kind : kinds_) {
      switch (kind) {
        case Kind::kRead:
          out.append(py::bytes(result.reads.at(read++)));
          break;
        case Kind::kWrite:
          out.append(py::none());
          break;
        case Kind::kCas: {
          const CasResult& c = result.cas.at(cas++);
          out.append(py::make_tuple(c.swapped, c.observed));
          break;
        }
        case Kind::kFetchAdd:
          out.append(py::int_(result.fetch_adds.at(fetch_add++)));
          break;
      }
    }
    kinds_.clear();
    batch_ = client_->one->Batch();  // the next send starts empty
    return out;
  }
  size_t size() const { return kinds_.size(); }

 private:
  enum class Kind { kRead, kWrite, kCas, kFetchAdd };
  std::shared_ptr<PyClient> client_;
  Batch batch_;
  std::vector<Kind> kinds_;
};

wire::CodeHash HashFromBytes(const std::string& bytes) {
  wire::CodeHash hash{};
  if (bytes.size() != hash.size()) {
    Check(absl::InvalidArgumentError(
        absl::StrCat("a library hash is 32 bytes (", bytes.size(), " given)")));
  }
  std::copy(bytes.begin(), bytes.end(), hash.begin());
  return hash;
}

wire::CodeKind CodeKindFromString(const std::string& kind) {
  if (kind == "jvm") return wire::CodeKind::kJvm;
  if (kind != "native") Check(absl::InvalidArgumentError("kind is \"native\" or \"jvm\""));
  return wire::CodeKind::kNative;
}

}  // namespace

void BindClient(py::module_& m) {
  py::class_<PyClient, std::shared_ptr<PyClient>>(m, "Client", R"(A connection to ardmad.

Client(address, *, auth_file=None, timeout=30.0, connect_timeout=5.0)

address: "HOST:PORT" (TCP), "unix:PATH", "tls://HOST:PORT", "ucx://HOST:PORT" (one-sided reads,
writes and atomics over UCX), or a cluster's "etcd://HOST:PORT[,...]/NAME" (the services route by
key; the raw memory operations need one server). auth_file: a private file whose first line is
NAME SECRET (default: $ARDMA_AUTH_FILE). timeout: seconds a call may take.

Thread-safe: threads share one client, and the GIL is released while a call waits.
Raises UnavailableError when the server cannot be reached.)")
      .def(py::init(&Connect), py::arg("address"), py::kw_only(), py::arg("auth_file") = "",
           py::arg("timeout") = 30.0, py::arg("connect_timeout") = 5.0)
      .def_property_readonly("address", [](const PyClient& c) { return c.address; })
      .def_property_readonly("is_cluster", [](const PyClient& c) { return c.one == nullptr; })
      .def(
          "ping",
          [](const PyClient& c) {
            Client& client = c.Single("ping");
            Unlocked([&] { return client.Ping(); });
          },
          "One round trip to the server.")
      .def(
          "read",
          [](const PyClient& c, uint64_t addr, uint32_t length, uint32_t region) {
            Client& client = c.Single("read");
            return py::bytes(Unlocked([&] { return client.Read(addr, length, region); }));
          },
          py::arg("addr"), py::arg("length"), py::arg("region") = 0,
          "`length` bytes at `addr` of `region` (0: the heap): one-sided over UCX.")
      .def(
          "write",
          [](const PyClient& c, uint64_t addr, Bytes data, uint32_t region) {
            Client& client = c.Single("write");
            Unlocked([&] { return client.Write(addr, data.value, region); });
          },
          py::arg("addr"), py::arg("data"), py::arg("region") = 0, "Writes `data` at `addr`.")
      .def(
          "cas",
          [](const PyClient& c, uint64_t addr, uint64_t expected, uint64_t desired,
             uint32_t region) {
            Client& client = c.Single("cas");
            CasResult r =
                Unlocked([&] { return client.CompareAndSwap(addr, expected, desired, region); });
            return std::make_pair(r.swapped, r.observed);
          },
          py::arg("addr"), py::arg("expected"), py::arg("desired"), py::arg("region") = 0,
          "Compare-and-swap of the 8-byte word at `addr`: (swapped, the value it had).")
      .def(
          "fetch_add",
          [](const PyClient& c, uint64_t addr, uint64_t delta, uint32_t region) {
            Client& client = c.Single("fetch_add");
            return Unlocked([&] { return client.FetchAdd(addr, delta, region); });
          },
          py::arg("addr"), py::arg("delta"), py::arg("region") = 0,
          "Adds `delta` to the 8-byte word at `addr` (wrapping); returns the value it had.")
      .def(
          "allocate",
          [](const PyClient& c, uint64_t size) {
            Client& client = c.Single("allocate");
            return Unlocked([&] {
              RemoteContext ctx(&client, {});
              return heap::Allocate(ctx, size);
            });
          },
          py::arg("size"),
          "Allocates `size` bytes of the server's heap (16-byte aligned, not zeroed); returns "
          "the address, for read/write/cas/fetch_add. ResourceExhaustedError when full.")
      .def(
          "free",
          [](const PyClient& c, uint64_t addr) {
            Client& client = c.Single("free");
            Unlocked([&] {
              RemoteContext ctx(&client, {});
              return heap::Free(ctx, addr);
            });
          },
          py::arg("addr"), "Frees a block allocate() returned.")
      .def(
          "batch", [](std::shared_ptr<PyClient> c) { return PyBatch(std::move(c)); },
          "A Batch: operations collected, then sent as one flight (one round trip).")
      .def(
          "load",
          [](const PyClient& c, Bytes code, const std::string& name, const std::string& kind) {
            Client& client = c.Single("load");
            wire::CodeKind code_kind = CodeKindFromString(kind);
            wire::CodeHash hash =
                Unlocked([&] { return client.Load(code_kind, name, code.value); });
            return py::bytes(reinterpret_cast<const char*>(hash.data()), hash.size());
          },
          py::arg("code"), py::arg("name"), py::arg("kind") = "native",
          "Ships code (the bytes of a shared object, or of a .class/.jar for kind=\"jvm\") as "
          "library `name`; returns its SHA-256, which names it. Needs the `load` permission.")
      .def(
          "execute",
          [](const PyClient& c, const std::string& function, Bytes args,
             std::optional<std::string> library) {
            Client& client = c.Single("execute");
            std::optional<wire::CodeHash> hash;
            if (library) hash = HashFromBytes(*library);
            return py::bytes(Unlocked([&] {
              return hash ? client.Execute(*hash, function, args.value)
                          : client.Execute(function, args.value);
            }));
          },
          py::arg("function"), py::arg("args") = py::bytes(), py::arg("library") = py::none(),
          "Runs shipped `function` (\"library.function\") on the server with `args`; returns its "
          "result bytes. `library`: the hash load() returned, to run exactly that code.")
      .def(
          "stats",
          [](const PyClient& c) {
            Client& client = c.Single("stats");
            std::vector<wire::StatsEntry> entries = Unlocked([&] { return client.Stats(); });
            py::dict out;
            for (const auto& [name, value] : entries) out[py::str(name)] = value;
            return out;
          },
          "The server's counters (STATS), by name.")
      .def_property_readonly(
          "round_trips",
          [](const PyClient& c) {
            uint64_t total = 0;
            for (Client* client : Take(c.servers->All())) {
              total += client->counters().round_trips.load();
            }
            return total;
          },
          "Round trips made so far by this client (every server of a cluster).")
      .def("__repr__", [](const PyClient& c) { return "ardma.Client('" + c.address + "')"; });

  py::class_<PyBatch>(m, "Batch", "Operations sent as one flight: client.batch().read(...)...")
      .def("read", &PyBatch::Read, py::arg("addr"), py::arg("length"), py::arg("region") = 0,
           py::return_value_policy::reference_internal)
      .def("write", &PyBatch::Write, py::arg("addr"), py::arg("data"), py::arg("region") = 0,
           py::return_value_policy::reference_internal)
      .def("cas", &PyBatch::Cas, py::arg("addr"), py::arg("expected"), py::arg("desired"),
           py::arg("region") = 0, py::return_value_policy::reference_internal)
      .def("fetch_add", &PyBatch::FetchAdd, py::arg("addr"), py::arg("delta"),
           py::arg("region") = 0, py::return_value_policy::reference_internal)
      .def("send", &PyBatch::Send,
           "Sends everything added since the last send; the results in order (bytes for a "
           "read, None for a write, (swapped, observed) for a cas, the old value for a "
           "fetch_add).")
      .def("__len__", &PyBatch::size);
}

}  // namespace ardma::python
