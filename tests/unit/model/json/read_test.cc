// model/json/read.h: the reader's tree is parse()'s, value types included, and it fails where
// parse() fails.

#include "model/json/read.h"

#include <cmath>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "model/json/write.h"
#include "random_json.h"

namespace qm::model::json {
namespace {

using nlohmann::json;

// Equal and of the same types all the way down (json's == takes 5u and 5 as equal).
bool SameTree(const json& a, const json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
      if (ia.key() != ib.key() || !SameTree(*ia, *ib)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!SameTree(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_discarded()) return true;
  if (a.is_number_float()) {
    const double x = a.get<double>(), y = b.get<double>();
    return x == y || (std::isnan(x) && std::isnan(y));
  }
  return a == b;
}

void ExpectSameAsParse(const std::string& text) {
  const json expected = json::parse(text, nullptr, false);
  const json got = Read(text);
  EXPECT_TRUE(SameTree(got, expected))
      << ::testing::PrintToString(text)
      << "\nread:  " << got.dump(-1, ' ', false, json::error_handler_t::replace)
      << "\nparse: " << expected.dump(-1, ' ', false, json::error_handler_t::replace);
}

TEST(ReadTest, ValuesHaveTheTypesParseGivesThem) {
  EXPECT_TRUE(Read("5").is_number_unsigned());
  EXPECT_TRUE(Read("-5").is_number_integer());
  EXPECT_TRUE(Read("-0").is_number_integer());
  EXPECT_TRUE(Read("1.5").is_number_float());
  for (const char* text :
       {"0", "-0", "5", "-5", "999999999999999999", "-999999999999999999", "1000000000000000000",
        "18446744073709551615", "18446744073709551616", "-9223372036854775808",
        "-9223372036854775809", "1.5", "-2e10", "1E3", "0.0", "true", "false", "null", "\"\""}) {
    ExpectSameAsParse(text);
  }
}

TEST(ReadTest, ContainersWhitespaceAndRepeatedKeys) {
  for (const char* text :
       {"{}", "[]", " { } ", "[ ]", "\t\r\n{\"a\" : [1 , -2,0,true,false,null,\"x\"]}\n",
        R"({"b":1,"a":{"d":[],"c":{}}})", R"({"a":1,"a":2})", R"({"a":{"x":1},"a":[2]})",
        R"([[[[[]]]]])", R"({"k":"v","k2":[{"a":null}]})"}) {
    ExpectSameAsParse(text);
  }
  EXPECT_EQ(Read(R"({"a":1,"a":2})")["a"], 2);
}

TEST(ReadTest, StringsAndEscapes) {
  for (const std::string text :
       {R"("a\"b\\c\/d\b\f\n\r\t")", "\"gr\xc3\xbc\xc3\x9f \xe4\xb8\xad \xf0\x9f\x98\x80\"",
        "\"\x7f\"", R"("\u00e9\ud83d\ude00")", R"("\u0000")", R"("\ud800")", R"("\x")", "\"\x01\"",
        "\"\xff\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xe2\x82\"", "\"abc", "\"abc\\"}) {
    ExpectSameAsParse(text);
  }
}

TEST(ReadTest, ErrorsAreParsesErrors) {
  for (const std::string text :
       {"",          " ",          "{",           "}",           "[1,]",   "[,1]",
        R"({"a":})", R"({"a" 1})", R"({"a":1,})", "{1:2}",       "01",     "-",
        "+1",        "1x",         "tru",         "nul",         "falsey", "[1 2]",
        "{} x",      "NaN",        "/* c */ {}",  "\"a\" \"b\"", "1.",     ".5",
        "-01",       "[-]"}) {
    SCOPED_TRACE(::testing::PrintToString(text));
    EXPECT_TRUE(Read(text).is_discarded());
    ExpectSameAsParse(text);
  }
}

TEST(ReadTest, AByteOrderMarkAndDeepNestingAreParsesToo) {
  ExpectSameAsParse("\xEF\xBB\xBF{\"a\":1}");
  ExpectSameAsParse("\xEF\xBB{}");
  const std::string deep = std::string(400, '[') + std::string(400, ']');
  ExpectSameAsParse(deep);
  EXPECT_FALSE(Read(deep).is_discarded());
}

TEST(ReadTest, RandomTreesInEveryLayoutMatchParse) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const json value = qm::testing::RandomJson(rng);
    for (const std::string& text : {Write(value), value.dump(2), value.dump(1, '\t')}) {
      ExpectSameAsParse(text);
    }
    if (::testing::Test::HasFailure()) return;
  }
}

// Valid text with random bytes changed, put in or taken out: read as parse() reads it, or
// refused as it refuses it.
TEST(ReadTest, DamagedTextMatchesParse) {
  std::mt19937 rng(11);
  const char alphabet[] = "{}[],:\"\\ 0123456789-+.eEtrufalsn\x01\x7f\xc3\xa9\xff\xed\xa0";
  std::uniform_int_distribution<size_t> pick(0, sizeof(alphabet) - 2);
  int refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text = Write(qm::testing::RandomJson(rng));
    for (int edits = 1 + rng() % 3; edits > 0; --edits) {
      const size_t at = text.empty() ? 0 : rng() % (text.size() + 1);
      switch (rng() % 3) {
        case 0:
          if (at < text.size()) text[at] = alphabet[pick(rng)];
          break;
        case 1:
          text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), alphabet[pick(rng)]);
          break;
        default:
          if (at < text.size()) text.erase(at, 1);
      }
    }
    if (json::parse(text, nullptr, false).is_discarded()) ++refused;
    ExpectSameAsParse(text);
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(refused, 2000);   // errors were tried
  EXPECT_LT(refused, 18000);  // and so was text that still parses
}

}  // namespace
}  // namespace qm::model::json
