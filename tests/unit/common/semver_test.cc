#include "common/semver.h"

#include <gtest/gtest.h>

namespace qm {
namespace {

TEST(SemverTest, ParsesStrictVersions) {
  auto v = Semver::Parse("560.35.3");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->major(), 560u);
  EXPECT_EQ(v->minor(), 35u);
  EXPECT_EQ(v->patch(), 3u);
  auto pre = Semver::Parse("1.2.3-rc.1+build.7");
  ASSERT_TRUE(pre.has_value());
  EXPECT_EQ(pre->prerelease(), (std::vector<std::string>{"rc", "1"}));
  EXPECT_EQ(pre->ToString(), "1.2.3-rc.1+build.7");
}

TEST(SemverTest, RejectsWhatStrictSemverRejects) {
  for (const char* bad : {"", "1", "1.2", "v1.2.3", "01.2.3", "1.02.3", "1.2.3-01", "1.2.3-",
                          "1.2.3+", "1.2.3-a..b", "1.2.x", "1.2.3.4", "-1.2.3", "1.2.3-a_b"}) {
    EXPECT_FALSE(Semver::Parse(bad).has_value()) << bad;
  }
}

TEST(SemverTest, NormalizeAcceptsLooseForms) {
  EXPECT_EQ(Semver::Parse("v1", true)->ToString(), "1.0.0");
  EXPECT_EQ(Semver::Parse("v1.2", true)->ToString(), "1.2.0");
  EXPECT_EQ(Semver::Parse("01.002.3", true)->ToString(), "1.2.3");
  EXPECT_FALSE(Semver::Parse("v1.2", false).has_value());
  EXPECT_FALSE(Semver::Parse("x1.2", true).has_value());
}

TEST(SemverTest, PrecedenceFollowsTheSpec) {
  // semver.org §11 example chain.
  const char* chain[] = {"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta",
                         "1.0.0-beta",  "1.0.0-beta.2",  "1.0.0-beta.11",
                         "1.0.0-rc.1",  "1.0.0",         "1.0.1",
                         "1.1.0",       "2.0.0",         "10.0.0"};
  for (size_t i = 0; i + 1 < std::size(chain); ++i) {
    auto a = Semver::Parse(chain[i]), b = Semver::Parse(chain[i + 1]);
    ASSERT_TRUE(a && b) << chain[i];
    EXPECT_EQ(a->Compare(*b), -1) << chain[i] << " < " << chain[i + 1];
    EXPECT_EQ(b->Compare(*a), 1);
  }
  EXPECT_EQ(Semver::Parse("8.0.0+a")->Compare(*Semver::Parse("8.0.0+b")), 0);
}

}  // namespace
}  // namespace qm
