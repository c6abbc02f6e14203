#include "common/symbol.h"

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/flat_map.h"

namespace qm {
namespace {

TEST(SymbolTest, EqualTextsShareOneEntry) {
  Symbol a("symbol-test/productName");
  Symbol b(std::string("symbol-test/productName"));
  EXPECT_EQ(&a.str(), &b.str());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.str(), "symbol-test/productName");
  EXPECT_NE(a, Symbol("symbol-test/other"));
  EXPECT_EQ(sizeof(Symbol), sizeof(void*));
}

TEST(SymbolTest, ComparesWithStringsByText) {
  Symbol m("symbol-test/m");
  EXPECT_TRUE(m == "symbol-test/m");
  EXPECT_TRUE("symbol-test/m" == m);
  EXPECT_TRUE(m == std::string("symbol-test/m"));
  EXPECT_TRUE(m != std::string_view("symbol-test/n"));
  EXPECT_TRUE(m < "symbol-test/n");
  EXPECT_TRUE("symbol-test/a" < m);
  EXPECT_TRUE(Symbol("symbol-test/a") < m);
  EXPECT_FALSE(m < m);
  EXPECT_TRUE(Symbol() == "");
  EXPECT_TRUE(Symbol().empty());
}

TEST(SymbolTest, AnUnheldTextLeavesTheTable) {
  const size_t before = Symbol::TableSize();
  {
    Symbol a("symbol-test/transient");
    EXPECT_EQ(Symbol::TableSize(), before + 1);
    Symbol b = a;
    Symbol c(std::move(b));
    Symbol d;
    d = c;
    const Symbol& same = d;
    d = same;
    EXPECT_EQ(Symbol::TableSize(), before + 1);
    a = Symbol("symbol-test/another");
    EXPECT_EQ(Symbol::TableSize(), before + 2);
  }
  EXPECT_EQ(Symbol::TableSize(), before);
}

// A FlatMap keyed by Symbols finds by any string type and iterates in text order.
TEST(SymbolTest, FlatMapKeysFindByTextInTextOrder) {
  FlatMap<Symbol, int> m;
  m["symbol-test/z"] = 1;
  m["symbol-test/a"] = 2;
  m[std::string("symbol-test/m")] = 3;
  EXPECT_EQ(m.at("symbol-test/a"), 2);
  EXPECT_EQ(m.at(std::string("symbol-test/m")), 3);
  EXPECT_TRUE(m.contains(std::string_view("symbol-test/z")));
  EXPECT_FALSE(m.contains("symbol-test/q"));
  std::vector<std::string> order;
  for (const auto& [k, v] : m) order.push_back(k);
  EXPECT_EQ(order, (std::vector<std::string>{"symbol-test/a", "symbol-test/m", "symbol-test/z"}));
}

// Threads taking and dropping the same texts leave neither a leaked nor a freed-in-use entry.
TEST(SymbolTest, ConcurrentInterningAndReleaseKeepsTheTableExact) {
  const size_t before = Symbol::TableSize();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 20000; ++i) {
        Symbol s("symbol-test/race-" + std::to_string(i % 7));
        Symbol copy = s;
        if (copy.str() != s.str() || s.str().rfind("symbol-test/race-", 0) != 0) std::abort();
        if ((i + t) % 3 == 0) copy = Symbol("symbol-test/race-x");
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(Symbol::TableSize(), before);
}

}  // namespace
}  // namespace qm
