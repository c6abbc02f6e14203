// The claim lifecycle rules end to end on a real PostgreSQL: the REST API in-process over the
// PostgreSQL store and its object cache, with the scheduler loop running beside it, as one
// server replica runs them. Each test drives the API as a client would and waits (bounded) for
// the outcome the controllers must reach: claims from templates and extended resources, shared
// claims released with their last consumer, admin access only in labelled namespaces,
// ResourceQuota admission for user and generated claims with the usage in status, and eviction
// of pods on devices that get an untolerated NoExecute taint, with their devices released in the
// ledger.

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

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

constexpr char kV1[] = "/apis/resource.k8s.io/v1";

class LifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::PgTestEnv::Get().Reset();
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
  void TearDown() override {
    scheduler_.reset();
    hub_->Stop();
  }

  api::HttpResponse Call(const std::string& method, const std::string& path,
                         const json& body = nullptr) {
    api::HttpRequest r{method, path, {}, "application/json", "", body.is_null() ? "" : body.dump()};
    return api_->Handle(r);
  }
  json Get(const std::string& path) {
    auto r = Call("GET", path);
    return r.code == 200 ? json::parse(r.body) : json();
  }
  void Create(const std::string& path, const json& body) {
    auto r = Call("POST", path, body);
    ASSERT_EQ(r.code, 201) << path << ": " << r.body;
  }
  // Polls `done` until it holds or 20 s pass; the scheduler works asynchronously.
  bool Eventually(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return done();
  }

  // A node with `devices` GPUs of driver gpu.example.com, and a class for them.
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
    if (Get(std::string(kV1) + "/deviceclasses/gpu").is_null()) {
      Create(std::string(kV1) + "/deviceclasses", testing::DriverClass("gpu", "gpu.example.com"));
    }
  }
  void Namespace(const std::string& name, const json& labels = json::object()) {
    Create("/api/v1/namespaces", {{"apiVersion", "v1"},
                                  {"kind", "Namespace"},
                                  {"metadata", {{"name", name}, {"labels", labels}}}});
  }
  static json ClaimSpec(bool admin_access = false) {
    json exactly = {{"deviceClassName", "gpu"}};
    if (admin_access) exactly["adminAccess"] = true;
    return {{"devices", {{"requests", {{{"name", "gpu"}, {"exactly", exactly}}}}}}};
  }
  void Claim(const std::string& ns, const std::string& name, const json& spec) {
    Create(std::string(kV1) + "/namespaces/" + ns + "/resourceclaims",
           {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaim"},
            {"metadata", {{"name", name}}},
            {"spec", spec}});
  }
  void Template(const std::string& ns, const std::string& name) {
    Create(std::string(kV1) + "/namespaces/" + ns + "/resourceclaimtemplates",
           {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaimTemplate"},
            {"metadata", {{"name", name}}},
            {"spec", {{"spec", ClaimSpec()}}}});
  }
  // A pod using one claim (`claim`) or one claim from a template (`tmpl`).
  void Pod(const std::string& ns, const std::string& name, const std::string& claim,
           const std::string& tmpl = "") {
    json rc = {{"name", "gpu"}};
    if (tmpl.empty()) {
      rc["resourceClaimName"] = claim;
    } else {
      rc["resourceClaimTemplateName"] = tmpl;
    }
    Create("/api/v1/namespaces/" + ns + "/pods",
           {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}}},
            {"spec",
             {{"resourceClaims", {rc}},
              {"containers",
               {{{"name", "c"},
                 {"image", "busybox"},
                 {"resources", {{"claims", {{{"name", "gpu"}}}}}}}}}}}});
  }
  json GetPod(const std::string& ns, const std::string& name) {
    return Get("/api/v1/namespaces/" + ns + "/pods/" + name);
  }
  std::string NodeOf(const std::string& ns, const std::string& name) {
    json pod = GetPod(ns, name);
    return pod.is_object() ? pod["spec"].value("nodeName", "") : "";
  }
  std::string ScheduledMessage(const std::string& ns, const std::string& name) {
    json pod = GetPod(ns, name);
    if (!pod.is_object()) return "";
    for (const auto& c : pod["status"].value("conditions", json::array())) {
      if (c.value("type", "") == "PodScheduled") return c.value("message", "");
    }
    return "";
  }

  SystemClock clock_;
  RandomIdGenerator ids_;
  std::unique_ptr<store::pg::PgStore> store_;
  std::unique_ptr<service::WatchHub> hub_;
  std::unique_ptr<service::ObjectService> objects_;
  std::unique_ptr<api::RestApi> api_;
  std::unique_ptr<service::Scheduler> scheduler_;
};

TEST_F(LifecycleTest, TemplateAndExtendedResourceClaimsLiveAndDieWithTheirPods) {
  Inventory("node-a", 4);
  Template("default", "one-gpu");
  Pod("default", "from-template", "", "one-gpu");
  Create("/api/v1/namespaces/default/pods",
         {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "classic"}}},
          {"spec",
           {{"containers",
             {{{"name", "c"},
               {"image", "busybox"},
               {"resources", {{"limits", {{"deviceclass.resource.kubernetes.io/gpu", 2}}}}}}}}}}});
  ASSERT_TRUE(Eventually([&] {
    return NodeOf("default", "from-template") == "node-a" &&
           NodeOf("default", "classic") == "node-a";
  }));
  json templ = GetPod("default", "from-template");
  const std::string generated = templ["status"]["resourceClaimStatuses"][0]["resourceClaimName"];
  json claim = Get(std::string(kV1) + "/namespaces/default/resourceclaims/" + generated);
  EXPECT_EQ(claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"], "gpu");
  EXPECT_EQ(claim["metadata"]["ownerReferences"][0]["uid"], templ["metadata"]["uid"]);
  EXPECT_EQ(claim["status"]["reservedFor"][0]["name"], "from-template");
  json classic = GetPod("default", "classic");
  const std::string extended =
      classic["status"]["extendedResourceClaimStatus"]["resourceClaimName"];
  json extended_claim = Get(std::string(kV1) + "/namespaces/default/resourceclaims/" + extended);
  EXPECT_EQ(extended_claim["status"]["allocation"]["devices"]["results"].size(), 2u);
  EXPECT_EQ(store_->ListDeviceClaims()->size(), 3u);

  // Deleting the pods deletes their generated claims and frees every device in the ledger.
  ASSERT_EQ(Call("DELETE", "/api/v1/namespaces/default/pods/from-template").code, 200);
  ASSERT_EQ(Call("DELETE", "/api/v1/namespaces/default/pods/classic").code, 200);
  ASSERT_TRUE(Eventually([&] {
    return Get(std::string(kV1) + "/namespaces/default/resourceclaims")["items"].empty() &&
           store_->ListDeviceClaims()->empty();
  }));
}

TEST_F(LifecycleTest, ASharedClaimKeepsItsDeviceUntilTheLastConsumerGoes) {
  Inventory("node-a", 2);
  Claim("default", "shared", ClaimSpec());
  Pod("default", "one", "shared");
  Pod("default", "two", "shared");
  ASSERT_TRUE(Eventually([&] {
    return NodeOf("default", "one") == "node-a" && NodeOf("default", "two") == "node-a";
  }));
  const std::string path = std::string(kV1) + "/namespaces/default/resourceclaims/shared";
  EXPECT_EQ(Get(path)["status"]["reservedFor"].size(), 2u);
  EXPECT_EQ(store_->ListDeviceClaims()->size(), 1u);

  ASSERT_EQ(Call("DELETE", "/api/v1/namespaces/default/pods/one").code, 200);
  ASSERT_TRUE(Eventually([&] { return Get(path)["status"]["reservedFor"].size() == 1u; }));
  EXPECT_EQ(Get(path)["status"]["reservedFor"][0]["name"], "two");
  EXPECT_TRUE(Get(path)["status"].contains("allocation"));
  EXPECT_EQ(store_->ListDeviceClaims()->size(), 1u);

  ASSERT_EQ(Call("DELETE", "/api/v1/namespaces/default/pods/two").code, 200);
  ASSERT_TRUE(Eventually([&] {
    return !Get(path)["status"].contains("allocation") && store_->ListDeviceClaims()->empty();
  }));
  EXPECT_FALSE(Get(path)["status"].contains("reservedFor"));
}

TEST_F(LifecycleTest, AdminAccessOnlyInLabelledNamespacesAndItBlocksNoDevice) {
  Inventory("node-a", 1);
  // Refused where the namespace lacks the label.
  auto refused = Call("POST", std::string(kV1) + "/namespaces/default/resourceclaims",
                      {{"apiVersion", "resource.k8s.io/v1"},
                       {"kind", "ResourceClaim"},
                       {"metadata", {{"name", "monitor"}}},
                       {"spec", ClaimSpec(/*admin_access=*/true)}});
  EXPECT_EQ(refused.code, 422) << refused.body;
  EXPECT_NE(refused.body.find("spec.devices.requests[0].exactly.adminAccess"), std::string::npos);

  // Allowed in a labelled namespace; the monitoring pod shares the device with a regular user.
  Namespace("ops", {{"resource.kubernetes.io/admin-access", "true"}});
  Claim("ops", "monitor", ClaimSpec(/*admin_access=*/true));
  Claim("default", "user", ClaimSpec());
  Pod("default", "user-pod", "user");
  ASSERT_TRUE(Eventually([&] { return NodeOf("default", "user-pod") == "node-a"; }));
  Pod("ops", "monitor-pod", "monitor");
  ASSERT_TRUE(Eventually([&] { return NodeOf("ops", "monitor-pod") == "node-a"; }));
  json monitor = Get(std::string(kV1) + "/namespaces/ops/resourceclaims/monitor");
  EXPECT_EQ(monitor["status"]["allocation"]["devices"]["results"][0]["device"], "gpu-0");
  EXPECT_EQ(monitor["status"]["allocation"]["devices"]["results"][0]["adminAccess"], true);
  // The ledger holds both rows; only the user's is exclusive.
  auto ledger = store_->ListDeviceClaims();
  ASSERT_TRUE(ledger.ok());
  ASSERT_EQ(ledger->size(), 2u);
  EXPECT_NE((*ledger)[0].admin_access, (*ledger)[1].admin_access);
}

TEST_F(LifecycleTest, QuotaRefusesClaimsOverTheLimitGeneratedOnesTooAndReportsUsage) {
  Inventory("node-a", 4);
  Namespace("team");
  Template("team", "one-gpu");
  Create("/api/v1/namespaces/team/resourcequotas",
         {{"apiVersion", "v1"},
          {"kind", "ResourceQuota"},
          {"metadata", {{"name", "gpus"}}},
          {"spec", {{"hard", {{"gpu.deviceclass.resource.k8s.io/devices", "1"}, {"pods", "5"}}}}}});
  Pod("team", "first", "", "one-gpu");
  ASSERT_TRUE(Eventually([&] { return NodeOf("team", "first") == "node-a"; }));

  // A user's claim over the limit: Kubernetes' 403.
  auto refused = Call("POST", std::string(kV1) + "/namespaces/team/resourceclaims",
                      {{"apiVersion", "resource.k8s.io/v1"},
                       {"kind", "ResourceClaim"},
                       {"metadata", {{"name", "extra"}}},
                       {"spec", ClaimSpec()}});
  EXPECT_EQ(refused.code, 403) << refused.body;
  EXPECT_NE(refused.body.find("exceeded quota: gpus"), std::string::npos) << refused.body;

  // The claim the template would generate for a second pod is refused the same way; the pod
  // waits and says why.
  Pod("team", "second", "", "one-gpu");
  ASSERT_TRUE(Eventually([&] {
    return ScheduledMessage("team", "second").find("exceeded quota: gpus") != std::string::npos;
  })) << ScheduledMessage("team", "second");
  EXPECT_EQ(NodeOf("team", "second"), "");

  // The quota controller reports the usage.
  ASSERT_TRUE(Eventually([&] {
    json q = Get("/api/v1/namespaces/team/resourcequotas/gpus");
    return q["status"]["used"] ==
           json{{"gpu.deviceclass.resource.k8s.io/devices", "1"}, {"pods", "2"}};
  })) << Get("/api/v1/namespaces/team/resourcequotas/gpus").dump();

  // Raising the limit lets the waiting pod get its claim and a device.
  json quota = Get("/api/v1/namespaces/team/resourcequotas/gpus");
  quota["spec"]["hard"]["gpu.deviceclass.resource.k8s.io/devices"] = "2";
  auto raised = Call("PUT", "/api/v1/namespaces/team/resourcequotas/gpus", quota);
  ASSERT_EQ(raised.code, 200) << raised.body;
  ASSERT_TRUE(Eventually([&] { return NodeOf("team", "second") == "node-a"; }));
}

TEST_F(LifecycleTest, NoExecuteTaintEvictsUntoleratedPodsAndReleasesTheirDevices) {
  Inventory("node-a", 2);
  Claim("default", "plain", ClaimSpec());
  json tolerant = ClaimSpec();
  tolerant["devices"]["requests"][0]["exactly"]["tolerations"] = {
      {{"key", "broken"}, {"operator", "Exists"}, {"effect", "NoExecute"}}};
  Claim("default", "tolerant", tolerant);
  Pod("default", "victim", "plain");
  Pod("default", "survivor", "tolerant");
  ASSERT_TRUE(Eventually([&] {
    return NodeOf("default", "victim") == "node-a" && NodeOf("default", "survivor") == "node-a";
  }));
  ASSERT_EQ(store_->ListDeviceClaims()->size(), 2u);

  Create(std::string(kV1) + "/devicetaintrules",
         {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "DeviceTaintRule"},
          {"metadata", {{"name", "broken-gpus"}}},
          {"spec",
           {{"deviceSelector", {{"driver", "gpu.example.com"}}},
            {"taint", {{"key", "broken"}, {"value", "true"}, {"effect", "NoExecute"}}}}}});
  ASSERT_TRUE(Eventually([&] { return GetPod("default", "victim").is_null(); }));
  // The victim's claim is deallocated and its ledger row is gone; the survivor keeps its device.
  ASSERT_TRUE(Eventually([&] {
    json plain = Get(std::string(kV1) + "/namespaces/default/resourceclaims/plain");
    return plain.is_object() && !plain["status"].contains("allocation") &&
           store_->ListDeviceClaims()->size() == 1u;
  }));
  EXPECT_EQ(NodeOf("default", "survivor"), "node-a");
  json survivor_claim = Get(std::string(kV1) + "/namespaces/default/resourceclaims/tolerant");
  EXPECT_TRUE(survivor_claim["status"].contains("allocation"));
  EXPECT_EQ((*store_->ListDeviceClaims())[0].claim_uid,
            survivor_claim["metadata"]["uid"].get<std::string>());
}

}  // namespace
}  // namespace qm
