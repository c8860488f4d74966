// The services' Python classes (python/ardma): Dht, Lock, List, Dfs and least_loaded(), each over
// a shared Client, in either mode.
#include "python/src/services.h"

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "python/src/bytes_arg.h"
#include "python/src/client.h"
#include "python/src/errors.h"
#include "services/dht/dht_client.h"
#include "services/list/list_client.h"
#include "services/lock/lock_client.h"
#include "services/monitor/monitor_client.h"

namespace ardma::python {
namespace {

// A service client over a shared PyClient, which it keeps alive.
template <typename Service>
struct Over {
  Over(std::shared_ptr<PyClient> c, const std::string& mode)
      : client(std::move(c)), service(client->servers.get(), ModeFromString(mode)) {}
  std::shared_ptr<PyClient> client;
  Service service;
};
using PyDht = Over<dht::DhtClient>;
using PyList = Over<list::ListClient>;

std::string ModeOf(Mode mode) { return ModeName(mode); }

// One named lock: held or not, with its grant.
class PyLock {
 public:
  PyLock(std::shared_ptr<PyClient> client, std::string name, const std::string& mode, bool shared,
         std::optional<double> timeout, double lease)
      : client_(std::move(client)),
        locks_(client_->servers.get(), ModeFromString(mode)),
        name_(std::move(name)),
        lock_mode_(shared ? lock::LockMode::kShared : lock::LockMode::kExclusive),
        timeout_(timeout),
        lease_(absl::Seconds(lease)) {}

  uint64_t Acquire(std::optional<double> timeout) {
    if (grant_) Check(absl::FailedPreconditionError(absl::StrCat("lock '", name_, "' is held")));
    std::optional<double> seconds = timeout ? timeout : timeout_;
    absl::Duration wait = seconds ? absl::Seconds(*seconds) : absl::InfiniteDuration();
    grant_ = Unlocked([&] { return locks_.Acquire(name_, lock_mode_, wait, lease_); });
    return grant_->token;
  }
  bool TryAcquire() {
    if (grant_) Check(absl::FailedPreconditionError(absl::StrCat("lock '", name_, "' is held")));
    grant_ = Unlocked([&] { return locks_.TryAcquire(name_, lock_mode_, lease_); });
    return grant_.has_value();
  }
  void Release() {
    if (!grant_) {
      Check(absl::FailedPreconditionError(absl::StrCat("lock '", name_, "' is not held")));
    }
    lock::Grant grant = *std::move(grant_);
    grant_.reset();
    Unlocked([&] { return locks_.Release(grant); });
  }
  void Renew() {
    if (!grant_) {
      Check(absl::FailedPreconditionError(absl::StrCat("lock '", name_, "' is not held")));
    }
    Unlocked([&] { return locks_.Renew(*grant_, lease_); });
  }
  std::optional<uint64_t> token() const {
    return grant_ ? std::optional<uint64_t>(grant_->token) : std::nullopt;
  }
  const std::string& name() const { return name_; }
  py::dict Inspect() {
    lock::LockState s = Unlocked([&] { return locks_.Inspect(name_); });
    py::dict out;
    out["tickets_taken"] = s.tickets_taken;
    out["tokens_issued"] = s.tokens_issued;
    out["holders"] = s.holders;
    out["waiters"] = s.waiters;
    return out;
  }

 private:
  std::shared_ptr<PyClient> client_;
  lock::LockClient locks_;
  std::string name_;
  lock::LockMode lock_mode_;
  std::optional<double> timeout_;
  absl::Duration lease_;
  std::optional<lock::Grant> grant_;
};

// A list value: an int stays an int; bytes and str are stored as bytes.
using PyListValue = std::variant<int64_t, py::bytes, std::string>;
list::ListValue ToListValue(const PyListValue& v) {
  if (const int64_t* i = std::get_if<int64_t>(&v)) return *i;
  if (const py::bytes* b = std::get_if<py::bytes>(&v)) return std::string(*b);
  return std::get<std::string>(v);
}
py::object FromListValue(const list::ListValue& v) {
  if (const int64_t* i = std::get_if<int64_t>(&v)) return py::int_(*i);
  return py::bytes(std::get<std::string>(v));
}

// The least loaded of `addresses` by the load monitor (services/monitor): each polled twice,
// `interval` apart, by `scheme`.
std::string LeastLoaded(const std::vector<std::string>& addresses, const std::string& scheme,
                        double interval) {
  if (addresses.empty()) Check(absl::InvalidArgumentError("no addresses"));
  monitor::Scheme parsed = Take(monitor::ParseScheme(scheme));
  size_t index = Unlocked([&]() -> absl::StatusOr<size_t> {
    std::vector<std::unique_ptr<monitor::Poller>> pollers;
    monitor::Balancer balancer(addresses.size());
    for (const std::string& address : addresses) {
      absl::StatusOr<std::unique_ptr<monitor::Poller>> p =
          monitor::Poller::Connect({.address = address, .scheme = parsed});
      pollers.push_back(p.ok() ? *std::move(p) : nullptr);  // unreachable: never chosen
    }
    for (int round = 0; round < 2; ++round) {
      if (round == 1) absl::SleepFor(absl::Seconds(interval));
      for (size_t i = 0; i < pollers.size(); ++i) {
        absl::StatusOr<monitor::LoadSample> sample =
            pollers[i] ? pollers[i]->Poll() : absl::UnavailableError("not connected");
        if (sample.ok()) {
          balancer.Update(i, *sample);
        } else {
          balancer.MarkDown(i);
        }
      }
    }
    return balancer.LeastLoaded();
  });
  return addresses[index];
}

}  // namespace

void BindServices(py::module_& m) {
  py::class_<PyDht>(m, "Dht", R"(The hash table service: tables of bytes keys to bytes values.

Dht(client, mode="active")   mode "active" runs each operation next to the data (one round
trip); "rdma" does it with one-sided reads, writes and atomics from here. Over a cluster's client,
keys route to the server that holds them.)")
      .def(py::init<std::shared_ptr<PyClient>, const std::string&>(), py::arg("client"),
           py::arg("mode") = "active")
      .def_property_readonly("mode", [](const PyDht& d) { return ModeOf(d.service.mode()); })
      .def(
          "put",
          [](PyDht& d, std::string table, Bytes key, Bytes value) {
            return Unlocked([&] { return d.service.Put(table, key.value, value.value); });
          },
          py::arg("table"), py::arg("key"), py::arg("value"),
          "Sets key to value (the table is made on first use); True if the key was new.")
      .def(
          "insert",
          [](PyDht& d, std::string table, Bytes key, Bytes value) -> py::object {
            std::optional<std::string> existing =
                Unlocked([&] { return d.service.Insert(table, key.value, value.value); });
            if (existing) return py::bytes(*existing);
            return py::none();
          },
          py::arg("table"), py::arg("key"), py::arg("value"),
          "Sets key only if absent: None if it was set, else the value already there.")
      .def(
          "get",
          [](PyDht& d, std::string table, Bytes key) {
            return py::bytes(Unlocked([&] { return d.service.Get(table, key.value); }));
          },
          py::arg("table"), py::arg("key"), "The value of key; NotFoundError if absent.")
      .def(
          "contains",
          [](PyDht& d, std::string table, Bytes key) {
            return Unlocked([&] { return d.service.Contains(table, key.value); });
          },
          py::arg("table"), py::arg("key"))
      .def(
          "remove",
          [](PyDht& d, std::string table, Bytes key) {
            return Unlocked([&] { return d.service.Remove(table, key.value); });
          },
          py::arg("table"), py::arg("key"), "Removes key; True if it was there.")
      .def(
          "size",
          [](PyDht& d, std::string table) {
            return Unlocked([&] { return d.service.Size(table); });
          },
          py::arg("table"), "The number of keys in table.")
      .def(
          "scan",
          [](PyDht& d, std::string table, uint64_t cursor, uint32_t count) {
            dht::DhtClient::Page page =
                Unlocked([&] { return d.service.Scan(table, cursor, count); });
            py::list items;
            for (const auto& [k, v] : page.items)
              items.append(py::make_tuple(py::bytes(k), py::bytes(v)));
            return py::make_tuple(page.next, items);
          },
          py::arg("table"), py::arg("cursor") = 0, py::arg("count") = 100,
          "One step of a scan, as Redis SCAN: (next cursor, [(key, value), ...]); start at 0, "
          "done when the cursor returned is 0. Every key present for the whole scan comes at "
          "least once, also while the table grows.");

  py::class_<PyLock>(m, "Lock", R"(A named FCFS lock of the lock manager, with fencing tokens.

Lock(client, name, *, mode="active", shared=False, timeout=None, lease=30.0)

    with ardma.Lock(client, "report") as lock:
        ...   # held; lock.token is this grant's fencing token

timeout: seconds acquire() waits (None: for ever; DeadlineExceededError after it). lease: seconds
the grant lasts unless renewed (a crashed holder's lock frees itself).)")
      .def(py::init<std::shared_ptr<PyClient>, std::string, const std::string&, bool,
                    std::optional<double>, double>(),
           py::arg("client"), py::arg("name"), py::kw_only(), py::arg("mode") = "active",
           py::arg("shared") = false, py::arg("timeout") = py::none(), py::arg("lease") = 30.0)
      .def("acquire", &PyLock::Acquire, py::arg("timeout") = py::none(),
           "Waits for the lock (first come, first served); returns the fencing token.")
      .def("try_acquire", &PyLock::TryAcquire, "Takes the lock if it is free now; True if so.")
      .def("release", &PyLock::Release)
      .def("renew", &PyLock::Renew, "Extends the lease from now.")
      .def("inspect", &PyLock::Inspect, "The lock's counters: tickets, tokens, holders, waiters.")
      .def_property_readonly("token", &PyLock::token, "The fencing token while held, else None.")
      .def_property_readonly("held", [](const PyLock& l) { return l.token().has_value(); })
      .def_property_readonly("name", &PyLock::name)
      .def("__enter__",
           [](py::object self) {
             self.cast<PyLock&>().Acquire(std::nullopt);
             return self;
           })
      .def("__exit__", [](PyLock& l, py::object, py::object, py::object) {
        l.Release();
        return false;
      });

  py::class_<PyList>(m, "List", R"(The linked-list service: named lists of ints and bytes.

List(client, mode="active"); values are int (64-bit) or bytes (str is stored as UTF-8 bytes).)")
      .def(py::init<std::shared_ptr<PyClient>, const std::string&>(), py::arg("client"),
           py::arg("mode") = "active")
      .def_property_readonly("mode", [](const PyList& l) { return ModeOf(l.service.mode()); })
      .def(
          "append",
          [](PyList& l, std::string list, const PyListValue& value) {
            list::ListValue v = ToListValue(value);
            Unlocked([&] { return l.service.Append(list, v); });
          },
          py::arg("list"), py::arg("value"))
      .def(
          "prepend",
          [](PyList& l, std::string list, const PyListValue& value) {
            list::ListValue v = ToListValue(value);
            Unlocked([&] { return l.service.Prepend(list, v); });
          },
          py::arg("list"), py::arg("value"))
      .def(
          "get",
          [](PyList& l, std::string list, uint64_t index) {
            return FromListValue(Unlocked([&] { return l.service.Get(list, index); }));
          },
          py::arg("list"), py::arg("index"), "The value at index; OutOfRangeError past the end.")
      .def(
          "remove",
          [](PyList& l, std::string list, uint64_t index) {
            return FromListValue(Unlocked([&] { return l.service.Remove(list, index); }));
          },
          py::arg("list"), py::arg("index"), "Removes and returns the value at index.")
      .def(
          "size",
          [](PyList& l, std::string list) {
            return Unlocked([&] { return l.service.Size(list); });
          },
          py::arg("list"))
      .def(
          "items",
          [](PyList& l, std::string list) {
            std::vector<list::ListValue> values = Unlocked([&] { return l.service.ReadAll(list); });
            py::list out;
            for (const list::ListValue& v : values) out.append(FromListValue(v));
            return out;
          },
          py::arg("list"), "Every value, in order.");

  m.def(
      "_time_dht_get",
      [](PyDht& d, std::string table, Bytes key, uint64_t n) {
        return Unlocked([&]() -> absl::StatusOr<double> {
          absl::Time start = absl::Now();
          for (uint64_t i = 0; i < n; ++i) {
            absl::StatusOr<std::string> value = d.service.Get(table, key.value);
            if (!value.ok()) return value.status();
          }
          return absl::ToDoubleSeconds(absl::Now() - start);
        });
      },
      py::arg("dht"), py::arg("table"), py::arg("key"), py::arg("n"),
      "For bench/python_bench.py: n Dht.get calls in a C++ loop (the C++ call without the "
      "binding); the seconds they took.");

  m.def("least_loaded", &LeastLoaded, py::arg("addresses"), py::kw_only(),
        py::arg("scheme") = "rdma-sync", py::arg("interval") = 0.1,
        R"(The least loaded of `addresses` by the load monitor: each polled twice, `interval`
seconds apart, by `scheme` ("rdma-sync", "rdma-async", "socket-sync", "socket-async"); an address
that cannot be polled is never chosen. FailedPreconditionError if none could be.)");
}

}  // namespace ardma::python
