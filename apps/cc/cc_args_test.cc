// What ardma-cc sends to the farm and what it keeps (distcc's rules), and the job encodings.
#include "apps/cc/cc_args.h"

#include <string>
#include <vector>

#include "apps/cc/cc_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma::cc {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

CompilePlan Plan(std::vector<std::string> args) { return PlanCompile(args); }

TEST(PlanCompileTest, ACompileOfOneCFileIsRemote) {
  CompilePlan p = Plan({"gcc", "-O2", "-Iinc", "-DX=1", "-Wall", "-c", "src/a.c", "-o", "obj/a.o"});
  ASSERT_TRUE(p.remote) << p.local_reason;
  EXPECT_EQ(p.input, "src/a.c");
  EXPECT_EQ(p.output, "obj/a.o");
  EXPECT_EQ(p.kind, SourceKind::kC);
  EXPECT_THAT(p.preprocess, ElementsAre("gcc", "-O2", "-Iinc", "-DX=1", "-Wall", "-E",
                                        "-fdirectives-only", "src/a.c"));
  EXPECT_THAT(p.remote_flags, ElementsAre("-O2", "-Wall"));
  EXPECT_THAT(RemoteLanguageFlags(p.kind),
              ElementsAre("-x", "c", "-fpreprocessed", "-fdirectives-only"));
}

TEST(PlanCompileTest, ClangRewritesIncludesHereAndCompilesCThere) {
  CompilePlan p = Plan({"clang", "-O2", "-Iinc", "-MD", "-c", "src/a.c", "-o", "obj/a.o"});
  ASSERT_TRUE(p.remote) << p.local_reason;
  EXPECT_EQ(p.family, CompilerFamily::kClang);
  EXPECT_THAT(p.preprocess, ElementsAre("clang", "-O2", "-Iinc", "-MD", "-E", "-frewrite-includes",
                                        "-w", "-MF", "obj/a.d", "-MT", "obj/a.o", "src/a.c"));
  EXPECT_THAT(p.remote_flags, ElementsAre("-O2"));
  EXPECT_THAT(RemoteLanguageFlags(p.kind, p.family), ElementsAre("-x", "c"));
  CompilePlan cxx = Plan({"/usr/bin/x86_64-linux-gnu-clang++-14", "-c", "b.cc"});
  ASSERT_TRUE(cxx.remote) << cxx.local_reason;
  EXPECT_EQ(cxx.family, CompilerFamily::kClang);
  EXPECT_THAT(RemoteLanguageFlags(cxx.kind, cxx.family), ElementsAre("-x", "c++"));
  EXPECT_EQ(FamilyOf("g++-12"), CompilerFamily::kGcc);
  EXPECT_EQ(FamilyOf("c++"), CompilerFamily::kGcc);
  EXPECT_EQ(FamilyOf("clang++"), CompilerFamily::kClang);
  EXPECT_EQ(FamilyOf("tcc"), std::nullopt);
}

TEST(PlanCompileTest, PreprocessorOptionsStayHereWithTheirValues) {
  CompilePlan p = Plan({"g++", "-std=c++20", "-I", "inc", "-isystem", "/opt/x", "-include", "pre.h",
                        "-D", "Y", "-UZ", "-Wp,-MD,x.d", "-nostdinc++", "-c", "b.cpp"});
  ASSERT_TRUE(p.remote) << p.local_reason;
  EXPECT_EQ(p.kind, SourceKind::kCxx);
  EXPECT_EQ(p.output, "b.o");  // the driver's default: the base name, here
  EXPECT_THAT(p.remote_flags, ElementsAre("-std=c++20"));
}

TEST(PlanCompileTest, DependencyFilesAreNamedAsTheCompileWouldHave) {
  CompilePlan p = Plan({"gcc", "-MD", "-MP", "-c", "a.c", "-o", "out/a.o"});
  ASSERT_TRUE(p.remote);
  EXPECT_THAT(p.preprocess, ElementsAre("gcc", "-MD", "-MP", "-E", "-fdirectives-only", "-MF",
                                        "out/a.d", "-MT", "out/a.o", "a.c"));
  EXPECT_TRUE(p.remote_flags.empty());
  // The user's own -MF / -MT are kept as given.
  p = Plan({"gcc", "-MMD", "-MF", "deps/a.dep", "-MT", "a", "-c", "a.c"});
  EXPECT_THAT(p.preprocess, ElementsAre("gcc", "-MMD", "-MF", "deps/a.dep", "-MT", "a", "-E",
                                        "-fdirectives-only", "a.c"));
}

TEST(PlanCompileTest, SourceKindsByName) {
  EXPECT_EQ(Plan({"gcc", "-c", "x.i"}).kind, SourceKind::kPreprocessedC);
  EXPECT_TRUE(Plan({"gcc", "-c", "x.i"}).preprocess.empty());
  EXPECT_EQ(Plan({"g++", "-c", "x.ii"}).kind, SourceKind::kPreprocessedCxx);
  EXPECT_EQ(Plan({"gcc", "-c", "x.s"}).kind, SourceKind::kAssembler);
  CompilePlan s = Plan({"gcc", "-c", "x.S"});
  EXPECT_EQ(s.kind, SourceKind::kAssemblerCpp);
  EXPECT_THAT(s.preprocess, ElementsAre("gcc", "-E", "x.S"));
  for (const char* name : {"x.cc", "x.cpp", "x.cxx", "x.C", "x.c++"}) {
    EXPECT_EQ(Plan({"c++", "-c", name}).kind, SourceKind::kCxx) << name;
  }
  EXPECT_TRUE(Plan({"x86_64-linux-gnu-gcc-13", "-c", "a.c"}).remote);
  EXPECT_TRUE(Plan({"/usr/bin/g++", "-c", "a.cc"}).remote);
}

TEST(PlanCompileTest, EverythingElseRunsHereWithAReason) {
  struct Case {
    std::vector<std::string> args;
    const char* reason;
  };
  for (const Case& c : std::vector<Case>{
           {{"gcc", "a.o", "b.o", "-o", "prog"}, "not a compile"},
           {{"gcc", "a.c", "-o", "prog"}, "not a compile"},
           {{"gcc", "-E", "a.c"}, "-E"},
           {{"gcc", "-M", "-c", "a.c"}, "-M/-MM"},
           {{"gcc", "-MM", "-c", "a.c"}, "-M/-MM"},
           {{"gcc", "-S", "a.c"}, "-S"},
           {{"gcc", "-fsyntax-only", "-c", "a.c"}, "-fsyntax-only"},
           {{"gcc", "-c", "a.c", "b.c"}, "several input files"},
           {{"gcc", "-c"}, "no input file"},
           {{"gcc", "-c", "-"}, "standard input"},
           {{"gcc", "-x", "c", "-c", "a.txt"}, "-x"},
           {{"gcc", "-c", "a.txt"}, "not C, C++ or assembler"},
           {{"gcc", "-c", "a.m"}, "not C, C++ or assembler"},
           {{"gcc", "-march=native", "-c", "a.c"}, "native"},
           {{"gcc", "--coverage", "-c", "a.c"}, "writes files"},
           {{"gcc", "-save-temps", "-c", "a.c"}, "writes files"},
           {{"gcc", "-fdump-tree-all", "-c", "a.c"}, "writes files"},
           {{"gcc", "-specs=x.specs", "-c", "a.c"}, "writes files"},
           {{"gcc", "@args.rsp"}, "response file"},
           {{"tcc", "-c", "a.c"}, "not one of GCC's or clang's drivers"},
           {{"clang-cl", "-c", "a.c"}, "not one of GCC's or clang's drivers"},
           {{"clang", "-fmodules", "-c", "a.c"}, "reads this machine's files"},
           {{"clang", "-Xclang", "-ast-dump", "-c", "a.c"}, "reads this machine's files"},
           {{"gcc", "-fprofile-use", "-c", "a.c"}, "reads this machine's files"},
           {{"gcc", "-c", "a.c", "-o"}, "-o without"},
       }) {
    CompilePlan p = PlanCompile(c.args);
    EXPECT_FALSE(p.remote) << c.args.back();
    EXPECT_THAT(p.local_reason, HasSubstr(c.reason)) << c.args.back();
  }
}

TEST(CompileJobTest, JobsAndResultsRoundTrip) {
  CompileJob job{"g++", {"-O2", "-g0"}, SourceKind::kCxx, "/src", 70000, 1234, 70001, 1 << 20,
                 "b.cc"};
  absl::StatusOr<CompileJob> back = DecodeJob(EncodeJob(job));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->compiler, "g++");
  EXPECT_THAT(back->flags, ElementsAre("-O2", "-g0"));
  EXPECT_EQ(back->kind, SourceKind::kCxx);
  EXPECT_EQ(back->cwd, "/src");
  EXPECT_EQ(back->source_region, 70000u);
  EXPECT_EQ(back->source_size, 1234u);
  EXPECT_EQ(back->object_region, 70001u);
  EXPECT_EQ(back->object_capacity, 1u << 20);
  EXPECT_EQ(back->source_name, "b.cc");
  EXPECT_FALSE(DecodeJob(EncodeJob(job).substr(1)).ok());
  // An older submitter's job has no name; a name with a slash would leave the slave's directory.
  std::string old = EncodeJob(job);
  old.resize(old.size() - 2 - 4);
  ASSERT_TRUE(DecodeJob(old).ok());
  EXPECT_EQ(DecodeJob(old)->source_name, "");
  job.source_name = "../x.c";
  EXPECT_FALSE(DecodeJob(EncodeJob(job)).ok());

  CompileResult r{true, "", 1, "out", "a.c:1: error", 0, 42};
  absl::StatusOr<CompileResult> rb = DecodeResult(EncodeResult(r));
  ASSERT_TRUE(rb.ok());
  EXPECT_TRUE(rb->compiled);
  EXPECT_EQ(rb->exit_code, 1);
  EXPECT_EQ(rb->err, "a.c:1: error");
  EXPECT_FALSE(DecodeResult("junk").ok());
}

}  // namespace
}  // namespace ardma::cc
