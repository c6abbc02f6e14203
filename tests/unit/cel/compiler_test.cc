#include "cel/compiler.h"

#include <gtest/gtest.h>

#include "cel/dra_env.h"

namespace qm::cel {
namespace {

TEST(CompileSelectorTest, AcceptsTheSeedAndVendorSelectors) {
  for (const char* ok : {
           "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
           "device.attributes[\"gpu.nvidia.com\"].productName.lowerAscii().matches(\"^.*a100.*$\")",
           "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0",
           "device.attributes['d'].list.all(x, x > 0) && cel.bind(v, 1, v == 1)",
           "device.attributes['d'].?x.orValue(1) == 1 && optional.none().hasValue() == false",
           "true",
       }) {
    CompileResult r = CompileSelector(ok);
    EXPECT_TRUE(r.error.empty()) << ok << "\n" << r.error;
    EXPECT_NE(r.ast, nullptr) << ok;
  }
}

TEST(CompileSelectorTest, ReportsSyntaxErrorsWithPosition) {
  CompileResult r = CompileSelector("device.driver ==");
  EXPECT_EQ(r.ast, nullptr);
  EXPECT_EQ(r.error.rfind("ERROR: <input>:1:", 0), 0u) << r.error;
  EXPECT_NE(r.error.find(" | device.driver =="), std::string::npos) << r.error;
}

TEST(CompileSelectorTest, ReportsUndeclaredReferences) {
  CompileResult r = CompileSelector("devise.driver == 'x'");
  EXPECT_EQ(r.ast, nullptr);
  EXPECT_EQ(r.error,
            "ERROR: <input>:1:1: undeclared reference to 'devise' (in container '')\n"
            " | devise.driver == 'x'\n"
            " | ^");
  // Comprehension variables are in scope only inside their macro.
  EXPECT_TRUE(CompileSelector("[1].all(x, x > 0)").error.empty());
  EXPECT_NE(CompileSelector("[1].all(x, x > 0) && x > 0").error.find("'x'"), std::string::npos);
}

TEST(CompileSelectorTest, ReportsUnknownDeviceFields) {
  CompileResult r = CompileSelector("device.drivr == 'x'");
  EXPECT_NE(r.error.find("undefined field 'drivr'"), std::string::npos) << r.error;
}

TEST(CompileSelectorTest, RequiresABoolResult) {
  EXPECT_EQ(CompileSelector("1").error, "must evaluate to bool or the unknown type, not int");
  EXPECT_EQ(CompileSelector("'x'").error, "must evaluate to bool or the unknown type, not string");
  EXPECT_EQ(CompileSelector("[true]").error,
            "must evaluate to bool or the unknown type, not list(bool)");
}

TEST(CompileSelectorTest, PrebuiltConstantsGiveTheSameResults) {
  CompileResult r = CompileSelector(
      "device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].n > 2 && "
      "[1, 2, 3].size() == 3 && 'x' + 'y' == 'xy' && b'y' != b'z' && 3u > 2u && 2.5 > 1.0");
  ASSERT_NE(r.ast, nullptr) << r.error;
  ASSERT_NE(r.constants, nullptr);
  DeviceInput d;
  d.driver = "gpu.example.com";
  d.attributes["n"] = int64_t{3};
  auto device = BuildDeviceValue(d);
  ASSERT_TRUE(device.ok());
  auto with = MatchesValue(*r.ast, *device, 1'000'000, nullptr, r.constants.get());
  auto without = MatchesValue(*r.ast, *device, 1'000'000);
  ASSERT_TRUE(with.ok()) << with.status();
  ASSERT_TRUE(without.ok());
  EXPECT_TRUE(*with);
  EXPECT_EQ(*with, *without);
  d.attributes["n"] = int64_t{1};
  auto other = BuildDeviceValue(d);
  EXPECT_FALSE(*MatchesValue(*r.ast, *other, 1'000'000, nullptr, r.constants.get()));
}

}  // namespace
}  // namespace qm::cel
