#include "core/active/code_registry.h"

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

}  // namespace
}  // namespace ardma
