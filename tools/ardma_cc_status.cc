// `ardma cc status`: the compile farm's queue and slaves (services/cc), for people at a shell.
#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/status_macros.h"
#include "services/cc/cc_client.h"
#include "tools/ardma_cli.h"

namespace ardma::cli {
namespace {

std::string Ago(uint64_t then_us, uint64_t now_us) {
  if (then_us == 0) return "-";
  double s = now_us > then_us ? static_cast<double>(now_us - then_us) / 1e6 : 0.0;
  return absl::StrFormat("%.1fs", s);
}

}  // namespace

absl::Status RunCcCommand(const Options& opt, const std::vector<std::string>& args) {
  if (args.size() != 2 || args[1] != "status") return Usage("usage: ardma cc status");
  ClientOptions client_options;
  client_options.connect_attempts = 2;
  ARDMA_ASSIGN_OR_RETURN(auto client, Client::Connect(opt.server, client_options));
  ARDMA_ASSIGN_OR_RETURN(cc::FarmStatus st, cc::CcClient(client.get()).Status());
  uint64_t now = static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()));
  std::cout << absl::StrFormat(
      "jobs: %d queued, %d running; %d submitted, %d finished, %d failed on a slave, %d given "
      "back, %d withdrawn, %d refused (queue full)\n",
      st.queued, st.running, st.submitted, st.finished, st.failed, st.requeued, st.cancelled,
      st.rejected);
  if (!st.slaves.empty()) {
    std::cout << absl::StrFormat("%-40s %7s %9s  %s\n", "SLAVE", "RUNNING", "DONE", "LAST SEEN");
    for (const cc::SlaveRow& r : st.slaves) {
      std::cout << absl::StrFormat("%-40s %7d %9d  %s ago\n", r.name, r.running, r.done,
                                   Ago(r.seen_us, now));
    }
  }
  if (!st.jobs.empty()) {
    std::cout << absl::StrFormat("%-16s  %-7s  %-40s %s\n", "JOB", "STATE", "SLAVE", "AGE");
    for (const cc::RunningJob& j : st.jobs) {
      std::cout << absl::StrFormat("%016x  %-7s  %-40s %s\n", j.id,
                                   j.slave.empty() ? "queued" : "running",
                                   j.slave.empty() ? "-" : j.slave, Ago(j.submitted_us, now));
    }
  }
  return absl::OkStatus();
}

}  // namespace ardma::cli
