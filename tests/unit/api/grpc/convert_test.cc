// Node-agent messages and API JSON: published slices become resource.k8s.io/v1 ResourceSlices
// that the REST validation accepts (or refuses with field paths), and claims become assignments.
#include "api/grpc/convert.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/rest/codec.h"
#include "api/rest/validation.h"
#include "common/clock.h"
#include "model/resource_types.h"

namespace qm::api::nodeapi {
namespace {

using nlohmann::json;

class FixedClock : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override {
    return std::chrono::system_clock::from_time_t(1'800'000'000);
  }
};

v1::Slice ExampleSlice() {
  v1::Slice s;
  v1::Device* d = s.add_devices();
  d->set_name("gpu-0");
  (*d->mutable_attributes())["productName"].set_string_value("NVIDIA A100-SXM4-80GB");
  (*d->mutable_attributes())["index"].set_int_value(0);
  (*d->mutable_attributes())["cudaComputeCapability"].set_version_value("8.0.0");
  (*d->mutable_attributes())["resource.kubernetes.io/pcieRoot"].set_string_value("pci0000:00");
  (*d->mutable_capacity())["memory"].set_value("80Gi");
  return s;
}

model::FieldErrors Validate(const json& obj) {
  const model::ResourceType& type = *model::FindResourceType("resource.k8s.io", "resourceslices");
  FixedClock clock;
  return ValidateObject(type, ToHub(type, "v1", obj, clock), nullptr);
}

TEST(ConvertTest, SliceIsAValidResourceSlice) {
  json obj = SliceJson(ExampleSlice(), "gpu-node-a-gpu.nvidia.com", "gpu-node-a", "gpu.nvidia.com",
                       "gpu-node-a", 3, 1);
  EXPECT_EQ(obj["spec"]["nodeName"], "gpu-node-a");
  EXPECT_EQ(obj["spec"]["pool"], json::parse(R"({"name":"gpu-node-a","generation":3,
                                                  "resourceSliceCount":1})"));
  const json& dev = obj["spec"]["devices"][0];
  EXPECT_EQ(dev["attributes"]["productName"], json({{"string", "NVIDIA A100-SXM4-80GB"}}));
  EXPECT_EQ(dev["attributes"]["index"], json({{"int", 0}}));
  EXPECT_EQ(dev["attributes"]["cudaComputeCapability"], json({{"version", "8.0.0"}}));
  EXPECT_EQ(dev["capacity"]["memory"], json({{"value", "80Gi"}}));
  auto errors = Validate(obj);
  EXPECT_TRUE(errors.empty()) << errors.front().ToString();
}

// A partitionable pool (NVML's MIG devices): the counters' slice has no devices field at all,
// which validation requires ("only one of sharedCounters or devices").
TEST(ConvertTest, ACountersSliceHasNoDevices) {
  v1::Slice s;
  auto* set = s.add_shared_counters();
  set->set_name("gpu-0-counter-set");
  (*set->mutable_counters())["memory"] = "80Gi";
  json obj = SliceJson(s, "n-gpu.nvidia.com", "n", "gpu.nvidia.com", "n", 1, 2);
  EXPECT_FALSE(obj["spec"].contains("devices"));
  EXPECT_EQ(obj["spec"]["sharedCounters"][0]["name"], "gpu-0-counter-set");
  auto errors = Validate(obj);
  EXPECT_TRUE(errors.empty()) << errors.front().ToString();
  // A slice with neither still lists its (empty) devices.
  EXPECT_TRUE(
      SliceJson(v1::Slice(), "n-gpu.nvidia.com", "n", "gpu.nvidia.com", "n", 1, 1)["spec"].contains(
          "devices"));
}

TEST(ConvertTest, InvalidContentIsRefusedWithFieldPaths) {
  v1::Slice s = ExampleSlice();
  s.mutable_devices(0)->set_name("GPU_0");
  (*s.mutable_devices(0)->mutable_attributes())["empty"];  // no value set
  auto errors = Validate(SliceJson(s, "n-d", "n", "gpu.nvidia.com", "n", 1, 1));
  std::vector<std::string> fields;
  for (const auto& e : errors) fields.push_back(e.field);
  EXPECT_THAT(fields, ::testing::Contains("spec.devices[0].name"));
  EXPECT_THAT(fields, ::testing::Contains(::testing::HasSubstr("spec.devices[0].attributes")));
}

TEST(ConvertTest, SliceNames) {
  EXPECT_EQ(SliceName("gpu-node-a", "gpu.nvidia.com", "gpu-node-a", 0, 1),
            "gpu-node-a-gpu.nvidia.com");
  EXPECT_EQ(SliceName("gpu-node-a", "gpu.nvidia.com", "gpu-node-a", 1, 2),
            "gpu-node-a-gpu.nvidia.com-1");
  EXPECT_EQ(SliceName("n", "d.io", "Rack/7_b", 0, 1), "n-d.io-rack-7-b");
}

json AllocatedClaim(const std::string& node, bool reserved) {
  json body = json::parse(R"({
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"}}]}},
    "status": {"allocation": {
      "devices": {
        "results": [
          {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "p", "device": "gpu-1"},
          {"request": "gpu", "driver": "nic.example.com", "pool": "p", "device": "nic-0",
           "shareID": "2f5e6c1a-0000-4000-8000-000000000001",
           "consumedCapacity": {"bandwidth": "10G"}}],
        "config": [{"source": "FromClaim", "requests": ["gpu"],
                    "opaque": {"driver": "gpu.nvidia.com", "parameters": {"sharing": "mps"}}}]},
      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": []}]}]}}}})");
  body["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] =
      json::array({node});
  if (reserved) {
    body["status"]["reservedFor"] =
        json::array({{{"resource", "pods"}, {"name", "pod1"}, {"uid", "p-uid"}}});
  }
  return body;
}

TEST(ConvertTest, AssignmentOfAnAllocatedReservedClaim) {
  auto a = AssignmentOf("ns", "claim", "c-uid", AllocatedClaim("gpu-node-a", true));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->node, "gpu-node-a");
  EXPECT_EQ(a->assignment.claim().namespace_(), "ns");
  EXPECT_EQ(a->assignment.claim().uid(), "c-uid");
  ASSERT_EQ(a->assignment.devices_size(), 2);
  EXPECT_EQ(a->assignment.devices(1).share_id(), "2f5e6c1a-0000-4000-8000-000000000001");
  EXPECT_EQ(a->assignment.devices(1).consumed_capacity().at("bandwidth"), "10G");
  ASSERT_EQ(a->assignment.configs_size(), 1);
  EXPECT_EQ(json::parse(a->assignment.configs(0).parameters_json()), json({{"sharing", "mps"}}));
  ASSERT_EQ(a->assignment.consumers_size(), 1);
  EXPECT_EQ(a->assignment.consumers(0).name(), "pod1");

  auto gpu_only = ForDrivers(a->assignment, {"gpu.nvidia.com"});
  ASSERT_TRUE(gpu_only.has_value());
  EXPECT_EQ(gpu_only->devices_size(), 1);
  EXPECT_EQ(gpu_only->configs_size(), 1);
  EXPECT_FALSE(ForDrivers(a->assignment, {"fpga.example.com"}).has_value());
}

TEST(ConvertTest, NoAssignmentWithoutConsumersOrNode) {
  EXPECT_FALSE(AssignmentOf("ns", "c", "u", AllocatedClaim("gpu-node-a", false)).has_value());
  EXPECT_FALSE(AssignmentOf("ns", "c", "u", json::parse(R"({"spec": {}})")).has_value());
}

// The text test that spares parsing claim bodies never rules out a body with an assignment.
TEST(ConvertTest, OnlyBodiesWithoutAllocationOrConsumersAreSkippedUnparsed) {
  const std::string assigned = AllocatedClaim("gpu-node-a", true).dump();
  EXPECT_TRUE(MayHaveAssignment(assigned));
  EXPECT_TRUE(AssignmentOf("ns", "c", "u", json::parse(assigned)).has_value());
  EXPECT_FALSE(MayHaveAssignment(AllocatedClaim("gpu-node-a", false).dump()));
  EXPECT_FALSE(MayHaveAssignment(R"({"spec":{"devices":{"requests":[]}}})"));
  EXPECT_FALSE(MayHaveAssignment(R"({"status":{"reservedFor":[{"name":"p"}]}})"));
}

TEST(ConvertTest, AllocationIdsTrackTheAllocation) {
  json one = AllocatedClaim("gpu-node-a", true)["status"]["allocation"];
  json other = one;
  other["devices"]["results"][0]["device"] = "gpu-2";
  EXPECT_EQ(AllocationId("u", one), AllocationId("u", one));
  EXPECT_NE(AllocationId("u", one), AllocationId("u", other));
  EXPECT_NE(AllocationId("u", one), AllocationId("v", one));
  EXPECT_EQ(AllocationId("u", one).size(), 16u);
}

// What the assignment router compares before it decodes a claim again: the id AssignmentOf would
// give, present exactly when AssignmentOf would give an assignment (a node aside), and the
// consumers alone.
TEST(ConvertTest, AnAssignmentsAllocationIdAndConsumersComeWithoutTheRest) {
  json claim = AllocatedClaim("gpu-node-a", true);
  auto a = AssignmentOf("ns", "claim", "c-uid", claim);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(AssignmentAllocationId("c-uid", claim), a->assignment.allocation_id());
  EXPECT_FALSE(AssignmentAllocationId("c-uid", AllocatedClaim("gpu-node-a", false)).has_value());
  EXPECT_FALSE(AssignmentAllocationId("c-uid", json::parse(R"({"spec": {}})")).has_value());

  claim["status"]["reservedFor"] = {{{"resource", "pods"}, {"name", "pod2"}, {"uid", "u2"}},
                                    {{"resource", "jobs"}, {"name", "j"}, {"uid", "u3"}},
                                    {{"resource", "pods"}, {"name", "pod3"}, {"uid", "u4"}}};
  SetConsumers(claim, a->assignment);
  ASSERT_EQ(a->assignment.consumers_size(), 2);  // pods only, in order, the old one gone
  EXPECT_EQ(a->assignment.consumers(0).name(), "pod2");
  EXPECT_EQ(a->assignment.consumers(1).uid(), "u4");
  auto again = AssignmentOf("ns", "claim", "c-uid", claim);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->assignment.SerializeAsString(), a->assignment.SerializeAsString());
}

}  // namespace
}  // namespace qm::api::nodeapi
