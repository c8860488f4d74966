#include "apps/cc/cc_args.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace ardma::cc {
namespace {

bool In(std::string_view s, std::initializer_list<std::string_view> set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

bool StartsWithAny(std::string_view s, std::initializer_list<std::string_view> prefixes) {
  for (std::string_view p : prefixes) {
    if (std::string_view(s).starts_with(p)) return true;
  }
  return false;
}

// Options whose value is the next argument (GCC's driver).
bool TakesSeparateValue(std::string_view a) {
  return In(a, {"-o",
                "-x",
                "-I",
                "-D",
                "-U",
                "-include",
                "-imacros",
                "-iquote",
                "-isystem",
                "-idirafter",
                "-iprefix",
                "-iwithprefix",
                "-iwithprefixbefore",
                "-isysroot",
                "-imultilib",
                "-MF",
                "-MT",
                "-MQ",
                "-Xpreprocessor",
                "-Xassembler",
                "-Xlinker",
                "-aux-info",
                "--param",
                "-L",
                "-l",
                "-T",
                "-u",
                "-z",
                "-e",
                "-A",
                "-G",
                "-V",
                "-b"});
}

// Options that only the preprocessor reads: not passed to the slave (their effect is in the
// shipped source). With a separate value for those TakesSeparateValue lists.
bool PreprocessorOnly(std::string_view a) {
  if (In(a, {"-I",
             "-D",
             "-U",
             "-include",
             "-imacros",
             "-iquote",
             "-isystem",
             "-idirafter",
             "-iprefix",
             "-iwithprefix",
             "-iwithprefixbefore",
             "-isysroot",
             "-imultilib",
             "-MF",
             "-MT",
             "-MQ",
             "-Xpreprocessor",
             "-A",
             "-nostdinc",
             "-nostdinc++",
             "-undef",
             "-H",
             "-C",
             "-CC"})) {
    return true;
  }
  return StartsWithAny(a, {"-I", "-D", "-U", "-M", "-Wp,", "-isystem", "-iquote", "-idirafter",
                           "-include", "-imacros", "-A"});
}

// Options that must run where the files are, with the reason.
const char* LocalOnly(std::string_view a) {
  if (a == "-E") return "-E (preprocessing only)";
  if (a == "-S") return "-S (assembly output)";
  if (a == "-fsyntax-only") return "-fsyntax-only";
  if (a == "-x" || std::string_view(a).starts_with("-x")) return "an explicit -x language";
  if (In(a, {"-march=native", "-mtune=native", "-mcpu=native"})) {
    return "-m...=native (depends on this machine's CPU)";
  }
  if (In(a, {"--coverage", "-fprofile-arcs", "-ftest-coverage", "-frepo", "-gsplit-dwarf",
             "-fstack-usage", "-aux-info", "-wrapper"}) ||
      StartsWithAny(a, {"-save-temps", "-specs=", "-B", "-fplugin", "-fdump-",
                        "-fsave-optimization-record", "-fcallgraph-info", "-fcompare-debug",
                        "-Wa,-a", "-Wa,--MD", "-print-", "-dump", "--help", "--version"})) {
    return "an option that writes files beside the object or reads this machine's";
  }
  if (std::string_view(a).starts_with("@")) return "a response file";
  // Options that read profiles, lists or module caches of this machine, write files beside the
  // object, or pass anything to clang's front end unseen.
  if (StartsWithAny(a, {"-fprofile-use", "-fprofile-instr-use", "-fprofile-sample-use",
                        "-fauto-profile", "-fsanitize-ignorelist", "-fsanitize-blacklist",
                        "-fmodules", "-fcxx-modules", "-fprebuilt-module-path", "-Xclang",
                        "-ftime-trace", "-fcrash-diagnostics"})) {
    return "an option that reads this machine's files or writes files beside the object";
  }
  return nullptr;
}

// Whether `base` is `driver`, perhaps after a target ("x86_64-linux-gnu-") and before a version
// ("-13", "-14.0").
bool IsDriver(std::string_view base, std::string_view driver) {
  size_t at = base.find(driver);
  while (at != std::string_view::npos) {
    bool starts = at == 0 || base[at - 1] == '-';
    std::string_view rest = base.substr(at + driver.size());
    bool ends = rest.empty() || (rest[0] == '-' &&
                                 rest.find_first_not_of("-0123456789.") == std::string_view::npos);
    if (starts && ends) return true;
    at = base.find(driver, at + 1);
  }
  return false;
}

bool Kind(std::string_view input, SourceKind* kind) {
  size_t dot = input.rfind('.');
  if (dot == std::string_view::npos || input.find('/', dot) != std::string_view::npos) {
    return false;
  }
  std::string_view ext = input.substr(dot + 1);
  if (ext == "c") {
    *kind = SourceKind::kC;
  } else if (In(ext, {"cc", "cpp", "cxx", "C", "c++", "cp", "CPP"})) {
    *kind = SourceKind::kCxx;
  } else if (ext == "i") {
    *kind = SourceKind::kPreprocessedC;
  } else if (ext == "ii") {
    *kind = SourceKind::kPreprocessedCxx;
  } else if (ext == "S") {
    *kind = SourceKind::kAssemblerCpp;
  } else if (ext == "s") {
    *kind = SourceKind::kAssembler;
  } else {
    return false;
  }
  return true;
}

// "dir/a.c" -> "a.o" (the driver's default object name: in the current directory).
std::string DefaultObject(std::string_view input) {
  std::string_view base = input.substr(input.rfind('/') + 1);
  return std::string(base.substr(0, base.rfind('.'))) + ".o";
}

}  // namespace

std::optional<CompilerFamily> FamilyOf(std::string_view compiler) {
  std::string_view base = compiler.substr(compiler.rfind('/') + 1);
  for (std::string_view driver : {"clang", "clang++"}) {
    if (IsDriver(base, driver)) return CompilerFamily::kClang;
  }
  for (std::string_view driver : {"gcc", "g++", "cc", "c++"}) {
    if (IsDriver(base, driver)) return CompilerFamily::kGcc;
  }
  return std::nullopt;
}

std::vector<std::string> RemoteLanguageFlags(SourceKind kind, CompilerFamily family) {
  const bool clang = family == CompilerFamily::kClang;
  switch (kind) {
    case SourceKind::kC:
      if (clang) return {"-x", "c"};  // -frewrite-includes output is C still to preprocess
      return {"-x", "c", "-fpreprocessed", "-fdirectives-only"};
    case SourceKind::kCxx:
      if (clang) return {"-x", "c++"};
      return {"-x", "c++", "-fpreprocessed", "-fdirectives-only"};
    case SourceKind::kPreprocessedC:
      return {"-x", "cpp-output"};
    case SourceKind::kPreprocessedCxx:
      return {"-x", "c++-cpp-output"};
    case SourceKind::kAssemblerCpp:
    case SourceKind::kAssembler:
      return {"-x", "assembler"};
  }
  return {};
}

const char* ShippedSuffix(SourceKind kind) {
  switch (kind) {
    case SourceKind::kC:
    case SourceKind::kPreprocessedC:
      return ".i";
    case SourceKind::kCxx:
    case SourceKind::kPreprocessedCxx:
      return ".ii";
    case SourceKind::kAssemblerCpp:
    case SourceKind::kAssembler:
      return ".s";
  }
  return ".i";
}

CompilePlan PlanCompile(const std::vector<std::string>& args) {
  CompilePlan plan;
  auto local = [&plan](std::string reason) {
    plan.remote = false;
    plan.local_reason = std::move(reason);
    return plan;
  };
  if (args.empty()) return local("no compiler");
  plan.compiler = args[0];
  std::optional<CompilerFamily> family = FamilyOf(plan.compiler);
  if (!family.has_value()) {
    return local(absl::StrCat(plan.compiler, " is not one of GCC's or clang's drivers"));
  }
  plan.family = *family;
  bool compile_only = false, md = false, deps_only = false, mf = false, mt = false;
  std::vector<std::string> inputs;
  std::vector<std::string> rest;  // every argument but -c, -o and the inputs, in order
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-") return local("input from standard input");
    if (a.empty() || a[0] != '-') {
      if (std::string_view(a).starts_with("@")) return local("a response file");
      inputs.push_back(a);
      continue;
    }
    if (const char* why = LocalOnly(a)) return local(absl::StrCat(why, " (", a, ")"));
    if (a == "-c") {
      compile_only = true;
      continue;
    }
    if (a == "-o") {
      if (i + 1 >= args.size()) return local("-o without a file");
      plan.output = args[++i];
      continue;
    }
    if (std::string_view(a).starts_with("-o")) {
      plan.output = a.substr(2);
      continue;
    }
    if (a == "-MD" || a == "-MMD") md = true;
    if (a == "-M" || a == "-MM") deps_only = true;
    if (std::string_view(a).starts_with("-MF")) mf = true;
    if (std::string_view(a).starts_with("-MT") || std::string_view(a).starts_with("-MQ")) mt = true;
    rest.push_back(a);
    if (TakesSeparateValue(a)) {
      if (i + 1 >= args.size()) return local(absl::StrCat(a, " without its value"));
      rest.push_back(args[++i]);
    }
  }
  if (!compile_only) return local("not a compile (-c): linking or another step runs here");
  if (deps_only && !md) return local("-M/-MM without -MD (dependencies only)");
  if (inputs.size() != 1) {
    return local(inputs.empty() ? "no input file" : "several input files");
  }
  plan.input = inputs[0];
  if (!Kind(plan.input, &plan.kind)) {
    return local(absl::StrCat(plan.input, ": not C, C++ or assembler by its name"));
  }
  if (plan.output.empty()) plan.output = DefaultObject(plan.input);

  // The slave's flags: preprocessor-only options (and their values) go.
  for (size_t i = 0; i < rest.size(); ++i) {
    bool separate = TakesSeparateValue(rest[i]) && i + 1 < rest.size();
    if (PreprocessorOnly(rest[i])) {
      if (separate) ++i;
      continue;
    }
    plan.remote_flags.push_back(rest[i]);
    if (separate) plan.remote_flags.push_back(rest[++i]);
  }
  // The local step: the same command preprocessing only. With -E, -o names the preprocessed
  // output, so a dependency file is named (and targeted) as the compile would have: OUT.d, OUT.
  if (plan.kind == SourceKind::kC || plan.kind == SourceKind::kCxx ||
      plan.kind == SourceKind::kAssemblerCpp) {
    plan.preprocess.push_back(plan.compiler);
    plan.preprocess.insert(plan.preprocess.end(), rest.begin(), rest.end());
    plan.preprocess.push_back("-E");
    if (plan.kind != SourceKind::kAssemblerCpp && plan.family == CompilerFamily::kClang) {
      // (-w: the compile there gives the warnings, #warning's included; errors still stop here)
      plan.preprocess.insert(plan.preprocess.end(), {"-frewrite-includes", "-w"});
    } else if (plan.kind != SourceKind::kAssemblerCpp) {
      plan.preprocess.push_back("-fdirectives-only");
    }
    if (md && !mf) {
      std::string_view out = plan.output;
      size_t slash = out.rfind('/');
      size_t dot = out.rfind('.');
      std::string stem(dot != std::string_view::npos &&
                               (slash == std::string_view::npos || dot > slash)
                           ? out.substr(0, dot)
                           : out);
      plan.preprocess.insert(plan.preprocess.end(), {"-MF", stem + ".d"});
    }
    if (md && !mt) plan.preprocess.insert(plan.preprocess.end(), {"-MT", plan.output});
    plan.preprocess.push_back(plan.input);
  }
  plan.remote = true;
  return plan;
}

}  // namespace ardma::cc
