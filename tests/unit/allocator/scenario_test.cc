// Runs the scenario table under tests/testdata/allocator/ (format: README.md there): one test
// case per scenario, named <file>_<scenario>.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "allocator/allocator.h"
#include "gtest/gtest.h"
#include "model/json/dra_json.h"
#include "nlohmann/json.hpp"

namespace qm::allocator {
namespace {

using nlohmann::json;

struct Scenario {
  std::string file;
  std::string name;
  json spec;
};

std::string TestName(const std::string& file, const std::string& name) {
  std::string out = file + "_" + name;
  for (char& c : out) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return out;
}

std::vector<Scenario> LoadScenarios() {
  std::vector<Scenario> out;
  const std::filesystem::path dir = std::string(QM_SOURCE_DIR) + "/tests/testdata/allocator";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream in(path);
    json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
    const std::string stem = path.stem().string();
    if (!doc.is_array()) {
      out.push_back(Scenario{stem, "unparsable_file", json()});
      continue;
    }
    for (const auto& s : doc) out.push_back(Scenario{stem, s.value("name", "unnamed"), s});
  }
  return out;
}

std::string ShareId(int n) {
  char buf[40];
  snprintf(buf, sizeof(buf), "00000000-0000-4000-8000-%012x", n);
  return buf;
}

void PrintTo(const Scenario& s, std::ostream* os) { *os << s.file << ".json " << s.name; }

class ScenarioTest : public testing::TestWithParam<Scenario> {};

TEST_P(ScenarioTest, Holds) {
  const Scenario& sc = GetParam();
  const json& s = sc.spec;
  ASSERT_TRUE(s.is_object()) << sc.file << ".json does not parse as a JSON array of scenarios";

  InventoryInput input;
  for (const auto& o : s.value("slices", json::array())) {
    auto slice = model::json::DecodeResourceSlice(o);
    ASSERT_TRUE(slice.ok()) << slice.status();
    input.slices.push_back(std::move(*slice));
  }
  for (const auto& o : s.value("classes", json::array())) {
    auto cls = model::json::DecodeDeviceClass(o);
    ASSERT_TRUE(cls.ok()) << cls.status();
    input.classes.push_back(std::move(*cls));
  }
  for (const auto& o : s.value("taintRules", json::array())) {
    auto rule = model::json::DecodeDeviceTaintRule(o);
    ASSERT_TRUE(rule.ok()) << rule.status();
    input.taint_rules.push_back(std::move(*rule));
  }
  std::vector<AllocatedDevice> allocated;
  for (const auto& a : s.value("allocated", json::array())) {
    AllocatedDevice d;
    d.driver = a.value("driver", "");
    d.pool = a.value("pool", "");
    d.device = a.value("device", "");
    d.share_id = a.value("shareID", "");
    d.admin_access = a.value("adminAccess", false);
    const json consumed = a.value("consumedCapacity", json::object());
    for (const auto& [name, q] : consumed.items()) {
      auto parsed = ParseQuantity(q.get<std::string>());
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      d.consumed_capacity[name] = *parsed;
    }
    allocated.push_back(std::move(d));
  }
  std::vector<model::ResourceClaim> claims;
  for (const auto& o : s.value("claims", json::array())) {
    auto claim = model::json::DecodeResourceClaim(o);
    ASSERT_TRUE(claim.ok()) << claim.status();
    claims.push_back(std::move(*claim));
  }
  std::optional<model::NodeInfo> node;
  if (s.contains("node") && !s["node"].is_null()) {
    node = model::NodeInfo{s["node"].value("name", ""), {}};
    const json labels = s["node"].value("labels", json::object());
    for (const auto& [k, v] : labels.items()) {
      node->labels[k] = v.get<std::string>();
    }
  }

  auto inventory = Inventory::Build(std::move(input));
  AllocatedState state = inventory->ResolveAllocated(allocated);
  std::vector<const model::ResourceClaim*> claim_ptrs;
  for (const auto& c : claims) claim_ptrs.push_back(&c);
  Options options;
  int shares = 0;
  options.new_share_id = [&shares] { return ShareId(++shares); };
  // The limit the server passes (its REST limit on allocation results); none by default.
  options.max_results_per_claim = s.value("maxResultsPerClaim", int64_t{0});
  if (s.contains("budgetMicros")) {
    options.deadline =
        std::chrono::steady_clock::now() + std::chrono::microseconds(s["budgetMicros"].get<int>());
  }
  Outcome outcome = Allocate(*inventory, state, claim_ptrs, node ? &*node : nullptr, options);

  const json& expect = s["expect"];
  const std::string want = expect.value("outcome", "");
  json got_allocations = json::array();
  for (const auto& a : outcome.allocations) {
    got_allocations.push_back(model::json::EncodeAllocationResult(a));
  }
  const std::string got_summary =
      outcome.kind == OutcomeKind::kAllocated       ? "allocated " + got_allocations.dump()
      : outcome.kind == OutcomeKind::kUnschedulable ? "unschedulable: " + outcome.reason
      : outcome.kind == OutcomeKind::kInvalid ? "error: " + std::string(outcome.error.message())
                                              : "timeout: " + std::string(outcome.error.message());
  SCOPED_TRACE(sc.file + ".json " + sc.name + " -> " + got_summary);

  if (want == "allocated") {
    ASSERT_EQ(outcome.kind, OutcomeKind::kAllocated);
    ASSERT_EQ(outcome.allocations.size(), claims.size());
    if (expect.contains("results")) {
      ASSERT_EQ(expect["results"].size(), claims.size());
      for (size_t c = 0; c < claims.size(); ++c) {
        std::vector<std::string> got;
        for (const auto& r : outcome.allocations[c].results) {
          got.push_back(r.request + "=" + r.driver + "/" + r.pool + "/" + r.device);
        }
        EXPECT_EQ(got, expect["results"][c].get<std::vector<std::string>>()) << "claim " << c;
      }
    }
    if (expect.contains("allocations")) {
      ASSERT_EQ(expect["allocations"].size(), claims.size());
      for (size_t c = 0; c < claims.size(); ++c) {
        EXPECT_EQ(got_allocations[c], expect["allocations"][c])
            << "claim " << c << "\n got:  " << got_allocations[c].dump()
            << "\n want: " << expect["allocations"][c].dump();
      }
    }
  } else if (want == "unschedulable") {
    // The reason is what users read in PodScheduled and FailedScheduling: every scenario that
    // does not fit says exactly which one it must give.
    ASSERT_EQ(outcome.kind, OutcomeKind::kUnschedulable);
    ASSERT_TRUE(expect.contains("reason")) << "an unschedulable scenario names its reason";
    EXPECT_EQ(outcome.reason, expect["reason"].get<std::string>());
  } else if (want == "error") {
    ASSERT_EQ(outcome.kind, OutcomeKind::kInvalid);
    ASSERT_TRUE(expect.contains("error")) << "an error scenario names its message";
    EXPECT_EQ(std::string(outcome.error.message()), expect["error"].get<std::string>());
  } else if (want == "timeout") {
    ASSERT_EQ(outcome.kind, OutcomeKind::kTimeout);
  } else {
    FAIL() << "unknown expected outcome '" << want << "'";
  }
}

std::vector<Scenario> AllScenarios() {
  static const auto* scenarios = new std::vector<Scenario>(LoadScenarios());
  return *scenarios;
}

INSTANTIATE_TEST_SUITE_P(Table, ScenarioTest, testing::ValuesIn(AllScenarios()),
                         [](const testing::TestParamInfo<Scenario>& info) {
                           return TestName(info.param.file, info.param.name);
                         });

TEST(ScenarioTableTest, HasEnoughScenarios) { EXPECT_GE(AllScenarios().size(), 150u); }

}  // namespace
}  // namespace qm::allocator
