// FlatMap: std::map's order and lookups over one sorted vector.

#include "common/flat_map.h"

#include <map>
#include <random>
#include <string>
#include <string_view>

#include "gtest/gtest.h"

namespace qm {
namespace {

TEST(FlatMapTest, IteratesInKeyOrderWhateverTheInsertionOrder) {
  FlatMap<std::string, int> m;
  m["productName"] = 1;
  m["gpu.nvidia.com/uuid"] = 2;
  m["index"] = 3;
  m["architecture"] = 4;
  std::vector<std::string> keys;
  for (const auto& [k, v] : m) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"architecture", "gpu.nvidia.com/uuid", "index",
                                            "productName"}));
  EXPECT_EQ(m.size(), 4u);
  EXPECT_EQ(m["index"], 3);
  EXPECT_EQ(m.size(), 4u);  // operator[] of an existing key adds nothing
}

TEST(FlatMapTest, LooksUpByAnyComparableKeyAndReportsMissingOnes) {
  FlatMap<std::string, int> m{{"b", 2}, {"a", 1}};
  EXPECT_EQ(m.find(std::string_view("a"))->second, 1);
  EXPECT_EQ(m.find("b")->second, 2);
  EXPECT_EQ(m.find("c"), m.end());
  EXPECT_TRUE(m.contains("a"));
  EXPECT_EQ(m.count("zz"), 0u);
  EXPECT_EQ(m.at("b"), 2);
  EXPECT_THROW(m.at("c"), std::out_of_range);
  const auto& cm = m;
  EXPECT_EQ(cm.at("a"), 1);
  EXPECT_EQ(cm.find("c"), cm.end());
}

TEST(FlatMapTest, InsertKeepsTheFirstValueAndEraseRemovesOnlyItsKey) {
  FlatMap<std::string, int> m;
  EXPECT_TRUE(m.insert({"k", 1}).second);
  auto [it, inserted] = m.emplace("k", 2);
  EXPECT_FALSE(inserted);
  EXPECT_EQ(it->second, 1);
  EXPECT_FALSE(m.try_emplace("k", 3).second);
  EXPECT_TRUE(m.try_emplace("j", 4).second);
  EXPECT_EQ(m.erase("k"), 1u);
  EXPECT_EQ(m.erase("k"), 0u);
  EXPECT_EQ(m, (FlatMap<std::string, int>{{"j", 4}}));
  EXPECT_NE(m, (FlatMap<std::string, int>{{"j", 5}}));
}

TEST(FlatMapTest, AgreesWithStdMapOverRandomOperations) {
  std::mt19937 rng(7);
  FlatMap<std::string, int> flat;
  std::map<std::string, int> ref;
  for (int step = 0; step < 5000; ++step) {
    const std::string key = "k" + std::to_string(rng() % 64);
    switch (rng() % 4) {
      case 0:
        flat[key] = step;
        ref[key] = step;
        break;
      case 1:
        EXPECT_EQ(flat.insert({key, step}).second, ref.insert({key, step}).second);
        break;
      case 2:
        EXPECT_EQ(flat.erase(key), ref.erase(key));
        break;
      default:
        EXPECT_EQ(flat.contains(key), ref.contains(key));
    }
    ASSERT_EQ(flat.size(), ref.size());
  }
  EXPECT_TRUE(std::equal(
      flat.begin(), flat.end(), ref.begin(), ref.end(),
      [](const auto& a, const auto& b) { return a.first == b.first && a.second == b.second; }));
  FlatMap<std::string, int> copied(ref.begin(), ref.end());
  EXPECT_EQ(copied, flat);
}

}  // namespace
}  // namespace qm
