// The DRA codec (model/json/dra_json.h) on its own: every field a decoder reads lands where the
// allocator expects it, absent fields take Kubernetes' defaults, values that cannot be
// represented are InvalidArgument naming their field path, and status.allocation survives an
// encode/decode round trip.
#include "model/json/dra_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace qm::model::json {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

TEST(DraJsonTest, ResourceSliceCarriesDevicesCountersAndTaints) {
  const json slice = json::parse(R"({
    "metadata": {"name": "node-a-gpus"},
    "spec": {"driver": "gpu.nvidia.com", "nodeName": "node-a",
             "pool": {"name": "node-a", "generation": 3, "resourceSliceCount": 2},
             "sharedCounters": [{"name": "gpu-0-counters",
                                 "counters": {"memory": {"value": "80Gi"}}}],
             "devices": [
               {"name": "gpu-0",
                "attributes": {"productName": {"string": "NVIDIA A100"},
                               "index": {"int": 0},
                               "driverVersion": {"version": "560.35.3"},
                               "gpu.nvidia.com/mig": {"bool": false}},
                "capacity": {"memory": {"value": "80Gi"}},
                "allowMultipleAllocations": true,
                "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
               {"name": "gpu-0-mig-1g",
                "consumesCounters": [{"counterSet": "gpu-0-counters",
                                      "counters": {"memory": {"value": "10Gi"}}}]}]}})");
  auto s = DecodeResourceSlice(slice);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "node-a-gpus");
  EXPECT_EQ(s->driver, "gpu.nvidia.com");
  EXPECT_EQ(s->pool, "node-a");
  EXPECT_EQ(s->generation, 3);
  EXPECT_EQ(s->resource_slice_count, 2);
  EXPECT_EQ(s->node_name, "node-a");
  EXPECT_FALSE(s->all_nodes);
  ASSERT_EQ(s->shared_counters.size(), 1u);
  EXPECT_EQ(s->shared_counters[0].counters.at("memory").String(), "80Gi");
  ASSERT_EQ(s->devices.size(), 2u);
  const Device& gpu = s->devices[0];
  EXPECT_EQ(std::get<std::string>(gpu.attributes.at("productName")), "NVIDIA A100");
  EXPECT_EQ(std::get<int64_t>(gpu.attributes.at("index")), 0);
  EXPECT_EQ(std::get<Version>(gpu.attributes.at("driverVersion")).value, "560.35.3");
  EXPECT_EQ(std::get<bool>(gpu.attributes.at("gpu.nvidia.com/mig")), false);
  EXPECT_EQ(gpu.capacity.at("memory").value.String(), "80Gi");
  EXPECT_TRUE(gpu.allow_multiple_allocations);
  ASSERT_EQ(gpu.taints.size(), 1u);
  EXPECT_EQ(gpu.taints[0], (DeviceTaint{"k", "v", "NoSchedule", ""}));
  const Device& mig = s->devices[1];
  ASSERT_EQ(mig.consumes_counters.size(), 1u);
  EXPECT_EQ(mig.consumes_counters[0].counter_set, "gpu-0-counters");
  EXPECT_EQ(mig.consumes_counters[0].counters.at("memory").String(), "10Gi");
  EXPECT_FALSE(mig.allow_multiple_allocations);
}

// Per-device node selection and binding conditions live out of line: a device that sets none
// holds no DeviceBinding (most of a fleet), one that sets any reads them through Binding().
TEST(DraJsonTest, DeviceBindingFieldsAreHeldOnlyWhereSet) {
  auto s = DecodeResourceSlice(json::parse(R"({"metadata": {"name": "s"},
      "spec": {"driver": "d", "perDeviceNodeSelection": true, "pool": {"name": "p"},
               "devices": [
                 {"name": "plain"},
                 {"name": "pinned", "nodeName": "node-a", "bindsToNode": true,
                  "bindingConditions": ["ready"], "bindingFailureConditions": ["failed"]},
                 {"name": "anywhere", "allNodes": true},
                 {"name": "selected", "nodeSelector": {"nodeSelectorTerms": [
                   {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}]}})"));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->devices.size(), 4u);
  EXPECT_EQ(s->devices[0].binding, nullptr);
  EXPECT_TRUE(s->devices[0].Binding().Empty());
  const DeviceBinding& pinned = s->devices[1].Binding();
  EXPECT_EQ(pinned.node_name, "node-a");
  EXPECT_TRUE(pinned.binds_to_node);
  EXPECT_EQ(pinned.binding_conditions, std::vector<std::string>{"ready"});
  EXPECT_EQ(pinned.binding_failure_conditions, std::vector<std::string>{"failed"});
  EXPECT_FALSE(pinned.all_nodes);
  EXPECT_TRUE(s->devices[2].Binding().all_nodes);
  EXPECT_EQ(s->devices[2].Binding().node_name, "");
  ASSERT_TRUE(s->devices[3].Binding().node_selector.has_value());
  EXPECT_EQ(s->devices[3].Binding().node_selector->terms.size(), 1u);
}

TEST(DraJsonTest, UnknownAttributeKindsAreKeptAsUnusable) {
  auto s = DecodeResourceSlice(json::parse(R"({"metadata": {"name": "s"},
      "spec": {"driver": "d", "allNodes": true, "pool": {"name": "p"},
               "devices": [{"name": "x", "attributes": {"future": {"quaternion": [1, 2]}}}]}})"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->all_nodes);
  EXPECT_EQ(s->resource_slice_count, 1);  // the default
  EXPECT_TRUE(std::holds_alternative<std::monostate>(s->devices[0].attributes.at("future")));
}

TEST(DraJsonTest, WrongTypesAreErrorsNamingTheField) {
  auto bad_quantity = DecodeResourceSlice(json::parse(R"({"metadata": {"name": "s"},
      "spec": {"driver": "d", "allNodes": true, "pool": {"name": "p"},
               "devices": [{"name": "x", "capacity": {"memory": {"value": "eighty"}}}]}})"));
  ASSERT_FALSE(bad_quantity.ok());
  EXPECT_EQ(bad_quantity.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_quantity.status().message(), HasSubstr("spec.devices[0].capacity"));
  auto bad_rule = DecodeDeviceTaintRule(json::parse(R"({"metadata": {"name": "r"},
      "spec": {"deviceSelector": {"device": 7}, "taint": {"key": "k", "effect": "NoSchedule"}}})"));
  ASSERT_FALSE(bad_rule.ok());
  EXPECT_THAT(bad_rule.status().message(), HasSubstr("spec.deviceSelector"));
  auto bad_allocation = DecodeAllocationResult(json::parse(R"({"devices": {"results": "all"}})"),
                                               "status.allocation");
  ASSERT_FALSE(bad_allocation.ok());
  EXPECT_THAT(bad_allocation.status().message(), HasSubstr("status.allocation.devices.results"));
}

TEST(DraJsonTest, DeviceClassAndTaintRule) {
  auto cls = DecodeDeviceClass(json::parse(R"({"metadata": {"name": "gpu"},
      "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
               "extendedResourceName": "example.com/gpu",
               "config": [{"opaque": {"driver": "gpu.nvidia.com",
                                      "parameters": {"kind": "GpuConfig"}}}]}})"));
  ASSERT_TRUE(cls.ok()) << cls.status();
  EXPECT_EQ(cls->name, "gpu");
  EXPECT_EQ(cls->selectors, std::vector<std::string>{"device.driver == 'gpu.nvidia.com'"});
  EXPECT_EQ(cls->extended_resource_name, "example.com/gpu");
  ASSERT_EQ(cls->config.size(), 1u);
  EXPECT_EQ(cls->config[0].driver, "gpu.nvidia.com");
  EXPECT_EQ(json::parse(cls->config[0].parameters), json::parse(R"({"kind": "GpuConfig"})"));

  auto rule = DecodeDeviceTaintRule(json::parse(R"({"metadata": {"name": "drain-a"},
      "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "node-a"},
               "taint": {"key": "maintenance", "value": "now", "effect": "NoExecute"}}})"));
  ASSERT_TRUE(rule.ok()) << rule.status();
  EXPECT_EQ(rule->name, "drain-a");
  EXPECT_EQ(rule->driver, "gpu.nvidia.com");
  EXPECT_EQ(rule->pool, "node-a");
  EXPECT_EQ(rule->device, "");  // absent: every device of the pool
  EXPECT_EQ(rule->taint.key, "maintenance");
  EXPECT_EQ(rule->taint.effect, "NoExecute");
}

TEST(DraJsonTest, ClaimRequestsDefaultAsKubernetesDoes) {
  auto claim = DecodeResourceClaim(json::parse(R"({
      "metadata": {"name": "c", "namespace": "team", "uid": "u-1"},
      "spec": {"devices": {"requests": [
        {"name": "one", "exactly": {"deviceClassName": "gpu"}},
        {"name": "all", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}},
        {"name": "pick", "firstAvailable": [{"name": "big", "deviceClassName": "a100"},
                                            {"name": "small", "deviceClassName": "l4",
                                             "count": 2}]}]}}})"));
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_EQ(claim->namespace_, "team");
  EXPECT_EQ(claim->uid, "u-1");
  EXPECT_FALSE(claim->allocation.has_value());
  const auto& requests = claim->spec.requests;
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].name, "one");
  ASSERT_TRUE(requests[0].exactly.has_value());
  EXPECT_EQ(requests[0].exactly->allocation_mode, kAllocationModeExactCount);
  EXPECT_EQ(requests[0].exactly->count, 1);
  EXPECT_EQ(requests[1].exactly->allocation_mode, kAllocationModeAll);
  ASSERT_EQ(requests[2].first_available.size(), 2u);
  EXPECT_EQ(requests[2].first_available[1].name, "small");
  EXPECT_EQ(requests[2].first_available[1].request.count, 2);
  EXPECT_EQ(requests[2].first_available[1].request.device_class_name, "l4");
}

TEST(DraJsonTest, AllocationRoundTrips) {
  const json wire = json::parse(R"({
    "devices": {
      "results": [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-0"},
        {"request": "share", "driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-1",
         "shareID": "7f0c9b1e-0c45-4b6e-9a57-3c7f7a0e0b11",
         "consumedCapacity": {"memory": "20Gi"}, "adminAccess": true,
         "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]}],
      "config": [{"source": "FromClass", "requests": ["gpu"],
                  "opaque": {"driver": "gpu.nvidia.com", "parameters": {"kind": "GpuConfig"}}}]},
    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
      {"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}})");
  auto decoded = DecodeAllocationResult(wire, "status.allocation");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->results.size(), 2u);
  const auto& share = decoded->results[1];
  EXPECT_EQ(share.share_id, "7f0c9b1e-0c45-4b6e-9a57-3c7f7a0e0b11");
  EXPECT_EQ(share.consumed_capacity.at("memory").String(), "20Gi");
  EXPECT_TRUE(share.admin_access);
  ASSERT_EQ(share.tolerations.size(), 1u);
  EXPECT_EQ(share.tolerations[0].op, "Exists");
  ASSERT_EQ(decoded->config.size(), 1u);
  EXPECT_EQ(decoded->config[0].source, "FromClass");
  ASSERT_TRUE(decoded->node_selector.has_value());
  // Encoding gives back the same wire form, and decoding that the same model.
  const json encoded = EncodeAllocationResult(*decoded);
  EXPECT_EQ(encoded, wire) << encoded.dump(2);
  auto again = DecodeAllocationResult(encoded, "status.allocation");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(EncodeAllocationResult(*again), encoded);
}

TEST(DraJsonTest, NodeInfoHasNameAndLabels) {
  auto node = DecodeNodeInfo(json::parse(
      R"({"metadata": {"name": "node-a", "labels": {"nvidia.com/gpu.product": "A100"}}})"));
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->name, "node-a");
  EXPECT_EQ(node->labels.at("nvidia.com/gpu.product"), "A100");
}

}  // namespace
}  // namespace qm::model::json
