// ClusterSummary (admin.quartermaster.io/v1alpha1, api/rest/cluster_summary.h) through RestApi
// over the in-memory store: node counts by state without a list per request, kept live by a
// watch; the last change of each followed kind; its creationTimestamp (the server's start);
// discovery and view's access.
#include "api/rest/cluster_summary.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/rest/request_gate.h"
#include "common/id_generator.h"
#include "service/authorizer.h"
#include "store/memory_store.h"

namespace qm::api {
namespace {

using nlohmann::json;

constexpr char kSummaries[] = "/apis/admin.quartermaster.io/v1alpha1/clustersummaries";

class FakeClock : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override { return now; }
  std::chrono::system_clock::time_point now{std::chrono::seconds(1800000000)};
};

class RecordingSink : public WatchSink {
 public:
  void Begin(const std::vector<std::string>&) override {}
  bool Write(const std::string& chunk) override {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(json::parse(chunk));
    cv.notify_all();
    return true;
  }
  void End() override {}
  // Waits until an event satisfies `pred` (5 s at most); returns it, or null.
  json WaitFor(const std::function<bool(const json&)>& pred) {
    std::unique_lock<std::mutex> lock(mu);
    json found;
    cv.wait_for(lock, std::chrono::seconds(5), [&] {
      for (const auto& e : events) {
        if (pred(e)) {
          found = e;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return events.size();
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<json> events;
};

json Node(const std::string& name, const std::string& ready, bool unschedulable = false) {
  json n = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
  if (unschedulable) n["spec"]["unschedulable"] = true;
  if (!ready.empty()) {
    n["status"]["conditions"] = json::array({{{"type", "MemoryPressure"}, {"status", "False"}},
                                             {{"type", "Ready"}, {"status", ready}}});
  }
  return n;
}

class ClusterSummaryTest : public ::testing::Test {
 protected:
  ClusterSummaryTest()
      : hub_(store_, service::WatchHubOptions{}),
        objects_(store_, clock_, ids_, &hub_),
        api_(objects_, hub_, clock_) {
    hub_.Start();
    EXPECT_TRUE(api_.EnsureDefaultNamespace().ok());
    Expect(201, "POST", "/api/v1/nodes", Node("a", "True").dump());
    Expect(201, "POST", "/api/v1/nodes", Node("b", "False", /*unschedulable=*/true).dump());
    Expect(201, "POST", "/api/v1/nodes", Node("c", "").dump());
    Expect(201, "POST", "/api/v1/nodes", Node("d", "True").dump());
  }
  ~ClusterSummaryTest() override { hub_.Stop(); }

  HttpResponse Expect(int code, const std::string& method, const std::string& path,
                      const std::string& body = "",
                      const std::string& content_type = "application/json") {
    HttpRequest r{method, path, {}, content_type, "", body};
    HttpResponse resp = api_.Handle(r);
    EXPECT_EQ(resp.code, code) << method << " " << path << ": " << resp.body;
    return resp;
  }

  json Summary() {
    return json::parse(Expect(200, "GET", std::string(kSummaries) + "/cluster").body);
  }

  store::MemoryStore store_;
  FakeClock clock_;
  RandomIdGenerator ids_;
  service::WatchHub hub_;
  service::ObjectService objects_;
  RestApi api_;
};

TEST_F(ClusterSummaryTest, CountsNodesByReadinessAndCordon) {
  json s = Summary();
  EXPECT_EQ(s["kind"], "ClusterSummary");
  EXPECT_EQ(s["apiVersion"], "admin.quartermaster.io/v1alpha1");
  EXPECT_EQ(s["metadata"]["name"], "cluster");
  // Created when the server started (RestApi's construction): kubectl's AGE is its uptime.
  EXPECT_EQ(s["metadata"]["creationTimestamp"], "2027-01-15T08:00:00Z");
  EXPECT_EQ(
      s["status"]["nodes"],
      (json{{"total", 4}, {"ready", 2}, {"notReady", 1}, {"unknown", 1}, {"unschedulable", 1}}));
  // The list has the one object, at its resourceVersion.
  json list = json::parse(Expect(200, "GET", kSummaries).body);
  EXPECT_EQ(list["kind"], "ClusterSummaryList");
  ASSERT_EQ(list["items"].size(), 1u);
  EXPECT_EQ(list["items"][0]["status"], s["status"]);
  EXPECT_EQ(list["items"][0]["metadata"]["creationTimestamp"], "2027-01-15T08:00:00Z");
  EXPECT_EQ(list["metadata"]["resourceVersion"], s["metadata"]["resourceVersion"]);
  // kubectl get's Table: the counts, and the age since the server started.
  clock_.now += std::chrono::hours(3);
  HttpRequest t{"GET", kSummaries, {}, "", "application/json;as=Table;v=v1;g=meta.k8s.io", ""};
  json table = json::parse(api_.Handle(t).body);
  EXPECT_EQ(table["kind"], "Table");
  std::vector<std::string> names;
  for (const json& c : table["columnDefinitions"]) names.push_back(c["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"Name", "Nodes", "Ready", "Not Ready", "Unknown",
                                             "Cordoned", "Age"}));
  ASSERT_EQ(table["rows"].size(), 1u) << table.dump();
  EXPECT_EQ(table["rows"][0]["cells"], json::parse(R"(["cluster", 4, 2, 1, 1, 1, "3h"])"));
  EXPECT_EQ(table["rows"][0]["object"]["metadata"]["name"], "cluster");
  Expect(404, "GET", std::string(kSummaries) + "/other");
  Expect(405, "POST", kSummaries, "{}");
}

TEST_F(ClusterSummaryTest, FollowsChangesAfterItsFirstList) {
  const json before = Summary();
  // Cordon a, make b Ready, delete d, add e (NotReady).
  Expect(200, "PATCH", "/api/v1/nodes/a", R"({"spec":{"unschedulable":true}})",
         "application/merge-patch+json");
  json b = json::parse(Expect(200, "GET", "/api/v1/nodes/b").body);
  b["status"]["conditions"][1]["status"] = "True";
  Expect(200, "PUT", "/api/v1/nodes/b/status", b.dump());
  Expect(200, "DELETE", "/api/v1/nodes/d");
  Expect(201, "POST", "/api/v1/nodes", Node("e", "False").dump());
  // The tally follows the hub, which may lag a write by a few ms.
  json s;
  for (int i = 0; i < 200; ++i) {
    s = Summary();
    if (s["status"]["nodes"]["notReady"] == 1 && s["status"]["nodes"]["total"] == 4 &&
        s["status"]["nodes"]["ready"] == 2 && s["status"]["nodes"]["unschedulable"] == 2) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(
      s["status"]["nodes"],
      (json{{"total", 4}, {"ready", 2}, {"notReady", 1}, {"unknown", 1}, {"unschedulable", 2}}));
  EXPECT_GT(std::stoll(s["metadata"]["resourceVersion"].get<std::string>()),
            std::stoll(before["metadata"]["resourceVersion"].get<std::string>()));
  EXPECT_EQ(s["status"]["lastChanges"]["nodes"], s["metadata"]["resourceVersion"]);
}

TEST_F(ClusterSummaryTest, AWatchSendsTheStateThenEachChange) {
  const json first = Summary();
  auto sink = std::make_shared<RecordingSink>();
  HttpRequest w{"GET", kSummaries, {{"watch", "1"}}, "", "", ""};
  ASSERT_FALSE(api_.StartWatch(w, sink).has_value());
  json added = sink->WaitFor([](const json&) { return true; });
  ASSERT_FALSE(added.is_null());
  EXPECT_EQ(added["type"], "ADDED");
  EXPECT_EQ(added["object"]["status"], first["status"]);
  EXPECT_EQ(added["object"]["metadata"]["creationTimestamp"], "2027-01-15T08:00:00Z");

  // A cordon: a MODIFIED event with the new count.
  Expect(200, "PATCH", "/api/v1/nodes/d", R"({"spec":{"unschedulable":true}})",
         "application/merge-patch+json");
  json cordoned = sink->WaitFor([](const json& e) {
    return e["type"] == "MODIFIED" && e["object"]["status"]["nodes"]["unschedulable"] == 2;
  });
  ASSERT_FALSE(cordoned.is_null()) << "no event for the cordon";

  // A claim: no node count changes, its kind's last change does.
  const std::string claims_rv = cordoned["object"]["status"]["lastChanges"]["resourceclaims"];
  Expect(201, "POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
         R"({"metadata":{"name":"c1"},"spec":{"devices":{"requests":[
             {"name":"gpu","exactly":{"deviceClassName":"gpu"}}]}}})");
  json claimed = sink->WaitFor([&](const json& e) {
    return e["type"] == "MODIFIED" &&
           e["object"]["status"]["lastChanges"]["resourceclaims"] != json(claims_rv);
  });
  ASSERT_FALSE(claimed.is_null()) << "no event for the claim";
  EXPECT_EQ(claimed["object"]["status"]["nodes"], cordoned["object"]["status"]["nodes"]);
  EXPECT_EQ(claimed["object"]["metadata"]["resourceVersion"],
            claimed["object"]["status"]["lastChanges"]["resourceclaims"]);

  // A change of a kind it does not follow (a namespace) sends nothing.
  const size_t seen = sink->size();
  Expect(201, "POST", "/api/v1/namespaces", R"({"metadata":{"name":"other"}})");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(sink->size(), seen);
}

// kubectl get -w asks for Tables: each event's object is one (the first with its columns).
TEST_F(ClusterSummaryTest, AWatchForTablesSendsTables) {
  auto sink = std::make_shared<RecordingSink>();
  HttpRequest w{
      "GET", kSummaries, {{"watch", "1"}}, "", "application/json;as=Table;v=v1;g=meta.k8s.io", ""};
  ASSERT_FALSE(api_.StartWatch(w, sink).has_value());
  json added = sink->WaitFor([](const json&) { return true; });
  ASSERT_FALSE(added.is_null());
  EXPECT_EQ(added["type"], "ADDED");
  EXPECT_EQ(added["object"]["kind"], "Table");
  EXPECT_EQ(added["object"]["columnDefinitions"].size(), 7u);
  EXPECT_EQ(added["object"]["rows"][0]["cells"],
            json::parse(R"(["cluster", 4, 2, 1, 1, 1, "0s"])"));
  Expect(200, "PATCH", "/api/v1/nodes/d", R"({"spec":{"unschedulable":true}})",
         "application/merge-patch+json");
  json cordoned = sink->WaitFor([](const json& e) {
    return e["type"] == "MODIFIED" && e["object"]["rows"][0]["cells"][5] == 2;
  });
  ASSERT_FALSE(cordoned.is_null()) << "no Table event for the cordon";
  EXPECT_EQ(cordoned["object"]["kind"], "Table");
  EXPECT_FALSE(cordoned["object"].contains("columnDefinitions"));
}

TEST_F(ClusterSummaryTest, TheLastChangeOfABurstFollowsSoon) {
  auto sink = std::make_shared<RecordingSink>();
  HttpRequest w{"GET", kSummaries, {{"watch", "1"}}, "", "", ""};
  ASSERT_FALSE(api_.StartWatch(w, sink).has_value());
  ASSERT_FALSE(sink->WaitFor([](const json&) { return true; }).is_null());
  // A cordon, then a second one right after the first was sent: within the watch's 100 ms it is
  // held back, and sent at the hub's next tick, which follows as soon as the hub has nothing more
  // to dispatch.
  Expect(200, "PATCH", "/api/v1/nodes/a", R"({"spec":{"unschedulable":true}})",
         "application/merge-patch+json");
  ASSERT_FALSE(sink->WaitFor([](const json& e) {
                     return e["object"]["status"]["nodes"]["unschedulable"] == 2;
                   })
                   .is_null());
  const auto t0 = std::chrono::steady_clock::now();
  Expect(200, "PATCH", "/api/v1/nodes/d", R"({"spec":{"unschedulable":true}})",
         "application/merge-patch+json");
  json both = sink->WaitFor(
      [](const json& e) { return e["object"]["status"]["nodes"]["unschedulable"] == 3; });
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  ASSERT_FALSE(both.is_null());
  EXPECT_LT(ms, 600) << "the second cordon was sent " << ms << " ms after it was written";
}

TEST_F(ClusterSummaryTest, AWatchFromTheCurrentVersionWaitsForAChange) {
  const json s = Summary();
  auto sink = std::make_shared<RecordingSink>();
  HttpRequest w{
      "GET", kSummaries, {{"watch", "1"}, {"resourceVersion", s["metadata"]["resourceVersion"]}},
      "",    "",         ""};
  ASSERT_FALSE(api_.StartWatch(w, sink).has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(sink->size(), 0u);
  Expect(200, "DELETE", "/api/v1/nodes/c");
  json e = sink->WaitFor([](const json&) { return true; });
  ASSERT_FALSE(e.is_null());
  EXPECT_EQ(e["type"], "MODIFIED");
  EXPECT_EQ(e["object"]["status"]["nodes"]["total"], 3);
  EXPECT_EQ(e["object"]["status"]["nodes"]["unknown"], 0);

  HttpRequest bad{"GET", kSummaries, {{"watch", "1"}, {"fieldSelector", "metadata.name=x"}},
                  "",    "",         ""};
  auto refused = api_.StartWatch(bad, std::make_shared<RecordingSink>());
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code, 400);
}

TEST_F(ClusterSummaryTest, DiscoveryListsItAndViewMayReadIt) {
  json resources = json::parse(Expect(200, "GET", "/apis/admin.quartermaster.io/v1alpha1").body);
  bool found = false;
  for (const auto& r : resources["resources"]) {
    if (r["name"] != "clustersummaries") continue;
    found = true;
    EXPECT_EQ(r["kind"], "ClusterSummary");
    EXPECT_EQ(r["verbs"], json::array({"get", "list", "watch"}));
    EXPECT_EQ(r["namespaced"], false);
  }
  EXPECT_TRUE(found) << resources.dump();

  const std::string kRbac = "rbac.authorization.k8s.io";
  service::Authorizer authz(service::RbacPolicy{
      {},
      {},
      {model::RoleBinding{
          "team-a", "viewers", {kRbac, "ClusterRole", "view"}, {{"User", kRbac, "w", ""}}}},
      {model::RoleBinding{
          "", "viewers", {kRbac, "ClusterRole", "view"}, {{"User", kRbac, "v", ""}}}}});
  const auth::UserInfo v{"v", "", {auth::kGroupAuthenticated}};
  const auth::UserInfo w{"w", "", {auth::kGroupAuthenticated}};
  const std::vector<HttpRequest> reads = {
      {"GET", kSummaries, {}, "", "", ""},
      {"GET", std::string(kSummaries) + "/cluster", {}, "", "", ""},
      {"GET", kSummaries, {{"watch", "1"}}, "", "", ""},
  };
  for (const auto& r : reads) {
    EXPECT_TRUE(authz.Authorize(v, RequestAttributes(r)).allowed) << r.path;
    // A view binding in one namespace does not reach the cluster-scoped summary.
    EXPECT_FALSE(authz.Authorize(w, RequestAttributes(r)).allowed) << r.path;
  }
  EXPECT_FALSE(
      authz.Authorize(v, RequestAttributes({"POST", kSummaries, {}, "application/json", "", "{}"}))
          .allowed);
}

}  // namespace
}  // namespace qm::api
