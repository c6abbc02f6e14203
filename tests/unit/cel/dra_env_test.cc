#include "cel/dra_env.h"

#include <gtest/gtest.h>

#include "cel/interpreter.h"
#include "cel/parser.h"
#include "cel/source.h"

namespace qm::cel {
namespace {

DeviceInput Gpu(const std::string& uuid, int64_t index) {
  DeviceInput d;
  d.driver = "gpu.nvidia.com";
  d.attributes["productName"] = std::string("NVIDIA A100-SXM4-80GB");
  d.attributes["driverVersion"] = VersionString{"550.54.15"};
  d.attributes["index"] = index;
  d.attributes["uuid"] = uuid;
  d.attributes["resource.kubernetes.io/pcieRoot"] = std::string("pci0000:00");
  d.capacity["memory"] = *ParseQuantity("80Gi");
  return d;
}

// Evaluates `expression` with `device`: its value's text, or the error.
std::string Eval(const std::string& expression, const Value& device) {
  Source source(expression);
  ParseResult parsed = Parse(source);
  if (parsed.ast == nullptr) return "parse error";
  Activation vars;
  vars.Insert("device", device);
  EvalResult r = Evaluate(*parsed.ast, vars, EvalOptions{});
  return r.ok() ? r.value.DebugString() : "error: " + r.error();
}

TEST(DeviceValueBuilderTest, BuildsWhatBuildDeviceValueBuilds) {
  DeviceValueBuilder builder;
  for (int i = 0; i < 3; ++i) {
    const DeviceInput in = Gpu("GPU-" + std::to_string(i), i);
    auto shared = builder.Build(in);
    auto single = BuildDeviceValue(in);
    ASSERT_TRUE(shared.ok());
    ASSERT_TRUE(single.ok());
    EXPECT_EQ(shared->DebugString(), single->DebugString());
    for (const char* e :
         {"device.attributes['gpu.nvidia.com'].index", "device.attributes['gpu.nvidia.com'].uuid",
          "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi'))",
          "device.attributes['resource.kubernetes.io'].pcieRoot",
          "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan("
          "semver('550.0.0'))",
          "device.attributes['nope'].size()", "device.attributes['gpu.nvidia.com'].x"}) {
      EXPECT_EQ(Eval(e, *shared), Eval(e, *single)) << e;
    }
  }
}

TEST(DeviceValueBuilderTest, KeepsEachDevicesOwnValues) {
  DeviceValueBuilder builder;
  auto a = builder.Build(Gpu("GPU-a", 0));
  auto b = builder.Build(Gpu("GPU-b", 1));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Eval("device.attributes['gpu.nvidia.com'].uuid", *a), "\"GPU-a\"");
  EXPECT_EQ(Eval("device.attributes['gpu.nvidia.com'].uuid", *b), "\"GPU-b\"");
  EXPECT_EQ(Eval("device.attributes['gpu.nvidia.com'].index", *b), "1");
}

TEST(DeviceValueBuilderTest, ListsThatLookAlikeStayApart) {
  // ["a,b"] and ["a", "b"] must not share a value.
  DeviceValueBuilder builder;
  DeviceInput one;
  one.driver = "d";
  one.attributes["l"] = std::vector<std::string>{"a,b"};
  DeviceInput two = one;
  two.attributes["l"] = std::vector<std::string>{"a", "b"};
  auto a = builder.Build(one);
  auto b = builder.Build(two);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Eval("device.attributes['d'].l.size()", *a), "1");
  EXPECT_EQ(Eval("device.attributes['d'].l.size()", *b), "2");
}

TEST(DeviceValueBuilderTest, AQualifiedAndABareNameOfOneIdKeepTheLaterAsBuildDeviceValueDoes) {
  DeviceInput d;
  d.driver = "gpu.nvidia.com";
  d.attributes["gpu.nvidia.com/model"] = std::string("qualified");
  d.attributes["model"] = std::string("bare");
  d.attributes["a"] = int64_t{1};
  DeviceValueBuilder builder;
  auto shared = builder.Build(d);
  auto single = BuildDeviceValue(d);
  ASSERT_TRUE(shared.ok());
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(shared->DebugString(), single->DebugString());
  EXPECT_EQ(Eval("device.attributes['gpu.nvidia.com'].model", *shared), "\"bare\"");
}

TEST(DeviceValueBuilderTest, ReportsTheErrorsBuildDeviceValueReports) {
  DeviceValueBuilder builder;
  DeviceInput bad = Gpu("GPU-x", 0);
  bad.attributes["driverVersion"] = VersionString{"not-a-version"};
  auto shared = builder.Build(bad);
  auto single = BuildDeviceValue(bad);
  ASSERT_FALSE(shared.ok());
  ASSERT_FALSE(single.ok());
  EXPECT_EQ(shared.status(), single.status());
  DeviceInput empty = Gpu("GPU-y", 0);
  empty.attributes["e"] = std::monostate{};
  EXPECT_EQ(builder.Build(empty).status(), BuildDeviceValue(empty).status());
  // A failed device leaves the builder usable.
  EXPECT_TRUE(builder.Build(Gpu("GPU-z", 2)).ok());
}

TEST(MapValueTest, FindsEveryKeyKindPastTheIndexThreshold) {
  MapValue m;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(m.Insert(Value::String("k" + std::to_string(i)), Value::Int(i)));
    ASSERT_TRUE(m.Insert(Value::Int(i), Value::Int(100 + i)));
  }
  ASSERT_TRUE(m.Insert(Value::Bool(true), Value::Int(7)));
  EXPECT_FALSE(m.Insert(Value::String("k3"), Value::Int(0)));
  EXPECT_FALSE(m.Insert(Value::Uint(3), Value::Int(0)));  // 3u is the key 3
  for (int i = 0; i < 20; ++i) {
    const Value* s = m.Find(Value::String("k" + std::to_string(i)));
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->int_value(), i);
    const Value* n = m.Find(Value::Int(i));
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->int_value(), 100 + i);
  }
  EXPECT_EQ(m.Find(Value::Uint(4))->int_value(), 104);
  EXPECT_EQ(m.Find(Value::Double(5.0))->int_value(), 105);
  EXPECT_EQ(m.Find(Value::Bool(true))->int_value(), 7);
  EXPECT_EQ(m.Find(Value::String("k20")), nullptr);
  EXPECT_EQ(m.Find(Value::String("1")), nullptr);  // not the int key 1
  // A copy finds its keys through its own index.
  const MapValue copy = m;
  m = MapValue();
  EXPECT_EQ(copy.Find(Value::String("k19"))->int_value(), 19);
}

}  // namespace
}  // namespace qm::cel
