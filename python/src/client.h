// The Python Client (python/ardma): one server's or a cluster's address, connected once; every
// service object (Dht, Lock, ...) shares it. Thread-safe as the C++ Client is.
#ifndef ARDMA_PYTHON_SRC_CLIENT_H_
#define ARDMA_PYTHON_SRC_CLIENT_H_

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/client/servers.h"

namespace ardma::python {

namespace py = pybind11;

struct PyClient {
  std::string address;
  std::unique_ptr<Servers> servers;
  Client* one = nullptr;  // the server, when `address` is one server's (not a cluster's)

  // The one server; FAILED_PRECONDITION (raised) for a cluster.
  Client& Single(const char* what) const;
};

// "active" or "rdma"; raises InvalidArgumentError otherwise.
Mode ModeFromString(const std::string& mode);

void BindClient(py::module_& m);

}  // namespace ardma::python

#endif  // ARDMA_PYTHON_SRC_CLIENT_H_
