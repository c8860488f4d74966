#include "apps/find/find_cli.h"

#include <cctype>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "apps/find/find_local.h"
#include "core/client/client.h"
#include "core/cluster/router.h"
#include "core/status_macros.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(find);

namespace ardma::find {

namespace {

constexpr char kUsage[] =
    "Usage: ardma-find [-H] [-L] [-P] [OPTION]... dfs:/PATH... [EXPRESSION]\n"
    "Walk directory trees of an ardmad's file system on the server, as GNU find does. The\n"
    "OPTIONs come first. Symbolic links: -P never follows them (the default), -H follows those\n"
    "given as starting points, -L (or the -follow test) follows all (-type l then matches only\n"
    "dangling links); the last of the three wins.\n";

constexpr char kExpressionHelp[] =
    "Tests: -name GLOB, -iname GLOB, -path GLOB, -ipath GLOB (-wholename, -iwholename),\n"
    "       -regex RE, -iregex RE (the whole path; -regextype emacs|posix-basic|posix-extended|\n"
    "       posix-egrep|posix-awk|grep|egrep|findutils-default), -type f|d|l[,...],\n"
    "       -size [+-]N[cwbkMG], -mtime [+-]N, -mmin [+-]N, -newer dfs:/FILE, -newermt DATE\n"
    "       (@SECONDS or YYYY-MM-DD[ HH:MM[:SS]]), -empty, -true, -false\n"
    "Actions: -print, -print0, -printf FORMAT, -ls, -prune, -delete,\n"
    "         -exec COMMAND ;  -exec COMMAND {} +  -ok COMMAND ;  (-execdir, -okdir: the same)\n"
    "         (without an action, matches are printed). -exec, -ok and -delete run here, on\n"
    "         this machine, with the dfs: paths ({} is the path as printed), as find over NFS\n"
    "         would; the rest is evaluated next to the data.\n"
    "Operators: ( EXPR ), ! EXPR, -not EXPR, EXPR -a EXPR, EXPR -and EXPR, EXPR EXPR,\n"
    "           EXPR -o EXPR, EXPR -or EXPR, EXPR , EXPR\n"
    "Options: -maxdepth N, -mindepth N, -depth (-d), -follow (as -L)\n"
    "\n"
    "Entries are visited depth first, a directory before its contents, and a directory's entries\n"
    "in creation order (a removal moves the newest entry into the gap). A directory's size is its\n"
    "number of entries.\n"
    "Exit status: 0 if all starting points were walked, 1 on any error.";

}  // namespace

std::string Help() {
  Command c;
  FlagSet flags("ardma-find", kUsage);
  c.Declare(flags);
  return flags.GnuHelp(kExpressionHelp);
}

namespace {

// -newermt's argument: @SECONDS[.FRACTION] or an ISO date with an optional time, local time.
absl::StatusOr<absl::Time> ParseDate(const std::string& text) {
  if (!text.empty() && text[0] == '@') {
    double seconds;
    if (absl::SimpleAtod(text.substr(1), &seconds)) {
      return absl::FromUnixNanos(static_cast<int64_t>(seconds * 1e9));
    }
  }
  for (const char* format : {"%Y-%m-%d %H:%M:%E*S", "%Y-%m-%dT%H:%M:%E*S", "%Y-%m-%d %H:%M",
                             "%Y-%m-%dT%H:%M", "%Y-%m-%d", "%Y-%m-%d %H:%M:%E*S %z"}) {
    absl::Time t;
    if (absl::ParseTime(format, text, absl::LocalTimeZone(), &t, nullptr)) return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("I cannot figure out how to interpret `", text, "' as a date or time"));
}

class Parser {
 public:
  Parser(std::vector<std::string> tokens, dfs::DfsClient* fs) : t_(std::move(tokens)), fs_(fs) {}

  absl::StatusOr<std::unique_ptr<Expr>> Parse() {
    if (t_.empty()) return Leaf(Op::kTrue);
    auto e = Comma();
    if (!e.ok()) return e;
    if (i_ < t_.size()) {
      return absl::InvalidArgumentError(
          t_[i_] == ")" ? "unexpected ')'" : absl::StrCat("unexpected argument '", t_[i_], "'"));
    }
    if (e.ok()) ARDMA_RETURN_IF_ERROR(CompileRegexes(**e));
    return e;
  }
  bool has_action() const { return has_action_; }
  uint32_t min_depth = 0, max_depth = UINT32_MAX;
  bool depth_first = false;  // -depth (or -delete): a directory after its contents
  bool follow = false;       // -follow

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

  absl::StatusOr<std::unique_ptr<Expr>> Comma() {
    ARDMA_ASSIGN_OR_RETURN(auto left, Or());
    while (At({","})) {
      ++i_;
      ARDMA_ASSIGN_OR_RETURN(auto right, Or());
      left = Node(Op::kComma, std::move(left), std::move(right));
    }
    return left;
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
    while (i_ < t_.size() && !At({"-o", "-or", ")", ","})) {
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
      ARDMA_ASSIGN_OR_RETURN(auto e, Comma());
      if (!At({")"})) return absl::InvalidArgumentError("missing ')'");
      ++i_;
      return e;
    }
    if (tok == "-name" || tok == "-iname" || tok == "-path" || tok == "-wholename" ||
        tok == "-ipath" || tok == "-iwholename") {
      ARDMA_ASSIGN_OR_RETURN(std::string glob, Arg(tok));
      auto e = Leaf(tok == "-name"    ? Op::kName
                    : tok == "-iname" ? Op::kIname
                    : tok[1] == 'i'   ? Op::kIpath
                                      : Op::kPath);
      e->text = glob;
      return e;
    }
    if (tok == "-type") {
      ARDMA_ASSIGN_OR_RETURN(std::string type, Arg(tok));
      auto e = Leaf(Op::kType);
      for (size_t k = 0; k < type.size(); k += 2) {  // "f", "f,d,l"
        if (std::string_view("bcdpflsD").find(type[k]) == std::string_view::npos ||
            (k + 1 < type.size() && type[k + 1] != ',')) {
          return absl::InvalidArgumentError(
              absl::StrCat("Unknown argument to -type: ", std::string(1, type[k])));
        }
        e->text += type[k];
      }
      if (type.empty() || type.back() == ',') {
        return absl::InvalidArgumentError("Last file type in list argument to -type is missing");
      }
      return e;
    }
    if (tok == "-regextype") {
      ARDMA_ASSIGN_OR_RETURN(std::string name, Arg(tok));
      static const std::pair<const char*, RegexType> kTypes[] = {
          {"emacs", RegexType::kEmacs},
          {"posix-basic", RegexType::kPosixBasic},
          {"posix-extended", RegexType::kPosixExtended},
          {"posix-egrep", RegexType::kPosixEgrep},
          {"posix-awk", RegexType::kPosixAwk},
          {"grep", RegexType::kGrep},
          {"egrep", RegexType::kEgrep},
          {"findutils-default", RegexType::kFindutilsDefault}};
      for (const auto& [n, t] : kTypes) {
        if (name == n) {
          regex_type_ = t;
          return Leaf(Op::kTrue);
        }
      }
      return absl::InvalidArgumentError(absl::StrCat("Unknown regular expression type ", name));
    }
    if (tok == "-regex" || tok == "-iregex") {
      ARDMA_ASSIGN_OR_RETURN(std::string re, Arg(tok));
      auto e = Leaf(tok == "-regex" ? Op::kRegex : Op::kIregex);
      e->text = re;
      e->n = static_cast<uint64_t>(regex_type_);
      return e;
    }
    if (tok == "-newermt") {
      ARDMA_ASSIGN_OR_RETURN(std::string when, Arg(tok));
      auto e = Leaf(Op::kNewer);
      ARDMA_ASSIGN_OR_RETURN(e->time, ParseDate(when));
      return e;
    }
    if (tok == "-prune") return Leaf(Op::kPrune);
    if (tok == "-depth" || tok == "-d") {
      depth_first = true;
      return Leaf(Op::kTrue);
    }
    if (tok == "-printf") {
      ARDMA_ASSIGN_OR_RETURN(std::string format, Arg(tok));
      has_action_ = true;
      auto e = Leaf(Op::kPrintf);
      e->text = format;
      return e;
    }
    if (tok == "-ls") {
      has_action_ = true;
      return Leaf(Op::kLs);
    }
    if (tok == "-delete") {
      has_action_ = true;
      depth_first = true;
      return Leaf(Op::kDelete);
    }
    if (tok == "-exec" || tok == "-execdir" || tok == "-ok" || tok == "-okdir") {
      auto e = Leaf(tok == "-exec" || tok == "-execdir" ? Op::kExec : Op::kOk);
      for (;;) {
        if (i_ >= t_.size()) {
          return absl::InvalidArgumentError(absl::StrCat("missing argument to `", tok, "'"));
        }
        std::string a = t_[i_++];
        if (a == ";") break;
        if (a == "+" && !e->argv.empty() && e->argv.back() == "{}" && e->op == Op::kExec) {
          e->batch = true;
          break;
        }
        e->argv.push_back(a);
      }
      if (e->argv.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("missing argument to `", tok, "'"));
      }
      e->index = exec_count_++;
      has_action_ = true;
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
    if (tok == "-follow") {
      follow = true;
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
  RegexType regex_type_ = RegexType::kEmacs;
  int exec_count_ = 0;
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
  out.depth_first = parser.depth_first;
  out.follow = parser.follow;
  return out;
}

absl::StatusOr<Command> ParseCommandLine(int argc, char** argv) {
  Command c;
  // The options come before the starting points: the first argument that is not one ends them
  // (find's expression begins with '-' too).
  FlagSet flags("ardma-find", kUsage);
  c.Declare(flags);
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> rest,
                         flags.Parse(std::vector<std::string>(argv + 1, argv + argc),
                                     /*stop_at_positional=*/true, /*stop_at_unknown=*/true));
  // find's own -H, -L and -P, among the options (they are not long options' short forms).
  while (!rest.empty() && (rest[0] == "-H" || rest[0] == "-L" || rest[0] == "-P")) {
    c.links = rest[0][1];
    rest.erase(rest.begin());
    ARDMA_ASSIGN_OR_RETURN(rest, flags.Parse(rest, true, true));
  }
  c.help = flags.help_requested();
  c.version = flags.version_requested();
  if (c.help || c.version) return c;
  size_t i = 0;
  for (; i < rest.size(); ++i) {
    const std::string& a = rest[i];
    if (a.empty() || a[0] == '-' || a == "(" || a == "!" || a == ")") break;
    c.roots.push_back(a);
  }
  c.expression.assign(rest.begin() + i, rest.end());
  if (c.roots.empty()) {
    // As find: a bad expression (an unknown option is an unknown predicate there) is named first.
    ARDMA_RETURN_IF_ERROR(ParseExpression(c.expression, nullptr).status());
    return absl::InvalidArgumentError("no dfs:/PATH starting point (see --help)");
  }
  return c;
}

int RunCommand(const Command& c) {
  // A bad expression is reported before any server is contacted.
  if (absl::StatusOr<Expression> syntax = ParseExpression(c.expression, nullptr); !syntax.ok()) {
    std::cerr << "ardma-find: " << syntax.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<ClientOptions> options = c.ConnectOptions();
  absl::StatusOr<std::unique_ptr<Servers>> servers =
      options.ok() ? cluster::ConnectServers(c.server, *options) : options.status();
  if (!servers.ok()) {
    std::cerr << "ardma-find: " << servers.status().message() << "\n";
    return 1;
  }
  dfs::DfsClient fs(servers->get(), c.mode, c.fs);
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
    std::string path = root.substr(4);
    // -H and -L walk a link given as a starting point through (a dangling one as itself).
    bool follow_all = c.links == 'L' || expr->follow;
    bool follow_start = (c.links == 'H' || follow_all) && fs.LookupFollowing(path).ok();
    if (NeedsClient(*expr->expr) || expr->depth_first || follow_all) {
      if (WalkHere(fs, *expr, path, root, req.now, follow_start, follow_all) != 0) status = 1;
      continue;
    }
    req.root = path;
    req.follow_start = follow_start;
    req.display = root;
    req.cursor.clear();
    req.pruned.clear();
    for (;;) {
      // The walk runs where the namespace is (on a cluster: its slot's member).
      absl::StatusOr<Client*> client = (*servers)->ForSlot(dfs::NamespaceSlot(c.fs));
      absl::StatusOr<std::string> reply =
          client.ok() ? Invoke(**client, c.mode, active_libraries::find(), "find.scan",
                               EncodeRequest(req))
                      : absl::StatusOr<std::string>(client.status());
      if (!reply.ok()) {
        if (dfs::ErrnoOf(reply.status()) != 0) {  // the starting point's fault
          std::cerr << "ardma-find: '" << root << "': " << dfs::ErrnoText(reply.status()) << "\n";
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
        if (m.terminator != Match::kRaw) std::fputc(m.terminator, stdout);
      }
      if (batch->done) break;
      req.cursor = batch->next;
      req.pruned = std::move(batch->pruned);
    }
  }
  std::fflush(stdout);
  return status;
}

}  // namespace ardma::find
