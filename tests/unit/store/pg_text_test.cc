#include "store/pg/text.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace qm::store::pg {
namespace {

TEST(TextArrayTest, QuotesEveryElementAndEscapesQuotesAndBackslashes) {
  EXPECT_EQ(TextArray({}), "{}");
  EXPECT_EQ(TextArray({""}), R"({""})");
  EXPECT_EQ(TextArray({"a", "", "b c"}), R"({"a","","b c"})");
  EXPECT_EQ(TextArray({R"({"k":"v\"w"})"}), R"({"{\"k\":\"v\\\"w\"}"})");
  EXPECT_EQ(TextArray({"\\", "\""}), R"({"\\","\""})");
  // NULL, braces, commas and non-ASCII bytes are plain text inside quotes.
  EXPECT_EQ(TextArray({"NULL", "{a,b}", "\xc3\xa9"}), "{\"NULL\",\"{a,b}\",\"\xc3\xa9\"}");
}

TEST(TextArrayTest, LongElementsComeOutWhole) {
  std::string body(100000, 'x');
  body[500] = '"';
  body[99999] = '\\';
  const std::string out = TextArray({body, body});
  std::string want = body;
  want.insert(99999, "\\");
  want.insert(500, "\\");
  EXPECT_EQ(out, "{\"" + want + "\",\"" + want + "\"}");
}

// array_send's layout, all integers big-endian: ndim, has-nulls flag, element type (text, 25);
// per dimension its length and lower bound; per element its length and bytes, as they are.
TEST(BinaryTextArrayTest, WritesPostgresBinaryLayout) {
  using namespace std::string_literals;
  EXPECT_EQ(BinaryTextArray({}),
            "\0\0\0\0"s
            "\0\0\0\0"s
            "\0\0\0\x19"s);
  EXPECT_EQ(BinaryTextArray({"ab", "", "\"{\\"}),
            "\0\0\0\x01"s
            "\0\0\0\0"s
            "\0\0\0\x19"s
            "\0\0\0\x03"s
            "\0\0\0\x01"s
            "\0\0\0\x02"s
            "ab"s
            "\0\0\0\0"s
            "\0\0\0\x03\"{\\"s);
}

TEST(BinaryTextArrayTest, LongElementsKeepTheirLengthAndBytes) {
  const std::string body(70000, 'x');
  const std::string out = BinaryTextArray({body});
  ASSERT_EQ(out.size(), 20u + 4u + body.size());
  EXPECT_EQ(out.substr(20, 4), std::string("\0\x01\x11\x70", 4));  // 70,000
  EXPECT_EQ(out.substr(24), body);
}

TEST(MicrosTest, CountsMicrosecondsSinceTheEpoch) {
  EXPECT_EQ(Micros(std::chrono::system_clock::time_point()), 0);
  EXPECT_EQ(Micros(std::chrono::system_clock::time_point(std::chrono::seconds(1700000000)) +
                   std::chrono::microseconds(42)),
            1700000000000042);
}

}  // namespace
}  // namespace qm::store::pg
