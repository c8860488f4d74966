// The file system's Python class (python/ardma): Dfs over one server's Client.
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "python/src/bytes_arg.h"
#include "python/src/client.h"
#include "python/src/errors.h"
#include "python/src/services.h"
#include "services/dfs/dfs_client.h"

namespace ardma::python {
namespace {

struct PyDfs {
  PyDfs(std::shared_ptr<PyClient> c, const std::string& fs, const std::string& mode)
      : client(std::move(c)), dfs(&client->Single("Dfs"), ModeFromString(mode), fs) {}
  std::shared_ptr<PyClient> client;
  dfs::DfsClient dfs;
};

// A file's or directory's attributes, as os.stat_result names them where they match.
struct PyStat {
  uint64_t ino = 0;
  std::string type;  // "file", "directory" or "symlink"
  uint64_t size = 0;
  uint32_t mode = 0;
  double mtime = 0, ctime = 0;
};

std::string TypeName(dfs::FileType type) {
  switch (type) {
    case dfs::FileType::kDirectory:
      return "directory";
    case dfs::FileType::kSymlink:
      return "symlink";
    case dfs::FileType::kFile:
      break;
  }
  return "file";
}

// From a dfs::Stat, or a dfs::DirEntry (which carries the same attributes).
template <typename Attributes>
PyStat ToPyStat(const Attributes& a) {
  return {a.ino,
          TypeName(a.type),
          a.size,
          a.mode,
          absl::ToDoubleSeconds(a.mtime - absl::UnixEpoch()),
          absl::ToDoubleSeconds(a.ctime - absl::UnixEpoch())};
}

}  // namespace

void BindDfs(py::module_& m) {
  py::class_<PyStat>(m, "Stat", "A file's attributes: ino, type, size, mode, mtime, ctime.")
      .def_readonly("ino", &PyStat::ino)
      .def_readonly("type", &PyStat::type, "\"file\", \"directory\" or \"symlink\"")
      .def_readonly("size", &PyStat::size, "bytes; for a directory, its number of entries")
      .def_readonly("mode", &PyStat::mode, "permission bits")
      .def_readonly("mtime", &PyStat::mtime, "seconds since the epoch")
      .def_readonly("ctime", &PyStat::ctime)
      .def("is_dir", [](const PyStat& s) { return s.type == "directory"; })
      .def("is_file", [](const PyStat& s) { return s.type == "file"; })
      .def("__repr__", [](const PyStat& s) {
        return "ardma.Stat(type='" + s.type + "', size=" + std::to_string(s.size) + ")";
      });

  py::class_<PyDfs>(m, "_Dfs")
      .def(py::init<std::shared_ptr<PyClient>, const std::string&, const std::string&>(),
           py::arg("client"), py::arg("fs") = "default", py::arg("mode") = "active")
      .def_property_readonly("fs", [](const PyDfs& d) { return d.dfs.fs(); })
      .def_property_readonly("mode",
                             [](const PyDfs& d) { return std::string(ModeName(d.dfs.mode())); })
      .def(
          "mkdir",
          [](PyDfs& d, std::string path, uint32_t mode) {
            return ToPyStat(Unlocked([&] { return d.dfs.Mkdir(path, mode); }));
          },
          py::arg("path"), py::arg("mode") = 0755)
      .def(
          "stat",
          [](PyDfs& d, std::string path) {
            return ToPyStat(Unlocked([&] { return d.dfs.Lookup(path); }));
          },
          py::arg("path"))
      .def(
          "scandir",
          [](PyDfs& d, std::string path) {
            std::vector<dfs::DirEntry> entries = Unlocked([&] { return d.dfs.ListDir(path); });
            std::vector<std::pair<std::string, PyStat>> out;
            out.reserve(entries.size());
            for (const dfs::DirEntry& e : entries) out.emplace_back(e.name, ToPyStat(e));
            return out;
          },
          py::arg("path"))
      .def(
          "read_file",
          [](PyDfs& d, std::string path) {
            return py::bytes(Unlocked([&] { return d.dfs.ReadFile(path); }));
          },
          py::arg("path"))
      .def(
          "write_file",
          [](PyDfs& d, std::string path, Bytes data, uint32_t mode) {
            Unlocked([&] { return d.dfs.WriteFile(path, data.value, mode); });
          },
          py::arg("path"), py::arg("data"), py::arg("mode") = 0644)
      .def(
          "pread",
          [](PyDfs& d, std::string path, uint64_t offset, uint64_t length) {
            return py::bytes(Unlocked([&] { return d.dfs.Read(path, offset, length); }));
          },
          py::arg("path"), py::arg("offset"), py::arg("length"))
      .def(
          "pwrite",
          [](PyDfs& d, std::string path, uint64_t offset, Bytes data) {
            return Unlocked([&] { return d.dfs.Write(path, offset, data.value); });
          },
          py::arg("path"), py::arg("offset"), py::arg("data"),
          "Writes data at offset (a hole if past the end); returns the file's new size.")
      .def(
          "create",
          [](PyDfs& d, std::string path, uint32_t mode, bool exclusive) {
            return ToPyStat(Unlocked([&] { return d.dfs.Create(path, mode, exclusive); }));
          },
          py::arg("path"), py::arg("mode") = 0644, py::arg("exclusive") = true)
      .def(
          "truncate",
          [](PyDfs& d, std::string path, uint64_t length) {
            Unlocked([&] { return d.dfs.Truncate(path, length); });
          },
          py::arg("path"), py::arg("length"))
      .def(
          "unlink",
          [](PyDfs& d, std::string path) { Unlocked([&] { return d.dfs.Unlink(path); }); },
          py::arg("path"))
      .def(
          "rmdir", [](PyDfs& d, std::string path) { Unlocked([&] { return d.dfs.Rmdir(path); }); },
          py::arg("path"))
      .def(
          "rename",
          [](PyDfs& d, std::string from, std::string to) {
            Unlocked([&] { return d.dfs.Rename(from, to); });
          },
          py::arg("src"), py::arg("dst"))
      .def(
          "symlink",
          [](PyDfs& d, std::string target, std::string path) {
            return ToPyStat(Unlocked([&] { return d.dfs.Symlink(target, path); }));
          },
          py::arg("target"), py::arg("path"))
      .def(
          "readlink",
          [](PyDfs& d, std::string path) { return Unlocked([&] { return d.dfs.Readlink(path); }); },
          py::arg("path"));
}

}  // namespace ardma::python
