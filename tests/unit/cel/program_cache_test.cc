#include "cel/program_cache.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace qm::cel {
namespace {

TEST(ProgramCacheTest, CompilesOncePerExpression) {
  ProgramCache cache(8);
  auto a = cache.Get("device.driver == 'x'");
  auto b = cache.Get("device.driver == 'x'");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a, b);  // the same shared result
  EXPECT_NE(a->ast, nullptr);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 1u);
}

TEST(ProgramCacheTest, CachesFailuresToo) {
  ProgramCache cache(8);
  auto bad = cache.Get("device.driver ==");
  EXPECT_EQ(bad->ast, nullptr);
  EXPECT_FALSE(bad->error.empty());
  EXPECT_EQ(cache.Get("device.driver =="), bad);
}

TEST(ProgramCacheTest, EvictsTheLeastRecentlyUsed) {
  ProgramCache cache(2);
  auto a = cache.Get("true");
  cache.Get("false");
  cache.Get("true");   // touch a
  cache.Get("1 < 2");  // evicts "false"
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.Get("true"), a);  // still cached
  size_t misses = cache.misses();
  cache.Get("false");
  EXPECT_EQ(cache.misses(), misses + 1);  // it had been evicted
  EXPECT_NE(a->ast, nullptr);             // an evicted result stays usable
}

TEST(ProgramCacheTest, IsSafeAcrossThreads) {
  ProgramCache cache(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto r = cache.Get("device.driver == '" + std::to_string((i + t) % 8) + "'");
        ASSERT_NE(r->ast, nullptr);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(cache.size(), 4u);
}

}  // namespace
}  // namespace qm::cel
