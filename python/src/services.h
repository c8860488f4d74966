// The services' Python classes (services.cc: Dht, Lock, List, least_loaded; dfs.cc: the file
// system's _Dfs and Stat, which python/ardma/__init__.py wraps as Dfs).
#ifndef ARDMA_PYTHON_SRC_SERVICES_H_
#define ARDMA_PYTHON_SRC_SERVICES_H_

#include <pybind11/pybind11.h>

namespace ardma::python {

void BindServices(pybind11::module_& m);
void BindDfs(pybind11::module_& m);

}  // namespace ardma::python

#endif  // ARDMA_PYTHON_SRC_SERVICES_H_
