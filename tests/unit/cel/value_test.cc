// cel::MapValue on its own: lookups below and above the size where it starts indexing its keys,
// CEL's numeric key equality on both sides of that size, copies that change independently, and
// a default value shared between maps.
#include "cel/value.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace qm::cel {
namespace {

MapValue Numbered(int n) {
  MapValue m;
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(m.Insert(Value::String("key-" + std::to_string(i)), Value::Int(i)));
    EXPECT_TRUE(m.Insert(Value::Int(1000 + i), Value::Int(-i)));
  }
  return m;
}

TEST(MapValueTest, FindsEveryKeyAtEverySize) {
  for (int n : {0, 1, 7, 8, 9, 16, 17, 40}) {
    const MapValue m = Numbered(n);
    ASSERT_EQ(m.size(), static_cast<size_t>(2 * n)) << n;
    for (int i = 0; i < n; ++i) {
      const Value* s = m.Find(Value::String("key-" + std::to_string(i)));
      ASSERT_NE(s, nullptr) << n << " " << i;
      EXPECT_EQ(s->int_value(), i);
      // An int key is found by an equal uint or integral double, as in CEL.
      for (const Value& k :
           {Value::Int(1000 + i), Value::Uint(1000 + i), Value::Double(1000 + i)}) {
        const Value* v = m.Find(k);
        ASSERT_NE(v, nullptr) << n << " " << k.DebugString();
        EXPECT_EQ(v->int_value(), -i);
      }
    }
    EXPECT_EQ(m.Find(Value::String("key-" + std::to_string(n))), nullptr) << n;
    EXPECT_EQ(m.Find(Value::Double(1000.5)), nullptr) << n;
    EXPECT_EQ(m.Find(Value::Bool(true)), nullptr) << n;
    // A key present already is refused, whatever the size.
    MapValue again = m;
    if (n > 0) {
      EXPECT_FALSE(again.Insert(Value::String("key-0"), Value::Int(5)));
      EXPECT_FALSE(again.Insert(Value::Uint(1000), Value::Int(5)));
      EXPECT_EQ(again.size(), m.size());
    }
  }
}

TEST(MapValueTest, CopiesChangeIndependently) {
  for (int n : {3, 30}) {
    MapValue original = Numbered(n);
    MapValue copy = original;
    ASSERT_TRUE(copy.Insert(Value::String("only-in-copy"), Value::Bool(true)));
    EXPECT_NE(copy.Find(Value::String("only-in-copy")), nullptr) << n;
    EXPECT_EQ(original.Find(Value::String("only-in-copy")), nullptr) << n;
    MapValue assigned;
    assigned = copy;
    EXPECT_NE(assigned.Find(Value::String("only-in-copy")), nullptr) << n;
    EXPECT_NE(assigned.Find(Value::String("key-2")), nullptr) << n;
    MapValue moved = std::move(copy);
    EXPECT_NE(moved.Find(Value::Int(1002)), nullptr) << n;
    EXPECT_EQ(moved.size(), static_cast<size_t>(2 * n + 1));
  }
}

TEST(MapValueTest, ADefaultAnswersMissingKeysButNotContains) {
  auto shared = std::make_shared<const Value>(Value::Map(MapValue()));
  MapValue a = Numbered(2);
  MapValue b = Numbered(20);
  a.set_default_value(shared);
  b.set_default_value(shared);
  for (const MapValue* m : {&a, &b}) {
    const Value* missing = m->Find(Value::String("nope"));
    ASSERT_NE(missing, nullptr);
    EXPECT_EQ(missing, shared.get());
    EXPECT_FALSE(m->Contains(Value::String("nope")));
    EXPECT_TRUE(m->Contains(Value::String("key-1")));
  }
  MapValue own = Numbered(1);
  own.set_default_value(Value::Int(7));
  EXPECT_EQ(own.Find(Value::String("nope"))->int_value(), 7);
}

}  // namespace
}  // namespace qm::cel
