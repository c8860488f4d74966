// Bytes: a parameter that takes bytes, bytearray, memoryview or str (as UTF-8), and says so in the
// signature help() shows ("bytes | str"): the keys, values and data of the Python classes.
#ifndef ARDMA_PYTHON_SRC_BYTES_ARG_H_
#define ARDMA_PYTHON_SRC_BYTES_ARG_H_

#include <pybind11/pybind11.h>

#include <string>

namespace ardma::python {

struct Bytes {
  std::string value;
};

}  // namespace ardma::python

namespace pybind11::detail {

template <>
struct type_caster<ardma::python::Bytes> {
  PYBIND11_TYPE_CASTER(ardma::python::Bytes, const_name("bytes | str"));

  bool load(handle source, bool) {
    PyObject* o = source.ptr();
    if (PyBytes_Check(o)) {
      value.value.assign(PyBytes_AS_STRING(o), static_cast<size_t>(PyBytes_GET_SIZE(o)));
      return true;
    }
    if (PyUnicode_Check(o)) {
      Py_ssize_t size = 0;
      const char* data = PyUnicode_AsUTF8AndSize(o, &size);
      if (data == nullptr) {
        PyErr_Clear();
        return false;
      }
      value.value.assign(data, static_cast<size_t>(size));
      return true;
    }
    if (PyObject_CheckBuffer(o)) {  // bytearray, memoryview, ...
      Py_buffer view;
      if (PyObject_GetBuffer(o, &view, PyBUF_SIMPLE) != 0) {
        PyErr_Clear();
        return false;
      }
      value.value.assign(static_cast<const char*>(view.buf), static_cast<size_t>(view.len));
      PyBuffer_Release(&view);
      return true;
    }
    return false;
  }
  static handle cast(const ardma::python::Bytes& b, return_value_policy, handle) {
    return PyBytes_FromStringAndSize(b.value.data(), static_cast<Py_ssize_t>(b.value.size()));
  }
};

}  // namespace pybind11::detail

#endif  // ARDMA_PYTHON_SRC_BYTES_ARG_H_
