#include "core/active/code_registry.h"

#include <atomic>

#include "absl/strings/str_split.h"
#include "core/active/local_context.h"
#include "core/active/native_loader.h"
#include "core/active/testdata/test_library.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

using testing::U64At;
using testing::U64s;

class CodeRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    regions_.Add(*Region::Create({.size = 1 << 20}));
    registry_.SetLoader(CodeKind::kNative, std::make_unique<NativeLoader>());
  }
  absl::StatusOr<std::string> Run(const BoundFunction& fn, std::string_view args) {
    Execution ex{.regions = &regions_, .registry = &registry_};
    return LocalContext::Run(&ex, fn, args);
  }

  RegionTable regions_;
  CodeRegistry registry_;
};

TEST_F(CodeRegistryTest, LoadsShippedBytesAndResolvesByNameAndHash) {
  const ActiveLibrary& lib = active_libraries::test2();
  absl::StatusOr<CodeHash> hash = registry_.Load(CodeKind::kNative, "test2", lib.code());
  ASSERT_TRUE(hash.ok()) << hash.status();
  EXPECT_EQ(*hash, lib.hash());
  EXPECT_EQ(*hash, Sha256(lib.code()));
  EXPECT_TRUE(registry_.Has(*hash));
  EXPECT_EQ(registry_.size(), 1u);
  // Known bytes: a no-op returning the same hash.
  EXPECT_EQ(*registry_.Load(CodeKind::kNative, "", lib.code()), *hash);
  EXPECT_EQ(registry_.size(), 1u);

  absl::StatusOr<BoundFunction> by_name = registry_.Resolve("test2.double");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(U64At(*Run(*by_name, U64s({21})), 0), 42u);
  EXPECT_TRUE(registry_.Resolve(*hash, "test2.double").ok());
  EXPECT_EQ(registry_.Resolve(*hash, "test2.nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_.Resolve("test2.nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CodeRegistryTest, CallGoesThroughTheRegistry) {
  ASSERT_TRUE(registry_.Load(CodeKind::kNative, "", active_libraries::test().code()).ok());
  absl::StatusOr<BoundFunction> fn = registry_.Resolve("test.call_double");
  ASSERT_TRUE(fn.ok());
  // test2 is not loaded yet: the Call fails with NotFound.
  EXPECT_EQ(Run(*fn, U64s({5})).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(registry_.Load(CodeKind::kNative, "", active_libraries::test2().code()).ok());
  EXPECT_EQ(U64At(*Run(*fn, U64s({5})), 0), 10u);
}

TEST_F(CodeRegistryTest, NewestVersionOfANameWinsAndOldStaysCallable) {
  // A linked table stands in for an older version of "test2".
  static const FunctionEntry kOld[] = {
      {"test2.double", +[](Context&, std::string_view) -> absl::StatusOr<std::string> {
         return std::string("old");
       }}};
  static const FunctionTable kOldTable{kActiveAbiVersion, "test2", kOld, 1};
  CodeHash old_hash = Sha256("old test2");
  registry_.AddLinked(kOldTable, old_hash);
  EXPECT_EQ(*Run(*registry_.Resolve("test2.double"), ""), "old");
  CodeHash new_hash = *registry_.Load(CodeKind::kNative, "", active_libraries::test2().code());
  EXPECT_EQ(U64At(*Run(*registry_.Resolve("test2.double"), U64s({4})), 0), 8u);
  EXPECT_EQ(*Run(*registry_.Resolve(old_hash, "test2.double"), ""), "old");
  int newest = 0;
  for (const LibraryInfo& info : registry_.List()) {
    if (info.newest) {
      ++newest;
      EXPECT_EQ(info.hash, new_hash);
    }
  }
  EXPECT_EQ(newest, 1);
}

TEST_F(CodeRegistryTest, BadCodeIsRejectedWithAClearError) {
  EXPECT_EQ(registry_.Load(CodeKind::kNative, "", "not an elf").status().code(),
            absl::StatusCode::kInvalidArgument);
  // A truncated shared object fails in dlopen.
  std::string_view code = active_libraries::test2().code();
  absl::Status truncated = registry_.Load(CodeKind::kNative, "", code.substr(0, 200)).status();
  EXPECT_EQ(truncated.code(), absl::StatusCode::kInvalidArgument) << truncated;
  // Wrong library name in LOAD.
  EXPECT_EQ(registry_.Load(CodeKind::kNative, "dht", code).status().code(),
            absl::StatusCode::kInvalidArgument);
  // No loader for the kind: the server cannot run such code at all.
  EXPECT_EQ(registry_.Load(CodeKind::kJvm, "", "cafebabe").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(registry_.size(), 0u);
}

// Code "NAME FN[,FN...] VERSION" loads as library NAME exporting the FNs; counts live libraries.
std::atomic<int> live_fakes{0};
class FakeLibrary : public LoadedLibrary {
 public:
  explicit FakeLibrary(std::string_view code) {
    std::vector<std::string> parts = absl::StrSplit(std::string(code), ' ');
    name_ = parts[0];
    functions_ = absl::StrSplit(parts[1], ',');
    ++live_fakes;
  }
  ~FakeLibrary() override { --live_fakes; }
  std::string_view name() const override { return name_; }
  size_t num_functions() const override { return functions_.size(); }
  std::string_view function_name(size_t i) const override { return functions_[i]; }
  absl::StatusOr<std::string> Run(size_t, Context&, std::string_view) override { return name_; }

 private:
  std::string name_;
  std::vector<std::string> functions_;
};
class FakeLoader : public CodeLoader {
 public:
  absl::StatusOr<std::unique_ptr<LoadedLibrary>> Load(std::string_view,
                                                      std::string_view code) override {
    return std::make_unique<FakeLibrary>(code);
  }
};

// Past --max-libraries, unused old versions are unloaded, oldest first; a version a call still
// holds, a current version and a version another library was built against never are; then LOAD
// is RESOURCE_EXHAUSTED. Names only an unloaded version exported are gone with it.
TEST(CodeLimitsTest, UnusedOldVersionsMakeRoomAndNothingInUseIsUnloaded) {
  CodeRegistry registry({.max_libraries = 3, .max_bytes = 1 << 20});
  registry.SetLoader(CodeKind::kNative, std::make_unique<FakeLoader>());
  auto load = [&](std::string_view code, const LoadAuthority& by = {}) {
    return registry.Load(CodeKind::kNative, "", code, by);
  };
  int live0 = live_fakes;
  absl::StatusOr<CodeHash> a1 = load("a a.f,a.old 1"), a2 = load("a a.f 2"), b1 = load("b b.f 1");
  ASSERT_TRUE(a1.ok() && a2.ok() && b1.ok());
  {
    absl::StatusOr<BoundFunction> held = registry.Resolve(*a1, "a.f");  // a call holds a1
    ASSERT_TRUE(held.ok());
    absl::StatusOr<CodeHash> refused = load("c c.f 1");
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
    EXPECT_EQ(registry.size(), 3u);
  }
  EXPECT_TRUE(registry.Resolve("a.old").ok());
  absl::StatusOr<CodeHash> c1 = load("c c.f 1");  // now a1 goes
  ASSERT_TRUE(c1.ok()) << c1.status();
  EXPECT_EQ(registry.size(), 3u);
  EXPECT_EQ(registry.unloaded(), 1u);
  EXPECT_EQ(live_fakes - live0, 3);  // a1's library was destroyed (its memfd closed)
  EXPECT_FALSE(registry.Has(*a1));
  EXPECT_EQ(registry.Resolve("a.old").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry.Resolve("a.f").ok());

  // b2 is built against b1: b1 is superseded but stays, so there is no room for d.
  registry.SetLimits({.max_libraries = 4, .max_bytes = 1 << 20});
  ASSERT_TRUE(load("b b.f 2", {.deps = {*b1}}).ok());
  absl::StatusOr<CodeHash> no_room = load("d d.f 1");
  EXPECT_EQ(no_room.status().code(), absl::StatusCode::kResourceExhausted) << no_room.status();
  EXPECT_TRUE(registry.Has(*b1));
  EXPECT_EQ(registry.bytes(), 4 * std::string("a a.f 2").size());
}

// What a thread remembers resolves as the registry does now: the newest version of a name once
// another is loaded, NotFound once the only exporter is unloaded, and it never keeps a library in
// use (so the limits can still unload it).
TEST(CodeLimitsTest, RememberedResolutionsFollowLoadsAndUnloads) {
  CodeRegistry registry({.max_libraries = 2, .max_bytes = 1 << 20});
  registry.SetLoader(CodeKind::kNative, std::make_unique<FakeLoader>());
  auto run = [&](const CodeHash* hash, std::string_view fn) -> absl::StatusOr<std::string> {
    absl::StatusOr<BoundFunction> bound = registry.ResolveRemembered(hash, fn);
    if (!bound.ok()) return bound.status();
    std::string name(bound->name());
    return name;
  };
  EXPECT_EQ(run(nullptr, "a.f").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<CodeHash> a1 = registry.Load(CodeKind::kNative, "", "a a.f,a.old 1");
  ASSERT_TRUE(a1.ok());
  for (int i = 0; i < 2; ++i) {  // (the second time from what the thread remembered)
    EXPECT_EQ(*run(nullptr, "a.f"), "a.f");
    EXPECT_EQ(*run(&*a1, "a.old"), "a.old");
    EXPECT_EQ(run(&*a1, "a.nope").status().code(), absl::StatusCode::kNotFound);
  }
  // a2 takes the name a.f: by name it resolves to a2 now, by a1's hash still to a1.
  absl::StatusOr<CodeHash> a2 = registry.Load(CodeKind::kNative, "", "a a.f 2");
  ASSERT_TRUE(a2.ok());
  absl::StatusOr<BoundFunction> newest = registry.ResolveRemembered(nullptr, "a.f");
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->scope()->front(), *a2);
  newest = registry.ResolveRemembered(&*a1, "a.f");
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->scope()->front(), *a1);
  newest = absl::UnknownError("released");
  // b1 needs room: a1 is superseded and unused (remembered only), so it is unloaded.
  ASSERT_TRUE(registry.Load(CodeKind::kNative, "", "b b.f 1").ok());
  EXPECT_FALSE(registry.Has(*a1));
  EXPECT_EQ(run(&*a1, "a.f").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(run(nullptr, "a.old").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*run(nullptr, "a.f"), "a.f");
}

TEST(CodeLimitsTest, TheByteLimitUnloadsTheSameWay) {
  CodeRegistry registry({.max_libraries = 100, .max_bytes = 20});
  registry.SetLoader(CodeKind::kNative, std::make_unique<FakeLoader>());
  ASSERT_TRUE(registry.Load(CodeKind::kNative, "", "x x.f 1").ok());    // 7 bytes
  ASSERT_TRUE(registry.Load(CodeKind::kNative, "", "x x.f 22").ok());   // 8
  ASSERT_TRUE(registry.Load(CodeKind::kNative, "", "x x.f 333").ok());  // 9: x1 goes
  EXPECT_EQ(registry.size(), 2u);
  EXPECT_EQ(registry.bytes(), 17u);
  EXPECT_EQ(registry.Load(CodeKind::kNative, "", "y y.f 1111111111111111").status().code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
// An isolating server's loader (NativeLoader::InProcess): the library is known by the table its
// trial load reported; the process maps it the first time a function runs here, or never.
TEST_F(CodeRegistryTest, ADeferredLibraryIsKnownByItsTrialsTableAndMappedOnlyIfAllowed) {
  for (auto when : {NativeLoader::InProcess::kOnFirstRun, NativeLoader::InProcess::kNever}) {
    CodeRegistry registry;
    registry.SetLoader(CodeKind::kNative,
                       std::make_unique<NativeLoader>(/*trial=*/true, std::nullopt, when));
    ASSERT_TRUE(registry.Load(CodeKind::kNative, "test2", active_libraries::test2().code()).ok());
    std::vector<LibraryInfo> listed = registry.List();
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0].name, "test2");
    EXPECT_EQ(listed[0].functions, std::vector<std::string>{"test2.double"});
    absl::StatusOr<BoundFunction> fn = registry.Resolve("test2.double");
    ASSERT_TRUE(fn.ok()) << fn.status();
    Execution ex{.regions = &regions_, .registry = &registry};
    absl::StatusOr<std::string> doubled = LocalContext::Run(&ex, *fn, U64s({21}));
    if (when == NativeLoader::InProcess::kNever) {
      EXPECT_EQ(doubled.status().code(), absl::StatusCode::kFailedPrecondition);
      continue;
    }
    ASSERT_TRUE(doubled.ok()) << doubled.status();
    EXPECT_EQ(U64At(*doubled, 0), 42u);
  }
}

}  // namespace ardma
