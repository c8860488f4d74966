// The admin CLI's pure pieces; the commands themselves run against a live server in ardmad_test.
#include "tools/ardma_cli.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace ardma::cli {
namespace {

TEST(ArdmaCliTest, NumbersAreDecimalOrHex) {
  EXPECT_EQ(*ParseNumber("1048576"), 1048576u);
  EXPECT_EQ(*ParseNumber("0x100000"), 1048576u);
  EXPECT_EQ(*ParseNumber("0XfF"), 255u);
  EXPECT_EQ(ParseNumber("12a").status().message(), "not a number: '12a'");
  EXPECT_FALSE(ParseNumber("0x").ok());
  EXPECT_FALSE(ParseNumber("-1").ok());
}

TEST(ArdmaCliTest, HexDataAndDumps) {
  EXPECT_EQ(*ParseHex("68656c6c6f"), "hello");
  EXPECT_EQ(*ParseHex(""), "");
  EXPECT_EQ(ParseHex("abc").status().message(), "hex data needs an even length");
  EXPECT_EQ(ParseHex("zz").status().message(), "bad hex data: 'zz'");
  EXPECT_TRUE(IsUsage(ParseHex("zz").status()));
  EXPECT_EQ(HexDump("hello", 0x100000),
            "0000000000100000  68 65 6c 6c 6f                                   |hello|\n");
  std::string two_lines = HexDump(std::string(17, '\x01'), 0x10);
  EXPECT_EQ(std::count(two_lines.begin(), two_lines.end(), '\n'), 2);
  EXPECT_NE(two_lines.find("\n0000000000000020  01 "), std::string::npos);
}

TEST(ArdmaCliTest, TypedExecArgumentsAndResults) {
  using T = Options::Typed;
  EXPECT_EQ(*EncodeTyped(T::kI32, {"1", "-2"}), std::string("\x01\0\0\0\xfe\xff\xff\xff", 8));
  EXPECT_EQ(*EncodeTyped(T::kI64, {"5"}), std::string("\x05\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(*EncodeTyped(T::kStr, {"hello", "world"}), "hello world");
  EXPECT_TRUE(IsUsage(EncodeTyped(T::kI32, {"4294967296"}).status()));
  EXPECT_TRUE(IsUsage(EncodeTyped(T::kI64, {"x"}).status()));
  EXPECT_EQ(*FormatTyped(T::kI32, std::string("\x03\0\0\0\xfc\xff\xff\xff", 8)), "3 -4");
  EXPECT_EQ(*FormatTyped(T::kI64, std::string("\x0a\0\0\0\0\0\0\0", 8)), "10");
  EXPECT_EQ(*FormatTyped(T::kI32, ""), "");
  EXPECT_EQ(FormatTyped(T::kI32, "abc").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ArdmaCliTest, UsageErrorsAreToldApart) {
  EXPECT_TRUE(IsUsage(Usage("usage: ardma ping [COUNT]")));
  EXPECT_FALSE(IsUsage(absl::InvalidArgumentError("usage: ardma ping [COUNT]")));
  // Bad usage is found before any connection is made.
  Options opt;
  opt.server = "127.0.0.1:1";
  EXPECT_TRUE(IsUsage(RunCommand(opt, {"frobnicate"})));
  EXPECT_TRUE(IsUsage(RunCommand(opt, {"ping", "1", "2"})));
  EXPECT_TRUE(IsUsage(RunCommand(opt, {"fs", "chmod", "/x"})));
}

}  // namespace
}  // namespace ardma::cli
