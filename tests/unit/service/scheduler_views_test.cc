// The scheduler's pod and claim views (scheduler_pass.h): a view no pass is about to edit lets go
// of its parsed body (Settle), and Tree() then parses the text it still holds.

#include "gtest/gtest.h"
#include "model/json/edits.h"
#include "nlohmann/json.hpp"
#include "service/scheduler_pass.h"

namespace qm::service::scheduling {
namespace {

model::Object Stored(const std::string& resource, const std::string& body) {
  model::Object o;
  o.resource = resource;
  o.meta.namespace_ = "default";
  o.meta.name = "x";
  o.body = body;
  // As the REST codec leaves a write: the tree its text was written from travels with it.
  model::json::KeepParsed(o, model::json::BodyOf(o));
  return o;
}

PodView Pod(const std::string& body) {
  PodView p;
  p.obj = Stored("pods", body);
  p.SetBody(model::json::BodyOf(p.obj));
  p.node_name = p.pod.node_name;
  return p;
}

constexpr char kBound[] = R"({"spec":{"nodeName":"gpu-node-a"},"status":{"phase":"Pending"}})";

TEST(SchedulerViewsTest, ABoundPodLetsGoOfItsTreeAndParsesItsTextAgain) {
  PodView p = Pod(kBound);
  ASSERT_NE(p.body, nullptr);
  ASSERT_NE(model::json::ParsedBody(p.obj), nullptr);
  p.Settle();
  EXPECT_EQ(p.body, nullptr);
  EXPECT_EQ(model::json::ParsedBody(p.obj), nullptr);  // the object's copy goes too
  EXPECT_EQ(p.Tree()->value()["spec"]["nodeName"], "gpu-node-a");
  EXPECT_EQ(p.Current()->value()["status"]["phase"], "Pending");
}

TEST(SchedulerViewsTest, APodAPassMayStillEditKeepsItsTree) {
  PodView pending = Pod(R"({"spec":{}})");
  pending.Settle();
  EXPECT_NE(pending.body, nullptr);

  PodView with_status = Pod(kBound);
  with_status.SetStatusBody(
      std::make_shared<Document>(Document::Parse(R"({"spec":{},"status":{}})")));
  with_status.Settle();
  EXPECT_NE(with_status.body, nullptr);

  PodView with_claims = Pod(kBound);
  ClaimView generated;
  with_claims.new_claims.push_back(&generated);
  with_claims.Settle();
  EXPECT_NE(with_claims.body, nullptr);

  PodView deleting = Pod(R"({"spec":{}})");
  deleting.deleting = true;
  deleting.Settle();
  EXPECT_EQ(deleting.body, nullptr);  // going: nothing schedules it again
}

TEST(SchedulerViewsTest, ThePendingBodyIsDecodedOverTheStoredSpecAndEditedInPlaceWhenUnshared) {
  PodView p = Pod(R"({"spec":{"priority":5},"status":{"phase":"Pending"}})");
  auto pending = std::make_shared<Document>(Document::Parse(
      R"({"spec":{"priority":5},"status":{"phase":"Pending",)"
      R"("resourceClaimStatuses":[{"name":"gpu","resourceClaimName":"x-gpu-1"}]}})"));
  Document* raw = pending.get();
  p.SetStatusBody(pending);
  ASSERT_TRUE(p.status_pod.has_value());
  EXPECT_EQ(p.status_pod->priority, 5);
  ASSERT_EQ(p.status_pod->resource_claim_statuses.size(), 1u);
  EXPECT_EQ(p.status_pod->resource_claim_statuses[0].resource_claim_name, "x-gpu-1");
  EXPECT_TRUE(p.pod.resource_claim_statuses.empty());  // the stored pod's stays as it was

  // Held elsewhere too: a copy, and the pending body stays.
  auto copy = p.TakeCurrent();
  EXPECT_NE(copy.get(), raw);
  EXPECT_EQ(copy->value(), raw->value());
  EXPECT_EQ(p.status_body.get(), raw);
  // Held by the view alone: the body itself, taken out.
  pending.reset();
  auto taken = p.TakeCurrent();
  EXPECT_EQ(taken.get(), raw);
  EXPECT_EQ(p.status_body, nullptr);
  EXPECT_TRUE(p.status_pod.has_value());  // what the binding decodes from
  // Without a pending body: a copy of the stored one.
  PodView plain = Pod(kBound);
  auto stored = plain.TakeCurrent();
  EXPECT_NE(stored.get(), plain.Tree().get());
  EXPECT_EQ(stored->value()["spec"]["nodeName"], "gpu-node-a");
}

ClaimView Claim(const std::string& body, bool allocated) {
  ClaimView c;
  c.obj = Stored("resourceclaims.resource.k8s.io", body);
  c.SetBody(model::json::BodyOf(c.obj));
  c.allocation = std::make_shared<const std::optional<model::AllocationResult>>(
      allocated ? std::optional<model::AllocationResult>(model::AllocationResult{}) : std::nullopt);
  return c;
}

constexpr char kAllocated[] =
    R"({"spec":{},"status":{"allocation":{"devices":{"results":[{"device":"gpu-0"}]}}}})";

TEST(SchedulerViewsTest, AnAllocatedClaimLetsGoOfItsTreeAndKeepsItsAllocationText) {
  ClaimView c = Claim(kAllocated, true);
  const std::string text = c.allocation_text;
  EXPECT_EQ(text, R"({"devices":{"results":[{"device":"gpu-0"}]}})");
  c.Settle();
  EXPECT_EQ(c.body, nullptr);
  EXPECT_EQ(model::json::ParsedBody(c.obj), nullptr);
  EXPECT_EQ(c.allocation_text, text);
  EXPECT_EQ(c.Tree()->value()["status"]["allocation"]["devices"]["results"][0]["device"], "gpu-0");
}

TEST(SchedulerViewsTest, AClaimAPassMayStillEditKeepsItsTree) {
  ClaimView unallocated = Claim(R"({"spec":{}})", false);
  unallocated.Settle();
  EXPECT_NE(unallocated.body, nullptr);
  EXPECT_EQ(unallocated.allocation_text, "");

  ClaimView uncommitted = Claim(kAllocated, true);
  uncommitted.uncommitted = true;
  uncommitted.Settle();
  EXPECT_NE(uncommitted.body, nullptr);

  ClaimView removed = Claim(kAllocated, true);
  removed.removed = true;
  removed.Settle();
  EXPECT_NE(removed.body, nullptr);
}

}  // namespace
}  // namespace qm::service::scheduling
