// UtilizationHistoryReview on a real PostgreSQL: the REST API in-process over the PostgreSQL
// store with the scheduler binding pods beside it, as one server replica runs them. Bindings and
// releases made by the scheduler show up in the right buckets and groups, and the same review
// gives the same answer after the database (and every object above it) restarts: the history
// lives in PostgreSQL, recorded by the transactions that changed the ledger.

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/rest/rest_api.h"
#include "common/clock.h"
#include "common/id_generator.h"
#include "pg_test_env.h"
#include "service/object_service.h"
#include "service/scheduler.h"
#include "service/watch_hub.h"
#include "store/pg/pg_store.h"
#include "test_objects.h"

namespace qm {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using std::chrono::system_clock;

constexpr char kV1[] = "/apis/resource.k8s.io/v1";

class UtilizationHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::PgTestEnv::Get().Reset();
    Open();
  }
  void TearDown() override { Close(); }

  void Open() {
    auto store = store::pg::PgStore::Open(testing::PgTestEnv::Get().url(), 4);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    hub_ = std::make_unique<service::WatchHub>(*store_, service::WatchHubOptions{});
    hub_->Start();
    objects_ = std::make_unique<service::ObjectService>(*store_, clock_, ids_, hub_.get());
    api_ = std::make_unique<api::RestApi>(*objects_, *hub_, clock_);
    ASSERT_TRUE(api_->EnsureDefaultNamespace().ok());
    service::SchedulerOptions options;
    options.initial_backoff = std::chrono::milliseconds(100);
    options.max_backoff = std::chrono::milliseconds(400);
    scheduler_ = std::make_unique<service::Scheduler>(*store_, *hub_, clock_, ids_, options);
    scheduler_->Start();
  }
  void Close() {
    scheduler_.reset();
    if (hub_) hub_->Stop();
    api_.reset();
    objects_.reset();
    hub_.reset();
    store_.reset();
  }

  api::HttpResponse Call(const std::string& method, const std::string& path,
                         const json& body = nullptr) {
    api::HttpRequest r{method, path, {}, "application/json", "", body.is_null() ? "" : body.dump()};
    return api_->Handle(r);
  }
  void Create(const std::string& path, const json& body) {
    auto r = Call("POST", path, body);
    ASSERT_EQ(r.code, 201) << path << ": " << r.body;
  }
  bool Eventually(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return done();
  }
  size_t LedgerRows() {
    auto rows = store_->ListDeviceClaims();
    return rows.ok() ? rows->size() : 0;
  }

  void Inventory(const std::string& node, int devices) {
    Create("/api/v1/nodes",
           {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", node}}},
            {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}});
    json list = json::array();
    for (int i = 0; i < devices; ++i) list.push_back({{"name", "gpu-" + std::to_string(i)}});
    Create(std::string(kV1) + "/resourceslices",
           {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceSlice"},
            {"metadata", {{"name", node + "-gpus"}}},
            {"spec",
             {{"driver", "gpu.example.com"},
              {"nodeName", node},
              {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
              {"devices", list}}}});
  }
  // Class "gpu" (every device of gpu.example.com) and namespace "team".
  void ClassAndTeamNamespace() {
    Create(std::string(kV1) + "/deviceclasses", testing::DriverClass("gpu", "gpu.example.com"));
    Create("/api/v1/namespaces",
           {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "team"}}}});
  }
  // Pod ns/name with its own claim ns/name of one gpu.
  void PodWithClaim(const std::string& ns, const std::string& name) {
    json exactly = {{"deviceClassName", "gpu"}};
    Create(std::string(kV1) + "/namespaces/" + ns + "/resourceclaims",
           {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaim"},
            {"metadata", {{"name", name}}},
            {"spec", {{"devices", {{"requests", {{{"name", "gpu"}, {"exactly", exactly}}}}}}}}});
    Create("/api/v1/namespaces/" + ns + "/pods",
           {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}}},
            {"spec",
             {{"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", name}}}},
              {"containers",
               {{{"name", "c"},
                 {"image", "busybox"},
                 {"resources", {{"claims", {{{"name", "gpu"}}}}}}}}}}}});
  }

  json Review(system_clock::time_point start, system_clock::time_point end,
              const std::string& group_by) {
    json body = {{"apiVersion", "admin.quartermaster.io/v1alpha1"},
                 {"kind", "UtilizationHistoryReview"},
                 {"spec",
                  {{"start", FormatRfc3339(start)},
                   {"end", FormatRfc3339(end)},
                   {"step", "1m"},
                   {"groupBy", group_by}}}};
    auto r = Call("POST", "/apis/admin.quartermaster.io/v1alpha1/utilizationhistoryreviews", body);
    EXPECT_EQ(r.code, 201) << r.body;
    return r.code == 201 ? json::parse(r.body)["status"] : json();
  }

  SystemClock clock_;
  RandomIdGenerator ids_;
  std::unique_ptr<store::pg::PgStore> store_;
  std::unique_ptr<service::WatchHub> hub_;
  std::unique_ptr<service::ObjectService> objects_;
  std::unique_ptr<api::RestApi> api_;
  std::unique_ptr<service::Scheduler> scheduler_;
};

TEST_F(UtilizationHistoryTest, SchedulerBindingsAndReleasesAreCountedAndSurviveARestart) {
  // Whole seconds, as the review's times are: every change below falls in the last of three
  // one-minute buckets that end at `end`.
  const auto begin = std::chrono::floor<seconds>(system_clock::now());
  Inventory("node-a", 4);
  Inventory("node-b", 2);
  ClassAndTeamNamespace();
  PodWithClaim("default", "p1");
  PodWithClaim("team", "p2");
  PodWithClaim("team", "p3");
  ASSERT_TRUE(Eventually([&] { return LedgerRows() == 3; })) << LedgerRows();
  // Deleting p3's pod and claim releases its device.
  ASSERT_EQ(Call("DELETE", "/api/v1/namespaces/team/pods/p3").code, 200);
  ASSERT_TRUE(Eventually([&] {
    Call("DELETE", std::string(kV1) + "/namespaces/team/resourceclaims/p3");
    return LedgerRows() == 2;
  })) << LedgerRows();
  const auto end = std::chrono::ceil<seconds>(system_clock::now()) + seconds(1);
  ASSERT_LT(end - begin, seconds(60)) << "the test ran too long for its buckets";
  const auto start = end - seconds(180);

  json all = Review(start, end, "");
  ASSERT_TRUE(all.is_object());
  ASSERT_EQ(all["groups"].size(), 1u) << all.dump();
  const json& total = all["groups"][0];
  EXPECT_EQ(total["devices"], 6);
  EXPECT_EQ(total["allocated"], json::array({0, 0, 2}));
  EXPECT_EQ(total["peakAllocated"], json::array({0, 0, 3}));
  EXPECT_EQ(total["free"], json::array({6, 6, 4}));
  EXPECT_EQ(total["unhealthy"], json::array({0, 0, 0}));

  json namespaces = Review(start, end, "namespace");
  ASSERT_EQ(namespaces["groups"].size(), 2u) << namespaces.dump();
  EXPECT_EQ(namespaces["groups"][0]["name"], "default");
  EXPECT_EQ(namespaces["groups"][0]["allocated"], json::array({0, 0, 1}));
  EXPECT_EQ(namespaces["groups"][1]["name"], "team");
  EXPECT_EQ(namespaces["groups"][1]["allocated"], json::array({0, 0, 1}));
  EXPECT_EQ(namespaces["groups"][1]["peakAllocated"], json::array({0, 0, 2}));

  json nodes = Review(start, end, "node");
  ASSERT_EQ(nodes["groups"].size(), 2u) << nodes.dump();
  int64_t allocated = 0;
  for (const auto& g : nodes["groups"]) allocated += g["allocated"][2].get<int64_t>();
  EXPECT_EQ(allocated, 2);
  EXPECT_EQ(nodes["groups"][0]["devices"], 4);
  EXPECT_EQ(nodes["groups"][1]["devices"], 2);

  // The database restarts and every object above it is new: the same answers.
  Close();
  testing::PgTestEnv::Get().Restart();
  Open();
  EXPECT_EQ(Review(start, end, ""), all);
  EXPECT_EQ(Review(start, end, "namespace"), namespaces);
  EXPECT_EQ(Review(start, end, "node"), nodes);
}

// The health history on PostgreSQL: its triggers record each source of an unhealthy taint
// (a slice device's own taint, a DeviceTaintRule) starting and stopping, in the transaction
// that writes it, and nothing for writes that leave the health as it was; it survives a restart.
TEST_F(UtilizationHistoryTest, HealthChangesAreRecordedWithTheirWritesAndSurviveARestart) {
  const auto begin = system_clock::now();
  Inventory("node-a", 2);  // no taints: nothing recorded
  const std::string slice_path = std::string(kV1) + "/resourceslices/node-a-gpus";
  auto put_slice = [&](const std::function<void(json&)>& edit) {
    json slice = json::parse(Call("GET", slice_path).body);
    edit(slice);
    auto r = Call("PUT", slice_path, slice);
    ASSERT_EQ(r.code, 200) << r.body;
  };
  const json unhealthy = {{"key", "quartermaster.io/unhealthy"}, {"effect", "NoSchedule"}};
  put_slice([&](json& s) { s["spec"]["devices"][1]["taints"] = json::array({unhealthy}); });
  // Another taint beside it, and an attribute: the device stays unhealthy, nothing recorded.
  put_slice([&](json& s) {
    s["spec"]["devices"][1]["taints"].push_back({{"key", "other"}, {"effect", "NoSchedule"}});
    s["spec"]["devices"][0]["attributes"] = {{"index", {{"int", 0}}}};
  });
  put_slice([&](json& s) { s["spec"]["devices"][1].erase("taints"); });
  const std::string rules = std::string(kV1) + "/devicetaintrules";
  json rule = {{"apiVersion", "resource.k8s.io/v1"},
               {"kind", "DeviceTaintRule"},
               {"metadata", {{"name", "pool-a"}}},
               {"spec",
                {{"deviceSelector", {{"driver", "gpu.example.com"}, {"pool", "node-a"}}},
                 {"taint", unhealthy}}}};
  Create(rules, rule);
  // Its effect changes, not its cover: nothing recorded.
  json stored = json::parse(Call("GET", rules + "/pool-a").body);
  stored["spec"]["taint"]["effect"] = "NoExecute";
  ASSERT_EQ(Call("PUT", rules + "/pool-a", stored).code, 200);
  json other = rule;
  other["metadata"]["name"] = "not-health";
  other["spec"]["taint"]["key"] = "example.com/maintenance";
  Create(rules, other);
  ASSERT_EQ(Call("DELETE", rules + "/pool-a").code, 200);
  // A slice created with an unhealthy device, then deleted.
  json list = json::array({{{"name", "gpu-0"}, {"taints", json::array({unhealthy})}}});
  Create(std::string(kV1) + "/resourceslices",
         {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", "node-b-gpus"}}},
          {"spec",
           {{"driver", "gpu.example.com"},
            {"nodeName", "node-b"},
            {"pool", {{"name", "node-b"}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", list}}}});
  ASSERT_EQ(Call("DELETE", std::string(kV1) + "/resourceslices/node-b-gpus").code, 200);

  auto changes = [&] {
    auto history = store_->ReadAllocationHistory(begin - seconds(1));
    EXPECT_TRUE(history.ok()) << history.status();
    std::vector<std::string> out;
    if (!history.ok()) return out;
    for (const auto& e : history->health) {
      EXPECT_GE(e.time, begin - seconds(1));
      out.push_back(absl::StrCat(e.driver, "/", e.pool, "/", e.device, " ", e.delta));
    }
    return out;
  };
  const std::vector<std::string> expected = {
      "gpu.example.com/node-a/gpu-1 1", "gpu.example.com/node-a/gpu-1 -1",
      "gpu.example.com/node-a/ 1",      "gpu.example.com/node-a/ -1",
      "gpu.example.com/node-b/gpu-0 1", "gpu.example.com/node-b/gpu-0 -1"};
  EXPECT_EQ(changes(), expected);

  Close();
  testing::PgTestEnv::Get().Restart();
  Open();
  EXPECT_EQ(changes(), expected);
  // Pruning drops them with the allocation history.
  auto pruned = store_->PruneAllocationHistory(system_clock::now() + seconds(1));
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 6);
  EXPECT_EQ(changes(), std::vector<std::string>{});
}

// One device's holders and changes, newest first, with the claims' names while they exist.
TEST_F(UtilizationHistoryTest, DeviceHistoryListsHoldersAndChangesNewestFirst) {
  Inventory("node-a", 1);
  ClassAndTeamNamespace();
  PodWithClaim("default", "p1");
  ASSERT_TRUE(Eventually([&] { return LedgerRows() == 1; })) << LedgerRows();
  const std::string p1_uid =
      json::parse(Call("GET", std::string(kV1) + "/namespaces/default/resourceclaims/p1")
                      .body)["metadata"]["uid"];
  ASSERT_EQ(Call("DELETE", "/api/v1/namespaces/default/pods/p1").code, 200);
  ASSERT_TRUE(Eventually([&] {
    Call("DELETE", std::string(kV1) + "/namespaces/default/resourceclaims/p1");
    return LedgerRows() == 0;
  }));
  PodWithClaim("team", "p2");
  ASSERT_TRUE(Eventually([&] { return LedgerRows() == 1; })) << LedgerRows();
  const std::string p2_uid = json::parse(
      Call("GET", std::string(kV1) + "/namespaces/team/resourceclaims/p2").body)["metadata"]["uid"];

  auto review = [&](const json& spec) {
    return Call("POST", "/apis/admin.quartermaster.io/v1alpha1/deviceallocationhistoryreviews",
                {{"apiVersion", "admin.quartermaster.io/v1alpha1"},
                 {"kind", "DeviceAllocationHistoryReview"},
                 {"spec", spec}});
  };
  const json spec = {{"driver", "gpu.example.com"}, {"pool", "node-a"}, {"device", "gpu-0"}};
  auto r = review(spec);
  ASSERT_EQ(r.code, 201) << r.body;
  json status = json::parse(r.body)["status"];
  EXPECT_EQ(status["holders"],
            json::parse(R"([{"claim": {"namespace": "team", "name": "p2", "uid": ")" + p2_uid +
                        R"("}, "adminAccess": false}])"));
  std::vector<std::string> events;
  for (const auto& e : status["events"]) {
    events.push_back(e["type"].get<std::string>() + " " +
                     e["claim"]["namespace"].get<std::string>() + "/" +
                     e["claim"].value("name", "-") + " " + e["claim"]["uid"].get<std::string>());
  }
  EXPECT_EQ(events,
            (std::vector<std::string>{"Allocated team/p2 " + p2_uid, "Released default/- " + p1_uid,
                                      "Allocated default/- " + p1_uid}));
  EXPECT_EQ(status["truncated"], false);
  // Times are MicroTime, newest first.
  ASSERT_EQ(status["events"].size(), 3u);
  const std::string t0 = status["events"][0]["time"], t2 = status["events"][2]["time"];
  EXPECT_EQ(t0.size(), std::string("2026-11-27T06:30:01.123456Z").size()) << t0;
  EXPECT_GT(t0, t2);

  json limited = spec;
  limited["limit"] = 2;
  r = review(limited);
  ASSERT_EQ(r.code, 201) << r.body;
  EXPECT_EQ(json::parse(r.body)["status"]["events"].size(), 2u);
  EXPECT_EQ(json::parse(r.body)["status"]["truncated"], true);

  // Another device has no history; a later start leaves the old changes out.
  json other = spec;
  other["device"] = "gpu-9";
  r = review(other);
  ASSERT_EQ(r.code, 201) << r.body;
  EXPECT_EQ(json::parse(r.body)["status"]["events"], json::array());
  json later = spec;
  later["start"] = FormatRfc3339(system_clock::now() + seconds(5));
  r = review(later);
  ASSERT_EQ(r.code, 201) << r.body;
  EXPECT_EQ(json::parse(r.body)["status"]["events"], json::array());
  EXPECT_EQ(json::parse(r.body)["status"]["holders"].size(), 1u);

  // Field errors name the field.
  json bad = spec;
  bad.erase("device");
  bad["limit"] = 0;
  r = review(bad);
  ASSERT_EQ(r.code, 422) << r.body;
  const json invalid = json::parse(r.body);
  std::vector<std::string> fields;
  for (const auto& c : invalid["details"]["causes"]) fields.push_back(c["field"]);
  EXPECT_EQ(fields, (std::vector<std::string>{"spec.device", "spec.limit"}));

  // It survives a restart of the database.
  Close();
  testing::PgTestEnv::Get().Restart();
  Open();
  r = review(spec);
  ASSERT_EQ(r.code, 201) << r.body;
  json again = json::parse(r.body)["status"];
  EXPECT_EQ(again["events"], status["events"]);
  EXPECT_EQ(again["holders"], status["holders"]);
}

}  // namespace
}  // namespace qm
