// The channel between ardmad and its isolated workers (isolation.h): how a worker is started
// (its environment and descriptors) and the messages it exchanges with the server, in its
// mailbox (isolation_mailbox.h) or on its socket. Internal to the isolation files.
#ifndef ARDMA_CORE_SERVER_ISOLATION_CHANNEL_H_
#define ARDMA_CORE_SERVER_ISOLATION_CHANNEL_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ardma {

// heap size:owner token:owner table:server pid:rw|ro (the heap's mapping):spin ns
constexpr char kWorkerVariable[] = "ARDMA_ISOLATED_WORKER";
// The worker's sandbox::Policy (Encode); absent: it runs unconfined.
constexpr char kSandboxVariable[] = "ARDMA_ISOLATED_SANDBOX";
// The JVM's settings: libjvm, classpath, then each option, separated by kJvmSeparator.
constexpr char kJvmVariable[] = "ARDMA_ISOLATED_JVM";
constexpr char kJvmSeparator = '\x1f';
constexpr int kChannelFd = 3, kHeapFd = 4, kMailboxFd = 5;
// The longest payload of any message.
constexpr size_t kMaxMessage = size_t{1} << 30;

// Messages: type and payload; on the socket len:u32 (type and payload) type:u8 payload. The
// socket carries kReady, the SIGSYS handler's kForbidden and payloads too long for the mailbox.
enum Type : uint8_t {
  // server -> worker
  kLoad = 1,   // hash:u8[32] kind:u8 name:str16 ndeps:u16 dep:u8[32]... code (answer: kReply)
  kExec = 2,   // hash:u8[32] deadline_unix_ns:u64 flags:u8 function:str16 args
  kReply = 3,  // status:u16 payload (the answer to a worker's request, or the worker's to kLoad)
  kReady = 4,  // (worker -> server, once at start)
  // hash:u8[32]: the answer to a kCall of shipped native code, loaded into the worker by kLoads
  // before it (each answered with a kReply): the worker runs the function itself
  kRun = 5,
  // worker -> server
  kDone = 10,     // status:u16 counts:u64[7] flags:u8 payload (result, or the error's message)
  kPark = 11,     // resumable:u8 resume_at_unix_ns:u64 key:str16 resume_args
  kResume = 12,   // key
  kWake = 13,     // key:str16 result
  kOnClose = 14,  // key:str16 function:str16 args
  kCall = 15,     // function:str16 args
  kForbidden = 16,  // nr:u32 (from the SIGSYS handler, as the worker ends: sandbox.h)
};
// kExec's flags: the request is another member's server-to-server call (Context::CalledByPeer).
inline constexpr uint8_t kExecFromPeer = 1;

constexpr uint8_t kRetireFlag = 1;  // kDone's flags: the worker has used half its CPU time

// One message on the channel; false if the peer is gone.
bool SendMessage(int fd, Type type, std::string_view payload);
bool ReceiveMessage(int fd, Type* type, std::string* payload);
// A kReply's payload: the status, then `ok_payload` or the error's message.
std::string ReplyPayload(const absl::Status& status, std::string_view ok_payload);
// The status or payload of a kReply; false if it is malformed.
bool ParseReply(std::string_view reply, absl::StatusOr<std::string>* out);
// The SIGSYS handler's report (sandbox.h) but its last four bytes, the call's number.
std::string ForbiddenReportHead();
// The forbidden call's number, if what a dead worker left on its socket ends with its report.
std::optional<int> ForbiddenReport(std::string_view said);
// Deadlines on the channel (InfiniteFuture as INT64_MAX).
int64_t UnixNanos(absl::Time t);
absl::Time FromUnixNanos(int64_t ns);

// Whether this program can be started as a worker (RunIsolatedWorkerIfAsked ran).
bool CanBeWorker();

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_ISOLATION_CHANNEL_H_
