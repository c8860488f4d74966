#include "apps/find/find_cli.h"

#include <cctype>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/client/client.h"
#include "core/status_macros.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(find);

namespace ardma::find {

const char kUsage[] =
    "Usage: ardma-find [--server=HOST:PORT] [--auth-file=FILE] [--fs=NAME] [--mode=active|rdma] dfs:/PATH... "
    "[EXPRESSION]\n"
    "Walk directory trees of an ardmad's file system on the server, as GNU find does.\n"
    "\n"
    "Tests: -name GLOB, -iname GLOB, -path GLOB, -type f|d, -size [+-]N[cwbkMG], -mtime [+-]N,\n"
    "       -mmin [+-]N, -newer dfs:/FILE, -empty, -true, -false\n"
    "Actions: -print, -print0 (without an action, matches are printed)\n"
    "Operators: ( EXPR ), ! EXPR, -not EXPR, EXPR -a EXPR, EXPR -and EXPR, EXPR EXPR,\n"
    "           EXPR -o EXPR, EXPR -or EXPR\n"
    "Options: -maxdepth N, -mindepth N\n"
    "\n"
    "Entries are visited depth first, a directory before its contents, and a directory's entries\n"
    "in creation order (a removal moves the newest entry into the gap). A directory's size is its\n"
    "number of entries. --server defaults to $ARDMA_SERVER, then 127.0.0.1:15712. --help shows\n"
    "this, --version the version and commit.\n"
    "Exit status: 0 if all starting points were walked, 1 on any error.";

namespace {

class Parser {
 public:
  Parser(std::vector<std::string> tokens, dfs::DfsClient* fs) : t_(std::move(tokens)), fs_(fs) {}

  absl::StatusOr<std::unique_ptr<Expr>> Parse() {
    if (t_.empty()) return Leaf(Op::kTrue);
    auto e = Or();
    if (!e.ok()) return e;
    if (i_ < t_.size()) {
      return absl::InvalidArgumentError(
          t_[i_] == ")" ? "unexpected ')'" : absl::StrCat("unexpected argument '", t_[i_], "'"));
    }
    return e;
  }
  bool has_action() const { return has_action_; }
  uint32_t min_depth = 0, max_depth = UINT32_MAX;

 private:
  static std::unique_ptr<Expr> Leaf(Op op) {
    auto e = std::make_unique<Expr>();
    e->op = op;
    return e;
  }
  static std::unique_ptr<Expr> Node(Op op, std::unique_ptr<Expr> a, std::unique_ptr<Expr> b) {
    auto e = Leaf(op);
    e->kids.push_back(std::move(a));
    if (b) e->kids.push_back(std::move(b));
    return e;
  }
  bool At(std::initializer_list<const char*> words) const {
    if (i_ >= t_.size()) return false;
    for (const char* w : words) {
      if (t_[i_] == w) return true;
    }
    return false;
  }

  absl::StatusOr<std::unique_ptr<Expr>> Or() {
    ARDMA_ASSIGN_OR_RETURN(auto left, And());
    while (At({"-o", "-or"})) {
      ++i_;
      ARDMA_ASSIGN_OR_RETURN(auto right, And());
      left = Node(Op::kOr, std::move(left), std::move(right));
    }
    return left;
  }
  absl::StatusOr<std::unique_ptr<Expr>> And() {
    ARDMA_ASSIGN_OR_RETURN(auto left, Not());
    while (i_ < t_.size() && !At({"-o", "-or", ")"})) {
      if (At({"-a", "-and"})) ++i_;
      ARDMA_ASSIGN_OR_RETURN(auto right, Not());
      left = Node(Op::kAnd, std::move(left), std::move(right));
    }
    return left;
  }
  absl::StatusOr<std::unique_ptr<Expr>> Not() {
    if (At({"!", "-not"})) {
      ++i_;
      ARDMA_ASSIGN_OR_RETURN(auto e, Not());
      return Node(Op::kNot, std::move(e), nullptr);
    }
    return Primary();
  }
  absl::StatusOr<std::string> Arg(const std::string& pred) {
    if (i_ >= t_.size())
      return absl::InvalidArgumentError(absl::StrCat("missing argument to `", pred, "'"));
    return t_[i_++];
  }
  // [+-]N with an optional unit suffix (for -size).
  absl::Status Number(const std::string& pred, const std::string& text, Expr* e, bool units) {
    std::string_view v = text;
    e->cmp = 0;
    if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
      e->cmp = v[0] == '+' ? 1 : -1;
      v.remove_prefix(1);
    }
    e->unit = 1;
    if (units) {
      e->unit = 512;
      if (!v.empty() && !std::isdigit(static_cast<unsigned char>(v.back()))) {
        switch (v.back()) {
          case 'c':
            e->unit = 1;
            break;
          case 'w':
            e->unit = 2;
            break;
          case 'b':
            e->unit = 512;
            break;
          case 'k':
            e->unit = 1024;
            break;
          case 'M':
            e->unit = 1024 * 1024;
            break;
          case 'G':
            e->unit = 1024ull * 1024 * 1024;
            break;
          default:
            return absl::InvalidArgumentError(
                absl::StrCat("invalid -size type `", std::string(1, v.back()), "'"));
        }
        v.remove_suffix(1);
      }
    }
    if (v.empty() || !absl::SimpleAtoi(absl::string_view(v.data(), v.size()), &e->n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid argument `", text, "' to `", pred, "'"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Expr>> Primary() {
    if (i_ >= t_.size()) return absl::InvalidArgumentError("expected an expression");
    std::string tok = t_[i_++];
    if (tok == "(") {
      ARDMA_ASSIGN_OR_RETURN(auto e, Or());
      if (!At({")"})) return absl::InvalidArgumentError("missing ')'");
      ++i_;
      return e;
    }
    if (tok == "-name" || tok == "-iname" || tok == "-path" || tok == "-wholename") {
      ARDMA_ASSIGN_OR_RETURN(std::string glob, Arg(tok));
      auto e = Leaf(tok == "-name" ? Op::kName : tok == "-iname" ? Op::kIname : Op::kPath);
      e->text = glob;
      return e;
    }
    if (tok == "-type") {
      absl::StatusOr<std::string> type = Arg(tok);
      if (!type.ok()) return type.status();
      if (*type != "f" && *type != "d") {
        return absl::InvalidArgumentError(
            absl::StrCat("invalid argument `", *type, "' to `-type'"));
      }
      auto e = Leaf(Op::kType);
      e->type = (*type)[0];
      return e;
    }
    if (tok == "-size" || tok == "-mtime" || tok == "-mmin") {
      ARDMA_ASSIGN_OR_RETURN(std::string arg, Arg(tok));
      auto e = Leaf(tok == "-size" ? Op::kSize : tok == "-mtime" ? Op::kMtime : Op::kMmin);
      ARDMA_RETURN_IF_ERROR(Number(tok, arg, e.get(), tok == "-size"));
      return e;
    }
    if (tok == "-newer") {
      ARDMA_ASSIGN_OR_RETURN(std::string ref, Arg(tok));
      if (ref.rfind("dfs:", 0) != 0) {
        return absl::InvalidArgumentError(absl::StrCat("`", ref, "': -newer takes a dfs:/PATH"));
      }
      auto e = Leaf(Op::kNewer);
      if (fs_ == nullptr) return e;  // checking the syntax only
      absl::StatusOr<dfs::Stat> st = fs_->Lookup(ref.substr(4));
      if (!st.ok())
        return absl::NotFoundError(absl::StrCat("'", ref, "': No such file or directory"));
      e->time = st->mtime;
      return e;
    }
    if (tok == "-maxdepth" || tok == "-mindepth") {
      ARDMA_ASSIGN_OR_RETURN(std::string arg, Arg(tok));
      uint32_t n;
      if (!absl::SimpleAtoi(arg, &n)) {
        return absl::InvalidArgumentError(
            absl::StrCat("invalid argument `", arg, "' to `", tok, "'"));
      }
      (tok == "-maxdepth" ? max_depth : min_depth) = n;
      return Leaf(Op::kTrue);
    }
    if (tok == "-empty") return Leaf(Op::kEmpty);
    if (tok == "-true") return Leaf(Op::kTrue);
    if (tok == "-false") return Leaf(Op::kFalse);
    if (tok == "-print" || tok == "-print0") {
      has_action_ = true;
      return Leaf(tok == "-print" ? Op::kPrint : Op::kPrint0);
    }
    if (!tok.empty() && tok[0] == '-') {
      return absl::InvalidArgumentError(absl::StrCat("unknown predicate `", tok, "'"));
    }
    return absl::InvalidArgumentError(absl::StrCat("paths must precede expression: `", tok, "'"));
  }

  std::vector<std::string> t_;
  size_t i_ = 0;
  bool has_action_ = false;
  dfs::DfsClient* fs_;
};

}  // namespace

absl::StatusOr<Expression> ParseExpression(std::vector<std::string> tokens, dfs::DfsClient* fs) {
  Parser parser(std::move(tokens), fs);
  Expression out;
  ARDMA_ASSIGN_OR_RETURN(out.expr, parser.Parse());
  out.has_action = parser.has_action();
  out.min_depth = parser.min_depth;
  out.max_depth = parser.max_depth;
  return out;
}

absl::StatusOr<Command> ParseCommandLine(int argc, char** argv) {
  Command c;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help") {
      c.help = true;
      return c;
    }
    if (a == "--version") {
      c.version = true;
      return c;
    }
    auto value = [&](const std::string& name) -> std::optional<std::string> {
      if (a.rfind(name + "=", 0) == 0) return a.substr(name.size() + 1);
      if (a == name && i + 1 < argc) return std::string(argv[++i]);
      return std::nullopt;
    };
    if (a.rfind("--auth-file", 0) == 0) {
      auto v = value("--auth-file");
      if (!v) return absl::InvalidArgumentError("--auth-file needs a FILE");
      c.auth_file = *v;
    } else if (a.rfind("--server", 0) == 0) {
      auto v = value("--server");
      if (!v) return absl::InvalidArgumentError("--server needs HOST:PORT");
      c.server = *v;
    } else if (a.rfind("--fs", 0) == 0) {
      auto v = value("--fs");
      if (!v) return absl::InvalidArgumentError("--fs needs a name");
      c.fs = *v;
    } else if (a.rfind("--mode", 0) == 0) {
      auto v = value("--mode");
      absl::StatusOr<Mode> m =
          v ? ParseMode(*v) : absl::InvalidArgumentError("--mode needs a value");
      if (!m.ok()) return m.status();
      c.mode = *m;
    } else {
      break;
    }
  }
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a.empty() || a[0] == '-' || a == "(" || a == "!" || a == ")") break;
    c.roots.push_back(a);
  }
  if (c.roots.empty()) {
    return absl::InvalidArgumentError("no dfs:/PATH starting point (see --help)");
  }
  c.expression.assign(argv + i, argv + argc);
  return c;
}

int RunCommand(const Command& c) {
  // A bad expression is reported before any server is contacted.
  if (absl::StatusOr<Expression> syntax = ParseExpression(c.expression, nullptr); !syntax.ok()) {
    std::cerr << "ardma-find: " << syntax.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<ClientOptions> options = OptionsWithAuthFile(c.auth_file);
  absl::StatusOr<std::unique_ptr<Client>> client =
      options.ok() ? Client::Connect(c.server, *options) : options.status();
  if (!client.ok()) {
    std::cerr << "ardma-find: " << client.status().message() << "\n";
    return 1;
  }
  dfs::DfsClient fs(client->get(), Mode::kActive, c.fs);
  absl::StatusOr<Expression> expr = ParseExpression(c.expression, &fs);
  if (!expr.ok()) {
    std::cerr << "ardma-find: " << expr.status().message() << "\n";
    return 1;
  }
  Request req;
  req.fs = c.fs;
  req.expr = EncodeExpr(*expr->expr);
  req.implicit_print = !expr->has_action;
  req.min_depth = expr->min_depth;
  req.max_depth = expr->max_depth;
  req.now = absl::Now();
  int status = 0;
  for (const std::string& root : c.roots) {
    if (root.rfind("dfs:", 0) != 0) {
      std::cerr << "ardma-find: '" << root << "': not a dfs:/PATH starting point\n";
      status = 1;
      continue;
    }
    req.root = root.substr(4);
    req.display = root;
    req.cursor.clear();
    for (;;) {
      absl::StatusOr<std::string> reply =
          Invoke(**client, c.mode, active_libraries::find(), "find.scan", EncodeRequest(req));
      if (!reply.ok()) {
        if (absl::IsNotFound(reply.status())) {
          std::cerr << "ardma-find: '" << root << "': No such file or directory\n";
        } else if (absl::IsInvalidArgument(reply.status())) {
          std::cerr << "ardma-find: '" << root << "': " << reply.status().message() << "\n";
        } else {
          std::cerr << "ardma-find: " << reply.status().message() << "\n";
        }
        status = 1;
        break;
      }
      absl::StatusOr<Batch> batch = DecodeBatch(*reply);
      if (!batch.ok()) {
        std::cerr << "ardma-find: " << batch.status().message() << "\n";
        return 1;
      }
      for (const auto& m : batch->matches) {
        std::fwrite(m.path.data(), 1, m.path.size(), stdout);
        std::fputc(m.terminator, stdout);
      }
      if (batch->done) break;
      req.cursor = batch->next;
    }
  }
  std::fflush(stdout);
  return status;
}

}  // namespace ardma::find
