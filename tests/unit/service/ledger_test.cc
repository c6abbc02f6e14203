// Ledger rows of an allocation and what they take from capacity and shared counters.

#include "service/ledger.h"

#include "gtest/gtest.h"

namespace qm::service {
namespace {

using Kind = store::DeviceCharge::Kind;

Quantity Q(const char* text) { return *ParseQuantity(text); }

model::Device Device(const std::string& name) {
  model::Device d;
  d.name = name;
  return d;
}

model::DeviceRequestAllocationResult Result(const std::string& device,
                                            const std::string& share = "") {
  model::DeviceRequestAllocationResult r;
  r.request = "gpu";
  r.driver = "gpu.example.com";
  r.pool = "node-a";
  r.device = device;
  r.share_id = share;
  return r;
}

TEST(LedgerTest, SharesChargeConsumedCapacityAndDevicesTheirCounters) {
  model::Device shared = Device("gpu-0");
  shared.allow_multiple_allocations = true;
  shared.capacity["memory"].value = Q("80Gi");
  shared.capacity["cores"].value = Q("100");
  shared.consumes_counters = {{"gpu-0", {{"memory", Q("80Gi")}, {"unknown", Q("1")}}},
                              {"missing-set", {{"memory", Q("1")}}}};
  model::Device mig = Device("mig-0");
  mig.capacity["memory"].value = Q("20Gi");
  mig.consumes_counters = {{"gpu-0", {{"memory", Q("20Gi")}}}};
  const std::map<std::string, std::map<std::string, Quantity>> sets = {
      {"gpu-0", {{"memory", Q("80Gi")}}}};
  auto lookup = [&](const std::string&, const std::string&, const std::string& name) {
    if (name == "gpu-0") return LedgerDevice{&shared, &sets};
    if (name == "mig-0") return LedgerDevice{&mig, &sets};
    return LedgerDevice{};
  };

  model::AllocationResult allocation;
  auto share = Result("gpu-0", "s1");
  share.consumed_capacity = {{"gpu.example.com/memory", Q("20Gi")},  // qualified in the request
                             {"cores", Q("10")},
                             {"bandwidth", Q("5")}};  // the device publishes no such capacity
  allocation.results.push_back(share);
  allocation.results.push_back(Result("mig-0"));
  auto admin = Result("mig-0");
  admin.admin_access = true;
  allocation.results.push_back(admin);
  allocation.results.push_back(Result("gone"));

  const auto rows = LedgerRows(allocation, "uid-1", lookup);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].charges, (std::vector<store::DeviceCharge>{
                                 {Kind::kCapacity, "gpu-0", "cores", Q("10"), Q("100")},
                                 {Kind::kCapacity, "gpu-0", "memory", Q("20Gi"), Q("80Gi")},
                                 {Kind::kCounter, "gpu-0", "memory", Q("80Gi"), Q("80Gi")}}));
  // An exclusive device takes its counters, not its capacity.
  EXPECT_EQ(rows[1].charges, (std::vector<store::DeviceCharge>{
                                 {Kind::kCounter, "gpu-0", "memory", Q("20Gi"), Q("80Gi")}}));
  EXPECT_TRUE(rows[2].charges.empty());  // admin access takes nothing
  EXPECT_TRUE(rows[3].charges.empty());  // unknown device: no limit known
  // Without a lookup the rows are the allocation alone.
  const auto plain = LedgerRows(allocation, "uid-1");
  EXPECT_EQ(plain[0].share_id, "s1");
  EXPECT_EQ(plain[0].consumed_capacity,
            R"({"bandwidth":"5","cores":"10","gpu.example.com/memory":"20Gi"})");
  EXPECT_TRUE(plain[0].charges.empty());
}

TEST(LedgerTest, SliceDevicesUseTheNewestGenerationAndPoolWideCounterSets) {
  auto slice = [](const std::string& pool, int64_t generation) {
    model::ResourceSlice s;
    s.driver = "gpu.example.com";
    s.pool = pool;
    s.generation = generation;
    return s;
  };
  std::vector<model::ResourceSlice> slices;
  slices.push_back(slice("node-a", 1));
  slices.back().devices.push_back(Device("old"));
  slices.push_back(slice("node-a", 2));
  slices.back().shared_counters.push_back({"gpu-0", {{"memory", Q("80Gi")}}});
  slices.push_back(slice("node-a", 2));
  slices.back().devices.push_back(Device("mig-0"));
  slices.push_back(slice("node-b", 1));
  slices.back().devices.push_back(Device("mig-0"));
  const SliceDevices devices(std::move(slices));

  EXPECT_EQ(devices.Find("gpu.example.com", "node-a", "old").device, nullptr);
  const LedgerDevice found = devices.Find("gpu.example.com", "node-a", "mig-0");
  ASSERT_NE(found.device, nullptr);
  EXPECT_EQ(found.device->name, "mig-0");
  ASSERT_NE(found.counter_sets, nullptr);
  EXPECT_EQ(found.counter_sets->at("gpu-0").at("memory"), Q("80Gi"));
  const LedgerDevice other = devices.Lookup()("gpu.example.com", "node-b", "mig-0");
  ASSERT_NE(other.device, nullptr);
  EXPECT_TRUE(other.counter_sets == nullptr || other.counter_sets->empty());
  EXPECT_EQ(devices.Find("other.example.com", "node-a", "mig-0").device, nullptr);
}

}  // namespace
}  // namespace qm::service
