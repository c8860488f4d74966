#include "core/client/invoke.h"

#include "absl/strings/str_cat.h"
#include "core/client/remote_context.h"
#include "core/status_macros.h"

namespace ardma {
namespace {

// The library (this one or a dependency) whose own table exports `function`.
const ActiveLibrary* Owner(const ActiveLibrary& library, std::string_view function) {
  if (library.table().Find(function) != nullptr) return &library;
  for (const ActiveLibrary* dep : library.deps()) {
    if (const ActiveLibrary* owner = Owner(*dep, function)) return owner;
  }
  return nullptr;
}

}  // namespace

const char* ModeName(Mode mode) { return mode == Mode::kActive ? "active" : "rdma"; }

absl::StatusOr<Mode> ParseMode(std::string_view text) {
  if (text == "active") return Mode::kActive;
  if (text == "rdma") return Mode::kRdma;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", ToAbsl(text), "' (expected active or rdma)"));
}

absl::Status EnsureLoaded(Client& client, const ActiveLibrary& library) {
  for (const ActiveLibrary* dep : library.deps()) ARDMA_RETURN_IF_ERROR(EnsureLoaded(client, *dep));
  if (client.KnownLoaded(library.hash())) return absl::OkStatus();
  ARDMA_ASSIGN_OR_RETURN(bool present, client.HasCode(library.hash()));
  if (!present) {
    // With the versions it was built against: its calls of them resolve to exactly these.
    std::vector<wire::CodeHash> deps;
    for (const ActiveLibrary* dep : library.deps()) deps.push_back(dep->hash());
    ARDMA_ASSIGN_OR_RETURN(
        wire::CodeHash hash,
        client.Load(library.kind(), library.name(), library.code(), {}, std::move(deps)));
    if (hash != library.hash()) return absl::DataLossError("server hashed the code differently");
  }
  client.MarkLoaded(library.hash());
  return absl::OkStatus();
}

absl::StatusOr<std::string> Invoke(Client& client, Mode mode, const ActiveLibrary& library,
                                   std::string_view function, std::string_view args,
                                   const CallOptions& options) {
  const ActiveLibrary* owner = Owner(library, function);
  if (owner == nullptr) {
    return absl::NotFoundError(absl::StrCat("library '", ToAbsl(library.name()),
                                            "' does not export '", ToAbsl(function), "'"));
  }
  if (mode == Mode::kRdma) {
    RemoteContext ctx(&client, {&library}, options);
    return owner->table().Find(function)(ctx, args);
  }
  ARDMA_RETURN_IF_ERROR(EnsureLoaded(client, library));
  absl::StatusOr<std::string> result = client.Execute(owner->hash(), function, args, options);
  if (result.status().code() == absl::StatusCode::kNotFound && !client.KnownLoaded(owner->hash())) {
    // The connection was re-established meanwhile (e.g. a restarted server): ship and retry once.
    ARDMA_RETURN_IF_ERROR(EnsureLoaded(client, library));
    result = client.Execute(owner->hash(), function, args, options);
  }
  return result;
}

std::future<absl::StatusOr<std::string>> InvokeAsync(Client& client, Mode mode,
                                                     const ActiveLibrary& library,
                                                     std::string function, std::string args,
                                                     const CallOptions& options) {
  const ActiveLibrary* owner = Owner(library, function);
  if (owner == nullptr || mode == Mode::kRdma) {
    return std::async(std::launch::async, [&client, mode, &library, function, args, options] {
      return Invoke(client, mode, library, function, args, options);
    });
  }
  if (absl::Status loaded = EnsureLoaded(client, library); !loaded.ok()) {
    std::promise<absl::StatusOr<std::string>> failed;
    failed.set_value(loaded);
    return failed.get_future();
  }
  std::future<absl::StatusOr<std::string>> sent =
      client.ExecuteAsync(owner->hash(), function, args, options);
  return std::async(std::launch::deferred, [&client, mode, &library, owner,
                                            function = std::move(function),
                                            args = std::move(args), options,
                                            sent = std::move(sent)]() mutable {
    absl::StatusOr<std::string> result = sent.get();
    // The connection broke (an asynchronous call is not retried), or was re-established and the
    // server lost the library: as Invoke would, once more, waiting.
    if (absl::IsUnavailable(result.status()) ||
        (absl::IsNotFound(result.status()) && !client.KnownLoaded(owner->hash()))) {
      return Invoke(client, mode, library, function, args, options);
    }
    return result;
  });
}

}  // namespace ardma
