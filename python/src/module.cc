// ardma._ardma: the Python extension over the C++ clients (python/ardma wraps it).
#include <pybind11/pybind11.h>

#include "core/version.h"
#include "python/src/client.h"
#include "python/src/errors.h"
#include "python/src/services.h"

PYBIND11_MODULE(_ardma, m) {
  m.doc() = "The Active RDMA toolkit's clients (import ardma, not this module).";
  ardma::python::BindErrors(m);
  ardma::python::BindClient(m);
  ardma::python::BindServices(m);
  ardma::python::BindDfs(m);
  m.attr("__version__") = ardma::ProjectVersion();
}
