#include "cel/source.h"

#include <string>

#include <gtest/gtest.h>

namespace qm::cel {
namespace {

TEST(SourceTest, MapsOffsetsToLinesAndCodePointColumns) {
  const Source source("ab\n\xc3\xa9x\n");
  EXPECT_EQ(source.GetLocation(0), (SourceLocation{1, 1}));
  EXPECT_EQ(source.GetLocation(2), (SourceLocation{1, 3}));  // the '\n' ends line 1
  EXPECT_EQ(source.GetLocation(3), (SourceLocation{2, 1}));
  EXPECT_EQ(source.GetLocation(5), (SourceLocation{2, 2}));  // after the two-byte 'é'
  EXPECT_EQ(source.GetLocation(6), (SourceLocation{2, 3}));
  EXPECT_EQ(source.GetLocation(7), (SourceLocation{3, 1}));     // empty last line
  EXPECT_EQ(source.GetLocation(1000), (SourceLocation{3, 1}));  // clamped to the end
}

TEST(SourceTest, CountsInvalidBytesAsOneColumnEach) {
  const Source source(
      "\xff\xfe"
      "a");
  EXPECT_EQ(source.GetLocation(2), (SourceLocation{1, 3}));
}

TEST(SourceTest, SnippetsExcludeLineTerminators) {
  const Source source("a\r\nbc\nd");
  EXPECT_EQ(source.Snippet(1), "a");
  EXPECT_EQ(source.Snippet(2), "bc");
  EXPECT_EQ(source.Snippet(3), "d");
  EXPECT_EQ(source.Snippet(0), std::nullopt);
  EXPECT_EQ(source.Snippet(4), std::nullopt);
}

TEST(SourceTest, RendersLikeCelGo) {
  const Source source("x + y");
  EXPECT_EQ(source.DisplayIssue({"undeclared reference to 'y' (in container '')", 4}),
            "ERROR: <input>:1:5: undeclared reference to 'y' (in container '')\n"
            " | x + y\n"
            " | ....^");
  EXPECT_EQ(Source("x", "expr.cel").DisplayIssue({"bad", 0}),
            "ERROR: expr.cel:1:1: bad\n | x\n | ^");
}

TEST(SourceTest, RendersOnlyTheIssuesLine) {
  const Source source("a &&\n  b.c(\n  d)");
  EXPECT_EQ(source.DisplayIssue({"found no matching overload for 'c'", 9}),
            "ERROR: <input>:2:5: found no matching overload for 'c'\n"
            " |   b.c(\n"
            " | ....^");
}

TEST(SourceTest, SortsIssuesByPositionKeepingTiesInOrder) {
  const Source source("ab");
  EXPECT_EQ(source.DisplayIssues({{"second", 1}, {"first", 0}, {"third", 1}}),
            "ERROR: <input>:1:1: first\n | ab\n | ^\n"
            "ERROR: <input>:1:2: second\n | ab\n | .^\n"
            "ERROR: <input>:1:2: third\n | ab\n | .^");
  EXPECT_EQ(source.DisplayIssues({}), "");
}

TEST(SourceTest, RendersInvalidUtf8AsReplacementCharacters) {
  const Source source("'\xff' + $");
  const std::string rendered = source.DisplayIssue({"msg \xfe", 6});
  EXPECT_EQ(rendered, "ERROR: <input>:1:7: msg \xef\xbf\xbd\n | '\xef\xbf\xbd' + $\n | ......^");
  EXPECT_EQ(SanitizeUtf8(rendered), rendered);
}

TEST(SourceTest, OmitsVeryLongLines) {
  const Source source(std::string(20000, 'a'));
  EXPECT_EQ(source.DisplayIssue({"too long", 5}), "ERROR: <input>:1:6: too long");
}

TEST(Utf8Test, DecodesAndRejectsMalformedSequences) {
  size_t size = 0;
  EXPECT_EQ(DecodeUtf8("\xf0\x9f\x98\x80", 0, &size), U'\U0001F600');
  EXPECT_EQ(size, 4u);
  EXPECT_EQ(DecodeUtf8("\xc0\xaf", 0, &size), U'\uFFFD');  // overlong
  EXPECT_EQ(size, 1u);
  EXPECT_EQ(DecodeUtf8("\xed\xa0\x80", 0, &size), U'\uFFFD');  // surrogate
  EXPECT_EQ(DecodeUtf8("\xe6\x97", 0, &size), U'\uFFFD');      // truncated
  std::string out;
  AppendUtf8(0xD800, &out);
  AppendUtf8(U'é', &out);
  EXPECT_EQ(out, "\xef\xbf\xbd\xc3\xa9");
  EXPECT_EQ(SanitizeUtf8("a\x80z"), "a\xef\xbf\xbdz");
}

}  // namespace
}  // namespace qm::cel
