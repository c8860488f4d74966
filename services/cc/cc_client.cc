#include "services/cc/cc_client.h"

#include "core/client/invoke.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"

namespace ardma::cc {

using wire::ByteReader;
using wire::ByteWriter;

absl::StatusOr<std::string> CcClient::Run(std::string_view function, std::string_view args,
                                          absl::Duration timeout) {
  ARDMA_RETURN_IF_ERROR(EnsureLoaded(*client_, active_libraries::cc()));
  CallOptions options;
  // The server answers at `timeout` (a parked request gets DEADLINE_EXCEEDED); the client listens
  // a little longer, so that no job is handed to a call nobody waits for.
  options.server_deadline = timeout;
  options.timeout = timeout + absl::Seconds(5);
  return client_->Execute(function, args, options);
}

absl::StatusOr<std::string> CcClient::Submit(uint64_t id, std::string_view descriptor,
                                             absl::Duration timeout) {
  std::string args;
  ByteWriter w(&args);
  w.U64(id);
  w.Bytes32(descriptor);
  absl::StatusOr<std::string> result = Run("cc.submit", args, timeout);
  if (!result.ok() && result.status().code() == absl::StatusCode::kDeadlineExceeded) {
    Cancel(id).IgnoreError();  // nobody will wait for it now
  }
  return result;
}

absl::StatusOr<std::optional<Job>> CcClient::Take(std::string_view slave, absl::Duration wait) {
  std::string args;
  ByteWriter(&args).Str16(slave);
  absl::StatusOr<std::string> answer = Run("cc.take", args, wait);
  if (!answer.ok()) {
    if (answer.status().code() == absl::StatusCode::kDeadlineExceeded) {
      return std::optional<Job>();
    }
    return answer.status();
  }
  ByteReader r(*answer);
  Job job;
  std::string_view descriptor;
  if (!r.U64(&job.id) || !r.Bytes32(&descriptor) || !r.AtEnd()) {
    return absl::DataLossError("cc.take: malformed answer");
  }
  job.descriptor = std::string(descriptor);
  return std::optional<Job>(std::move(job));
}

absl::StatusOr<bool> CcClient::Finish(uint64_t id, std::string_view slave, bool failed,
                                      std::string_view result) {
  std::string args;
  ByteWriter w(&args);
  w.U64(id);
  w.Str16(slave);
  w.U8(failed ? 1 : 0);
  w.Bytes32(result);
  ARDMA_ASSIGN_OR_RETURN(std::string r, Run("cc.finish", args, absl::Seconds(30)));
  return r == std::string(1, '\1');
}

absl::Status CcClient::Cancel(uint64_t id) {
  std::string args;
  ByteWriter(&args).U64(id);
  return Run("cc.cancel", args, absl::Seconds(10)).status();
}

absl::StatusOr<FarmStatus> CcClient::Status() {
  ARDMA_ASSIGN_OR_RETURN(std::string r, Run("cc.status", "", absl::Seconds(10)));
  return DecodeStatus(r);
}

}  // namespace ardma::cc
