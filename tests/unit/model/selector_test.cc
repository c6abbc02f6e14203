#include "model/selector.h"

#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"

namespace qm::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Labels = std::map<std::string, std::string>;
using Op = LabelSelector::Op;

LabelSelector MustParseLabels(const std::string& text) {
  absl::StatusOr<LabelSelector> sel = LabelSelector::Parse(text);
  EXPECT_TRUE(sel.ok()) << text << ": " << sel.status();
  return sel.ok() ? *sel : LabelSelector();
}

std::string LabelParseError(const std::string& text) {
  absl::StatusOr<LabelSelector> sel = LabelSelector::Parse(text);
  EXPECT_FALSE(sel.ok()) << text << " parsed";
  if (sel.ok()) return "";
  EXPECT_EQ(sel.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(sel.status().message());
}

const std::vector<std::string> kSliceFields = {"spec.nodeName", "spec.driver", "spec.pool.name"};

FieldSelector MustParseFields(const std::string& text) {
  absl::StatusOr<FieldSelector> sel = FieldSelector::Parse(text, kSliceFields);
  EXPECT_TRUE(sel.ok()) << text << ": " << sel.status();
  return sel.ok() ? *sel : FieldSelector();
}

// --- Label selector parsing -------------------------------------------------------------------

TEST(LabelSelectorTest, EmptyTextSelectsEverything) {
  for (const char* text : {"", "   "}) {
    LabelSelector sel = MustParseLabels(text);
    EXPECT_TRUE(sel.Empty()) << text;
    EXPECT_TRUE(sel.Matches({})) << text;
    EXPECT_TRUE(sel.Matches({{"app", "demo"}})) << text;
  }
}

TEST(LabelSelectorTest, ParsesSingleEquals) {
  LabelSelector sel = MustParseLabels("app=demo");
  ASSERT_EQ(sel.requirements().size(), 1u);
  EXPECT_EQ(sel.requirements()[0].key, "app");
  EXPECT_EQ(sel.requirements()[0].op, Op::kEquals);
  EXPECT_THAT(sel.requirements()[0].values, ElementsAre("demo"));
  EXPECT_FALSE(sel.Empty());
}

TEST(LabelSelectorTest, ParsesDoubleEqualsAsEquals) {
  LabelSelector sel = MustParseLabels("app==demo");
  ASSERT_EQ(sel.requirements().size(), 1u);
  EXPECT_EQ(sel.requirements()[0].op, Op::kEquals);
  EXPECT_THAT(sel.requirements()[0].values, ElementsAre("demo"));
}

TEST(LabelSelectorTest, ParsesNotEquals) {
  LabelSelector sel = MustParseLabels("tier!=x");
  ASSERT_EQ(sel.requirements().size(), 1u);
  EXPECT_EQ(sel.requirements()[0].key, "tier");
  EXPECT_EQ(sel.requirements()[0].op, Op::kNotEquals);
  EXPECT_THAT(sel.requirements()[0].values, ElementsAre("x"));
}

TEST(LabelSelectorTest, ParsesInAndNotInLists) {
  LabelSelector sel = MustParseLabels("env in (a, b,c),zone notin (z1)");
  ASSERT_EQ(sel.requirements().size(), 2u);
  EXPECT_EQ(sel.requirements()[0].key, "env");
  EXPECT_EQ(sel.requirements()[0].op, Op::kIn);
  EXPECT_THAT(sel.requirements()[0].values, ElementsAre("a", "b", "c"));
  EXPECT_EQ(sel.requirements()[1].key, "zone");
  EXPECT_EQ(sel.requirements()[1].op, Op::kNotIn);
  EXPECT_THAT(sel.requirements()[1].values, ElementsAre("z1"));
}

TEST(LabelSelectorTest, ParsesExistsAndDoesNotExist) {
  LabelSelector sel = MustParseLabels("gpu,!legacy");
  ASSERT_EQ(sel.requirements().size(), 2u);
  EXPECT_EQ(sel.requirements()[0].key, "gpu");
  EXPECT_EQ(sel.requirements()[0].op, Op::kExists);
  EXPECT_TRUE(sel.requirements()[0].values.empty());
  EXPECT_EQ(sel.requirements()[1].key, "legacy");
  EXPECT_EQ(sel.requirements()[1].op, Op::kDoesNotExist);
  EXPECT_TRUE(sel.requirements()[1].values.empty());
}

TEST(LabelSelectorTest, ParsesGreaterAndLess) {
  LabelSelector sel = MustParseLabels("replicas>3,rank < 10");
  ASSERT_EQ(sel.requirements().size(), 2u);
  EXPECT_EQ(sel.requirements()[0].key, "replicas");
  EXPECT_EQ(sel.requirements()[0].op, Op::kGreater);
  EXPECT_THAT(sel.requirements()[0].values, ElementsAre("3"));
  EXPECT_EQ(sel.requirements()[1].key, "rank");
  EXPECT_EQ(sel.requirements()[1].op, Op::kLess);
  EXPECT_THAT(sel.requirements()[1].values, ElementsAre("10"));
}

TEST(LabelSelectorTest, IgnoresWhitespaceAroundKeysOperatorsAndValues) {
  LabelSelector sel = MustParseLabels("  app = demo ,  tier != x , env in ( a , b ) , ! old ");
  ASSERT_EQ(sel.requirements().size(), 4u);
  EXPECT_EQ(sel.requirements()[0].key, "app");
  EXPECT_EQ(sel.requirements()[0].op, Op::kEquals);
  EXPECT_THAT(sel.requirements()[0].values, ElementsAre("demo"));
  EXPECT_EQ(sel.requirements()[1].key, "tier");
  EXPECT_EQ(sel.requirements()[1].op, Op::kNotEquals);
  EXPECT_THAT(sel.requirements()[1].values, ElementsAre("x"));
  EXPECT_EQ(sel.requirements()[2].key, "env");
  EXPECT_THAT(sel.requirements()[2].values, ElementsAre("a", "b"));
  EXPECT_EQ(sel.requirements()[3].key, "old");
  EXPECT_EQ(sel.requirements()[3].op, Op::kDoesNotExist);
}

TEST(LabelSelectorTest, AcceptsPrefixedKeysAndEmptyValue) {
  LabelSelector sel = MustParseLabels("example.com/gpu=,app.kubernetes.io/name=demo");
  ASSERT_EQ(sel.requirements().size(), 2u);
  EXPECT_EQ(sel.requirements()[0].key, "example.com/gpu");
  EXPECT_THAT(sel.requirements()[0].values, ElementsAre(""));
  EXPECT_EQ(sel.requirements()[1].key, "app.kubernetes.io/name");
  EXPECT_THAT(sel.requirements()[1].values, ElementsAre("demo"));
}

TEST(LabelSelectorTest, RejectsInvalidKey) {
  EXPECT_EQ(LabelParseError("-bad=x"),
            "unable to parse requirement: invalid label key \"-bad\": name part must consist of "
            "alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')");
  EXPECT_THAT(LabelParseError("Bad_Prefix/x=y"),
              StartsWith("unable to parse requirement: invalid label key \"Bad_Prefix/x\": "
                         "prefix part a lowercase RFC 1123 subdomain must consist of"));
  EXPECT_THAT(LabelParseError("!"),
              StartsWith("unable to parse requirement: invalid label key \"\": name part must "
                         "be non-empty"));
  EXPECT_THAT(LabelParseError(std::string(64, 'k') + "=v"),
              HasSubstr("name part must be no more than 63 characters"));
}

TEST(LabelSelectorTest, RejectsInvalidValue) {
  EXPECT_THAT(LabelParseError("app=-demo"),
              StartsWith("unable to parse requirement: invalid label value: \"-demo\": a valid "
                         "label must be an empty string or consist of alphanumeric characters"));
  EXPECT_THAT(LabelParseError("app=de mo"), HasSubstr("invalid label value: \"de mo\""));
  EXPECT_THAT(LabelParseError("env in (a,b!)"), HasSubstr("invalid label value: \"b!\""));
  EXPECT_THAT(LabelParseError("app=" + std::string(64, 'v')),
              HasSubstr("must be no more than 63 characters"));
}

TEST(LabelSelectorTest, RejectsNonIntegerForGreaterAndLess) {
  const std::string want =
      "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer";
  EXPECT_EQ(LabelParseError("replicas>abc"), want);
  EXPECT_EQ(LabelParseError("replicas<"), want);
  EXPECT_EQ(LabelParseError("replicas>3x"), want);
}

TEST(LabelSelectorTest, RejectsBadSyntax) {
  EXPECT_EQ(LabelParseError("app=demo,"), "found '', expected: identifier");
  EXPECT_EQ(LabelParseError(",app=demo"), "found '', expected: identifier");
  EXPECT_EQ(LabelParseError("env foo"),
            "unable to parse requirement: found 'foo', expected: in, notin, =, ==, !=, gt, lt");
  EXPECT_EQ(LabelParseError("env in a"), "found 'a', expected: '('");
  EXPECT_EQ(LabelParseError("env notin (a"), "found '(a', expected: '('");
}

// --- Label selector matching ------------------------------------------------------------------

TEST(LabelSelectorTest, EqualsRequiresKeyWithThatValue) {
  LabelSelector sel = MustParseLabels("app=demo");
  EXPECT_TRUE(sel.Matches({{"app", "demo"}, {"other", "x"}}));
  EXPECT_FALSE(sel.Matches({{"app", "other"}}));
  EXPECT_FALSE(sel.Matches({}));
}

TEST(LabelSelectorTest, NotEqualsMatchesMissingKey) {
  LabelSelector sel = MustParseLabels("tier!=x");
  EXPECT_TRUE(sel.Matches({}));
  EXPECT_TRUE(sel.Matches({{"tier", "y"}}));
  EXPECT_FALSE(sel.Matches({{"tier", "x"}}));
}

TEST(LabelSelectorTest, InMatchesAnyListedValueOnly) {
  LabelSelector sel = MustParseLabels("env in (a,b)");
  EXPECT_TRUE(sel.Matches({{"env", "a"}}));
  EXPECT_TRUE(sel.Matches({{"env", "b"}}));
  EXPECT_FALSE(sel.Matches({{"env", "c"}}));
  EXPECT_FALSE(sel.Matches({}));
}

TEST(LabelSelectorTest, NotInMatchesMissingKeyAndOtherValues) {
  LabelSelector sel = MustParseLabels("env notin (a,b)");
  EXPECT_TRUE(sel.Matches({}));
  EXPECT_TRUE(sel.Matches({{"env", "c"}}));
  EXPECT_FALSE(sel.Matches({{"env", "a"}}));
  EXPECT_FALSE(sel.Matches({{"env", "b"}}));
}

TEST(LabelSelectorTest, ExistsAndDoesNotExistLookAtKeyOnly) {
  LabelSelector exists = MustParseLabels("gpu");
  EXPECT_TRUE(exists.Matches({{"gpu", ""}}));
  EXPECT_FALSE(exists.Matches({{"cpu", "1"}}));
  LabelSelector absent = MustParseLabels("!gpu");
  EXPECT_FALSE(absent.Matches({{"gpu", ""}}));
  EXPECT_TRUE(absent.Matches({{"cpu", "1"}}));
}

TEST(LabelSelectorTest, GreaterAndLessCompareIntegers) {
  LabelSelector gt = MustParseLabels("replicas>3");
  EXPECT_TRUE(gt.Matches({{"replicas", "4"}}));
  EXPECT_TRUE(gt.Matches({{"replicas", "10"}}));  // numeric, not lexical
  EXPECT_FALSE(gt.Matches({{"replicas", "3"}}));
  EXPECT_FALSE(gt.Matches({{"replicas", "abc"}}));
  EXPECT_FALSE(gt.Matches({{"replicas", ""}}));
  EXPECT_FALSE(gt.Matches({}));
  LabelSelector lt = MustParseLabels("replicas<3");
  EXPECT_TRUE(lt.Matches({{"replicas", "-1"}}));
  EXPECT_TRUE(lt.Matches({{"replicas", "2"}}));
  EXPECT_FALSE(lt.Matches({{"replicas", "3"}}));
  EXPECT_FALSE(lt.Matches({}));
}

TEST(LabelSelectorTest, AllRequirementsMustMatch) {
  LabelSelector sel = MustParseLabels("app=demo,tier!=x,gpu");
  EXPECT_TRUE(sel.Matches({{"app", "demo"}, {"gpu", "1"}}));
  EXPECT_FALSE(sel.Matches({{"app", "demo"}, {"gpu", "1"}, {"tier", "x"}}));
  EXPECT_FALSE(sel.Matches({{"app", "demo"}}));
  EXPECT_FALSE(sel.Matches({{"gpu", "1"}}));
}

// --- Field selectors --------------------------------------------------------------------------

TEST(FieldSelectorTest, EmptyTextSelectsEverything) {
  FieldSelector sel = MustParseFields("");
  EXPECT_TRUE(sel.Empty());
  EXPECT_TRUE(sel.Matches("", "", {}));
  EXPECT_TRUE(sel.Matches("x", "ns", {{"spec.nodeName", "n"}}));
}

TEST(FieldSelectorTest, ParsesEqualsDoubleEqualsAndNotEquals) {
  FieldSelector sel =
      MustParseFields("metadata.name=a,metadata.namespace==ns, spec.nodeName != node-1");
  ASSERT_EQ(sel.requirements().size(), 3u);
  EXPECT_EQ(sel.requirements()[0].field, "metadata.name");
  EXPECT_TRUE(sel.requirements()[0].equals);
  EXPECT_EQ(sel.requirements()[0].value, "a");
  EXPECT_EQ(sel.requirements()[1].field, "metadata.namespace");
  EXPECT_TRUE(sel.requirements()[1].equals);
  EXPECT_EQ(sel.requirements()[1].value, "ns");
  EXPECT_EQ(sel.requirements()[2].field, "spec.nodeName");
  EXPECT_FALSE(sel.requirements()[2].equals);
  EXPECT_EQ(sel.requirements()[2].value, "node-1");
}

TEST(FieldSelectorTest, MetadataFieldsAreAlwaysSupported) {
  EXPECT_TRUE(FieldSelector::Parse("metadata.name=a", {}).ok());
  EXPECT_TRUE(FieldSelector::Parse("metadata.namespace=a", {}).ok());
}

TEST(FieldSelectorTest, RejectsUnsupportedFieldWithKubernetesMessage) {
  absl::StatusOr<FieldSelector> sel = FieldSelector::Parse("spec.foo=x", kSliceFields);
  ASSERT_FALSE(sel.ok());
  EXPECT_EQ(sel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sel.status().message(), "field label not supported: spec.foo");

  // Supported for one type is not supported for another.
  sel = FieldSelector::Parse("metadata.name=a,spec.nodeName=n", {});
  ASSERT_FALSE(sel.ok());
  EXPECT_EQ(sel.status().message(), "field label not supported: spec.nodeName");
}

TEST(FieldSelectorTest, RejectsTermWithoutOperatorNamingWholeSelector) {
  absl::StatusOr<FieldSelector> sel = FieldSelector::Parse("metadata.name", kSliceFields);
  ASSERT_FALSE(sel.ok());
  EXPECT_EQ(sel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sel.status().message(),
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'");

  sel = FieldSelector::Parse("metadata.name=a,bogus", kSliceFields);
  ASSERT_FALSE(sel.ok());
  EXPECT_EQ(sel.status().message(),
            "invalid selector: 'metadata.name=a,bogus'; can't understand 'bogus'");
}

TEST(FieldSelectorTest, SkipsEmptyTermsLikeKubernetes) {
  FieldSelector sel = MustParseFields("metadata.name=a,");
  ASSERT_EQ(sel.requirements().size(), 1u);
  EXPECT_EQ(sel.requirements()[0].field, "metadata.name");
  EXPECT_EQ(sel.requirements()[0].value, "a");
}

TEST(FieldSelectorTest, EqualsMatchesExactValue) {
  FieldSelector sel = MustParseFields("spec.driver=gpu.example.com");
  EXPECT_TRUE(sel.Matches("", "", {{"spec.driver", "gpu.example.com"}}));
  EXPECT_FALSE(sel.Matches("", "", {{"spec.driver", "other.example.com"}}));
  EXPECT_FALSE(sel.Matches("", "", {}));
}

TEST(FieldSelectorTest, MissingFieldCountsAsEmptyString) {
  FieldSelector empty_node = MustParseFields("spec.nodeName=");
  EXPECT_TRUE(empty_node.Matches("", "", {}));
  EXPECT_TRUE(empty_node.Matches("", "", {{"spec.nodeName", ""}}));
  EXPECT_FALSE(empty_node.Matches("", "", {{"spec.nodeName", "n1"}}));

  FieldSelector not_n1 = MustParseFields("spec.nodeName!=n1");
  EXPECT_TRUE(not_n1.Matches("", "", {}));
  EXPECT_TRUE(not_n1.Matches("", "", {{"spec.nodeName", "n2"}}));
  EXPECT_FALSE(not_n1.Matches("", "", {{"spec.nodeName", "n1"}}));

  FieldSelector has_node = MustParseFields("spec.nodeName!=");
  EXPECT_FALSE(has_node.Matches("", "", {}));
  EXPECT_TRUE(has_node.Matches("", "", {{"spec.nodeName", "n1"}}));
}

TEST(FieldSelectorTest, AllRequirementsMustMatch) {
  FieldSelector sel = MustParseFields("metadata.name=s1,spec.pool.name=p");
  EXPECT_TRUE(sel.Matches("s1", "", {{"spec.pool.name", "p"}}));
  EXPECT_FALSE(sel.Matches("s1", "", {{"spec.pool.name", "q"}}));
  EXPECT_FALSE(sel.Matches("s2", "", {{"spec.pool.name", "p"}}));
}

// metadata.name and metadata.namespace come from the object's metadata, not from its fields
// (stored objects no longer repeat them there; rows written before may still).
TEST(FieldSelectorTest, NameAndNamespaceAreReadFromTheMetadata) {
  FieldSelector sel = MustParseFields("metadata.name=s1,metadata.namespace=team-a");
  EXPECT_TRUE(sel.Matches("s1", "team-a", {}));
  EXPECT_FALSE(sel.Matches("s2", "team-a", {}));
  EXPECT_FALSE(sel.Matches("s1", "team-b", {}));
  EXPECT_FALSE(
      sel.Matches("s2", "team-b", {{"metadata.name", "s1"}, {"metadata.namespace", "team-a"}}));
  EXPECT_TRUE(
      sel.Matches("s1", "team-a", {{"metadata.name", "old"}, {"metadata.namespace", "old"}}));

  FieldSelector not_default = MustParseFields("metadata.namespace!=default");
  EXPECT_TRUE(not_default.Matches("x", "", {}));
  EXPECT_FALSE(not_default.Matches("x", "default", {}));
}

}  // namespace
}  // namespace qm::model
