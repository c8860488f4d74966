#include "core/memory/region.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ardma {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "." + std::to_string(::getpid()) + "." +
           ::testing::UnitTest::GetInstance()->current_test_info()->name()))
      .string();
}

TEST(RegionTest, ReadWriteAndBounds) {
  auto region = Region::Create({.size = 4096});
  ASSERT_TRUE(region.ok()) << region.status();
  Region& r = **region;
  ASSERT_TRUE(r.Write(4090, "abcdef").ok());
  char out[6];
  ASSERT_TRUE(r.Read(4090, out).ok());
  EXPECT_EQ(std::string_view(out, 6), "abcdef");
  EXPECT_EQ(r.Write(4091, "abcdef").code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(r.Read(4097, std::span<char>(out, 0)).code(), absl::StatusCode::kOutOfRange);
  // Overflowing addr + len must not wrap around into range.
  EXPECT_EQ(r.CheckRange(~0ull - 2, 8).code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(r.CheckRange(4096, 0).ok());
  EXPECT_EQ(r.View(4000, 97).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(RegionTest, AtomicsNeedAlignmentAndReturnOldValue) {
  auto region = Region::Create({.size = 4096});
  ASSERT_TRUE(region.ok());
  Region& r = **region;
  EXPECT_EQ(r.CompareAndSwap(4, 0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.FetchAdd(12, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.FetchAdd(4096, 1).status().code(), absl::StatusCode::kOutOfRange);
  absl::StatusOr<CasResult> won = r.CompareAndSwap(8, 0, 5);
  ASSERT_TRUE(won.ok());
  EXPECT_TRUE(won->swapped);
  EXPECT_EQ(won->observed, 0u);
  absl::StatusOr<CasResult> lost = r.CompareAndSwap(8, 0, 6);
  ASSERT_TRUE(lost.ok());  // losing is a result, not an error
  EXPECT_FALSE(lost->swapped);
  EXPECT_EQ(lost->observed, 5u);
  EXPECT_EQ(*r.FetchAdd(8, 10), 5u);
  EXPECT_EQ(*r.FetchAdd(8, 0), 15u);
}

TEST(RegionTest, ConcurrentFetchAddSumsExactly) {
  auto region = Region::Create({.size = 4096});
  ASSERT_TRUE(region.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100000; ++i) ASSERT_TRUE((*region)->FetchAdd(64, 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*(*region)->FetchAdd(64, 0), 400000u);
}

TEST(RegionTest, ReadOnlyRefusesWrites) {
  auto region = Region::Create({.size = 4096, .read_only = true});
  ASSERT_TRUE(region.ok());
  EXPECT_EQ((*region)->Write(0, "x").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*region)->CompareAndSwap(0, 0, 1).status().code(),
            absl::StatusCode::kPermissionDenied);
  char c;
  EXPECT_TRUE((*region)->Read(0, std::span<char>(&c, 1)).ok());
}

TEST(RegionTest, FileBackedKeepsDataAndChecksSize) {
  std::string path = TempPath("ardma_region");
  std::filesystem::remove(path);
  {
    auto region = Region::Create({.size = 8192, .file = path});
    ASSERT_TRUE(region.ok()) << region.status();
    EXPECT_FALSE((*region)->reopened());
    ASSERT_TRUE((*region)->Write(100, "persist me").ok());
  }
  {
    auto region = Region::Create({.size = 0, .file = path});  // 0: the file's size
    ASSERT_TRUE(region.ok()) << region.status();
    EXPECT_TRUE((*region)->reopened());
    EXPECT_EQ((*region)->size(), 8192u);
    char out[10];
    ASSERT_TRUE((*region)->Read(100, out).ok());
    EXPECT_EQ(std::string_view(out, 10), "persist me");
  }
  EXPECT_EQ(Region::Create({.size = 4096, .file = path}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  std::filesystem::remove(path);
  EXPECT_EQ(Region::Create({.size = 0, .file = path}).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::filesystem::remove(path);
  EXPECT_FALSE(Region::Create({.size = 4096, .file = "/nonexistent-dir/x"}).ok());
}

TEST(RegionTableTest, UnknownRegionIsNotFound) {
  RegionTable table;
  table.Add(*Region::Create({.size = 4096}));
  EXPECT_TRUE(table.Get(0).ok());
  EXPECT_EQ(table.Get(1).status().code(), absl::StatusCode::kNotFound);
}

TEST(ParseByteSizeTest, Suffixes) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("64K"), 64u << 10);
  EXPECT_EQ(*ParseByteSize("512m"), 512u << 20);
  EXPECT_EQ(*ParseByteSize("1G"), 1ull << 30);
  EXPECT_FALSE(ParseByteSize("").ok());
  EXPECT_FALSE(ParseByteSize("G").ok());
  EXPECT_FALSE(ParseByteSize("-1").ok());
  EXPECT_FALSE(ParseByteSize("99999999999T").ok());
}

}  // namespace
}  // namespace ardma
