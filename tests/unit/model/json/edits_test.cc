// The controllers' edits of stored bodies (model/json/edits.h): each sets exactly what the
// scheduler's write needs and keeps every other field, unknown ones included, as stored.
#include "model/json/edits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/json/dra_json.h"
#include "model/json/stored.h"

namespace qm::model::json {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;

Document Doc(const char* text) { return Document::Parse(text); }

ResourceClaimConsumerReference PodRef(const std::string& name, const std::string& uid) {
  return {"", "pods", name, uid};
}

TEST(DocumentTest, ParseKeepsObjectsAndTurnsAnythingElseIntoAnEmptyObject) {
  EXPECT_EQ(Doc(R"({"a":1})").Dump(), R"({"a":1})");
  EXPECT_EQ(Doc("[1,2]").Dump(), "{}");
  EXPECT_EQ(Doc("not json").Dump(), "{}");
  EXPECT_EQ(Document(json(3)).Dump(), "{}");
}

TEST(DocumentTest, AKeptTreeIsUsedOnlyForTheTextItWasKeptWith) {
  Object pod;
  pod.resource = "pods";
  pod.meta.name = "p";
  pod.body = R"({"spec":{"nodeName":"a"}})";
  // The kept tree says "kept", the text "a": which one a reader saw tells them apart.
  KeepParsed(pod, std::make_shared<const Document>(Doc(R"({"spec":{"nodeName":"kept"}})")));
  ASSERT_NE(ParsedBody(pod), nullptr);
  EXPECT_EQ(BodyOf(pod), pod.parsed) << "the kept tree itself, not a parse";
  EXPECT_EQ(DecodePod(pod).node_name, "kept");

  // A body replaced after the tree was kept is parsed again.
  pod.body = R"({"spec":{"nodeName":"b"}})";
  EXPECT_EQ(ParsedBody(pod), nullptr);
  EXPECT_NE(BodyOf(pod), pod.parsed);
  EXPECT_EQ(BodyOf(pod)->Dump(), pod.body);
  EXPECT_EQ(DecodePod(pod).node_name, "b");

  // Never kept: parsed.
  Object plain;
  plain.body = R"({"spec":{"nodeName":"c"}})";
  EXPECT_EQ(ParsedBody(plain), nullptr);
  EXPECT_EQ(DecodePod(plain).node_name, "c");
}

TEST(DocumentTest, AKeptSliceTreeDecodesWithTheObjectsName) {
  Object slice;
  slice.resource = "resourceslices.resource.k8s.io";
  slice.meta.name = "node-a-gpu";
  slice.body =
      R"({"spec":{"driver":"gpu.example.com","nodeName":"node-a",)"
      R"("pool":{"name":"node-a","generation":1,"resourceSliceCount":1},"devices":[{"name":"g0"}]}})";
  KeepParsed(slice, std::make_shared<const Document>(Doc(slice.body.c_str())));
  auto kept = DecodeResourceSlice(slice);
  ASSERT_TRUE(kept.ok()) << kept.status();
  Object text_only = slice;
  text_only.parsed.reset();
  auto parsed = DecodeResourceSlice(text_only);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(kept->name, "node-a-gpu");
  EXPECT_EQ(kept->name, parsed->name);
  EXPECT_EQ(kept->driver, parsed->driver);
  EXPECT_EQ(kept->pool, parsed->pool);
  ASSERT_EQ(kept->devices.size(), 1u);
  EXPECT_EQ(kept->devices[0].name, "g0");
}

TEST(EditsTest, WithStatusDropsAKeptTree) {
  Object pod;
  pod.resource = "pods";
  pod.body = R"({"spec":{}})";
  KeepParsed(pod, std::make_shared<const Document>(Doc(pod.body.c_str())));
  Object next = WithStatus(pod, Doc(R"({"spec":{},"status":{"phase":"Running"}})"));
  EXPECT_EQ(next.parsed, nullptr);
}

TEST(EditsTest, SetConditionAddsThenChangesOnlyWhatMoved) {
  Document pod = Doc(R"({"spec":{"x-unknown":1},"status":{"phase":"Pending"}})");
  ASSERT_TRUE(SetCondition(pod, "PodScheduled", "False", "Unschedulable", "no node", "t1"));
  const json& c = pod.value()["status"]["conditions"][0];
  EXPECT_EQ(c["status"], "False");
  EXPECT_EQ(c["reason"], "Unschedulable");
  EXPECT_EQ(c["lastTransitionTime"], "t1");
  EXPECT_TRUE(c["lastProbeTime"].is_null());
  // The same again: nothing changed.
  EXPECT_FALSE(SetCondition(pod, "PodScheduled", "False", "Unschedulable", "no node", "t2"));
  // Another message, same status: the transition time stays.
  EXPECT_TRUE(SetCondition(pod, "PodScheduled", "False", "Unschedulable", "other", "t3"));
  EXPECT_EQ(pod.value()["status"]["conditions"][0]["lastTransitionTime"], "t1");
  // Another status: it moves.
  EXPECT_TRUE(SetCondition(pod, "PodScheduled", "True", "", "", "t4"));
  EXPECT_EQ(pod.value()["status"]["conditions"].size(), 1u);
  EXPECT_EQ(pod.value()["status"]["conditions"][0]["lastTransitionTime"], "t4");
  EXPECT_EQ(pod.value()["status"]["phase"], "Pending");
  EXPECT_EQ(pod.value()["spec"]["x-unknown"], 1);
}

TEST(EditsTest, SetConditionMakesAStatusWhereTheBodyHasNone) {
  Document pod = Doc(R"({"status":"garbage"})");
  ASSERT_TRUE(SetCondition(pod, "Ready", "True", "", "", "t"));
  EXPECT_EQ(pod.value()["status"]["conditions"][0]["type"], "Ready");
  EXPECT_FALSE(pod.value()["status"]["conditions"][0].contains("reason"));
}

TEST(EditsTest, BindingSetsTheNodeNameAndKeepsTheSpec) {
  Document pod = Doc(R"({"spec":{"containers":[{"name":"c"}]}})");
  SetNodeName(pod, "gpu-node-a");
  EXPECT_EQ(DecodePod(pod).node_name, "gpu-node-a");
  EXPECT_EQ(pod.value()["spec"]["containers"][0]["name"], "c");
}

TEST(EditsTest, PodClaimStatusesAreWrittenOnlyWhenTheyDiffer) {
  const Document pod = Doc(R"({"status":{"phase":"Pending"}})");
  const std::vector<PodResourceClaimStatus> statuses = {{"gpu", "p-gpu-abcde"}};
  const ExtendedResourceClaimStatus extended{"p-extended-resources-xyz",
                                             {{"main", "nvidia.com/gpu", "container-0-request-0"}}};
  auto written = WithPodClaimStatuses(pod, statuses, extended);
  ASSERT_TRUE(written.has_value());
  const Pod decoded = DecodePod(*written);
  EXPECT_THAT(decoded.resource_claim_statuses,
              ElementsAre(PodResourceClaimStatus{"gpu", "p-gpu-abcde"}));
  EXPECT_EQ(decoded.extended_resource_claim_name, "p-extended-resources-xyz");
  EXPECT_EQ(written->value()["status"]["extendedResourceClaimStatus"]["requestMappings"][0]
                            ["requestName"],
            "container-0-request-0");
  EXPECT_EQ(written->value()["status"]["phase"], "Pending");
  // Already there: nothing to write.
  EXPECT_FALSE(WithPodClaimStatuses(*written, statuses, extended).has_value());
  EXPECT_FALSE(WithPodClaimStatuses(*written, std::nullopt, std::nullopt).has_value());
  // One of them changed: only that one is replaced.
  auto again = WithPodClaimStatuses(*written, std::vector<PodResourceClaimStatus>{}, std::nullopt);
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(DecodePod(*again).resource_claim_statuses.empty());
  EXPECT_EQ(DecodePod(*again).extended_resource_claim_name, "p-extended-resources-xyz");
}

TEST(EditsTest, AllocationReservesForOneConsumerAndReleaseTakesDeviceStatusesAlong) {
  Document claim = Doc(R"({"spec":{"devices":{"requests":[]}},
                           "status":{"reservedFor":[{"resource":"pods","name":"old","uid":"u0"}]}})");
  AllocationResult allocation;
  allocation.results.push_back({});
  allocation.results[0].request = "gpu";
  allocation.results[0].driver = "gpu.nvidia.com";
  allocation.results[0].pool = "node-a";
  allocation.results[0].device = "gpu-0";
  SetAllocation(claim, allocation, PodRef("p", "u1"));
  const StoredAllocation stored = StoredAllocationOf(claim);
  ASSERT_TRUE(stored.decoded.has_value()) << stored.error;
  EXPECT_EQ(stored.decoded->results[0].device, "gpu-0");
  const ResourceClaimStatus status = DecodeResourceClaimStatus(claim);
  EXPECT_THAT(status.reserved_for, ElementsAre(PodRef("p", "u1")));
  EXPECT_FALSE(claim.value()["status"]["reservedFor"][0].contains("apiGroup"));

  claim.value()["status"]["devices"] = json::array({{{"driver", "gpu.nvidia.com"}}});
  Deallocate(claim);
  EXPECT_FALSE(StoredAllocationOf(claim).present);
  EXPECT_FALSE(claim.value()["status"].contains("devices"));
  EXPECT_EQ(DecodeResourceClaimStatus(claim).reserved_for.size(), 1u);
}

TEST(EditsTest, ReserveForAddsAConsumerOnce) {
  Document claim = Doc(R"({"status":{"reservedFor":"garbage"}})");
  ReserveFor(claim, PodRef("a", "ua"));
  ReserveFor(claim, PodRef("b", "ub"));
  ReserveFor(claim, PodRef("a", "ua"));
  EXPECT_THAT(DecodeResourceClaimStatus(claim).reserved_for,
              ElementsAre(PodRef("a", "ua"), PodRef("b", "ub")));
}

TEST(EditsTest, KeepConsumersKeepsEntriesVerbatimByPosition) {
  Document claim = Doc(R"({"status":{"reservedFor":[
      {"resource":"pods","name":"a","uid":"ua","x-extra":true},
      {"resource":"pods","name":"b","uid":"ub"},
      {"resource":"pods","name":"c","uid":"uc"}]}})");
  KeepConsumers(claim, {0, 2});
  const json& kept = claim.value()["status"]["reservedFor"];
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0]["x-extra"], true);
  EXPECT_EQ(kept[1]["name"], "c");
  KeepConsumers(claim, {});
  EXPECT_FALSE(claim.value()["status"].contains("reservedFor"));
}

TEST(EditsTest, AllocationTextIsOnlyTheAllocation) {
  const Document a = Doc(R"({"status":{"allocation":{"devices":{"results":[]}},"x":1}})");
  const Document b = Doc(R"({"status":{"x":2,"allocation":{"devices":{"results":[]}}}})");
  const Document other = Doc(R"({"status":{"allocation":{"devices":{"results":[{}]}}}})");
  EXPECT_EQ(AllocationText(a), R"({"devices":{"results":[]}})");
  EXPECT_EQ(AllocationText(a), AllocationText(b));
  EXPECT_NE(AllocationText(a), AllocationText(other));
  EXPECT_EQ(AllocationText(Doc(R"({"status":{}})")), "");
  EXPECT_EQ(AllocationText(Doc(R"({"status":{"allocation":null}})")), "");
  EXPECT_EQ(AllocationText(Doc("{}")), "");
}

TEST(EditsTest, ClaimFromTemplateTakesTheSpecAndStringMetadata) {
  const Document tmpl = Doc(R"({"spec":{
      "metadata":{"labels":{"team":"ml","n":3},"annotations":{"note":"x"}},
      "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu"}}]}}}})");
  const ClaimFromTemplate out = ClaimBodyFromTemplate(tmpl);
  EXPECT_EQ(out.labels, (std::map<std::string, std::string>{{"team", "ml"}}));
  EXPECT_EQ(out.annotations, (std::map<std::string, std::string>{{"note", "x"}}));
  EXPECT_EQ(out.body.value()["spec"]["devices"]["requests"][0]["name"], "gpu");
  EXPECT_EQ(out.body.value().size(), 1u);
  // A template without a claim spec gives an empty one.
  EXPECT_EQ(ClaimBodyFromTemplate(Doc("{}")).body.Dump(), R"({"spec":{}})");
}

TEST(EditsTest, ClaimWithRequestsDecodesAsExactCountRequests) {
  Object obj;
  obj.resource = "resourceclaims.resource.k8s.io";
  obj.meta.name = "p-extended-resources-abcde";
  obj.meta.namespace_ = "default";
  obj.meta.uid = "uid-1";
  const Document body = ClaimBodyWithRequests({{"container-0-request-0", "gpu.example.com", 2},
                                               {"container-1-request-0", "gpu.example.com", 1}});
  auto claim = DecodeResourceClaim(obj, body);
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_EQ(claim->name, "p-extended-resources-abcde");
  ASSERT_EQ(claim->spec.requests.size(), 2u);
  EXPECT_EQ(claim->spec.requests[0].name, "container-0-request-0");
  ASSERT_TRUE(claim->spec.requests[0].exactly.has_value());
  EXPECT_EQ(claim->spec.requests[0].exactly->device_class_name, "gpu.example.com");
  EXPECT_EQ(claim->spec.requests[0].exactly->allocation_mode, "ExactCount");
  EXPECT_EQ(claim->spec.requests[0].exactly->count, 2);
}

TEST(EditsTest, WithBodyComputesTheDigestAndFieldsWithStatusKeepsTheDigest) {
  Object pod;
  pod.resource = "pods";
  pod.meta.name = "p";
  pod.meta.namespace_ = "default";
  pod.spec_digest = "kept";
  Document body = Doc(R"({"spec":{"nodeName":"gpu-node-a"}})");
  const Object with_status = WithStatus(pod, body);
  EXPECT_EQ(with_status.spec_digest, "kept");
  EXPECT_EQ(with_status.fields.at("spec.nodeName"), "gpu-node-a");
  EXPECT_FALSE(with_status.fields.contains("metadata.name"));
  EXPECT_EQ(with_status.body, body.Dump());
  const Object with_body = WithBody(pod, body);
  EXPECT_NE(with_body.spec_digest, "kept");
  EXPECT_FALSE(with_body.spec_digest.empty());
}

TEST(EditsTest, OwnerReferencesRoundTrip) {
  Object owner;
  owner.meta.name = "p";
  owner.meta.uid = "uid-p";
  Object owned;
  owned.meta.owner_references = PodControllerReference(owner);
  EXPECT_THAT(OwnerUids(owned), ElementsAre("uid-p"));
  owned.meta.owner_references = "not json";
  EXPECT_TRUE(OwnerUids(owned).empty());
}

TEST(EditsTest, PodContainersCarryLimitsBeforeRequests) {
  const Pod pod = DecodePod(Doc(R"({"spec":{"containers":[
      {"name":"main","resources":{"limits":{"nvidia.com/gpu":2,"cpu":1.5},
                                  "requests":{"nvidia.com/gpu":"9","cpu":"1","memory":"1Gi"}}},
      {"name":"side"}]}})"));
  ASSERT_EQ(pod.containers.size(), 2u);
  EXPECT_EQ(pod.containers[0].name, "main");
  // The limit wins (the request of 9 is not read); a limit that is not a whole number or a
  // string hides its request too, and is left out.
  EXPECT_EQ(pod.containers[0].amounts,
            (std::map<std::string, std::string>{{"memory", "1Gi"}, {"nvidia.com/gpu", "2"}}));
  EXPECT_TRUE(pod.containers[1].amounts.empty());
}

}  // namespace
}  // namespace qm::model::json
