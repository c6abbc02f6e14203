// ResourceQuota rules: what pods and claims count, admission with Kubernetes' message, status.

#include "service/quota.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace qm::service {
namespace {

model::Object Obj(const std::string& resource, const std::string& name, const std::string& body) {
  model::Object o;
  o.resource = resource;
  o.meta.namespace_ = "team";
  o.meta.name = name;
  o.body = body;
  return o;
}

constexpr char kClaims[] = "resourceclaims.resource.k8s.io";

TEST(QuotaTest, PodsCountUntilTheyFinish) {
  EXPECT_EQ(QuotaUsage(Obj("pods", "p", R"({"status":{"phase":"Running"}})")),
            (QuotaAmounts{{"count/pods", 1}, {"pods", 1}}));
  EXPECT_TRUE(QuotaUsage(Obj("pods", "p", R"({"status":{"phase":"Succeeded"}})")).empty());
  EXPECT_TRUE(QuotaUsage(Obj("pods", "p", R"({"status":{"phase":"Failed"}})")).empty());
  // A phase spelled with escapes is still the phase.
  EXPECT_TRUE(QuotaUsage(Obj("pods", "p", R"({"status":{"phase":"\u0053ucceeded"}})")).empty());
  // The words elsewhere in the body change nothing.
  EXPECT_EQ(QuotaUsage(Obj("pods", "p",
                           R"({"spec":{"containers":[{"name":"Failed","image":"Succeeded"}]},)"
                           R"("status":{"phase":"Pending"}})")),
            (QuotaAmounts{{"count/pods", 1}, {"pods", 1}}));
  EXPECT_EQ(QuotaUsage(Obj("pods", "p", "not json")),
            (QuotaAmounts{{"count/pods", 1}, {"pods", 1}}));
  EXPECT_TRUE(QuotaUsage(Obj("nodes", "n", "{}")).empty());
}

TEST(QuotaTest, ClaimsCountDevicesPerClassAndTheLargestSubrequest) {
  const char* body = R"({"spec":{"devices":{"requests":[
      {"name":"a","exactly":{"deviceClassName":"gpu","count":2}},
      {"name":"b","exactly":{"deviceClassName":"gpu","allocationMode":"All"}},
      {"name":"c","firstAvailable":[{"name":"x","deviceClassName":"l4","count":2},
                                    {"name":"y","deviceClassName":"l4"},
                                    {"name":"z","deviceClassName":"a100"}]}]}}})";
  EXPECT_EQ(QuotaUsage(Obj(kClaims, "c", body)),
            (QuotaAmounts{{"a100.deviceclass.resource.k8s.io/devices", 1},
                          {"count/resourceclaims.resource.k8s.io", 1},
                          {"gpu.deviceclass.resource.k8s.io/devices", 2},
                          {"l4.deviceclass.resource.k8s.io/devices", 2}}));
}

TEST(QuotaTest, AdmissionRefusesWhatWouldPassAHardLimit) {
  const auto claim = Obj(kClaims, "two",
                         R"({"spec":{"devices":{"requests":[
                             {"name":"a","exactly":{"deviceClassName":"gpu","count":2}}]}}})");
  const std::vector<model::ObjectPtr> quotas = {
      model::Share(Obj("resourcequotas", "gpus",
                       R"({"spec":{"hard":{"gpu.deviceclass.resource.k8s.io/devices":"3"}}})"))};
  EXPECT_TRUE(CheckQuota(claim, quotas, {{"gpu.deviceclass.resource.k8s.io/devices", 1}}).ok());
  const absl::Status refused =
      CheckQuota(claim, quotas, {{"gpu.deviceclass.resource.k8s.io/devices", 2}});
  EXPECT_TRUE(absl::IsPermissionDenied(refused));
  EXPECT_EQ(refused.message(),
            "resourceclaims.resource.k8s.io \"two\" is forbidden: exceeded quota: gpus, requested: "
            "gpu.deviceclass.resource.k8s.io/devices=2, used: "
            "gpu.deviceclass.resource.k8s.io/devices=2, limited: "
            "gpu.deviceclass.resource.k8s.io/devices=3");
  // Keys the quota does not limit are not checked.
  EXPECT_TRUE(CheckQuota(Obj("pods", "p", "{}"), quotas, {{"pods", 100}}).ok());
}

TEST(QuotaTest, StatusListsEveryHardKeyWithItsUsage) {
  const auto quota =
      Obj("resourcequotas", "q", R"({"spec":{"hard":{"pods":"10","count/pods":"4"}}})");
  const std::string body = QuotaStatusBody(quota, {{"pods", 3}, {"other", 7}});
  EXPECT_EQ(body,
            R"({"spec":{"hard":{"count/pods":"4","pods":"10"}},"status":{"hard":{"count/pods":"4",)"
            R"("pods":"10"},"used":{"count/pods":"0","pods":"3"}}})");
  // Already up to date: nothing to write.
  auto current = quota;
  current.body = body;
  EXPECT_EQ(QuotaStatusBody(current, {{"pods", 3}}), "");
  EXPECT_EQ(QuotaHard(quota), (QuotaAmounts{{"count/pods", 4}, {"pods", 10}}));
}

TEST(QuotaTest, ChecksCoverEveryLimitedKeyTheObjectRequests) {
  const auto claim = Obj(kClaims, "two",
                         R"({"spec":{"devices":{"requests":[
                             {"name":"a","exactly":{"deviceClassName":"gpu","count":2}},
                             {"name":"b","exactly":{"deviceClassName":"nic","allocationMode":"All"}}
                             ]}}})");
  const std::vector<model::ObjectPtr> quotas = {
      model::Share(
          Obj("resourcequotas", "gpus",
              R"({"spec":{"hard":{"gpu.deviceclass.resource.k8s.io/devices":"3","pods":"1",)"
              R"("nic.deviceclass.resource.k8s.io/devices":"0"}}})")),
      model::Share(Obj("resourcequotas", "claims",
                       R"({"spec":{"hard":{"count/resourceclaims.resource.k8s.io":"2500m",)"
                       R"("gpu.deviceclass.resource.k8s.io/devices":"1k"}}})"))};
  // Nothing for pods (not requested) or nic (requested 0); a fractional limit rounds down.
  EXPECT_EQ(
      QuotaChecks(claim, quotas),
      (std::vector<store::QuotaCheck>{{"team", "gpu.deviceclass.resource.k8s.io/devices", 3},
                                      {"team", "count/resourceclaims.resource.k8s.io", 2},
                                      {"team", "gpu.deviceclass.resource.k8s.io/devices", 1000}}));
  EXPECT_TRUE(QuotaChecks(claim, {}).empty());
  EXPECT_TRUE(QuotaChecks(Obj("pods", "p", R"({"status":{"phase":"Failed"}})"), quotas).empty());
  EXPECT_EQ(QuotaChecks(Obj("pods", "p", "{}"), quotas),
            (std::vector<store::QuotaCheck>{{"team", "pods", 1}}));
}

// Admission with quotas from a cache: what the cache shows is only trusted while the store
// holds the same quotas; a quota the cache does not show yet still binds the create.
TEST(QuotaTest, ACreateIsCheckedAgainstTheStoresQuotasWhenTheCacheLags) {
  store::MemoryStore store;
  auto quota = store.Create(Obj("resourcequotas", "one-pod", R"({"spec":{"hard":{"pods":"1"}}})"));
  ASSERT_TRUE(quota.ok());
  int asked = 0;
  std::vector<model::ObjectPtr> shown;  // what the cache shows
  const CachedQuotas cached = [&](const std::string& ns) {
    EXPECT_EQ(ns, "team");
    ++asked;
    return absl::StatusOr<std::vector<model::ObjectPtr>>(shown);
  };
  // The cache shows no quota yet: the store's one is found and applied all the same.
  EXPECT_TRUE(CreateWithinQuota(store, Obj("pods", "a", "{}"), cached).ok());
  EXPECT_EQ(asked, 1);
  const auto refused = CreateWithinQuota(store, Obj("pods", "b", "{}"), cached);
  EXPECT_TRUE(absl::IsPermissionDenied(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("exceeded quota: one-pod"));
  EXPECT_EQ(store.Get(Obj("pods", "b", "").Key()).status().code(), absl::StatusCode::kNotFound);
  // The cache caught up: refused from what it shows.
  shown = {model::Share(*quota)};
  EXPECT_TRUE(
      absl::IsPermissionDenied(CreateWithinQuota(store, Obj("pods", "b", "{}"), cached).status()));
  // The cache still shows a quota the store no longer holds: the create is not refused by it.
  ASSERT_TRUE(store.Delete(quota->Key(), 0).ok());
  EXPECT_TRUE(CreateWithinQuota(store, Obj("pods", "b", "{}"), cached).ok());
  // Objects no quota counts never ask.
  asked = 0;
  EXPECT_TRUE(
      CreateWithinQuota(store, Obj("pods", "done", R"({"status":{"phase":"Failed"}})"), cached)
          .ok());
  EXPECT_EQ(asked, 0);
}

}  // namespace
}  // namespace qm::service
