#include "model/object.h"

#include <gtest/gtest.h>

#include "model/json/fields.h"

namespace qm::model {
namespace {

TEST(SpecDigestTest, IsTheSha256OfTheCanonicalText) {
  // sha256sum of the two bytes "{}".
  EXPECT_EQ(SpecDigest("{}"),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
  EXPECT_NE(SpecDigest(R"({"a":1})"), SpecDigest(R"({"a":2})"));
}

TEST(SpecDigestTest, OfAHubObjectHashesItsSpecOnly) {
  const auto a = nlohmann::json::parse(R"({"spec":{"b":2,"a":1},"status":{"x":1}})");
  const auto b = nlohmann::json::parse(R"({"spec":{"a":1,"b":2},"status":{"x":2}})");
  EXPECT_EQ(json::SpecDigestOf(a), SpecDigest(R"({"a":1,"b":2})"));
  EXPECT_EQ(json::SpecDigestOf(a), json::SpecDigestOf(b));
  EXPECT_EQ(json::SpecDigestOf(nlohmann::json::parse(R"({"status":{}})")), "");
  EXPECT_EQ(json::SpecDigestOf(nlohmann::json::parse(R"({"spec":null})")), "");
}

TEST(SameSpecTest, ComparesHashedDigests) {
  EXPECT_TRUE(SameSpec(SpecDigest("{}"), SpecDigest("{}")));
  EXPECT_FALSE(SameSpec(SpecDigest("{}"), SpecDigest(R"({"a":1})")));
  EXPECT_TRUE(SameSpec("", ""));
  EXPECT_FALSE(SameSpec("", SpecDigest("{}")));
  EXPECT_FALSE(SameSpec(SpecDigest("{}"), ""));
}

TEST(SameSpecTest, AStoredCanonicalTextMatchesItsHash) {
  // Rows written before digests were hashed hold the spec's canonical text.
  EXPECT_TRUE(SameSpec(R"({"a":1})", SpecDigest(R"({"a":1})")));
  EXPECT_TRUE(SameSpec(SpecDigest(R"({"a":1})"), R"({"a":1})"));
  EXPECT_FALSE(SameSpec(R"({"a":1})", SpecDigest(R"({"a":2})")));
  EXPECT_TRUE(SameSpec(R"({"a":1})", R"({"a":1})"));
  EXPECT_FALSE(SameSpec(R"({"a":1})", R"({"a":2})"));
}

}  // namespace
}  // namespace qm::model
