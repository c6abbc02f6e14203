// Runs every golden file under tests/testdata/cel/: one case per line,
//   [<node>/<device>] <expression> ==> <expected>
// where the device comes from the sample inventory (samples/inventory.json, the seed manifests)
// and <expected> is the value's DebugString, `error: <text>` (a runtime error containing the
// text, which may be empty) or `compile error: <text>` (CompileSelector's message containing the
// text). Lines that are empty or start with '#' are ignored.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cel/compiler.h"
#include "cel/dra_env.h"
#include "cel/interpreter.h"
#include "cel/parser.h"
#include "cel/source.h"

namespace qm::cel {
namespace {

using nlohmann::json;

std::map<std::string, DeviceInput> LoadInventory() {
  std::ifstream in(std::string(QM_SOURCE_DIR) + "/samples/inventory.json");
  json docs = json::parse(in);
  std::map<std::string, DeviceInput> devices;
  for (const auto& doc : docs) {
    if (doc["kind"] != "ResourceSlice") continue;
    const json& spec = doc["spec"];
    for (const auto& d : spec["devices"]) {
      DeviceInput in;
      in.driver = spec["driver"];
      for (auto& [name, attr] : d["attributes"].items()) {
        if (attr.contains("string")) in.attributes[name] = attr["string"].get<std::string>();
        if (attr.contains("int")) in.attributes[name] = attr["int"].get<int64_t>();
        if (attr.contains("bool")) in.attributes[name] = attr["bool"].get<bool>();
        if (attr.contains("version")) {
          in.attributes[name] = VersionString{attr["version"].get<std::string>()};
        }
      }
      for (auto& [name, cap] : d["capacity"].items()) {
        in.capacity[name] = *ParseQuantity(cap["value"].get<std::string>());
      }
      devices[spec["nodeName"].get<std::string>() + "/" + d["name"].get<std::string>()] = in;
    }
  }
  return devices;
}

struct Case {
  std::string file;
  int line;
  std::string device;
  std::string expression;
  std::string expected;
};

std::vector<Case> LoadCases() {
  std::vector<Case> cases;
  const std::filesystem::path dir = std::string(QM_SOURCE_DIR) + "/tests/testdata/cel";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream in(path);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty() || line[0] == '#') continue;
      Case c{path.filename().string(), n, "", "", ""};
      size_t close = line.find("] ");
      size_t arrow = line.rfind(" ==> ");
      if (line[0] != '[' || close == std::string::npos || arrow == std::string::npos) {
        ADD_FAILURE() << c.file << ":" << n << ": malformed case: " << line;
        continue;
      }
      c.device = line.substr(1, close - 1);
      c.expression = line.substr(close + 2, arrow - close - 2);
      c.expected = line.substr(arrow + 5);
      cases.push_back(c);
    }
  }
  return cases;
}

TEST(CelGoldenTest, EveryCaseHolds) {
  const auto devices = LoadInventory();
  const auto cases = LoadCases();
  ASSERT_GE(cases.size(), 50u);
  RegexCache regexes;
  DeviceValueBuilder shared;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file + ":" + std::to_string(c.line) + ": " + c.expression);
    auto dev = devices.find(c.device);
    ASSERT_NE(dev, devices.end()) << "unknown device " << c.device;
    const std::string compile_prefix = "compile error: ";
    if (c.expected.rfind(compile_prefix, 0) == 0) {
      CompileResult r = CompileSelector(c.expression);
      EXPECT_NE(r.error.find(c.expected.substr(compile_prefix.size())), std::string::npos)
          << r.error;
      continue;
    }
    Source source(c.expression);
    ParseResult parsed = Parse(source);
    ASSERT_NE(parsed.ast, nullptr) << source.DisplayIssues(parsed.issues);
    auto device = BuildDeviceValue(dev->second);
    ASSERT_TRUE(device.ok()) << device.status();
    Activation vars;
    vars.Insert("device", *device);
    EvalOptions options;
    options.regex_cache = &regexes;
    EvalResult result = Evaluate(*parsed.ast, vars, options);
    // The planned evaluation (ConstantTable: literals, field keys, call plans) must agree with
    // the unplanned one in value and cost.
    const ConstantTable plan(*parsed.ast);
    EvalOptions planned_options = options;
    planned_options.constants = &plan;
    EvalResult planned = Evaluate(*parsed.ast, vars, planned_options);
    EXPECT_EQ(planned.value.DebugString(), result.value.DebugString());
    EXPECT_EQ(planned.cost, result.cost);
    // The device value shared through a DeviceValueBuilder (one for every case, as one is for
    // every device of an inventory) must evaluate the same.
    auto shared_device = shared.Build(dev->second);
    ASSERT_TRUE(shared_device.ok()) << shared_device.status();
    EXPECT_EQ(shared_device->DebugString(), device->DebugString());
    Activation shared_vars;
    shared_vars.Insert("device", *shared_device);
    EvalResult shared_result = Evaluate(*parsed.ast, shared_vars, options);
    EXPECT_EQ(shared_result.ok(), result.ok());
    EXPECT_EQ(shared_result.ok() ? shared_result.value.DebugString() : shared_result.error(),
              result.ok() ? result.value.DebugString() : result.error());
    EXPECT_EQ(shared_result.cost, result.cost);
    const std::string error_prefix = "error:";
    if (c.expected.rfind(error_prefix, 0) == 0) {
      std::string text = c.expected.substr(error_prefix.size());
      if (!text.empty() && text[0] == ' ') text.erase(0, 1);
      ASSERT_FALSE(result.ok()) << result.value.DebugString();
      EXPECT_NE(result.error().find(text), std::string::npos) << result.error();
    } else {
      ASSERT_TRUE(result.ok()) << result.error();
      EXPECT_EQ(result.value.DebugString(), c.expected);
    }
  }
}

}  // namespace
}  // namespace qm::cel
