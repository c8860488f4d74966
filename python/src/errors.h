// The Python side of absl::Status (python/ardma): ardma.Error and one subclass per status code
// (ardma.NotFoundError, ardma.UnavailableError, ...), and the helpers every binding uses to run a
// C++ call with the GIL released and raise what it returns.
#ifndef ARDMA_PYTHON_SRC_ERRORS_H_
#define ARDMA_PYTHON_SRC_ERRORS_H_

#include <pybind11/pybind11.h>

#include <optional>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ardma::python {

namespace py = pybind11;

// Adds Error and its subclasses to `m`.
void BindErrors(py::module_& m);

// Raises the exception of a status that is not OK (with the GIL held).
void Check(const absl::Status& status);

template <typename T>
T Take(absl::StatusOr<T> value) {
  Check(value.status());
  return *std::move(value);
}

// Runs `call` (returning absl::Status or absl::StatusOr<T>) with the GIL released, so other Python
// threads run while it waits on the network; then raises its error or returns its value. `call`
// must not touch Python objects.
template <typename Call>
auto Unlocked(Call&& call) {
  using Result = std::invoke_result_t<Call>;
  std::optional<Result> result;
  {
    py::gil_scoped_release release;
    result.emplace(call());
  }
  if constexpr (std::is_same_v<Result, absl::Status>) {
    Check(*result);
  } else {
    return Take(std::move(*result));
  }
}

}  // namespace ardma::python

#endif  // ARDMA_PYTHON_SRC_ERRORS_H_
