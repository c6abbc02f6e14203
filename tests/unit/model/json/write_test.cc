// model/json/write.h: the writer's text is dump()'s, byte for byte, and it fails where dump()
// fails.

#include "model/json/write.h"

#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "random_json.h"

namespace qm::model::json {
namespace {

using nlohmann::json;

// Write(value) == value.dump(), or both throw nlohmann's type_error.
void ExpectSameAsDump(const json& value) {
  std::string dumped;
  bool dump_failed = false;
  try {
    dumped = value.dump();
  } catch (const json::type_error&) {
    dump_failed = true;
  }
  if (dump_failed) {
    EXPECT_THROW(Write(value), json::type_error);
    return;
  }
  EXPECT_EQ(Write(value), dumped);
}

TEST(WriteTest, ScalarsAreWrittenAsDumpWritesThem) {
  EXPECT_EQ(Write(json()), "null");
  EXPECT_EQ(Write(json(true)), "true");
  EXPECT_EQ(Write(json(false)), "false");
  EXPECT_EQ(Write(json(0)), "0");
  EXPECT_EQ(Write(json(-17)), "-17");
  EXPECT_EQ(Write(json(std::numeric_limits<int64_t>::min())), "-9223372036854775808");
  EXPECT_EQ(Write(json(std::numeric_limits<uint64_t>::max())), "18446744073709551615");
  for (double d : {0.0, -0.0, 0.1, 3.0, 1e300, -2.5e-8, 123456789.125}) ExpectSameAsDump(json(d));
  EXPECT_EQ(Write(json("")), "\"\"");
}

TEST(WriteTest, ContainersKeepTheTreesOrder) {
  EXPECT_EQ(Write(json::object()), "{}");
  EXPECT_EQ(Write(json::array()), "[]");
  const json value = json::parse(
      R"({"spec":{"b":[1,2,{"z":null,"a":[]}],"a":{}},"kind":"Pod","apiVersion":"v1"})");
  EXPECT_EQ(Write(value),
            R"({"apiVersion":"v1","kind":"Pod","spec":{"a":{},"b":[1,2,{"a":[],"z":null}]}})");
  ExpectSameAsDump(value);
}

TEST(WriteTest, StringsAreEscapedAsDumpEscapesThem) {
  EXPECT_EQ(Write(json("a\"b\\c/d")), R"("a\"b\\c/d")");
  EXPECT_EQ(Write(json("\b\f\n\r\t")), R"("\b\f\n\r\t")");
  EXPECT_EQ(Write(json(std::string("\x00\x01\x1f", 3))), R"("\u0000\u0001\u001f")");
  EXPECT_EQ(Write(json("\x7f")), "\"\x7f\"");  // DEL stays as it is
  EXPECT_EQ(Write(json("gr\xc3\xbc\xc3\x9f \xe4\xb8\xad \xf0\x9f\x98\x80")),
            "\"gr\xc3\xbc\xc3\x9f \xe4\xb8\xad \xf0\x9f\x98\x80\"");
  for (int c = 0; c < 0x80; ++c) ExpectSameAsDump(json(std::string(1, static_cast<char>(c))));
  // Keys are strings too.
  EXPECT_EQ(Write(json{{"a\nb", 1}}), R"({"a\nb":1})");
}

TEST(WriteTest, TextThatIsNotUtf8FailsAsInDump) {
  for (const std::string bad :
       {"\xff", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
        "\xf5\x80\x80\x80", "\xe2\x82", "ok\x80", "\xf0\x9f\x98"}) {
    SCOPED_TRACE(::testing::PrintToString(bad));
    EXPECT_THROW(json(bad).dump(), json::type_error);
    EXPECT_THROW(Write(json(bad)), json::type_error);
    EXPECT_THROW(Write(json{{"key", {1, bad}}}), json::type_error);
    EXPECT_THROW(Write(json{{bad, 1}}), json::type_error);
  }
}

TEST(WriteTest, StringMapsAreWrittenAsTheirTrees) {
  const std::map<std::string, std::string> empty;
  EXPECT_EQ(WriteStringMap(empty), "{}");
  const std::map<std::string, std::string> labels = {
      {"app.kubernetes.io/name", "train"}, {"tier", "a\"b"}, {"z", ""}, {"\u00e9", "\x01"}};
  EXPECT_EQ(WriteStringMap(labels), json(labels).dump());
  EXPECT_THROW(WriteStringMap({{"bad", "\xff"}}), json::type_error);
}

TEST(WriteTest, StringListsAreWrittenAsTheirTrees) {
  EXPECT_EQ(WriteStringList({}), "[]");
  const std::vector<std::string> groups = {"system:nodes", "a\"b", "", "\u00e9\x01"};
  EXPECT_EQ(WriteStringList(groups), json(groups).dump());
  EXPECT_THROW(WriteStringList({"ok", "\xff"}), json::type_error);
}

TEST(WriteTest, AppendKeepsWhatIsThereAndAddsNothingWhenItFails) {
  std::string out = "prefix:";
  AppendJson(json{{"a", 1}}, &out);
  EXPECT_EQ(out, R"(prefix:{"a":1})");
  EXPECT_THROW(AppendJson(json{{"a", "\xff"}}, &out), json::type_error);
  EXPECT_EQ(out, R"(prefix:{"a":1})");
}

// Random byte strings, most of them near UTF-8's edges: every one is written as dump() writes
// it, or fails as it fails.
TEST(WriteTest, RandomBytesMatchDump) {
  std::mt19937 rng(20261202);
  const unsigned char interesting[] = {0x00, 0x1f, 0x20, '"',  '\\', 0x7f, 0x80, 0x8f, 0x90, 0x9f,
                                       0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed,
                                       0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff, 'a',  'Z'};
  std::uniform_int_distribution<int> length(0, 6);
  std::uniform_int_distribution<size_t> pick(0, sizeof(interesting) - 1);
  int failed = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    for (int n = length(rng); n > 0; --n) s.push_back(static_cast<char>(interesting[pick(rng)]));
    try {
      (void)json(s).dump();
    } catch (const json::type_error&) {
      ++failed;
    }
    ExpectSameAsDump(json(s));
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "first mismatch for " << ::testing::PrintToString(s);
      return;
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(failed, 1000);
  EXPECT_LT(failed, 19000);
}

TEST(WriteTest, RandomTreesMatchDump) {
  std::mt19937 rng(42);
  for (int i = 0; i < 3000; ++i) {
    const json value = qm::testing::RandomJson(rng);
    ASSERT_EQ(Write(value), value.dump()) << "tree " << i;
  }
}

}  // namespace
}  // namespace qm::model::json
