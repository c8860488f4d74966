// What a compiler command line asks for, and whether the farm may run it (distcc's rules).
//
// `ardma-cc gcc -O2 -c a.c -o a.o` is split into a local preprocessing step and a remote compile:
//
//   local:  gcc -O2 -E -fdirectives-only a.c -o TMP.i        (plus dependency-file fixes)
//   remote: gcc -O2 -x c -fpreprocessed -fdirectives-only -c SRC -o OBJ
//
// With -fdirectives-only the includes are resolved locally but macros expand on the slave, so
// the compiler's diagnostics (macro-expansion notes included) and objects are the same as a local
// compile's. clang has no -fdirectives-only; its equivalent is -frewrite-includes (includes inlined
// between line markers, macros and conditionals left as written):
//
//   local:  clang -O2 -E -frewrite-includes a.c -o TMP.i
//   remote: clang -O2 -x c -c DIR/a.c -o OBJ        (the shipped source named as the input was:
//                                                    clang names the object's FILE symbol so) Anything else — linking, -E, -M without -MD, -S, several or no inputs, stdin,
// languages other than C, C++ and assembler, explicit -x, options that write files beside the
// object or depend on the local machine (-march=native, --coverage, -save-temps, -specs=, ...),
// response files, compilers other than GCC's and clang's — runs locally, with the reason.
#ifndef ARDMA_APPS_CC_CC_ARGS_H_
#define ARDMA_APPS_CC_CC_ARGS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ardma::cc {

enum class SourceKind {
  kC,                // .c: preprocessed here (directives only), compiled as C there
  kCxx,              // .cc .cpp .cxx .C .c++ .cp .CPP
  kPreprocessedC,    // .i: shipped as is
  kPreprocessedCxx,  // .ii
  kAssemblerCpp,     // .S: preprocessed fully here, assembled there
  kAssembler,        // .s: shipped as is
};

enum class CompilerFamily {
  kGcc,    // gcc, g++, cc, c++ (and versioned, target-prefixed names)
  kClang,  // clang, clang++ (likewise)
};

// The family of a compiler by its base name; nullopt for any other program.
std::optional<CompilerFamily> FamilyOf(std::string_view compiler);

struct CompilePlan {
  bool remote = false;
  std::string local_reason;  // why not, when !remote
  std::string compiler;      // as given (argv[1] of ardma-cc)
  CompilerFamily family = CompilerFamily::kGcc;
  std::string input;
  std::string output;  // -o, or the input's base name with .o
  SourceKind kind = SourceKind::kC;
  // The preprocessing command (argv, the compiler first) without its output; empty for sources
  // shipped as they are.
  std::vector<std::string> preprocess;
  // The slave's compile flags: everything but the input, the output, -c and preprocessor-only
  // options. The slave appends the language, the source and the object.
  std::vector<std::string> remote_flags;
};

// `args` is the compiler and its arguments (ardma-cc's own arguments).
CompilePlan PlanCompile(const std::vector<std::string>& args);

// The -x value and extra flags the slave compiles a shipped source of `kind` with.
std::vector<std::string> RemoteLanguageFlags(SourceKind kind,
                                             CompilerFamily family = CompilerFamily::kGcc);
// The suffix of a shipped source of `kind` (".i", ".ii", ".s").
const char* ShippedSuffix(SourceKind kind);

}  // namespace ardma::cc

#endif  // ARDMA_APPS_CC_CC_ARGS_H_
