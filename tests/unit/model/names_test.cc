#include "model/names.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace qm::model {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::StartsWith;

// apimachinery's messages (k8s.io/apimachinery/pkg/util/validation), verbatim.
constexpr char kLabelMsg[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
constexpr char kSubdomainMsg[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
constexpr char kNamePartMsg[] =
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
constexpr char kLabelValueMsg[] =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
constexpr char kCIdentifierMsg[] =
    "a valid C identifier must start with alphabetic character or '_', followed by a string of "
    "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
    "validation is '[A-Za-z_][A-Za-z0-9_]*')";

// --- DNS-1123 label ---------------------------------------------------------------------------

TEST(NamesTest, Dns1123LabelAcceptsLowercaseAlphanumericAndDashes) {
  for (const char* v : {"a", "0", "my-name", "123-abc", "a--b", "gpu0"}) {
    EXPECT_THAT(IsDns1123Label(v), IsEmpty()) << v;
  }
  EXPECT_THAT(IsDns1123Label(std::string(63, 'a')), IsEmpty());
}

TEST(NamesTest, Dns1123LabelRejectsBadCharactersWithKubernetesMessage) {
  for (const char* v : {"", "-a", "a-", "My-Name", "a_b", "a b", "ä"}) {
    EXPECT_THAT(IsDns1123Label(v), ElementsAre(kLabelMsg)) << v;
  }
}

TEST(NamesTest, Dns1123LabelRejectsDotsWithDedicatedMessage) {
  EXPECT_THAT(IsDns1123Label("a.b"), ElementsAre("must not contain dots"));
  EXPECT_THAT(IsDns1123Label("gpu.example.com"), ElementsAre("must not contain dots"));
  // Not a valid subdomain either: the regex message.
  EXPECT_THAT(IsDns1123Label("a..b"), ElementsAre(kLabelMsg));
}

TEST(NamesTest, Dns1123LabelLimitsLengthTo63) {
  EXPECT_THAT(IsDns1123Label(std::string(64, 'a')),
              ElementsAre("must be no more than 63 characters"));
  EXPECT_THAT(IsDns1123Label(std::string(64, 'A')),
              ElementsAre("must be no more than 63 characters", kLabelMsg));
}

// --- DNS-1123 subdomain -----------------------------------------------------------------------

TEST(NamesTest, Dns1123SubdomainAcceptsDottedLabels) {
  for (const char* v : {"a", "example.com", "gpu.example.com", "rc-1", "1.2.3"}) {
    EXPECT_THAT(IsDns1123Subdomain(v), IsEmpty()) << v;
  }
  EXPECT_THAT(IsDns1123Subdomain(std::string(253, 'a')), IsEmpty());
}

TEST(NamesTest, Dns1123SubdomainRejectsBadNamesWithKubernetesMessage) {
  for (const char* v : {"", ".a", "a.", "a..b", "Example.com", "a_b.com", "-a.com"}) {
    EXPECT_THAT(IsDns1123Subdomain(v), ElementsAre(kSubdomainMsg)) << v;
  }
}

TEST(NamesTest, Dns1123SubdomainLimitsLengthTo253) {
  EXPECT_THAT(IsDns1123Subdomain(std::string(254, 'a')),
              ElementsAre("must be no more than 253 characters"));
}

// --- Qualified names (label keys) -------------------------------------------------------------

TEST(NamesTest, QualifiedNameAcceptsOptionalSubdomainPrefix) {
  for (const char* v : {"app", "MyName", "my.name", "123-abc", "a_b", "example.com/MyName",
                        "app.kubernetes.io/name", "resource.kubernetes.io/pod-claim-name"}) {
    EXPECT_THAT(IsQualifiedName(v), IsEmpty()) << v;
  }
  EXPECT_THAT(IsQualifiedName(std::string(63, 'n')), IsEmpty());
  EXPECT_THAT(IsQualifiedName(std::string(253, 'p') + "/" + std::string(63, 'n')), IsEmpty());
}

TEST(NamesTest, QualifiedNameRejectsBadNamePart) {
  EXPECT_THAT(IsQualifiedName("-app"), ElementsAre(kNamePartMsg));
  EXPECT_THAT(IsQualifiedName("app."), ElementsAre(kNamePartMsg));
  EXPECT_THAT(IsQualifiedName("example.com/a b"), ElementsAre(kNamePartMsg));
}

TEST(NamesTest, QualifiedNameRejectsEmptyNamePartTwiceLikeKubernetes) {
  EXPECT_THAT(IsQualifiedName(""), ElementsAre("name part must be non-empty", kNamePartMsg));
  EXPECT_THAT(IsQualifiedName("example.com/"),
              ElementsAre("name part must be non-empty", kNamePartMsg));
}

TEST(NamesTest, QualifiedNameLimitsNamePartTo63) {
  EXPECT_THAT(IsQualifiedName(std::string(64, 'n')),
              ElementsAre("name part must be no more than 63 characters"));
  EXPECT_THAT(IsQualifiedName("example.com/" + std::string(64, 'n')),
              ElementsAre("name part must be no more than 63 characters"));
}

TEST(NamesTest, QualifiedNameChecksPrefixAsSubdomain) {
  EXPECT_THAT(IsQualifiedName("/name"), ElementsAre("prefix part must be non-empty"));
  EXPECT_THAT(IsQualifiedName("Example.com/name"),
              ElementsAre(std::string("prefix part ") + kSubdomainMsg));
  EXPECT_THAT(IsQualifiedName(std::string(254, 'p') + "/name"),
              ElementsAre("prefix part must be no more than 253 characters"));
}

TEST(NamesTest, QualifiedNameRejectsTwoSlashes) {
  std::vector<std::string> errs = IsQualifiedName("a/b/c");
  ASSERT_THAT(errs, SizeIs(1));
  EXPECT_EQ(errs[0],
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
            "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') "
            "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
}

// --- Label values -----------------------------------------------------------------------------

TEST(NamesTest, LabelValueAcceptsEmptyAndQualifiedNameCharacters) {
  for (const char* v : {"", "MyValue", "my_value", "12345", "a.b-c_d", "x"}) {
    EXPECT_THAT(IsLabelValue(v), IsEmpty()) << v;
  }
  EXPECT_THAT(IsLabelValue(std::string(63, 'v')), IsEmpty());
}

TEST(NamesTest, LabelValueRejectsBadCharactersWithKubernetesMessage) {
  for (const char* v : {"-a", "a-", "_a", "a b", "a/b", "a:b"}) {
    EXPECT_THAT(IsLabelValue(v), ElementsAre(kLabelValueMsg)) << v;
  }
}

TEST(NamesTest, LabelValueLimitsLengthTo63) {
  EXPECT_THAT(IsLabelValue(std::string(64, 'v')),
              ElementsAre("must be no more than 63 characters"));
}

// --- C identifiers ----------------------------------------------------------------------------

TEST(NamesTest, CIdentifierAcceptsLettersDigitsAndUnderscore) {
  for (const char* v : {"a", "_", "my_name", "MY_NAME", "MyName", "x9", "_9"}) {
    EXPECT_THAT(IsCIdentifier(v), IsEmpty()) << v;
  }
}

TEST(NamesTest, CIdentifierRejectsLeadingDigitAndPunctuation) {
  for (const char* v : {"", "9x", "a-b", "a.b", "a b", "example.com/x"}) {
    EXPECT_THAT(IsCIdentifier(v), ElementsAre(kCIdentifierMsg)) << v;
  }
}

// --- UUIDs and semantic versions --------------------------------------------------------------

TEST(NamesTest, LowercaseUuidNeeds36LowercaseHexCharactersInGroups) {
  EXPECT_TRUE(IsLowercaseUuid("123e4567-e89b-12d3-a456-426614174000"));
  EXPECT_TRUE(IsLowercaseUuid("00000000-0000-0000-0000-000000000000"));
  EXPECT_FALSE(IsLowercaseUuid("123E4567-E89B-12D3-A456-426614174000"));
  EXPECT_FALSE(IsLowercaseUuid("123e4567e89b12d3a456426614174000"));
  EXPECT_FALSE(IsLowercaseUuid("123e4567-e89b-12d3-a456-4266141740000"));
  EXPECT_FALSE(IsLowercaseUuid("123e4567-e89b-12d3-a456-42661417400"));
  EXPECT_FALSE(IsLowercaseUuid("123e4567-e89b-12d3-a456-42661417400g"));
  EXPECT_FALSE(IsLowercaseUuid("{123e4567-e89b-12d3-a456-426614174000}"));
  EXPECT_FALSE(IsLowercaseUuid(""));
}

TEST(NamesTest, SemverAcceptsSemVer2Forms) {
  for (const char* v : {"0.0.0", "1.2.3", "10.20.30", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0.3.7",
                        "1.0.0-x.7.z.92", "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85",
                        "1.0.0-rc.1+build.1"}) {
    EXPECT_TRUE(IsSemver(v)) << v;
  }
}

TEST(NamesTest, SemverRejectsPrefixesLeadingZerosAndMissingParts) {
  for (const char* v : {"", "v1.2.3", "1.2", "1", "01.2.3", "1.02.3", "1.2.03", "1.2.3-",
                        "1.2.3-01", "1.2.3+", "1.2.3.4", "1.2.3-a..b", " 1.2.3", "a.b.c"}) {
    EXPECT_FALSE(IsSemver(v)) << v;
  }
}

// Client-supplied strings of any length are scanned in linear time and constant stack: a
// megabyte-long name or label is an error, never a crash.
TEST(NamesTest, HugeValuesAreErrorsNotCrashes) {
  const std::string huge(1 << 20, 'a');
  EXPECT_FALSE(IsDns1123Label(huge).empty());
  EXPECT_FALSE(IsDns1123Subdomain(huge).empty());
  EXPECT_FALSE(IsQualifiedName(huge).empty());
  EXPECT_FALSE(IsQualifiedName("example.com/" + huge).empty());
  EXPECT_FALSE(IsLabelValue(huge).empty());
  EXPECT_TRUE(IsCIdentifier(huge).empty());  // no length limit for C identifiers
  EXPECT_FALSE(IsCIdentifier(huge + "-").empty());
  std::string dotted;
  for (int i = 0; i < 100000; ++i) dotted += "a.";
  EXPECT_FALSE(IsDns1123Subdomain(dotted).empty());
  EXPECT_FALSE(IsLowercaseUuid(huge));
}

TEST(NamesTest, ScannersMatchTheDocumentedFormats) {
  EXPECT_TRUE(IsDns1123Label("a").empty());
  EXPECT_TRUE(IsDns1123Label("a-1").empty());
  EXPECT_FALSE(IsDns1123Label("-a").empty());
  EXPECT_FALSE(IsDns1123Label("a-").empty());
  EXPECT_FALSE(IsDns1123Label("A").empty());
  EXPECT_FALSE(IsDns1123Label("").empty());
  EXPECT_TRUE(IsDns1123Subdomain("a.b-c.d").empty());
  EXPECT_FALSE(IsDns1123Subdomain("a..b").empty());
  EXPECT_FALSE(IsDns1123Subdomain("a.").empty());
  EXPECT_FALSE(IsDns1123Subdomain(".a").empty());
  EXPECT_TRUE(IsQualifiedName("My_Name.x-1").empty());
  EXPECT_FALSE(IsQualifiedName("_a").empty());
  EXPECT_TRUE(IsLabelValue("").empty());
  EXPECT_TRUE(IsLabelValue("v1.2_x-y").empty());
  EXPECT_FALSE(IsLabelValue("v1.").empty());
  EXPECT_TRUE(IsCIdentifier("_x1").empty());
  EXPECT_FALSE(IsCIdentifier("1x").empty());
  EXPECT_FALSE(IsCIdentifier("").empty());
}

}  // namespace
}  // namespace qm::model
