// Names the server makes up come from the injected IdGenerator: Kubernetes' alphabet, the length
// asked for, and deterministic when the uids are.
#include "common/id_generator.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace qm {
namespace {

class CountingIds : public IdGenerator {
 public:
  std::string NewUid() override {
    ++n_;
    return "0123abcd-" + std::string(4, static_cast<char>('0' + n_ % 10)) +
           "-4000-8000-00000000000" + std::to_string(n_ % 10);
  }

 private:
  int n_ = 0;
};

bool InAlphabet(const std::string& s) {
  return s.find_first_not_of("bcdfghjklmnpqrstvwxz2456789") == std::string::npos;
}

TEST(IdGeneratorTest, NameSuffixesFollowTheUids) {
  CountingIds a, b;
  const std::string first = a.NameSuffix(5);
  EXPECT_EQ(first.size(), 5u);
  EXPECT_TRUE(InAlphabet(first)) << first;
  EXPECT_EQ(first, b.NameSuffix(5));            // the same uids, the same names
  const std::string longer = a.NameSuffix(40);  // more than one uid's worth
  EXPECT_EQ(longer.size(), 40u);
  EXPECT_TRUE(InAlphabet(longer)) << longer;
}

TEST(IdGeneratorTest, RandomSuffixesUseTheAlphabetAndDiffer) {
  RandomIdGenerator ids;
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string s = ids.NameSuffix(10);
    EXPECT_EQ(s.size(), 10u);
    EXPECT_TRUE(InAlphabet(s)) << s;
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 100u);
}

// Both random sources give version-4 UUIDs in RFC 4122's layout, each one new.
TEST(IdGeneratorTest, RandomUuidsAreVersionFourAndDiffer) {
  RandomIdGenerator ids;
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    for (const std::string& u : {ids.NewUid(), RandomUuid()}) {
      ASSERT_EQ(u.size(), 36u) << u;
      EXPECT_EQ(u.find_first_not_of("0123456789abcdef-"), std::string::npos) << u;
      EXPECT_EQ(u[8], '-');
      EXPECT_EQ(u[13], '-');
      EXPECT_EQ(u[14], '4') << u;  // the version
      EXPECT_EQ(u[18], '-');
      EXPECT_NE(std::string("89ab").find(u[19]), std::string::npos) << u;  // the variant
      EXPECT_EQ(u[23], '-');
      seen.insert(u);
    }
  }
  EXPECT_EQ(seen.size(), 200u);
}

}  // namespace
}  // namespace qm
