#include "python/src/errors.h"

#include <array>
#include <string>

namespace ardma::python {
namespace {

struct ErrorClass {
  absl::StatusCode code;
  const char* name;   // the Python class, in module ardma
  PyObject* also_is;  // a built-in exception it also derives from (or nullptr)
  const char* doc;
};

// Filled by BindErrors: the class of each status code (indexed by its number), and the base.
PyObject* base_error = nullptr;
std::array<PyObject*, 17> error_by_code{};

}  // namespace

void BindErrors(py::module_& m) {
  base_error = PyErr_NewExceptionWithDoc(
      "ardma.Error",
      "Every error the server or the client reports: an absl status code (its class, and the "
      "`code` attribute: \"NOT_FOUND\", ...) and its message (str(error)).",
      PyExc_Exception, nullptr);
  if (base_error == nullptr) throw py::error_already_set();
  m.add_object("Error", py::handle(base_error));
  const ErrorClass classes[] = {
      {absl::StatusCode::kCancelled, "CancelledError", nullptr, "The call was cancelled."},
      {absl::StatusCode::kUnknown, "UnknownError", nullptr, "An error without a better code."},
      {absl::StatusCode::kInvalidArgument, "InvalidArgumentError", PyExc_ValueError,
       "A bad argument (also a ValueError)."},
      {absl::StatusCode::kDeadlineExceeded, "DeadlineExceededError", PyExc_TimeoutError,
       "The call's deadline passed (also a TimeoutError)."},
      {absl::StatusCode::kNotFound, "NotFoundError", PyExc_LookupError,
       "No such key, table, lock, file or code (also a LookupError)."},
      {absl::StatusCode::kAlreadyExists, "AlreadyExistsError", nullptr, "It exists already."},
      {absl::StatusCode::kPermissionDenied, "PermissionDeniedError", nullptr,
       "The authenticated name lacks the permission (docs/SECURITY.md)."},
      {absl::StatusCode::kResourceExhausted, "ResourceExhaustedError", nullptr,
       "Out of heap, slots or a limit."},
      {absl::StatusCode::kFailedPrecondition, "FailedPreconditionError", nullptr,
       "Not possible in the current state."},
      {absl::StatusCode::kAborted, "AbortedError", nullptr, "Aborted (a conflict); try again."},
      {absl::StatusCode::kOutOfRange, "OutOfRangeError", PyExc_IndexError,
       "Past the end (also an IndexError)."},
      {absl::StatusCode::kUnimplemented, "UnimplementedError", nullptr, "Not supported."},
      {absl::StatusCode::kInternal, "InternalError", nullptr, "A broken invariant."},
      {absl::StatusCode::kUnavailable, "UnavailableError", PyExc_ConnectionError,
       "The server cannot be reached (also a ConnectionError)."},
      {absl::StatusCode::kDataLoss, "DataLossError", nullptr, "Data was lost or corrupted."},
      {absl::StatusCode::kUnauthenticated, "UnauthenticatedError", nullptr,
       "The server requires authentication (an auth file)."},
  };
  for (const ErrorClass& c : classes) {
    py::tuple bases = c.also_is == nullptr
                          ? py::make_tuple(py::handle(base_error))
                          : py::make_tuple(py::handle(base_error), py::handle(c.also_is));
    py::dict attributes;
    attributes["code"] = py::str(absl::StatusCodeToString(c.code));
    PyObject* cls = PyErr_NewExceptionWithDoc((std::string("ardma.") + c.name).c_str(), c.doc,
                                              bases.ptr(), attributes.ptr());
    if (cls == nullptr) throw py::error_already_set();
    m.add_object(c.name, py::handle(cls));
    error_by_code[static_cast<size_t>(c.code)] = cls;
  }
}

void Check(const absl::Status& status) {
  if (status.ok()) return;
  size_t code = static_cast<size_t>(status.code());
  PyObject* cls = code < error_by_code.size() && error_by_code[code] != nullptr
                      ? error_by_code[code]
                      : base_error;
  PyErr_SetString(cls, std::string(status.message()).c_str());
  throw py::error_already_set();
}

}  // namespace ardma::python
