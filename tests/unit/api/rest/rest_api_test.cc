// The REST API in-process over the in-memory store: Kubernetes conventions request by request.
#include "api/rest/rest_api.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "api/rest/discovery.h"
#include "common/id_generator.h"
#include "store/memory_store.h"

namespace qm::api {
namespace {

using nlohmann::json;

class FakeClock : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override { return now; }
  std::chrono::system_clock::time_point now{std::chrono::seconds(1800000000)};
};

class RecordingSink : public WatchSink {
 public:
  void Begin(const std::vector<std::string>& w) override { warnings = w; }
  bool Write(const std::string& chunk) override {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(json::parse(chunk));
    cv.notify_all();
    return true;
  }
  void End() override { ended = true; }
  std::vector<json> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(5), [&] { return events.size() >= n; });
    return events;
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<json> events;
  std::vector<std::string> warnings;
  bool ended = false;
};

const char kClaimV1[] = R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
  "metadata":{"name":"c1","namespace":"default","labels":{"app":"demo"}},
  "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu"}}]}}})";

class RestApiTest : public ::testing::Test {
 protected:
  RestApiTest()
      : hub_(store_, service::WatchHubOptions{}),
        objects_(store_, clock_, ids_, &hub_),
        api_(objects_, hub_, clock_) {
    hub_.Start();
    EXPECT_TRUE(api_.EnsureDefaultNamespace().ok());
  }
  ~RestApiTest() override { hub_.Stop(); }

  HttpResponse Call(const std::string& method, const std::string& path,
                    const std::string& body = "",
                    const std::string& content_type = "application/json",
                    std::map<std::string, std::string> query = {}, const std::string& accept = "") {
    HttpRequest r{method, path, std::move(query), content_type, accept, body};
    return api_.Handle(r);
  }

  static json Body(const HttpResponse& r) { return json::parse(r.body); }

  const std::string claims_ = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
  store::MemoryStore store_;
  FakeClock clock_;
  RandomIdGenerator ids_;
  service::WatchHub hub_;
  service::ObjectService objects_;
  RestApi api_;
};

TEST_F(RestApiTest, VersionAndDiscovery) {
  auto v = Body(Call("GET", "/version"));
  EXPECT_EQ(v["major"], "1");
  EXPECT_EQ(v["minor"], "32");
  auto agg = Call("GET", "/apis", "", "", {},
                  "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
  EXPECT_EQ(agg.content_type, kAggregatedDiscoveryContentType);
  auto groups = Body(agg);
  ASSERT_EQ(groups["items"].size(), 3u);
  EXPECT_EQ(groups["items"][0]["metadata"]["name"], "resource.k8s.io");
  EXPECT_EQ(groups["items"][1]["metadata"]["name"], "rbac.authorization.k8s.io");
  // Our review group: create-only, cluster-scoped resources (kubectl create -f finds them).
  const json& admin = groups["items"][2];
  EXPECT_EQ(admin["metadata"]["name"], "admin.quartermaster.io");
  ASSERT_EQ(admin["versions"].size(), 1u);
  EXPECT_EQ(admin["versions"][0]["version"], "v1alpha1");
  std::set<std::string> reviews;
  for (const auto& r : admin["versions"][0]["resources"]) {
    reviews.insert(r["resource"].get<std::string>() + " " +
                   r["responseKind"]["kind"].get<std::string>());
    EXPECT_EQ(r["verbs"], r["resource"] == "clustersummaries"
                              ? json::array({"get", "list", "watch"})
                              : json::array({"create"}));
    EXPECT_EQ(r["scope"], "Cluster");
  }
  EXPECT_EQ(reviews,
            (std::set<std::string>{"devicematchreviews DeviceMatchReview",
                                   "utilizationhistoryreviews UtilizationHistoryReview",
                                   "deviceallocationhistoryreviews DeviceAllocationHistoryReview",
                                   "deviceholderreviews DeviceHolderReview",
                                   "clustersummaries ClusterSummary"}));
  EXPECT_EQ(groups["items"][0]["versions"][0]["version"], "v1");
  bool found_status = false;
  for (const auto& r : groups["items"][0]["versions"][0]["resources"]) {
    EXPECT_TRUE(r.contains("responseKind"));
    if (r["resource"] == "resourceclaims") found_status = r.contains("subresources");
  }
  EXPECT_TRUE(found_status);
  auto legacy = Body(Call("GET", "/apis"));
  EXPECT_EQ(legacy["kind"], "APIGroupList");
  ASSERT_EQ(legacy["groups"].size(), 3u);
  EXPECT_EQ(legacy["groups"][0]["preferredVersion"]["version"], "v1");
  EXPECT_EQ(legacy["groups"][1]["preferredVersion"]["groupVersion"],
            "rbac.authorization.k8s.io/v1");
  EXPECT_EQ(legacy["groups"][2]["preferredVersion"]["groupVersion"],
            "admin.quartermaster.io/v1alpha1");
  auto core = Body(Call("GET", "/api/v1"));
  EXPECT_EQ(core["kind"], "APIResourceList");
  EXPECT_EQ(Call("GET", "/openapi/v2").code, 404);
  EXPECT_EQ(Call("GET", "/apis/nope.example.com/v1").code, 404);
}

TEST_F(RestApiTest, CreateGetAndAlreadyExists) {
  auto created = Call("POST", claims_, kClaimV1);
  ASSERT_EQ(created.code, 201) << created.body;
  auto obj = Body(created);
  EXPECT_EQ(obj["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"], "ExactCount");
  EXPECT_EQ(obj["spec"]["devices"]["requests"][0]["exactly"]["count"], 1);
  EXPECT_TRUE(obj["metadata"]["resourceVersion"].is_string());
  EXPECT_EQ(obj["metadata"]["creationTimestamp"], "2027-01-15T08:00:00Z");
  auto got = Body(Call("GET", claims_ + "/c1"));
  EXPECT_EQ(got["metadata"]["uid"], obj["metadata"]["uid"]);
  auto again = Call("POST", claims_, kClaimV1);
  EXPECT_EQ(again.code, 409);
  EXPECT_EQ(Body(again)["reason"], "AlreadyExists");
  EXPECT_EQ(Body(again)["message"], "resourceclaims.resource.k8s.io \"c1\" already exists");
  auto missing = Call("GET", claims_ + "/nope");
  EXPECT_EQ(missing.code, 404);
  EXPECT_EQ(Body(missing)["message"], "resourceclaims.resource.k8s.io \"nope\" not found");
  EXPECT_EQ(Body(missing)["details"]["kind"], "resourceclaims");
}

TEST_F(RestApiTest, InvalidObjectIs422WithCauses) {
  json bad = json::parse(kClaimV1);
  bad["metadata"]["name"] = "Bad_Name";
  bad["spec"]["devices"]["requests"][0]["exactly"].erase("deviceClassName");
  auto r = Call("POST", claims_, bad.dump());
  ASSERT_EQ(r.code, 422) << r.body;
  auto st = Body(r);
  EXPECT_EQ(st["reason"], "Invalid");
  EXPECT_EQ(st["details"]["name"], "Bad_Name");
  std::set<std::string> fields;
  for (const auto& c : st["details"]["causes"]) fields.insert(c["field"]);
  EXPECT_TRUE(fields.count("metadata.name"));
  EXPECT_TRUE(fields.count("spec.devices.requests[0].exactly.deviceClassName"));
}

TEST_F(RestApiTest, AdminAccessNeedsTheNamespaceLabel) {
  json claim = json::parse(kClaimV1);
  claim["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = true;
  auto r = Call("POST", claims_, claim.dump());
  ASSERT_EQ(r.code, 422) << r.body;
  auto cause = Body(r)["details"]["causes"][0];
  EXPECT_EQ(cause["reason"], "FieldValueForbidden");
  EXPECT_EQ(cause["field"], "spec.devices.requests[0].exactly.adminAccess");
  EXPECT_NE(cause["message"].get<std::string>().find("resource.kubernetes.io/admin-access"),
            std::string::npos);

  json ns = {{"apiVersion", "v1"},
             {"kind", "Namespace"},
             {"metadata",
              {{"name", "admins"}, {"labels", {{"resource.kubernetes.io/admin-access", "true"}}}}}};
  ASSERT_EQ(Call("POST", "/api/v1/namespaces", ns.dump()).code, 201);
  claim["metadata"]["namespace"] = "admins";
  r = Call("POST", "/apis/resource.k8s.io/v1/namespaces/admins/resourceclaims", claim.dump());
  EXPECT_EQ(r.code, 201) << r.body;

  // Templates follow the same rule.
  json tmpl = {{"apiVersion", "resource.k8s.io/v1"},
               {"kind", "ResourceClaimTemplate"},
               {"metadata", {{"name", "t"}}},
               {"spec", {{"spec", claim["spec"]}}}};
  r = Call("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates",
           tmpl.dump());
  ASSERT_EQ(r.code, 422) << r.body;
  EXPECT_EQ(Body(r)["details"]["causes"][0]["field"],
            "spec.spec.devices.requests[0].exactly.adminAccess");
}

TEST_F(RestApiTest, ResourceQuotaLimitsDevicesPerClass) {
  json quota = {{"apiVersion", "v1"},
                {"kind", "ResourceQuota"},
                {"metadata", {{"name", "gpus"}}},
                {"spec", {{"hard", {{"gpu.deviceclass.resource.k8s.io/devices", "3"}}}}}};
  ASSERT_EQ(Call("POST", "/api/v1/namespaces/default/resourcequotas", quota.dump()).code, 201);
  json claim = json::parse(kClaimV1);
  claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "gpu";
  claim["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2;
  claim["metadata"]["name"] = "two";
  ASSERT_EQ(Call("POST", claims_, claim.dump()).code, 201);
  claim["metadata"]["name"] = "two-more";
  auto r = Call("POST", claims_, claim.dump());
  ASSERT_EQ(r.code, 403) << r.body;
  EXPECT_EQ(Body(r)["reason"], "Forbidden");
  EXPECT_EQ(Body(r)["message"],
            "resourceclaims.resource.k8s.io \"two-more\" is forbidden: exceeded quota: gpus, "
            "requested: gpu.deviceclass.resource.k8s.io/devices=2, used: "
            "gpu.deviceclass.resource.k8s.io/devices=2, limited: "
            "gpu.deviceclass.resource.k8s.io/devices=3");
  // Other classes are not limited, and one more device of the class still fits.
  claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "other";
  EXPECT_EQ(Call("POST", claims_, claim.dump()).code, 201);
  claim["metadata"]["name"] = "one";
  claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "gpu";
  claim["spec"]["devices"]["requests"][0]["exactly"]["count"] = 1;
  EXPECT_EQ(Call("POST", claims_, claim.dump()).code, 201);
}

TEST_F(RestApiTest, V1beta1ErrorsUseTheClientsPathsAndWarn) {
  json bad = {
      {"apiVersion", "resource.k8s.io/v1beta1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", "b1"}}},
      {"spec", {{"devices", {{"requests", {{{"name", "gpu"}, {"allocationMode", "Some"}}}}}}}}};
  auto r =
      Call("POST", "/apis/resource.k8s.io/v1beta1/namespaces/default/resourceclaims", bad.dump());
  ASSERT_EQ(r.code, 422) << r.body;
  bool flat = false;
  const json status = Body(r);
  for (const auto& c : status["details"]["causes"]) {
    if (c["field"] == "spec.devices.requests[0].allocationMode") flat = true;
    EXPECT_EQ(std::string(c["field"]).find("exactly"), std::string::npos) << c;
  }
  EXPECT_TRUE(flat) << r.body;
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("v1beta1 ResourceClaim is deprecated"), std::string::npos);
}

TEST_F(RestApiTest, StrictFieldValidationRejectsUnknownFields) {
  json obj = json::parse(kClaimV1);
  obj["spec"]["surprise"] = true;
  auto strict =
      Call("POST", claims_, obj.dump(), "application/json", {{"fieldValidation", "Strict"}});
  EXPECT_EQ(strict.code, 400);
  EXPECT_EQ(Body(strict)["message"], "strict decoding error: unknown field \"spec.surprise\"");
  auto warn = Call("POST", claims_, obj.dump(), "application/json", {{"fieldValidation", "Warn"}});
  EXPECT_EQ(warn.code, 201);
  ASSERT_EQ(warn.warnings.size(), 1u);
  EXPECT_EQ(warn.warnings[0], "unknown field \"spec.surprise\"");
}

TEST_F(RestApiTest, NamespaceAndNameMustMatchTheUrl) {
  json obj = json::parse(kClaimV1);
  obj["metadata"]["namespace"] = "elsewhere";
  EXPECT_EQ(Call("POST", claims_, obj.dump()).code, 400);
  ASSERT_EQ(Call("POST", claims_, kClaimV1).code, 201);
  json renamed = json::parse(kClaimV1);
  renamed["metadata"]["name"] = "other";
  EXPECT_EQ(Call("PUT", claims_ + "/c1", renamed.dump()).code, 400);
  EXPECT_EQ(Call("POST", "/apis/resource.k8s.io/v1/namespaces/ghost/resourceclaims", kClaimV1).code,
            400);
}

TEST_F(RestApiTest, ClaimSpecIsImmutable) {
  ASSERT_EQ(Call("POST", claims_, kClaimV1).code, 201);
  auto r = Call(
      "PATCH", claims_ + "/c1",
      R"({"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"other"}}]}}})",
      "application/merge-patch+json");
  EXPECT_EQ(r.code, 422) << r.body;
  EXPECT_NE(r.body.find("field is immutable"), std::string::npos) << r.body;
}

TEST_F(RestApiTest, StatusSubresourceOnlyChangesStatus) {
  ASSERT_EQ(Call("POST", claims_, kClaimV1).code, 201);
  // Status sent to the main resource is ignored.
  auto main = Call(
      "PATCH", claims_ + "/c1",
      R"({"metadata":{"labels":{"x":"y"}},"status":{"reservedFor":[{"resource":"pods","name":"p","uid":"u1"}]}})",
      "application/merge-patch+json");
  ASSERT_EQ(main.code, 200) << main.body;
  EXPECT_FALSE(Body(main).contains("status"));
  EXPECT_EQ(Body(main)["metadata"]["labels"]["x"], "y");
  // Through /status the status changes and labels do not.
  const std::string status =
      R"({"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.example.com",)"
      R"("pool":"p1","device":"d0"}]}},"reservedFor":[{"resource":"pods","name":"p","uid":"u1"}]})";
  auto st = Call("PATCH", claims_ + "/c1/status",
                 R"({"metadata":{"labels":{"x":"z"}},"status":)" + status + "}",
                 "application/merge-patch+json");
  ASSERT_EQ(st.code, 200) << st.body;
  EXPECT_EQ(Body(st)["status"]["reservedFor"][0]["name"], "p");
  EXPECT_EQ(Body(st)["metadata"]["labels"]["x"], "y");
  // A reservation without an allocation breaks the status rules.
  auto bad =
      Call("PUT", claims_ + "/c1/status",
           R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c1"},)"
           R"("status":{"reservedFor":[{"resource":"pods","name":"p","uid":"u1"}]}})");
  EXPECT_EQ(bad.code, 422) << bad.body;
  EXPECT_EQ(Body(st)["metadata"]["generation"], 1);
  auto table = Body(
      Call("GET", claims_ + "/c1", "", "", {}, "application/json;as=Table;v=v1;g=meta.k8s.io"));
  EXPECT_EQ(table["rows"][0]["cells"][1], "allocated,reserved");
}

TEST_F(RestApiTest, PatchTypes) {
  ASSERT_EQ(Call("POST", claims_, kClaimV1).code, 201);
  auto jp =
      Call("PATCH", claims_ + "/c1", R"([{"op":"add","path":"/metadata/labels/j","value":"1"}])",
           "application/json-patch+json");
  ASSERT_EQ(jp.code, 200) << jp.body;
  EXPECT_EQ(Body(jp)["metadata"]["labels"]["j"], "1");
  auto failed_test =
      Call("PATCH", claims_ + "/c1", R"([{"op":"test","path":"/metadata/labels/j","value":"2"}])",
           "application/json-patch+json");
  EXPECT_EQ(failed_test.code, 400);
  auto smp =
      Call("PATCH", claims_ + "/c1", R"({"metadata":{"finalizers":["a/b"],"labels":{"app":null}}})",
           "application/strategic-merge-patch+json");
  ASSERT_EQ(smp.code, 200) << smp.body;
  EXPECT_EQ(Body(smp)["metadata"]["finalizers"], json::array({"a/b"}));
  EXPECT_FALSE(Body(smp)["metadata"]["labels"].contains("app"));
  EXPECT_EQ(Call("PATCH", claims_ + "/c1", "{}", "text/plain").code, 415);
  // A resourceVersion in the patch is a precondition.
  auto stale = Call("PATCH", claims_ + "/c1", R"({"metadata":{"resourceVersion":"1"}})",
                    "application/merge-patch+json");
  EXPECT_EQ(stale.code, 409);
  EXPECT_EQ(Body(stale)["reason"], "Conflict");
}

TEST_F(RestApiTest, ServerSideApplyUpsertsAndMerges) {
  auto created = Call("PATCH", claims_ + "/c1", kClaimV1, "application/apply-patch+yaml",
                      {{"fieldManager", "kubectl"}});
  ASSERT_EQ(created.code, 201) << created.body;
  auto merged = Call(
      "PATCH", claims_ + "/c1",
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c1","annotations":{"a":"b"}}})",
      "application/apply-patch+yaml");
  ASSERT_EQ(merged.code, 200) << merged.body;
  EXPECT_EQ(Body(merged)["metadata"]["annotations"]["a"], "b");
  EXPECT_TRUE(Body(merged)["spec"]["devices"]["requests"].is_array());
}

TEST_F(RestApiTest, DryRunAndDelete) {
  EXPECT_EQ(Call("POST", claims_, kClaimV1, "application/json", {{"dryRun", "All"}}).code, 201);
  EXPECT_EQ(Call("GET", claims_ + "/c1").code, 404);
  ASSERT_EQ(Call("POST", claims_, kClaimV1).code, 201);
  auto del = Call("DELETE", claims_ + "/c1", R"({"propagationPolicy":"Background"})");
  ASSERT_EQ(del.code, 200);
  EXPECT_EQ(Body(del)["metadata"]["name"], "c1");
  EXPECT_EQ(Call("GET", claims_ + "/c1").code, 404);
  EXPECT_EQ(Call("DELETE", claims_ + "/c1").code, 404);
  EXPECT_EQ(Call("POST", claims_ + "/c1", kClaimV1).code, 405);
}

TEST_F(RestApiTest, ListPagesWithContinueAndSelectors) {
  for (int i = 0; i < 5; ++i) {
    json o = json::parse(kClaimV1);
    o["metadata"]["name"] = "c" + std::to_string(i);
    o["metadata"]["labels"]["i"] = std::to_string(i % 2);
    ASSERT_EQ(Call("POST", claims_, o.dump()).code, 201);
  }
  auto p1 = Body(Call("GET", claims_, "", "", {{"limit", "2"}}));
  ASSERT_EQ(p1["items"].size(), 2u);
  ASSERT_TRUE(p1["metadata"].contains("continue"));
  auto p2 = Body(
      Call("GET", claims_, "", "", {{"limit", "10"}, {"continue", p1["metadata"]["continue"]}}));
  EXPECT_EQ(p2["items"].size(), 3u);
  EXPECT_FALSE(p2["metadata"].contains("continue"));
  auto odd = Body(Call("GET", claims_, "", "", {{"labelSelector", "i=1"}}));
  EXPECT_EQ(odd["items"].size(), 2u);
  auto named = Body(Call("GET", "/apis/resource.k8s.io/v1/resourceclaims", "", "",
                         {{"fieldSelector", "metadata.name=c3"}}));
  ASSERT_EQ(named["items"].size(), 1u);
  EXPECT_EQ(named["kind"], "ResourceClaimList");
  EXPECT_EQ(Call("GET", claims_, "", "", {{"fieldSelector", "spec.bogus=1"}}).code, 400);
  EXPECT_EQ(Call("GET", claims_, "", "", {{"continue", "garbage!"}}).code, 400);
}

TEST_F(RestApiTest, TablesUseUpstreamColumns) {
  json slice = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceSlice"},
                {"metadata", {{"name", "s1"}}},
                {"spec",
                 {{"driver", "gpu.example.com"},
                  {"nodeName", "n1"},
                  {"pool", {{"name", "p1"}, {"generation", 1}, {"resourceSliceCount", 1}}},
                  {"devices", {{{"name", "d0"}}}}}}};
  ASSERT_EQ(Call("POST", "/apis/resource.k8s.io/v1/resourceslices", slice.dump()).code, 201);
  auto t = Body(Call("GET", "/apis/resource.k8s.io/v1/resourceslices", "", "", {},
                     "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"));
  EXPECT_EQ(t["kind"], "Table");
  std::vector<std::string> cols;
  for (const auto& c : t["columnDefinitions"]) cols.push_back(c["name"]);
  EXPECT_EQ(cols, (std::vector<std::string>{"Name", "Node", "Driver", "Pool", "Age"}));
  EXPECT_EQ(t["rows"][0]["cells"], json::array({"s1", "n1", "gpu.example.com", "p1", "0s"}));
  EXPECT_EQ(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
}

TEST_F(RestApiTest, WatchFromZeroStartsWithSyntheticAdds) {
  ASSERT_EQ(Call("POST", claims_, kClaimV1).code, 201);
  auto sink = std::make_shared<RecordingSink>();
  HttpRequest w{"GET", claims_, {{"watch", "true"}, {"resourceVersion", "0"}}, "", "", ""};
  ASSERT_FALSE(api_.StartWatch(w, sink).has_value());
  json second = json::parse(kClaimV1);
  second["metadata"]["name"] = "c2";
  ASSERT_EQ(Call("POST", claims_, second.dump()).code, 201);
  ASSERT_EQ(Call("DELETE", claims_ + "/c1").code, 200);
  auto events = sink->WaitFor(3);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "c1");
  EXPECT_EQ(events[1]["type"], "ADDED");
  EXPECT_EQ(events[1]["object"]["metadata"]["name"], "c2");
  EXPECT_EQ(events[2]["type"], "DELETED");
}

// Kubernetes' watch cache: with a selector, a change that makes an object stop matching is
// DELETED (the object as it last matched, at the change's resourceVersion), one that makes it
// match is ADDED, and changes on either side of the selector are not sent.
TEST_F(RestApiTest, ASelectorWatchSeesObjectsLeaveAndEnterIt) {
  auto sink = std::make_shared<RecordingSink>();
  HttpRequest w{"GET", claims_, {{"watch", "true"}, {"labelSelector", "app=demo"}}, "", "", ""};
  ASSERT_FALSE(api_.StartWatch(w, sink).has_value());
  ASSERT_EQ(Call("POST", claims_, kClaimV1).code, 201);
  const std::string merge = "application/merge-patch+json";
  auto relabel =
      Call("PATCH", claims_ + "/c1", R"({"metadata":{"labels":{"app":"other"}}})", merge);
  ASSERT_EQ(relabel.code, 200);
  const std::string left_rv = Body(relabel)["metadata"]["resourceVersion"];
  // Outside the selector: not sent.
  ASSERT_EQ(Call("PATCH", claims_ + "/c1", R"({"metadata":{"annotations":{"a":"b"}}})", merge).code,
            200);
  json other = json::parse(kClaimV1);
  other["metadata"]["name"] = "c2";
  other["metadata"]["labels"]["app"] = "other";
  ASSERT_EQ(Call("POST", claims_, other.dump()).code, 201);
  ASSERT_EQ(Call("PATCH", claims_ + "/c1", R"({"metadata":{"labels":{"app":"demo"}}})", merge).code,
            200);
  ASSERT_EQ(Call("PATCH", claims_ + "/c1", R"({"metadata":{"annotations":{"a":"c"}}})", merge).code,
            200);
  ASSERT_EQ(Call("DELETE", claims_ + "/c1").code, 200);
  ASSERT_EQ(Call("DELETE", claims_ + "/c2").code, 200);
  auto events = sink->WaitFor(5);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // nothing more may follow
  events = sink->WaitFor(5);
  std::vector<std::string> seen;
  for (const auto& e : events) {
    seen.push_back(e["type"].get<std::string>() + " " +
                   e["object"]["metadata"]["name"].get<std::string>() + " " +
                   e["object"]["metadata"]["labels"]["app"].get<std::string>());
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED c1 demo", "DELETED c1 demo", "ADDED c1 demo",
                                            "MODIFIED c1 demo", "DELETED c1 demo"}));
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[1]["object"]["metadata"]["resourceVersion"], left_rv);
  EXPECT_FALSE(events[1]["object"]["metadata"].contains("annotations"));
}

TEST_F(RestApiTest, WatchFromACompactedRevisionGetsExpired) {
  for (int i = 0; i < 3; ++i) {
    json o = json::parse(kClaimV1);
    o["metadata"]["name"] = "c" + std::to_string(i);
    ASSERT_EQ(Call("POST", claims_, o.dump()).code, 201);
  }
  ASSERT_TRUE(store_.Compact(*store_.CurrentRevision() - 1).ok());
  auto sink = std::make_shared<RecordingSink>();
  HttpRequest w{"GET", claims_, {{"watch", "1"}, {"resourceVersion", "1"}}, "", "", ""};
  ASSERT_FALSE(api_.StartWatch(w, sink).has_value());
  auto events = sink->WaitFor(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "ERROR");
  EXPECT_EQ(events[0]["object"]["code"], 410);
  EXPECT_EQ(events[0]["object"]["reason"], "Expired");
  EXPECT_TRUE(sink->ended);
}

}  // namespace
}  // namespace qm::api

namespace qm::api {
namespace {

TEST_F(RestApiTest, HostileBodiesAreRejectedNotFatal) {
  std::string deep;
  for (int i = 0; i < 5000; ++i) deep += R"({"x":)";
  deep += "1";
  for (int i = 0; i < 5000; ++i) deep += "}";
  auto r = Call("PATCH", "/api/v1/namespaces/default", deep, "application/merge-patch+json");
  EXPECT_EQ(r.code, 400) << r.body;
  EXPECT_NE(r.body.find("nests deeper"), std::string::npos);

  json nul = json::parse(kClaimV1);
  nul["metadata"]["annotations"]["a"] = std::string("x\0y", 3);
  auto n = Call("POST", claims_, nul.dump());
  EXPECT_EQ(n.code, 400) << n.body;

  ASSERT_EQ(Call("POST", claims_, kClaimV1).code, 201);
  // Each copy of the whole spec into itself doubles the document: the patch must stop at the
  // size limit before memory runs out.
  json doubling = json::array();
  for (int i = 0; i < 40; ++i) {
    doubling.push_back(
        {{"op", "copy"}, {"from", "/spec"}, {"path", "/spec/d" + std::to_string(i)}});
  }
  auto b = Call("PATCH", claims_ + "/c1", doubling.dump(), "application/json-patch+json");
  EXPECT_EQ(b.code, 400) << b.body.substr(0, 200);
}

TEST_F(RestApiTest, DryRunOnlyAcceptsAll) {
  auto r = Call("POST", claims_, kClaimV1, "application/json", {{"dryRun", "true"}});
  EXPECT_EQ(r.code, 400);
  EXPECT_EQ(Call("GET", claims_ + "/c1").code, 404);
}

TEST_F(RestApiTest, AllNamespacesPathRefusesDeleteCollection) {
  ASSERT_EQ(Call("POST", claims_, kClaimV1).code, 201);
  EXPECT_EQ(Call("DELETE", "/apis/resource.k8s.io/v1/resourceclaims").code, 405);
  EXPECT_EQ(Call("GET", claims_ + "/c1").code, 200);
  EXPECT_EQ(Call("DELETE", claims_).code, 200);
  EXPECT_EQ(Call("GET", claims_ + "/c1").code, 404);
}

// ---- core Pod, Event, ResourceQuota --------------------------------------------------------

const char kPod[] = R"({"apiVersion":"v1","kind":"Pod",
  "metadata":{"name":"pod1","namespace":"default"},
  "spec":{"restartPolicy":"OnFailure",
    "securityContext":{"seLinuxOptions":{"type":"nvidia_container_t"}},
    "resourceClaims":[{"name":"gpu","resourceClaimName":"gpu-claim"}],
    "containers":[
      {"name":"ctr0","image":"cuda:1","env":[{"name":"A","value":"1"}],
       "resources":{"claims":[{"name":"gpu"}]}},
      {"name":"ctr1","image":"cuda:1","resources":{"claims":[{"name":"gpu"}]}}]}})";

class CoreKindsTest : public RestApiTest {
 protected:
  const std::string pods_ = "/api/v1/namespaces/default/pods";
  const std::string events_ = "/api/v1/namespaces/default/events";
  const std::string quotas_ = "/api/v1/namespaces/default/resourcequotas";
};

TEST_F(CoreKindsTest, DiscoveryListsPodsEventsAndQuotas) {
  auto agg = Body(Call("GET", "/api", "", "", {},
                       "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"));
  std::map<std::string, json> by_name;
  for (const auto& r : agg["items"][0]["versions"][0]["resources"]) by_name[r["resource"]] = r;
  ASSERT_TRUE(by_name.count("pods"));
  EXPECT_EQ(by_name["pods"]["shortNames"], json::array({"po"}));
  EXPECT_EQ(by_name["pods"]["categories"], json::array({"all"}));
  EXPECT_EQ(by_name["pods"]["scope"], "Namespaced");
  EXPECT_EQ(by_name["pods"]["subresources"][0]["subresource"], "status");
  EXPECT_EQ(by_name["events"]["shortNames"], json::array({"ev"}));
  EXPECT_FALSE(by_name["events"].contains("subresources"));
  EXPECT_EQ(by_name["resourcequotas"]["shortNames"], json::array({"quota"}));
  EXPECT_EQ(by_name["resourcequotas"]["subresources"][0]["subresource"], "status");
  auto legacy = Body(Call("GET", "/api/v1"));
  std::set<std::string> names;
  for (const auto& r : legacy["resources"]) names.insert(r["name"]);
  for (const char* n :
       {"pods", "pods/status", "events", "resourcequotas", "resourcequotas/status"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  EXPECT_FALSE(names.count("events/status"));
}

TEST_F(CoreKindsTest, PodCreateDefaultsPhaseAndKeepsUnmodelledFields) {
  auto created = Call("POST", pods_, kPod, "application/json", {{"fieldValidation", "Strict"}});
  ASSERT_EQ(created.code, 201) << created.body;
  json pod = Body(created);
  EXPECT_EQ(pod["status"]["phase"], "Pending");
  EXPECT_EQ(pod["spec"]["securityContext"]["seLinuxOptions"]["type"], "nvidia_container_t");
  EXPECT_EQ(pod["spec"]["containers"][0]["env"][0]["name"], "A");
  EXPECT_EQ(pod["spec"]["schedulerName"], "default-scheduler");
  json bad = json::parse(kPod);
  bad["metadata"]["name"] = "pod2";
  bad["spec"]["containers"][0]["resources"]["claims"][0]["name"] = "nic";
  auto invalid = Call("POST", pods_, bad.dump());
  EXPECT_EQ(invalid.code, 422);
  EXPECT_EQ(Body(invalid)["details"]["causes"][0]["field"],
            "spec.containers[0].resources.claims[0]");
  EXPECT_EQ(Body(invalid)["details"]["kind"], "Pod");
}

TEST_F(CoreKindsTest, PodStatusOnlyThroughTheSubresource) {
  ASSERT_EQ(Call("POST", pods_, kPod).code, 201);
  auto patched = Call("PATCH", pods_ + "/pod1", R"({"status":{"phase":"Running"}})",
                      "application/merge-patch+json");
  ASSERT_EQ(patched.code, 200) << patched.body;
  EXPECT_EQ(Body(patched)["status"]["phase"], "Pending");
  auto status = Call("PATCH", pods_ + "/pod1/status",
                     R"({"status":{"phase":"Running","conditions":[{"type":"PodScheduled",
                        "status":"True"}]}})",
                     "application/strategic-merge-patch+json");
  ASSERT_EQ(status.code, 200) << status.body;
  EXPECT_EQ(Body(status)["status"]["phase"], "Running");
  auto spec_via_status = Call("PATCH", pods_ + "/pod1/status", R"({"spec":{"nodeName":"x"}})",
                              "application/merge-patch+json");
  ASSERT_EQ(spec_via_status.code, 200);
  EXPECT_FALSE(Body(spec_via_status)["spec"].contains("nodeName"));
  auto bad = Call("PATCH", pods_ + "/pod1/status", R"({"status":{"phase":"Sleeping"}})",
                  "application/merge-patch+json");
  EXPECT_EQ(bad.code, 422);
}

TEST_F(CoreKindsTest, PodNodeNameIsSetOnceAndSelectable) {
  ASSERT_EQ(Call("POST", pods_, kPod).code, 201);
  json second = json::parse(kPod);
  second["metadata"]["name"] = "pod2";
  ASSERT_EQ(Call("POST", pods_, second.dump()).code, 201);
  auto bind = Call("PATCH", pods_ + "/pod1", R"({"spec":{"nodeName":"gpu-node-a"}})",
                   "application/strategic-merge-patch+json");
  ASSERT_EQ(bind.code, 200) << bind.body;
  auto move = Call("PATCH", pods_ + "/pod1", R"({"spec":{"nodeName":"gpu-node-b"}})",
                   "application/strategic-merge-patch+json");
  EXPECT_EQ(move.code, 422);
  EXPECT_EQ(Body(move)["details"]["causes"][0]["field"], "spec");
  auto on_node =
      Body(Call("GET", "/api/v1/pods", "", "", {{"fieldSelector", "spec.nodeName=gpu-node-a"}}));
  ASSERT_EQ(on_node["items"].size(), 1u);
  EXPECT_EQ(on_node["items"][0]["metadata"]["name"], "pod1");
  auto unbound = Body(Call("GET", pods_, "", "", {{"fieldSelector", "spec.nodeName="}}));
  ASSERT_EQ(unbound["items"].size(), 1u);
  EXPECT_EQ(unbound["items"][0]["metadata"]["name"], "pod2");
  ASSERT_EQ(Call("PATCH", pods_ + "/pod2/status", R"({"status":{"phase":"Running"}})",
                 "application/merge-patch+json")
                .code,
            200);
  auto pending = Body(Call("GET", pods_, "", "", {{"fieldSelector", "status.phase=Pending"}}));
  ASSERT_EQ(pending["items"].size(), 1u);
  EXPECT_EQ(pending["items"][0]["metadata"]["name"], "pod1");
  EXPECT_EQ(Call("GET", pods_, "", "", {{"fieldSelector", "spec.image=x"}}).code, 400);
}

// A wrongly typed field is the client's error: a 422 Status naming the field, as Kubernetes
// answers, never an exception (which the HTTP server would turn into a 500).
TEST_F(CoreKindsTest, MistypedContainerOnUpdateIsA422NotA500) {
  json pod = json::parse(kPod);
  pod["spec"]["containers"].erase(1);  // as many containers as the update sends
  auto created = Call("POST", pods_, pod.dump());
  ASSERT_EQ(created.code, 201) << created.body;
  json update = Body(created);
  update["spec"]["containers"] = json::array({"x"});
  HttpResponse r;
  ASSERT_NO_THROW(r = Call("PUT", pods_ + "/pod1", update.dump()));
  EXPECT_EQ(r.code, 422) << r.body;
  json st = Body(r);
  EXPECT_EQ(st["kind"], "Status");
  EXPECT_EQ(st["reason"], "Invalid");
  ASSERT_FALSE(st["details"]["causes"].empty()) << r.body;
  EXPECT_EQ(st["details"]["causes"][0]["field"], "spec.containers[0]");
  EXPECT_EQ(st["details"]["causes"][0]["reason"], "FieldValueInvalid");
  EXPECT_EQ(st["details"]["causes"][0]["message"], "Invalid value: \"x\": must be of type object");
  // Nothing was stored.
  EXPECT_EQ(Body(Call("GET", pods_ + "/pod1"))["spec"]["containers"][0]["image"], "cuda:1");
}

TEST_F(CoreKindsTest, ClientSideApplyOfAPodUsesStrategicMerge) {
  ASSERT_EQ(Call("POST", pods_, kPod).code, 201);
  auto patched = Call("PATCH", pods_ + "/pod1",
                      R"({"metadata":{"labels":{"app":"x"}},"spec":{
                          "$setElementOrder/containers":[{"name":"ctr0"},{"name":"ctr1"}],
                          "containers":[{"name":"ctr1","image":"cuda:2"}]}})",
                      "application/strategic-merge-patch+json");
  ASSERT_EQ(patched.code, 200) << patched.body;
  json pod = Body(patched);
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "cuda:1");
  EXPECT_EQ(pod["spec"]["containers"][0]["env"][0]["value"], "1");
  EXPECT_EQ(pod["spec"]["containers"][1]["image"], "cuda:2");
  EXPECT_EQ(pod["metadata"]["labels"]["app"], "x");
}

TEST_F(CoreKindsTest, PodTable) {
  ASSERT_EQ(Call("POST", pods_, kPod).code, 201);
  auto table = Body(Call("GET", pods_, "", "", {},
                         "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"));
  EXPECT_EQ(table["kind"], "Table");
  EXPECT_EQ(table["columnDefinitions"][1]["name"], "Ready");
  EXPECT_EQ(table["rows"][0]["cells"][1], "0/2");
  EXPECT_EQ(table["rows"][0]["cells"][2], "Pending");
  EXPECT_EQ(table["rows"][0]["cells"][6], "<none>");
}

TEST_F(CoreKindsTest, EventsAreSelectableByInvolvedObject) {
  auto created = Call("POST", pods_, kPod);
  ASSERT_EQ(created.code, 201);
  const std::string uid = Body(created)["metadata"]["uid"];
  json ev = {{"apiVersion", "v1"},
             {"kind", "Event"},
             {"metadata", {{"name", "pod1.1"}, {"namespace", "default"}}},
             {"involvedObject",
              {{"kind", "Pod"}, {"name", "pod1"}, {"namespace", "default"}, {"uid", uid}}},
             {"reason", "FailedScheduling"},
             {"message", "0/3 nodes are available"},
             {"type", "Warning"}};
  ASSERT_EQ(
      Call("POST", events_, ev.dump(), "application/json", {{"fieldValidation", "Strict"}}).code,
      201);
  ev["metadata"]["name"] = "other.1";
  ev["involvedObject"]["name"] = "other";
  ASSERT_EQ(Call("POST", events_, ev.dump()).code, 201);
  // What kubectl describe pod asks for.
  auto found = Body(Call("GET", events_, "", "",
                         {{"fieldSelector",
                           "involvedObject.name=pod1,involvedObject.namespace=default,"
                           "involvedObject.kind=Pod,involvedObject.uid=" +
                               uid}}));
  EXPECT_EQ(found["kind"], "EventList");
  ASSERT_EQ(found["items"].size(), 1u);
  EXPECT_EQ(found["items"][0]["reason"], "FailedScheduling");
  auto table = Body(Call("GET", events_, "", "", {{"fieldSelector", "type=Warning"}},
                         "application/json;as=Table;v=v1;g=meta.k8s.io"));
  ASSERT_EQ(table["rows"].size(), 2u);
  EXPECT_EQ(table["rows"][0]["cells"][3], "pod/other");
  ev["metadata"]["name"] = "bad.1";
  ev["involvedObject"]["namespace"] = "elsewhere";
  EXPECT_EQ(Call("POST", events_, ev.dump()).code, 422);
}

TEST_F(CoreKindsTest, ResourceQuotaStatusIsTheControllers) {
  json quota = json::parse(R"({"apiVersion":"v1","kind":"ResourceQuota",
      "metadata":{"name":"gpus","namespace":"default"},
      "spec":{"hard":{"gpu.nvidia.com.deviceclass.resource.k8s.io/devices":"4","count/pods":"10"}},
      "status":{"hard":{"count/pods":"10"},"used":{"count/pods":"3"}}})");
  auto created =
      Call("POST", quotas_, quota.dump(), "application/json", {{"fieldValidation", "Strict"}});
  ASSERT_EQ(created.code, 201) << created.body;
  EXPECT_FALSE(Body(created).contains("status"));
  auto status = Call("PUT", quotas_ + "/gpus/status",
                     R"({"apiVersion":"v1","kind":"ResourceQuota",
                         "metadata":{"name":"gpus","namespace":"default"},
                         "status":{"hard":{"count/pods":"10"},"used":{"count/pods":"1"}}})");
  ASSERT_EQ(status.code, 200) << status.body;
  auto table =
      Body(Call("GET", quotas_, "", "", {}, "application/json;as=Table;v=v1;g=meta.k8s.io"));
  EXPECT_EQ(table["rows"][0]["cells"][2], "count/pods: 1/10");
  quota["metadata"]["name"] = "neg";
  quota["spec"]["hard"]["count/pods"] = "-1";
  EXPECT_EQ(Call("POST", quotas_, quota.dump()).code, 422);
}

// Oversized and malformed client input is a 4xx with a Status body, never a crash: names,
// label keys and values, annotations, finalizers, selectors, CEL, quantities, deep JSON.
TEST_F(RestApiTest, MalformedAndOversizedInputIsAClientErrorNotACrash) {
  const std::string big(40 * 1024, 'a');
  auto claim_with = [&](const std::string& metadata_extra) {
    return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c",)" +
           metadata_extra +
           R"(},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu"}}]}}})";
  };
  std::vector<std::pair<std::string, std::string>> bodies = {
      {"long label value", claim_with(R"("labels":{"k":")" + big + R"("})")},
      {"long label key", claim_with(R"("labels":{")" + big + R"(":"v"})")},
      {"long annotation key", claim_with(R"("annotations":{")" + big + R"(":"v"})")},
      {"long finalizer", claim_with(R"("finalizers":[")" + big + R"("])")},
      {"long generateName", claim_with(R"("generateName":")" + big + R"(")")},
      {"long name",
       R"({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":")" + big +
           R"("}})"},
      {"deep JSON", std::string(100000, '[') + std::string(100000, ']')},
      {"deep CEL",
       R"({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"d"},)"
       R"("spec":{"selectors":[{"cel":{"expression":")" +
           std::string(50000, '(') + "true" + std::string(50000, ')') + R"("}}]}})"},
      {"long CEL",
       R"({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"d"},)"
       R"("spec":{"selectors":[{"cel":{"expression":"device.driver == ')" +
           std::string(2 << 20, 'x') + R"('"}}]}})"},
      {"deep CEL unary",
       R"({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"d"},)"
       R"("spec":{"selectors":[{"cel":{"expression":")" +
           std::string(100000, '!') + "true" + R"("}}]}})"},
      {"huge quantity",
       R"({"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q"},"spec":{"hard":{"pods":"1e999999999"}}})"},
      {"not JSON", "{\"apiVersion\":"},
  };
  for (const auto& [name, body] : bodies) {
    std::string path =
        name.find("quantity") != std::string::npos ? "/api/v1/namespaces/default/resourcequotas"
        : body.find("DeviceClass") != std::string::npos ? "/apis/resource.k8s.io/v1/deviceclasses"
                                                        : claims_;
    auto r = Call("POST", path, body);
    EXPECT_GE(r.code, 400) << name;
    EXPECT_LT(r.code, 500) << name << ": " << r.body.substr(0, 300);
  }
  for (const std::string& selector : {big, std::string(100000, '('), "a in (" + big + ")",
                                      std::string(100000, '!'), "a," + std::string(50000, ',')}) {
    auto r = Call("GET", claims_, "", "application/json", {{"labelSelector", selector}});
    EXPECT_EQ(r.code, 400) << selector.substr(0, 40);
    r = Call("GET", claims_, "", "application/json", {{"fieldSelector", selector}});
    EXPECT_EQ(r.code, 400) << selector.substr(0, 40);
  }
}

// ---- rbac.authorization.k8s.io and core ServiceAccount ---------------------------------------

class RbacKindsTest : public RestApiTest {
 protected:
  const std::string rbac_ = "/apis/rbac.authorization.k8s.io/v1";
  const std::string roles_ = rbac_ + "/namespaces/default/roles";
  const std::string bindings_ = rbac_ + "/namespaces/default/rolebindings";
};

TEST_F(RbacKindsTest, DiscoveryListsTheRbacKindsAndServiceAccounts) {
  auto agg = Body(Call("GET", "/apis", "", "", {},
                       "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"));
  std::map<std::string, json> by_name;
  for (const auto& group : agg["items"]) {
    if (group["metadata"]["name"] != "rbac.authorization.k8s.io") continue;
    for (const auto& r : group["versions"][0]["resources"]) by_name[r["resource"]] = r;
  }
  ASSERT_EQ(by_name.size(), 4u);
  EXPECT_EQ(by_name["roles"]["scope"], "Namespaced");
  EXPECT_EQ(by_name["rolebindings"]["scope"], "Namespaced");
  EXPECT_EQ(by_name["clusterroles"]["scope"], "Cluster");
  EXPECT_EQ(by_name["clusterrolebindings"]["responseKind"]["kind"], "ClusterRoleBinding");
  for (const auto& [name, r] : by_name) {
    EXPECT_FALSE(r.contains("shortNames")) << name;
    EXPECT_FALSE(r.contains("subresources")) << name;
  }
  auto legacy = Body(Call("GET", rbac_));
  EXPECT_EQ(legacy["kind"], "APIResourceList");
  EXPECT_EQ(legacy["resources"].size(), 4u);
  auto core = Body(Call("GET", "/api", "", "", {},
                        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"));
  bool found = false;
  for (const auto& r : core["items"][0]["versions"][0]["resources"]) {
    if (r["resource"] != "serviceaccounts") continue;
    found = true;
    EXPECT_EQ(r["shortNames"], json::array({"sa"}));
    EXPECT_EQ(r["scope"], "Namespaced");
  }
  EXPECT_TRUE(found);
}

TEST_F(RbacKindsTest, KubectlCreateRoleAndRoleBinding) {
  // `kubectl create role r --verb=get --resource=pods`
  auto role = Call("POST", roles_, R"({"kind":"Role","apiVersion":"rbac.authorization.k8s.io/v1",
      "metadata":{"name":"r","creationTimestamp":null},
      "rules":[{"verbs":["get"],"apiGroups":[""],"resources":["pods"]}]})",
                   "application/json", {{"fieldValidation", "Strict"}});
  ASSERT_EQ(role.code, 201) << role.body;
  EXPECT_EQ(Body(role)["rules"][0]["resources"], json::array({"pods"}));
  // A binding written by hand without apiGroups gets Kubernetes' defaults.
  auto binding = Call("POST", bindings_, R"({"kind":"RoleBinding",
      "apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"alice-view"},
      "roleRef":{"kind":"ClusterRole","name":"view"},
      "subjects":[{"kind":"User","name":"alice"},{"kind":"ServiceAccount","name":"ci"}]})",
                      "application/json", {{"fieldValidation", "Strict"}});
  ASSERT_EQ(binding.code, 201) << binding.body;
  json b = Body(binding);
  EXPECT_EQ(b["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
  EXPECT_EQ(b["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
  EXPECT_EQ(b["subjects"][1]["apiGroup"], "");
  // The role reference never changes; the subjects may.
  b["subjects"].push_back(json{{"kind", "Group"}, {"name", "devs"}});
  auto updated = Call("PUT", bindings_ + "/alice-view", b.dump());
  ASSERT_EQ(updated.code, 200) << updated.body;
  b = Body(updated);
  b["roleRef"]["name"] = "edit";
  auto changed = Call("PUT", bindings_ + "/alice-view", b.dump());
  EXPECT_EQ(changed.code, 422) << changed.body;
  EXPECT_NE(Body(changed)["message"].get<std::string>().find("cannot change roleRef"),
            std::string::npos)
      << changed.body;
  auto table =
      Body(Call("GET", roles_, "", "", {}, "application/json;as=Table;v=v1;g=meta.k8s.io"));
  EXPECT_EQ(table["columnDefinitions"][1]["name"], "Created At");
  EXPECT_EQ(table["rows"][0]["cells"][0], "r");
}

TEST_F(RbacKindsTest, ClusterRoleBindingsRefuseRolesAndNamespacelessServiceAccounts) {
  auto created = Call("POST", rbac_ + "/clusterrolebindings",
                      R"({"kind":"ClusterRoleBinding","apiVersion":"rbac.authorization.k8s.io/v1",
      "metadata":{"name":"system:ci"},"roleRef":{"kind":"Role","name":"r"},
      "subjects":[{"kind":"ServiceAccount","name":"ci"}]})");
  ASSERT_EQ(created.code, 422) << created.body;
  const json status = Body(created);
  std::set<std::string> fields;
  for (const auto& c : status["details"]["causes"]) fields.insert(c["field"]);
  EXPECT_EQ(fields, (std::set<std::string>{"roleRef.kind", "subjects[0].namespace"}));
  // Names may hold colons, unlike most kinds.
  auto role = Call("POST", rbac_ + "/clusterroles",
                   R"({"kind":"ClusterRole","apiVersion":"rbac.authorization.k8s.io/v1",
      "metadata":{"name":"system:gpu-viewer"},
      "rules":[{"verbs":["get"],"nonResourceURLs":["/metrics"]}]})");
  EXPECT_EQ(role.code, 201) << role.body;
}

TEST_F(RbacKindsTest, ServiceAccountsCreateAndPrint) {
  auto created = Call("POST", "/api/v1/namespaces/default/serviceaccounts",
                      R"({"kind":"ServiceAccount","apiVersion":"v1",
      "metadata":{"name":"ci","creationTimestamp":null}})",
                      "application/json", {{"fieldValidation", "Strict"}});
  ASSERT_EQ(created.code, 201) << created.body;
  auto table = Body(Call("GET", "/api/v1/namespaces/default/serviceaccounts", "", "", {},
                         "application/json;as=Table;v=v1;g=meta.k8s.io"));
  EXPECT_EQ(table["rows"][0]["cells"], json::parse(R"(["ci", 0, "0s"])"));
}

// Duplicate JSON keys: the last wins with a Warning, and fieldValidation=Strict refuses them.
TEST_F(RestApiTest, DuplicateJsonKeysWarnOrFailStrictly) {
  const std::string body = R"({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass",)"
                           R"("metadata":{"name":"first","labels":{"a":"1"},"name":"dup"}})";
  auto warned = Call("POST", "/apis/resource.k8s.io/v1/deviceclasses", body);
  ASSERT_EQ(warned.code, 201) << warned.body;
  EXPECT_EQ(Body(warned)["metadata"]["name"], "dup");
  ASSERT_EQ(warned.warnings.size(), 1u);
  EXPECT_EQ(warned.warnings[0], "duplicate field \"metadata.name\"");
  auto strict = Call("POST", "/apis/resource.k8s.io/v1/deviceclasses",
                     R"({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","kind":"X",)"
                     R"("metadata":{"name":"s"}})",
                     "application/json", {{"fieldValidation", "Strict"}});
  EXPECT_EQ(strict.code, 400);
  EXPECT_EQ(Body(strict)["message"], "strict decoding error: json: duplicate field \"kind\"");
  // The same key in different objects is not a duplicate.
  auto fine = Call("POST", "/apis/resource.k8s.io/v1/deviceclasses",
                   R"({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass",)"
                   R"("metadata":{"name":"n","labels":{"name":"x"}}})",
                   "application/json", {{"fieldValidation", "Strict"}});
  EXPECT_EQ(fine.code, 201) << fine.body;
  EXPECT_TRUE(fine.warnings.empty());
  // Colons, braces and escaped quotes inside strings are not members; a duplicate deep in an
  // array of objects is found with its path.
  auto nested = Call(
      "POST", "/apis/resource.k8s.io/v1/deviceclasses",
      R"({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"nested",)"
      R"("annotations":{"a":"x: {\"y\": [1]}","b":"::\\"}},"spec":{"selectors":[)"
      R"({"cel":{"expression":"true"}},{"cel":{"expression":"false","expression":"true"}}]}})");
  ASSERT_EQ(nested.code, 201) << nested.body;
  EXPECT_EQ(Body(nested)["metadata"]["annotations"]["a"], "x: {\"y\": [1]}");
  EXPECT_EQ(Body(nested)["spec"]["selectors"][1]["cel"]["expression"], "true");
  EXPECT_EQ(nested.warnings,
            std::vector<std::string>{"duplicate field \"spec.selectors.cel.expression\""});
  auto colons =
      Call("POST", "/apis/resource.k8s.io/v1/deviceclasses",
           R"({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"colons",)"
           R"("annotations":{"a":"x: {\"y\": [1]}","b":"::\\"}}})",
           "application/json", {{"fieldValidation", "Strict"}});
  EXPECT_EQ(colons.code, 201) << colons.body;
  EXPECT_TRUE(colons.warnings.empty());
}

}  // namespace
}  // namespace qm::api
