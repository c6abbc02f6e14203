// Stored objects -> the typed core model (model/json/stored.h): each field the service reads
// lands in its struct, fields of the wrong JSON type read as absent instead of failing, and the
// few writes the service makes (a quota's status, an Event) produce the body Kubernetes would.
#include "model/json/stored.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace qm::model::json {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Object Stored(const std::string& resource, const std::string& name, const std::string& body) {
  Object obj;
  obj.resource = resource;
  obj.meta.name = name;
  obj.meta.namespace_ = resource == "nodes" ? "" : "default";
  obj.body = body;
  return obj;
}

TEST(StoredTest, NodeCarriesCordonTaintsAndReadiness) {
  Object obj = Stored("nodes", "gpu-node-a", R"({
    "spec": {"unschedulable": true,
             "taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                         "timeAdded": "2026-11-28T10:00:00Z"},
                        {"key": "gpu", "value": "busy", "effect": "NoSchedule"}]},
    "status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
                              {"type": "Ready", "status": "Unknown"}]}})");
  obj.meta.labels = {{"nvidia.com/gpu.product", "A100"}};
  const Node node = DecodeNode(obj);
  EXPECT_EQ(node.name, "gpu-node-a");
  EXPECT_EQ(node.labels.at("nvidia.com/gpu.product"), "A100");
  EXPECT_TRUE(node.unschedulable);
  EXPECT_FALSE(node.ready);
  ASSERT_EQ(node.taints.size(), 2u);
  EXPECT_EQ(node.taints[0].key, "node.kubernetes.io/unreachable");
  EXPECT_EQ(node.taints[0].effect, "NoExecute");
  ASSERT_TRUE(node.taints[0].time_added.has_value());
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(
                node.taints[0].time_added->time_since_epoch())
                .count(),
            1795860000);
  EXPECT_EQ(node.taints[1].value, "busy");
  EXPECT_FALSE(node.taints[1].time_added.has_value());
}

TEST(StoredTest, NodeWithoutReadyConditionOrSpecIsReadyAndSchedulable) {
  const Node node = DecodeNode(Stored("nodes", "n", R"({"spec": {"unschedulable": "yes"}})"));
  EXPECT_TRUE(node.ready);
  EXPECT_FALSE(node.unschedulable) << "a non-boolean unschedulable cordons nothing";
  EXPECT_TRUE(node.taints.empty());
  // A body that is not JSON reads as an empty node, not a crash.
  EXPECT_TRUE(DecodeNode(Stored("nodes", "n", "{not json")).ready);
}

TEST(StoredTest, PodCarriesPlacementClaimsAndStatus) {
  const Pod pod = DecodePod(Stored("pods", "p", R"({
    "spec": {"nodeName": "gpu-node-a", "priority": 1000, "terminationGracePeriodSeconds": 5,
             "nodeSelector": {"zone": "a", "bad": 3},
             "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
               "nodeSelectorTerms": [{"matchExpressions": [
                 {"key": "gpu", "operator": "In", "values": ["a100", "h100"]}]}]}}},
             "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                              "effect": "NoExecute", "tolerationSeconds": 300}],
             "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                                {"name": "shared", "resourceClaimName": "team-gpu"}]},
    "status": {"phase": "Running",
               "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7k2"}],
               "extendedResourceClaimStatus": {"resourceClaimName": "p-extended-resources-q",
                 "requestMappings": [{"containerName": "main", "resourceName": "nvidia.com/gpu",
                                      "requestName": "container-0-request-0"}]}}})"));
  EXPECT_EQ(pod.node_name, "gpu-node-a");
  EXPECT_EQ(pod.priority, 1000);
  EXPECT_EQ(pod.GracePeriodSeconds(), 5);
  EXPECT_EQ(pod.phase, "Running");
  EXPECT_FALSE(pod.Terminal());
  EXPECT_EQ(pod.node_selector, (std::map<std::string, std::string>{{"zone", "a"}}));
  ASSERT_TRUE(pod.required_affinity.has_value());
  ASSERT_EQ(pod.required_affinity->terms.size(), 1u);
  ASSERT_EQ(pod.tolerations.size(), 1u);
  EXPECT_EQ(pod.tolerations[0],
            (Toleration{"node.kubernetes.io/unreachable", "Exists", "", "NoExecute", 300}));
  EXPECT_THAT(pod.resource_claims, ElementsAre(PodResourceClaim{"gpu", "", "one-gpu"},
                                               PodResourceClaim{"shared", "team-gpu", ""}));
  EXPECT_THAT(pod.resource_claim_statuses,
              ElementsAre(PodResourceClaimStatus{"gpu", "p-gpu-x7k2"}));
  EXPECT_EQ(pod.extended_resource_claim_name, "p-extended-resources-q");
  EXPECT_THAT(
      pod.extended_resource_request_mappings,
      ElementsAre(ContainerRequestMapping{"main", "nvidia.com/gpu", "container-0-request-0"}));
}

TEST(StoredTest, PodDefaultsAndTerminalPhases) {
  Pod pod = DecodePod(json::parse(R"({"spec": {"priority": "high"}, "status": {}})"));
  EXPECT_EQ(pod.priority, 0);
  EXPECT_EQ(pod.GracePeriodSeconds(), Pod::kDefaultGracePeriodSeconds);
  EXPECT_FALSE(pod.required_affinity.has_value());
  pod.termination_grace_period_seconds = -4;
  EXPECT_EQ(pod.GracePeriodSeconds(), 0);
  pod.phase = "Succeeded";
  EXPECT_TRUE(pod.Terminal());
  pod.phase = "Failed";
  EXPECT_TRUE(pod.Terminal());
}

TEST(StoredTest, PlacementSignatureCoversExactlyThePlacementFields) {
  const Pod a = DecodePod(json::parse(R"({"spec": {"nodeSelector": {"zone": "a"},
      "tolerations": [{"key": "k", "operator": "Exists"}], "containers": [{"name": "x"}]},
      "status": {"phase": "Pending"}})"));
  const Pod same = DecodePod(json::parse(R"({"spec": {"nodeSelector": {"zone": "a"},
      "tolerations": [{"key": "k", "operator": "Exists"}], "containers": [{"name": "y"}],
      "priority": 7}})"));
  const Pod other_zone = DecodePod(json::parse(R"({"spec": {"nodeSelector": {"zone": "b"},
      "tolerations": [{"key": "k", "operator": "Exists"}]}})"));
  const Pod no_toleration = DecodePod(json::parse(R"({"spec": {"nodeSelector": {"zone": "a"}}})"));
  const Pod with_affinity = DecodePod(json::parse(R"({"spec": {"nodeSelector": {"zone": "a"},
      "tolerations": [{"key": "k", "operator": "Exists"}],
      "affinity": {"nodeAffinity": {}}}})"));
  EXPECT_EQ(a.placement_signature, same.placement_signature);
  EXPECT_NE(a.placement_signature, other_zone.placement_signature);
  EXPECT_NE(a.placement_signature, no_toleration.placement_signature);
  EXPECT_NE(a.placement_signature, with_affinity.placement_signature);
  // The text of the three, in order, absent ones null.
  EXPECT_EQ(a.placement_signature, R"([{"zone":"a"},null,[{"key":"k","operator":"Exists"}]])");
  EXPECT_EQ(DecodePod(json::parse("{}")).placement_signature, "[null,null,null]");
}

TEST(StoredTest, PodStatusDecodesOverAPodAndReplacesWhatItsStatusHeld) {
  Pod pod = DecodePod(json::parse(R"({"spec": {"nodeName": "n", "priority": 3},
      "status": {"phase": "Pending",
                 "resourceClaimStatuses": [{"name": "a", "resourceClaimName": "p-a"}],
                 "extendedResourceClaimStatus": {"resourceClaimName": "p-x",
                   "requestMappings": [{"containerName": "c", "resourceName": "r",
                                        "requestName": "q"}]}}})"));
  const json next = json::parse(R"({"spec": {"nodeName": "other"},
      "status": {"phase": "Succeeded",
                 "resourceClaimStatuses": [{"name": "b", "resourceClaimName": "p-b"}]}})");
  DecodePodStatus(next, pod);
  EXPECT_EQ(pod.phase, "Succeeded");
  EXPECT_THAT(pod.resource_claim_statuses, ElementsAre(PodResourceClaimStatus{"b", "p-b"}));
  EXPECT_EQ(pod.extended_resource_claim_name, "");
  EXPECT_TRUE(pod.extended_resource_request_mappings.empty());
  // The spec is what the pod was decoded from: DecodePodStatus reads the status only.
  EXPECT_EQ(pod.node_name, "n");
  EXPECT_EQ(pod.priority, 3);
}

TEST(StoredTest, QuotaHardKeepsKeysThatAreNoQuantityAsUnlimited) {
  const QuotaHard hard = DecodeQuotaHard(Stored("resourcequotas", "q", R"({
    "spec": {"hard": {"gpu.deviceclass.resource.k8s.io/devices": "4", "pods": 10,
                      "requests.nvidia.com/gpu": "lots"}}})"));
  ASSERT_EQ(hard.size(), 3u);
  ASSERT_TRUE(hard.at("gpu.deviceclass.resource.k8s.io/devices").has_value());
  EXPECT_EQ(hard.at("gpu.deviceclass.resource.k8s.io/devices")->Value(), 4);
  ASSERT_TRUE(hard.at("pods").has_value());
  EXPECT_EQ(hard.at("pods")->Value(), 10);
  EXPECT_FALSE(hard.at("requests.nvidia.com/gpu").has_value());
}

TEST(StoredTest, QuotaStatusIsWrittenOnlyWhenItChanges) {
  const Object quota = Stored("resourcequotas", "q", R"({
    "spec": {"hard": {"a": "4", "b": "2"}}, "other": {"kept": true}})");
  const std::string body = QuotaBodyWithStatus(quota, {{"a", 3}, {"unlisted", 9}});
  ASSERT_FALSE(body.empty());
  const json parsed = json::parse(body);
  EXPECT_EQ(parsed["status"], json::parse(R"({"hard": {"a": "4", "b": "2"},
                                               "used": {"a": "3", "b": "0"}})"));
  EXPECT_EQ(parsed["other"], json::parse(R"({"kept": true})")) << "unknown fields stay";
  Object updated = quota;
  updated.body = body;
  EXPECT_EQ(QuotaBodyWithStatus(updated, {{"a", 3}}), "");
  EXPECT_NE(QuotaBodyWithStatus(updated, {{"a", 4}}), "");
}

TEST(StoredTest, EventBodyAndFieldSelectorValues) {
  Object base;
  base.resource = "events";
  base.meta.name = "p.1";
  base.meta.namespace_ = "team-a";
  Event event;
  event.involved = {"Pod", "team-a", "p", "uid-1", "v1", ""};
  event.reason = "FailedScheduling";
  event.message = "0/3 nodes are available";
  event.type = "Warning";
  event.component = "quartermaster-scheduler";
  event.timestamp = "2026-11-28T10:00:00Z";
  const Object out = EncodeEvent(event, base);
  const json body = json::parse(out.body);
  EXPECT_EQ(body["involvedObject"], json::parse(R"({"kind": "Pod", "namespace": "team-a",
      "name": "p", "uid": "uid-1", "apiVersion": "v1"})"));
  EXPECT_EQ(body["reason"], "FailedScheduling");
  EXPECT_EQ(body["type"], "Warning");
  EXPECT_EQ(body["count"], 1);
  EXPECT_EQ(body["firstTimestamp"], "2026-11-28T10:00:00Z");
  EXPECT_EQ(body["lastTimestamp"], "2026-11-28T10:00:00Z");
  EXPECT_EQ(body["source"]["component"], "quartermaster-scheduler");
  EXPECT_EQ(body["reportingComponent"], "quartermaster-scheduler");
  EXPECT_EQ(out.meta.name, "p.1");
  EXPECT_EQ(out.meta.namespace_, "team-a");
  EXPECT_FALSE(out.fields.contains("metadata.name"));
  EXPECT_EQ(out.fields.at("involvedObject.name"), "p");
  EXPECT_EQ(out.fields.at("reason"), "FailedScheduling");
}

TEST(StoredTest, NodeRelationsNameTheAllocatedNode) {
  const json claim = json::parse(R"({
    "metadata": {"name": "c"},
    "status": {"allocation": {"nodeSelector": {"nodeSelectorTerms": [
      {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node-a"]}]}]}}}})");
  const NodeRelations relations = NodeRelationsOf(claim);
  EXPECT_EQ(relations.name, "c");
  EXPECT_THAT(relations.allocated_nodes, ElementsAre("gpu-node-a"));
  EXPECT_EQ(AllocatedNode(relations), "gpu-node-a");
  EXPECT_FALSE(NodeRelationsOf(static_cast<const json*>(nullptr)).has_value());

  // Two different nodes (network-attached devices) name no single node; neither do a NotIn or a
  // requirement with several values.
  const json spread = json::parse(R"({"status": {"allocation": {"nodeSelector": {
    "nodeSelectorTerms": [
      {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]}]},
      {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]},
      {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["c"]}]},
      {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["d", "e"]}]}]}}}})");
  EXPECT_THAT(NodeRelationsOf(spread).allocated_nodes, ElementsAre("a", "b"));
  EXPECT_EQ(AllocatedNode(NodeRelationsOf(spread)), std::nullopt);

  // From a stored pod: its name from metadata, spec.nodeName from the body.
  const NodeRelations pod =
      NodeRelationsOf(Stored("pods", "p", R"({"spec": {"nodeName": "gpu-node-b"}})"));
  EXPECT_EQ(pod.name, "p");
  EXPECT_EQ(pod.spec_node_name, "gpu-node-b");
  EXPECT_EQ(AllocatedNode(pod), std::nullopt);
}

TEST(StoredTest, StoredAllocationTellsAbsentFromUnreadable) {
  EXPECT_FALSE(DecodeStoredAllocation(R"({"spec": {}})").present);
  EXPECT_FALSE(DecodeStoredAllocation(R"({"status": {"allocation": null}})").present);

  const StoredAllocation ok = DecodeStoredAllocation(R"({"status": {"allocation": {"devices": {
    "results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "a", "device": "gpu-0"}]}}}})");
  EXPECT_TRUE(ok.present);
  ASSERT_TRUE(ok.decoded.has_value()) << ok.error;
  ASSERT_EQ(ok.decoded->results.size(), 1u);
  EXPECT_EQ(ok.decoded->results[0].device, "gpu-0");

  const StoredAllocation bad =
      DecodeStoredAllocation(R"({"status": {"allocation": {"devices": {"results": "all"}}}})");
  EXPECT_TRUE(bad.present);
  EXPECT_FALSE(bad.decoded.has_value());
  EXPECT_THAT(bad.error, HasSubstr("status.allocation"));

  const StoredAllocation not_object =
      DecodeStoredAllocation(R"({"status": {"allocation": "gpu-0"}})");
  EXPECT_TRUE(not_object.present);
  EXPECT_FALSE(not_object.decoded.has_value()) << "it could hold anything";
  EXPECT_EQ(not_object.error, "status.allocation: must be an object");

  const StoredAllocation garbage = DecodeStoredAllocation("{not json");
  EXPECT_TRUE(garbage.present) << "an unreadable body may hold an allocation";
  EXPECT_FALSE(garbage.decoded.has_value());
  EXPECT_EQ(garbage.error, "the body is not JSON");
}

TEST(StoredTest, ClaimStatusKeepsConsumersByPositionAndSeesPreparedDevices) {
  const ResourceClaimStatus status = DecodeResourceClaimStatus(json::parse(R"({"status": {
    "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}, "junk",
                    {"apiGroup": "batch", "resource": "jobs", "name": "j", "uid": "u2"}],
    "devices": [{"driver": "gpu.nvidia.com", "pool": "a", "device": "gpu-0",
                 "conditions": [{"type": "Ready", "status": "False"}]},
                {"driver": "gpu.nvidia.com", "pool": "a", "device": "gpu-1",
                 "conditions": [{"type": "Other", "status": "True"},
                                {"type": "Ready", "status": "True"}]}]}})"));
  EXPECT_THAT(status.reserved_for,
              ElementsAre(ResourceClaimConsumerReference{"", "pods", "p", "u1"},
                          ResourceClaimConsumerReference{},
                          ResourceClaimConsumerReference{"batch", "jobs", "j", "u2"}));
  EXPECT_TRUE(status.prepared);

  const ResourceClaimStatus failed = DecodeResourceClaimStatus(json::parse(R"({"status": {
    "reservedFor": {"uid": "u1"},
    "devices": [{"conditions": [{"type": "Ready", "status": "False", "reason": "PrepareFailed"}]}]}})"));
  EXPECT_TRUE(failed.reserved_for.empty()) << "a reservedFor that is not a list names nobody";
  EXPECT_FALSE(failed.prepared) << "a device that failed to prepare holds nothing on the node";
  EXPECT_FALSE(DecodeResourceClaimStatus(json::parse(R"({"spec": {}})")).prepared);
}

TEST(StoredTest, AllocatedRefsReadWhatTheyCan) {
  const AllocatedRefs refs = ReadAllocatedRefs(R"({"status": {"allocation": {"devices": {
    "results": [{"driver": "gpu.nvidia.com", "pool": "a", "device": "gpu-0", "adminAccess": true},
                {"driver": "gpu.nvidia.com", "pool": "a", "device": 7}]}}}})");
  EXPECT_FALSE(refs.unreadable);
  ASSERT_EQ(refs.results.size(), 2u);
  EXPECT_EQ(refs.results[0].device, "gpu-0");
  EXPECT_TRUE(refs.results[0].admin_access);
  EXPECT_EQ(refs.results[1].device, "");
  EXPECT_FALSE(refs.results[1].admin_access);

  const AllocatedRefs none = ReadAllocatedRefs(R"({"status": {"allocation": null}})");
  EXPECT_FALSE(none.unreadable);
  EXPECT_TRUE(none.results.empty());
  EXPECT_FALSE(ReadAllocatedRefs(R"({"status": {"allocation": {}}})").unreadable)
      << "an allocation of no devices";
  EXPECT_TRUE(
      ReadAllocatedRefs(R"({"status": {"allocation": {"devices": {"results": 3}}}})").unreadable);
  EXPECT_TRUE(ReadAllocatedRefs(R"({"status": {"allocation": "x"}})").unreadable);
  EXPECT_TRUE(ReadAllocatedRefs("[").unreadable);
}

TEST(StoredTest, ObjectDecodersRejectBodiesThatAreNotObjects) {
  for (const std::string body : {"[]", "{oops", "3"}) {
    EXPECT_THAT(
        std::string(DecodeResourceSlice(Stored("resourceslices", "s", body)).status().message()),
        HasSubstr("not a JSON object"))
        << body;
    EXPECT_FALSE(DecodeDeviceClass(Stored("deviceclasses", "c", body)).ok()) << body;
    EXPECT_FALSE(DecodeRole(Stored("roles", "r", body)).ok()) << body;
  }
  auto device_class = DecodeDeviceClass(Stored("deviceclasses", "gpu.nvidia.com", R"({
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}})"));
  ASSERT_TRUE(device_class.ok()) << device_class.status();
  EXPECT_EQ(device_class->name, "gpu.nvidia.com") << "the name comes from the metadata";

  const DeviceTaintRule rule = DecodeDeviceTaintRuleSelector(Stored("devicetaintrules", "r", R"({
    "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": 5, "device": "gpu-1"}}})"));
  EXPECT_EQ(rule.name, "r");
  EXPECT_EQ(rule.driver, "gpu.nvidia.com");
  EXPECT_EQ(rule.pool, "");
  EXPECT_EQ(rule.device, "gpu-1");
}

TEST(StoredTest, CapacityMapIsCanonicalQuantities) {
  std::map<std::string, Quantity> capacity;
  capacity["memory"] = *ParseQuantity("80Gi");
  capacity["cores"] = *ParseQuantity("1000m");
  EXPECT_EQ(EncodeCapacityMap(capacity), R"({"cores":"1","memory":"80Gi"})");
  EXPECT_EQ(EncodeCapacityMap({}), "{}");
}

// Deletion reads only a pod's grace period, without decoding the pod: it must read what
// DecodePod reads, whatever else the body holds.
TEST(StoredTest, GracePeriodReadsAsDecodePodReadsIt) {
  const std::vector<std::pair<std::string, std::optional<int64_t>>> cases = {
      {R"({"spec": {"terminationGracePeriodSeconds": 5}})", 5},
      {R"({"spec": {"containers": [{"name": "c", "terminationGracePeriodSeconds": 7}],
                    "terminationGracePeriodSeconds": 0}})",
       0},
      {R"({"metadata": {"terminationGracePeriodSeconds": 9},
           "status": {"terminationGracePeriodSeconds": 8},
           "spec": {"nodeName": "n", "overhead": {"terminationGracePeriodSeconds": 6}}})",
       std::nullopt},
      {R"({"spec": {"terminationGracePeriodSeconds": -3}})", -3},
      {R"({"spec": {"terminationGracePeriodSeconds": "30"}})", std::nullopt},
      {R"({"spec": {"terminationGracePeriodSeconds": 1.5}})", std::nullopt},
      {R"({"spec": {"terminationGracePeriodSeconds": null}})", std::nullopt},
      {R"({"spec": [{"terminationGracePeriodSeconds": 4}]})", std::nullopt},
      {R"({"spec": 12})", std::nullopt},
      {R"({"status": {"phase": "Running"}})", std::nullopt},
      {R"({"spec": {"terminationGracePeriodSeconds": 18446744073709551615}})", std::nullopt},
      {R"({"spec": {"nodeName": "n")", std::nullopt},  // truncated
      {"", std::nullopt},
  };
  for (const auto& [body, want] : cases) {
    const Object pod = Stored("pods", "p", body);
    EXPECT_EQ(PodTerminationGracePeriodSeconds(pod), want) << body;
    if (json::accept(body)) {
      EXPECT_EQ(PodTerminationGracePeriodSeconds(pod),
                DecodePod(pod).termination_grace_period_seconds)
          << body;
    }
  }
}

// The unhealthy sources the health history records (migrations/0015 reads rows the same way):
// a slice's devices with the taint of their own, once each; a rule's selector when its taint is
// that one, "" for an open field; nothing else.
TEST(StoredTest, UnhealthySourcesOfSlicesAndRules) {
  const char* taint = R"({"key":"quartermaster.io/unhealthy","effect":"NoSchedule"})";
  const Object slice =
      Stored("resourceslices.resource.k8s.io", "s",
             std::string(R"({"spec":{"driver":"gpu.example.com","pool":{"name":"p"},"devices":[)") +
                 R"({"name":"gpu-1","taints":[)" + taint + "," + taint + R"(]},)" +
                 R"({"name":"gpu-0","taints":[{"key":"other"},)" + taint + R"(]},)" +
                 R"({"name":"gpu-2","taints":[{"key":"other"}]},)" + R"({"name":7,"taints":[)" +
                 taint + R"(]}]}})");
  EXPECT_EQ(UnhealthySourcesOf(slice),
            (std::vector<UnhealthySource>{{"gpu.example.com", "p", "gpu-0"},
                                          {"gpu.example.com", "p", "gpu-1"}}));
  const Object rule = Stored(
      "devicetaintrules.resource.k8s.io", "r",
      std::string(R"({"spec":{"deviceSelector":{"driver":"gpu.example.com","device":3},"taint":)") +
          taint + "}}");
  EXPECT_EQ(UnhealthySourcesOf(rule), (std::vector<UnhealthySource>{{"gpu.example.com", "", ""}}));
  const Object other_rule =
      Stored("devicetaintrules.resource.k8s.io", "r",
             R"({"spec":{"deviceSelector":{"driver":"d"},"taint":{"key":"other","value":)"
             R"("quartermaster.io/unhealthy"}}})");
  EXPECT_TRUE(UnhealthySourcesOf(other_rule).empty());
  Object claim = slice;
  claim.resource = "resourceclaims.resource.k8s.io";
  EXPECT_TRUE(UnhealthySourcesOf(claim).empty());
}

}  // namespace
}  // namespace qm::model::json
