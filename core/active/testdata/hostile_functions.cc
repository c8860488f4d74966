// The "hostile" active-code library: each function tries one thing shipped code must not do in
// an isolated worker (docs/SECURITY.md, "Isolated workers"). Tests only: outside a sandbox these
// would do what they say. Each answers "" if the attempt returned at all; a refused attempt that
// returns is an error naming the call and errno.
//   hostile.open_shadow  ()          open("/etc/shadow") (openat), then read it
//   hostile.raw_open     ()          the open(2) system call itself
//   hostile.socket       ()          socket(AF_INET, SOCK_STREAM)
//   hostile.connect      ()          connect(0, 127.0.0.1:9): the call, whatever fd 0 is
//   hostile.execve       ()          execve("/bin/sh", {"sh", "-c", "true"})
//   hostile.fork         ()          fork()
//   hostile.ptrace       ()          ptrace(PTRACE_ATTACH, parent)
//   hostile.kill_parent  ()          kill(parent, SIGKILL)
//   hostile.write_view   addr:u64    writes one byte at addr through a View of the heap
//   hostile.leak         ()          memfd_create, then an answer: leaves a descriptor open
//   hostile.allocate     bytes:u64   mallocs and touches them; RESOURCE_EXHAUSTED if malloc fails
//   hostile.map_heap     fd:u64      maps fd (an isolated worker's heap is fd 4) shared and
//                                    writable, and flips its first data byte
//   hostile.reopen_heap  fd:u64      opens /proc/self/fd/FD for writing, writes a byte at 64 KiB
//   hostile.hang_up      ()          closes every descriptor from 3 up (a worker's channel to the
//                                    server among them), then loops for ever
//   hostile.call         name\0args  Call(name, args): code outside its library, by name
// Its module's constructor (hostile_ctor in the library name) is harmless here; the
// "hostile_ctor" library's constructor makes a socket (hostile_ctor_functions.cc).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/active/function_table.h"

namespace {

using ardma::Context;

absl::StatusOr<std::string> Refused(const char* call) {
  return absl::PermissionDeniedError(absl::StrCat(call, ": ", std::strerror(errno)));
}

absl::StatusOr<std::string> OpenShadow(Context&, std::string_view) {
  int fd = ::open("/etc/shadow", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Refused("open /etc/shadow");
  char buf[16];
  ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n < 0) return Refused("read /etc/shadow");
  return std::string(buf, static_cast<size_t>(n));
}

absl::StatusOr<std::string> RawOpen(Context&, std::string_view) {
#ifdef SYS_open
  long fd = ::syscall(SYS_open, "/etc/hostname", O_RDONLY);
  if (fd < 0) return Refused("open");
  ::close(static_cast<int>(fd));
  return std::string();
#else
  return absl::UnimplementedError("no open(2) on this architecture");
#endif
}

absl::StatusOr<std::string> Socket(Context&, std::string_view) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Refused("socket");
  ::close(fd);
  return std::string();
}

absl::StatusOr<std::string> Connect(Context&, std::string_view) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(0, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) return Refused("connect");
  return std::string();
}

absl::StatusOr<std::string> Execve(Context&, std::string_view) {
  char sh[] = "sh", c[] = "-c", cmd[] = "true";
  char* argv[] = {sh, c, cmd, nullptr};
  char* envp[] = {nullptr};
  ::execve("/bin/sh", argv, envp);
  return Refused("execve");
}

absl::StatusOr<std::string> Fork(Context&, std::string_view) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  if (pid < 0) return Refused("fork");
  return std::string();
}

absl::StatusOr<std::string> Ptrace(Context&, std::string_view) {
  if (::ptrace(PTRACE_ATTACH, ::getppid(), nullptr, nullptr) != 0) return Refused("ptrace");
  return std::string();
}

absl::StatusOr<std::string> KillParent(Context&, std::string_view) {
  if (::kill(::getppid(), SIGKILL) != 0) return Refused("kill");
  return std::string();
}

absl::StatusOr<std::string> WriteView(Context& ctx, std::string_view args) {
  if (args.size() < 8) return absl::InvalidArgumentError("expected an address");
  uint64_t addr;
  std::memcpy(&addr, args.data(), 8);
  absl::StatusOr<std::string_view> view = ctx.View(addr, 1);
  if (!view.ok()) return view.status();
  *const_cast<char*>(view->data()) ^= 1;  // through the pointer, not ctx.Write
  return std::string();
}

absl::StatusOr<std::string> Leak(Context&, std::string_view) {
  if (::memfd_create("hostile-leak", 0) < 0) return Refused("memfd_create");
  return std::string();
}

absl::StatusOr<std::string> Allocate(Context&, std::string_view args) {
  if (args.size() < 8) return absl::InvalidArgumentError("expected a size");
  uint64_t bytes;
  std::memcpy(&bytes, args.data(), 8);
  char* p = static_cast<char*>(std::malloc(bytes));
  if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("malloc of ", bytes));
  for (uint64_t i = 0; i < bytes; i += 4096) p[i] = 1;
  std::free(p);
  return std::string();
}

uint64_t FdArg(std::string_view args) {
  uint64_t fd = 4;
  if (args.size() >= 8) std::memcpy(&fd, args.data(), 8);
  return fd;
}

absl::StatusOr<std::string> MapHeap(Context&, std::string_view args) {
  int fd = static_cast<int>(FdArg(args));
  void* p = ::mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Refused("mmap");
  static_cast<char*>(p)[65536] ^= 1;
  ::munmap(p, 1 << 20);
  return std::string();
}

absl::StatusOr<std::string> ReopenHeap(Context&, std::string_view args) {
  std::string path = absl::StrCat("/proc/self/fd/", FdArg(args));
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Refused("open for writing");
  char byte = 1;
  ssize_t n = ::pwrite(fd, &byte, 1, 65536);
  ::close(fd);
  if (n != 1) return Refused("pwrite");
  return std::string();
}

absl::StatusOr<std::string> HangUp(Context&, std::string_view) {
  for (int fd = 3; fd < 64; ++fd) ::close(fd);
  for (;;) asm volatile("" ::: "memory");  // a loop the compiler keeps
}

absl::StatusOr<std::string> CallByName(Context& ctx, std::string_view args) {
  size_t end = args.find('\0');
  if (end == std::string_view::npos) return absl::InvalidArgumentError("want name\\0args");
  return ctx.Call(args.substr(0, end), args.substr(end + 1));
}

}  // namespace

ARDMA_ACTIVE_LIBRARY(hostile, {"hostile.open_shadow", &OpenShadow}, {"hostile.raw_open", &RawOpen},
                     {"hostile.socket", &Socket}, {"hostile.connect", &Connect},
                     {"hostile.execve", &Execve}, {"hostile.fork", &Fork},
                     {"hostile.ptrace", &Ptrace}, {"hostile.kill_parent", &KillParent},
                     {"hostile.write_view", &WriteView}, {"hostile.leak", &Leak},
                     {"hostile.allocate", &Allocate}, {"hostile.hang_up", &HangUp},
                     {"hostile.map_heap", &MapHeap}, {"hostile.reopen_heap", &ReopenHeap},
                     {"hostile.call", &CallByName});
