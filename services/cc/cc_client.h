// CcClient: the compile farm's job queue from a client (cc_queue.h), always in active mode: each
// call is one EXECUTE. Submit waits (parked on the server) until a slave finishes the job; Take
// waits until there is a job or its timeout passes.
//
//   CcClient farm(client.get());
//   ARDMA_ASSIGN_OR_RETURN(std::string result, farm.Submit(job_id, descriptor, absl::Minutes(5)));
#ifndef ARDMA_SERVICES_CC_CC_CLIENT_H_
#define ARDMA_SERVICES_CC_CC_CLIENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/active/active_library.h"
#include "core/client/client.h"
#include "services/cc/cc_queue.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(cc);

namespace ardma::cc {

class CcClient {
 public:
  explicit CcClient(Client* client) : client_(client) {}

  // Queues the job and waits for its result, at most `timeout` (DEADLINE_EXCEEDED; the job is
  // then withdrawn). An empty result means the job was cancelled.
  absl::StatusOr<std::string> Submit(uint64_t id, std::string_view descriptor,
                                     absl::Duration timeout);
  // The next job, or nullopt if none came within `wait`.
  absl::StatusOr<std::optional<Job>> Take(std::string_view slave, absl::Duration wait);
  // Returns whether the submitter was still waiting.
  absl::StatusOr<bool> Finish(uint64_t id, std::string_view slave, bool failed,
                              std::string_view result);
  absl::Status Cancel(uint64_t id);
  absl::StatusOr<FarmStatus> Status();

 private:
  absl::StatusOr<std::string> Run(std::string_view function, std::string_view args,
                                  absl::Duration timeout);
  Client* const client_;
};

}  // namespace ardma::cc

#endif  // ARDMA_SERVICES_CC_CC_CLIENT_H_
