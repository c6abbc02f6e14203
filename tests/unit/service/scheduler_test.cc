// The scheduler and claim controllers over the in-memory store and a real WatchHub: binding,
// shared claims, claims from templates, extended resources, exhaustion with a counted reason
// and an Event, and release on pod deletion followed by scheduling of the waiting pod.

#include "service/scheduler.h"
#include "stored_objects.h"

#include <functional>
#include <future>
#include <thread>

#include "forwarding_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/json/fields.h"
#include "nlohmann/json.hpp"
#include "service/graceful_deletion.h"
#include "service/object_service.h"
#include "store/memory_store.h"

namespace qm::service {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// Stands still unless a test advances it (the scheduler's backoff follows it).
class TestClock final : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override { return now_; }
  void Advance(std::chrono::seconds d) { now_ += d; }

 private:
  std::chrono::system_clock::time_point now_{std::chrono::seconds(1'800'000'000)};
};

class CountingIds final : public IdGenerator {
 public:
  std::string NewUid() override {
    char buf[40];
    snprintf(buf, sizeof(buf), "00000000-0000-4000-8000-%012d", ++n_);
    return buf;
  }

 private:
  int n_ = 0;
};

constexpr char kClaims[] = "resourceclaims.resource.k8s.io";

using qm::testing::PutObject;

// The body of a node's ResourceSlice with `devices` plain devices gpu-0, gpu-1, ...
json NodeSliceBody(const std::string& node, int devices) {
  json list = json::array();
  for (int i = 0; i < devices; ++i) list.push_back({{"name", "gpu-" + std::to_string(i)}});
  return {{"spec",
           {{"driver", "gpu.example.com"},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", list}}}};
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hub_ = std::make_unique<WatchHub>(store_, WatchHubOptions{});
    hub_->Start();
    scheduler_ = std::make_unique<Scheduler>(store_, *hub_, clock_, ids_);
    Put("namespaces", "", "default", json::object());
    Put("deviceclasses.resource.k8s.io", "", "gpu",
        {{"spec",
          {{"selectors", {{{"cel", {{"expression", "device.driver == 'gpu.example.com'"}}}}}},
           {"extendedResourceName", "nvidia.com/gpu"}}}});
  }
  void TearDown() override {
    scheduler_.reset();
    hub_->Stop();
  }

  model::Object Put(const std::string& resource, const std::string& ns, const std::string& name,
                    const json& body, std::map<std::string, std::string> labels = {}) {
    return PutObject(store_, ids_, clock_, resource, ns, name, body, std::move(labels));
  }

  void Node(const std::string& name, int devices, json taints = json::array()) {
    Put("nodes", "", name, {{"spec", {{"taints", taints}}}}, {{"kubernetes.io/hostname", name}});
    Put("resourceslices.resource.k8s.io", "", name + "-slice", NodeSliceBody(name, devices));
  }

  model::Object Pod(const std::string& name, json spec) {
    if (!spec.contains("containers")) spec["containers"] = {{{"name", "c"}, {"image", "busybox"}}};
    return Put("pods", "default", name, {{"spec", spec}, {"status", {{"phase", "Pending"}}}});
  }

  json Body(const std::string& resource, const std::string& name,
            const std::string& ns = "default") {
    auto o = store_.Get(model::ResourceKey{resource, ns, name});
    if (!o.ok()) return json();
    return json::parse(o->body);
  }

  PassStats Run() {
    auto stats = scheduler_->RunOnce();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? *stats : PassStats{};
  }

  std::vector<model::Object> List(const std::string& resource) {
    auto r = store_.List(store::ListOptions{resource, "", "", "", 0});
    std::vector<model::Object> out;
    if (r.ok()) {
      for (const auto& o : r->items) out.push_back(*o);
    }
    return out;
  }

  store::MemoryStore store_;
  TestClock clock_;
  CountingIds ids_;
  std::unique_ptr<WatchHub> hub_;
  std::unique_ptr<Scheduler> scheduler_;
};

json ClaimSpec(int count = 1) {
  return {
      {"spec",
       {{"devices",
         {{"requests",
           {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu"}, {"count", count}}}}}}}}}}};
}

TEST_F(SchedulerTest, BindsAPodAndAllocatesItsClaimInOneTransaction) {
  Node("node-a", 2);
  Put(kClaims, "default", "shared", ClaimSpec());
  Pod("pod1", {{"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", "shared"}}}}});
  PassStats stats = Run();
  EXPECT_EQ(stats.bound, 1);
  json pod = Body("pods", "pod1");
  EXPECT_EQ(pod["spec"]["nodeName"], "node-a");
  EXPECT_EQ(pod["status"]["conditions"][0]["type"], "PodScheduled");
  EXPECT_EQ(pod["status"]["conditions"][0]["status"], "True");
  // Field selectors see the binding (fields computed as the REST codecs compute them).
  auto stored = store_.Get(model::ResourceKey{"pods", "default", "pod1"});
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->fields.at("spec.nodeName"), "node-a");
  EXPECT_EQ(stored->fields.at("status.phase"), "Pending");
  json claim = Body(kClaims, "shared");
  EXPECT_EQ(claim["status"]["allocation"]["devices"]["results"][0]["device"], "gpu-0");
  EXPECT_EQ(claim["status"]["reservedFor"][0]["name"], "pod1");
  auto ledger = store_.ListDeviceClaims();
  ASSERT_TRUE(ledger.ok());
  ASSERT_EQ(ledger->size(), 1u);
  EXPECT_EQ((*ledger)[0].device, "gpu-0");

  // A second pod on the same claim goes to the same node and takes no second device.
  Pod("pod2", {{"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", "shared"}}}}});
  EXPECT_EQ(Run().bound, 1);
  EXPECT_EQ(Body("pods", "pod2")["spec"]["nodeName"], "node-a");
  claim = Body(kClaims, "shared");
  EXPECT_EQ(claim["status"]["reservedFor"].size(), 2u);
  EXPECT_EQ(store_.ListDeviceClaims()->size(), 1u);
}

// The scheduler allocates at most --max-results-per-claim devices to one claim (Kubernetes' 32
// by default, the REST limit on allocation results); raised, a claim for 256 of a node's 1,024
// devices is bound with all 256.
TEST_F(SchedulerTest, TheClaimLimitIsTheServersAndCanBeRaised) {
  Node("node-a", 1024);
  Put(kClaims, "default", "big", ClaimSpec(256));
  Pod("pod1", {{"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", "big"}}}}});
  EXPECT_EQ(Run().unschedulable, 1);
  json condition = Body("pods", "pod1")["status"]["conditions"][0];
  EXPECT_EQ(condition["status"], "False");
  EXPECT_EQ(condition["message"],
            "claim default/big: number of requested devices 256 exceeds the claim limit of 32");

  SchedulerOptions raised;
  raised.max_results_per_claim = 256;
  raised.initial_backoff = std::chrono::milliseconds(0);
  scheduler_ = std::make_unique<Scheduler>(store_, *hub_, clock_, ids_, raised);
  EXPECT_EQ(Run().bound, 1);
  EXPECT_EQ(Body("pods", "pod1")["spec"]["nodeName"], "node-a");
  EXPECT_EQ(Body(kClaims, "big")["status"]["allocation"]["devices"]["results"].size(), 256u);
  EXPECT_EQ(store_.ListDeviceClaims()->size(), 256u);
}

TEST_F(SchedulerTest, ASliceThatDoesNotDecodeIsReportedOnceAndLeftOutUntilItIsFixed) {
  Put("nodes", "", "node-a", {{"spec", json::object()}}, {{"kubernetes.io/hostname", "node-a"}});
  // Written past validation (an older server, a hand edit of the table): devices is not a list.
  model::Object bad =
      Put("resourceslices.resource.k8s.io", "", "node-a-slice",
          {{"spec",
            {{"driver", "gpu.example.com"},
             {"nodeName", "node-a"},
             {"pool", {{"name", "node-a"}, {"generation", 1}, {"resourceSliceCount", 1}}},
             {"devices", "gpu-0"}}}});
  Put(kClaims, "default", "c", ClaimSpec());
  Pod("pod1", {{"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", "c"}}}}});
  EXPECT_EQ(Run().bound, 0);
  auto decode_events = [&] {
    int n = 0;
    for (const auto& e : List("events")) {
      if (json::parse(e.body).value("reason", "") == "DecodeFailed") ++n;
    }
    return n;
  };
  EXPECT_EQ(decode_events(), 1);
  // Passes that rebuild the inventory for other reasons do not report it again.
  Node("node-b", 0);
  Run();
  EXPECT_EQ(decode_events(), 1);
  // Fixed: the pod is bound to its devices.
  model::Object fixed = bad;
  fixed.body = json({{"spec",
                      {{"driver", "gpu.example.com"},
                       {"nodeName", "node-a"},
                       {"pool", {{"name", "node-a"}, {"generation", 1}, {"resourceSliceCount", 1}}},
                       {"devices", {{{"name", "gpu-0"}}}}}}})
                   .dump();
  ASSERT_TRUE(store_.Update(fixed, bad.meta.resource_version).ok());
  clock_.Advance(std::chrono::seconds(60));
  EXPECT_EQ(Run().bound, 1);
  EXPECT_EQ(Body("pods", "pod1")["spec"]["nodeName"], "node-a");
}

TEST_F(SchedulerTest, TemplatesGiveEveryPodItsOwnClaim) {
  Node("node-a", 4);
  Put("resourceclaimtemplates.resource.k8s.io", "default", "one-gpu", {{"spec", ClaimSpec()}});
  json claims = {{{"name", "gpu"}, {"resourceClaimTemplateName", "one-gpu"}}};
  Pod("p1", {{"resourceClaims", claims}});
  Pod("p2", {{"resourceClaims", claims}});
  PassStats stats = Run();
  EXPECT_EQ(stats.claims_created, 2);
  EXPECT_EQ(stats.bound, 2);
  std::set<std::string> devices;
  for (const auto& c : List(kClaims)) {
    EXPECT_EQ(c.meta.annotations.at("resource.kubernetes.io/pod-claim-name"), "gpu");
    EXPECT_THAT(c.meta.owner_references, HasSubstr("\"kind\":\"Pod\""));
    json body = json::parse(c.body);
    devices.insert(body["status"]["allocation"]["devices"]["results"][0]["device"]);
  }
  EXPECT_EQ(devices.size(), 2u);
  json p1 = Body("pods", "p1");
  EXPECT_EQ(p1["status"]["resourceClaimStatuses"][0]["name"], "gpu");
  EXPECT_THAT(p1["status"]["resourceClaimStatuses"][0]["resourceClaimName"].get<std::string>(),
              HasSubstr("p1-gpu-"));
}

TEST_F(SchedulerTest, ExtendedResourceLimitsAreServedThroughAGeneratedClaim) {
  Node("node-a", 2);
  Pod("classic", {{"containers",
                   {{{"name", "cuda"},
                     {"image", "x"},
                     {"resources", {{"limits", {{"nvidia.com/gpu", 2}}}}}}}}});
  PassStats stats = Run();
  EXPECT_EQ(stats.claims_created, 1);
  EXPECT_EQ(stats.bound, 1);
  auto claims = List(kClaims);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0].meta.annotations.at("resource.kubernetes.io/extended-resource-claim"),
            "true");
  json body = json::parse(claims[0].body);
  EXPECT_EQ(body["status"]["allocation"]["devices"]["results"].size(), 2u);
  EXPECT_EQ(
      Body(
          "pods",
          "classic")["status"]["extendedResourceClaimStatus"]["requestMappings"][0]["resourceName"],
      "nvidia.com/gpu");
}

TEST_F(SchedulerTest, ExhaustionExplainsAndReleaseSchedulesTheWaitingPod) {
  Node("node-a", 1);
  Node("node-c", 8, {{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}});
  Put(kClaims, "default", "c1", ClaimSpec());
  Put(kClaims, "default", "c2", ClaimSpec());
  model::Object first =
      Pod("first", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "c1"}}}}});
  EXPECT_EQ(Run().bound, 1);
  Pod("second", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "c2"}}}}});
  PassStats stats = Run();
  EXPECT_EQ(stats.unschedulable, 1);
  json second = Body("pods", "second");
  EXPECT_FALSE(second["spec"].contains("nodeName"));
  EXPECT_EQ(second["status"]["conditions"][0]["status"], "False");
  EXPECT_EQ(second["status"]["conditions"][0]["reason"], "Unschedulable");
  EXPECT_EQ(second["status"]["conditions"][0]["message"],
            "0/2 nodes are available: 1 insufficient devices of class gpu, 1 node(s) had "
            "untolerated taint {nvidia.com/gpu: present}.");
  auto events = List("events");
  ASSERT_EQ(events.size(), 1u);
  json event = json::parse(events[0].body);
  EXPECT_EQ(event["reason"], "FailedScheduling");
  EXPECT_EQ(event["involvedObject"]["name"], "second");
  // Nothing changed: the pod backs off, no second event.
  EXPECT_EQ(Run().backing_off, 1);
  EXPECT_EQ(List("events").size(), 1u);

  // Deleting the first pod releases its claim; once its backoff has passed, the waiting pod
  // gets the device.
  ASSERT_TRUE(store_.Delete(first.Key(), 0).ok());
  clock_.Advance(std::chrono::seconds(1));
  stats = Run();
  EXPECT_EQ(stats.claims_released, 1);
  EXPECT_EQ(stats.bound, 1);
  EXPECT_EQ(Body("pods", "second")["spec"]["nodeName"], "node-a");
  EXPECT_FALSE(Body(kClaims, "c1")["status"].contains("allocation"));
  auto ledger = store_.ListDeviceClaims();
  ASSERT_EQ(ledger->size(), 1u);
}

TEST_F(SchedulerTest, PodWaitsForAMissingClaimAndIsScheduledWhenItAppears) {
  Node("node-a", 1);
  Pod("early", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "later"}}}}});
  EXPECT_EQ(Run().unschedulable, 1);
  EXPECT_THAT(Body("pods", "early")["status"]["conditions"][0]["message"].get<std::string>(),
              HasSubstr("resourceclaim \"later\" not found"));
  Put(kClaims, "default", "later", ClaimSpec());
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Run().bound, 1);
}

TEST_F(SchedulerTest, DeletingAPodFreesItsGeneratedClaimsDevicesForAWaitingPod) {
  Node("node-a", 1);
  Put("resourceclaimtemplates.resource.k8s.io", "default", "one-gpu", {{"spec", ClaimSpec()}});
  json claims = {{{"name", "gpu"}, {"resourceClaimTemplateName", "one-gpu"}}};
  model::Object holder = Pod("holder", {{"resourceClaims", claims}});
  EXPECT_EQ(Run().bound, 1);
  Pod("waiter", {{"resourceClaims", claims}});
  EXPECT_EQ(Run().unschedulable, 1);
  EXPECT_EQ(List(kClaims).size(), 2u);  // the waiter's claim exists, unallocated

  ASSERT_TRUE(store_.Delete(holder.Key(), 0).ok());
  clock_.Advance(std::chrono::seconds(1));
  PassStats stats = Run();
  EXPECT_EQ(stats.claims_released, 1);  // the holder's claim is deleted with it
  EXPECT_EQ(stats.bound, 1);
  EXPECT_EQ(Body("pods", "waiter")["spec"]["nodeName"], "node-a");
  ASSERT_EQ(List(kClaims).size(), 1u);
  EXPECT_THAT(List(kClaims)[0].meta.name, HasSubstr("waiter-gpu-"));
}

// The REST codec stores pods with the digest of their spec, and a status update keeps it: the
// scheduler then decodes the new status only (DecodePodStatus), over the spec it decoded before.
TEST_F(SchedulerTest, APodThatFinishedFreesItsClaimsDevicesForAWaitingPod) {
  Node("node-a", 1);
  auto rewrite = [&](const std::string& name, const std::function<void(json&)>& edit) {
    auto o = store_.Get(model::ResourceKey{"pods", "default", name});
    ASSERT_TRUE(o.ok()) << o.status();
    json body = json::parse(o->body);
    edit(body);
    model::Object next = *o;
    next.body = body.dump();
    next.spec_digest = model::json::SpecDigestOf(body);
    ASSERT_TRUE(store_.Update(next, o->meta.resource_version).ok());
  };
  Put("resourceclaimtemplates.resource.k8s.io", "default", "one-gpu", {{"spec", ClaimSpec()}});
  json claims = {{{"name", "gpu"}, {"resourceClaimTemplateName", "one-gpu"}}};
  Pod("holder", {{"resourceClaims", claims}});
  rewrite("holder", [](json&) {});  // from here on, the stored pod has its digest
  EXPECT_EQ(Run().bound, 1);
  Pod("waiter", {{"resourceClaims", claims}});
  EXPECT_EQ(Run().unschedulable, 1);

  // Running first (nothing freed), then Succeeded: the status alone changes, the digest stays.
  rewrite("holder", [](json& b) { b["status"]["phase"] = "Running"; });
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Run().bound, 0);
  rewrite("holder", [](json& b) { b["status"]["phase"] = "Succeeded"; });
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Run().bound, 1);
  EXPECT_EQ(Body("pods", "waiter")["spec"]["nodeName"], "node-a");
}

TEST_F(SchedulerTest, GeneratedClaimsPassQuotaAdmissionAndTheQuotaShowsItsUsage) {
  Node("node-a", 4);
  Put("resourcequotas", "default", "gpus",
      {{"spec", {{"hard", {{"gpu.deviceclass.resource.k8s.io/devices", "1"}, {"pods", "9"}}}}}});
  Put("resourceclaimtemplates.resource.k8s.io", "default", "one-gpu", {{"spec", ClaimSpec()}});
  json claims = {{{"name", "gpu"}, {"resourceClaimTemplateName", "one-gpu"}}};
  Pod("p1", {{"resourceClaims", claims}});
  Pod("p2", {{"resourceClaims", claims}});
  PassStats stats = Run();
  EXPECT_EQ(stats.bound, 1);
  EXPECT_EQ(stats.claims_created, 1);
  EXPECT_EQ(Body("pods", "p1")["spec"]["nodeName"], "node-a");
  EXPECT_THAT(Body("pods", "p2")["status"]["conditions"][0]["message"].get<std::string>(),
              HasSubstr("resourceclaims.resource.k8s.io \"p2-gpu-\" is forbidden: exceeded quota: "
                        "gpus, requested: gpu.deviceclass.resource.k8s.io/devices=1, used: "
                        "gpu.deviceclass.resource.k8s.io/devices=1, limited: "
                        "gpu.deviceclass.resource.k8s.io/devices=1"));
  EXPECT_EQ(List(kClaims).size(), 1u);
  EXPECT_EQ(Body("resourcequotas", "gpus")["status"]["used"],
            json({{"gpu.deviceclass.resource.k8s.io/devices", "1"}, {"pods", "2"}}));

  // A higher limit is a change that lets the waiting pod in once its backoff passed.
  auto quota = store_.Get(model::ResourceKey{"resourcequotas", "default", "gpus"});
  ASSERT_TRUE(quota.ok());
  json body = json::parse(quota->body);
  body["spec"]["hard"]["gpu.deviceclass.resource.k8s.io/devices"] = "2";
  quota->body = body.dump();
  ASSERT_TRUE(store_.Update(*quota, 0).ok());
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Run().bound, 1);
  EXPECT_EQ(Body("pods", "p2")["spec"]["nodeName"], "node-a");
  EXPECT_EQ(
      Body("resourcequotas", "gpus")["status"]["used"]["gpu.deviceclass.resource.k8s.io/devices"],
      "2");
}

TEST_F(SchedulerTest, UnschedulablePodsBackOffUntilSomethingRelevantChanges) {
  Node("node-a", 1);
  Put(kClaims, "default", "c1", ClaimSpec());
  Put(kClaims, "default", "c2", ClaimSpec());
  Pod("first", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "c1"}}}}});
  EXPECT_EQ(Run().bound, 1);
  Pod("second", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "c2"}}}}});
  EXPECT_EQ(Run().unschedulable, 1);  // attempt 1: backoff 1 s

  // The backoff has passed but nothing that could help changed: not tried.
  clock_.Advance(std::chrono::seconds(5));
  PassStats stats = Run();
  EXPECT_EQ(stats.backing_off, 1);
  EXPECT_EQ(stats.unschedulable, 0);

  // A node without devices appears: tried again, still does not fit (attempt 2: backoff 2 s).
  Node("node-b", 0);
  EXPECT_EQ(Run().unschedulable, 1);
  // A node with a free device appears, but the backoff has not passed yet.
  Node("node-c", 1);
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Run().backing_off, 1);
  clock_.Advance(std::chrono::seconds(1));
  stats = Run();
  EXPECT_EQ(stats.bound, 1);
  EXPECT_EQ(Body("pods", "second")["spec"]["nodeName"], "node-c");
}

TEST_F(SchedulerTest, AnAllocationWrittenBySomeoneElseIsKeptWithoutConsumers) {
  Node("node-a", 1);
  json taken = ClaimSpec();
  taken["status"]["allocation"] = {
      {"devices",
       {{"results",
         {{{"request", "gpu"},
           {"driver", "gpu.example.com"},
           {"pool", "node-a"},
           {"device", "gpu-0"}}}}}},
      {"nodeSelector",
       {{"nodeSelectorTerms",
         {{{"matchFields",
            {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"node-a"}}}}}}}}}}};
  Put(kClaims, "default", "preallocated", taken);
  Put(kClaims, "default", "wanted", ClaimSpec());
  Pod("pod", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "wanted"}}}}});
  PassStats stats = Run();
  EXPECT_EQ(stats.claims_released, 0);
  EXPECT_EQ(stats.unschedulable, 1);
  EXPECT_EQ(
      Body(kClaims, "preallocated")["status"]["allocation"]["devices"]["results"][0]["device"],
      "gpu-0");
}

// The scheduler keeps a claim's decoded allocation across changes that leave its text as it was
// (a report, a consumer): one written, changed or removed later is decoded anew.
TEST_F(SchedulerTest, AnAllocationWrittenLaterBySomeoneElseIsCountedAndItsRemovalFreesTheDevice) {
  Node("node-a", 2);
  auto allocate = [&](const std::string& device) {
    auto o = store_.Get(model::ResourceKey{kClaims, "default", "other"});
    ASSERT_TRUE(o.ok()) << o.status();
    json body = json::parse(o->body);
    if (device.empty()) {
      body["status"].erase("allocation");
    } else {
      body["status"]["allocation"] = {{"devices",
                                       {{"results",
                                         {{{"request", "gpu"},
                                           {"driver", "gpu.example.com"},
                                           {"pool", "node-a"},
                                           {"device", device}}}}}}};
    }
    model::Object next = *o;
    next.body = body.dump();
    ASSERT_TRUE(store_.Update(next, o->meta.resource_version).ok());
  };
  Put(kClaims, "default", "other", ClaimSpec());
  Put(kClaims, "default", "first", ClaimSpec());
  Put(kClaims, "default", "second", ClaimSpec());
  Run();  // the scheduler has seen "other" without an allocation
  allocate("gpu-0");
  allocate("gpu-1");  // a change of the allocation itself
  Pod("a", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "first"}}}}});
  EXPECT_EQ(Run().bound, 1);  // gpu-0, which "other" holds no more
  Pod("b", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "second"}}}}});
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Run().unschedulable, 1);  // gpu-1 is "other"'s
  allocate("");
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Run().bound, 1);
  EXPECT_EQ(Body(kClaims, "second")["status"]["allocation"]["devices"]["results"][0]["device"],
            "gpu-1");
}

TEST_F(SchedulerTest, NoExecuteDeviceTaintsEvictUntoleratedPods) {
  Node("node-a", 2);
  json tolerating = ClaimSpec();
  tolerating["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = {
      {{"key", "dead"}, {"operator", "Exists"}, {"effect", "NoExecute"}}};
  Put(kClaims, "default", "plain", ClaimSpec());
  Put(kClaims, "default", "tolerant", tolerating);
  Pod("victim", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "plain"}}}}});
  Pod("survivor", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "tolerant"}}}}});
  EXPECT_EQ(Run().bound, 2);

  // A DeviceTaintRule taints every device of the driver.
  Put("devicetaintrules.resource.k8s.io", "", "dead-gpus",
      {{"spec",
        {{"deviceSelector", {{"driver", "gpu.example.com"}}},
         {"taint", {{"key", "dead"}, {"value", "true"}, {"effect", "NoExecute"}}}}}});
  PassStats stats = Run();
  EXPECT_EQ(stats.evicted, 1);
  EXPECT_TRUE(Body("pods", "victim").is_null());
  EXPECT_FALSE(Body("pods", "survivor").is_null());
  // The next pass releases the evicted pod's claim.
  Run();
  EXPECT_FALSE(Body(kClaims, "plain")["status"].contains("allocation"));
  EXPECT_TRUE(Body(kClaims, "tolerant")["status"].contains("allocation"));
}

// The node lifecycle's NoExecute taint (node.kubernetes.io/unreachable) evicts the pods on the
// node that tolerate it for tolerationSeconds once that has passed since timeAdded (the default
// 300 s for pods whose tolerations do not mention it), and never those that tolerate it without
// a limit. (Untolerated taints evicting at once: NodeEvictionReasonTest.)
TEST_F(SchedulerTest, NoExecuteNodeTaintsEvictAfterTolerationSeconds) {
  Node("node-a", 4);
  auto tolerate = [](std::optional<int> seconds) {
    json t = {
        {"key", "node.kubernetes.io/unreachable"}, {"operator", "Exists"}, {"effect", "NoExecute"}};
    if (seconds.has_value()) t["tolerationSeconds"] = *seconds;
    return json::array({t});
  };
  for (const char* name : {"plain", "short", "forever", "other"}) {
    Put(kClaims, "default", name, ClaimSpec());
  }
  Pod("plain", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "plain"}}}}});
  Pod("short", {{"tolerations", tolerate(5)},
                {"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "short"}}}}});
  Pod("forever", {{"tolerations", tolerate(std::nullopt)},
                  {"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "forever"}}}}});
  // Tolerations of other taints only: the default (300 s) applies, as if admission had added it.
  Pod("other", {{"tolerations", {{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}}}},
                {"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "other"}}}}});
  EXPECT_EQ(Run().bound, 4);

  auto node = store_.Get(model::ResourceKey{"nodes", "", "node-a"});
  ASSERT_TRUE(node.ok());
  model::Object tainted = *node;
  tainted.body = json({{"spec",
                        {{"taints",
                          {{{"key", "node.kubernetes.io/unreachable"},
                            {"effect", "NoExecute"},
                            {"timeAdded", FormatRfc3339(clock_.Now())}}}}}}})
                     .dump();
  ASSERT_TRUE(store_.Update(tainted, 0).ok());
  // "plain" lists no tolerations: the default 300 s applies to it too.
  EXPECT_EQ(Run().evicted, 0);
  clock_.Advance(std::chrono::seconds(4));
  EXPECT_EQ(Run().evicted, 0);
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Run().evicted, 1);
  EXPECT_TRUE(Body("pods", "short").is_null());
  EXPECT_FALSE(Body("pods", "plain").is_null());
  EXPECT_FALSE(Body("pods", "other").is_null());
  clock_.Advance(std::chrono::hours(1));
  EXPECT_EQ(Run().evicted, 2);
  EXPECT_TRUE(Body("pods", "plain").is_null());
  EXPECT_TRUE(Body("pods", "other").is_null());
  EXPECT_FALSE(Body("pods", "forever").is_null());
  Run();
  // The evicted pods' claims are released.
  EXPECT_FALSE(Body(kClaims, "plain")["status"].contains("allocation"));
  EXPECT_FALSE(Body(kClaims, "short")["status"].contains("allocation"));
  EXPECT_TRUE(Body(kClaims, "forever")["status"].contains("allocation"));
}

// What an agent's ReportPrepared leaves behind (node_agent_api.cc): Ready device entries in the
// claim's status and the devices-prepared finalizer on its pod.
class GracefulDeletionTest : public SchedulerTest {
 protected:
  void Prepare(const std::string& claim, const std::vector<std::string>& pods) {
    auto c = store_.Get(model::ResourceKey{kClaims, "default", claim});
    ASSERT_TRUE(c.ok());
    json body = json::parse(c->body);
    json devices = json::array();
    for (const auto& r : body["status"]["allocation"]["devices"]["results"]) {
      devices.push_back({{"driver", r["driver"]},
                         {"pool", r["pool"]},
                         {"device", r["device"]},
                         {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}});
    }
    body["status"]["devices"] = devices;
    model::Object next = *c;
    next.body = body.dump();
    ASSERT_TRUE(store_.Update(next, 0).ok());
    for (const auto& name : pods) {
      auto p = store_.Get(model::ResourceKey{"pods", "default", name});
      ASSERT_TRUE(p.ok());
      model::Object pod = *p;
      pod.meta.finalizers.push_back(kDevicesPreparedFinalizer);
      ASSERT_TRUE(store_.Update(pod, 0).ok());
    }
  }
  // The agent's ReportUnprepared: the claim's device entries go.
  void Unprepare(const std::string& claim) {
    auto c = store_.Get(model::ResourceKey{kClaims, "default", claim});
    ASSERT_TRUE(c.ok());
    json body = json::parse(c->body);
    body["status"].erase("devices");
    model::Object next = *c;
    next.body = body.dump();
    ASSERT_TRUE(store_.Update(next, 0).ok());
  }
  absl::StatusOr<DeleteResult> Delete(const std::string& pod, std::optional<int64_t> grace = {}) {
    ObjectService objects(store_, clock_, ids_);
    DeleteOptions options;
    options.grace_period_seconds = grace;
    return objects.Delete(model::ResourceKey{"pods", "default", pod}, options);
  }
  model::Object Stored(const std::string& resource, const std::string& name) {
    auto o = store_.Get(model::ResourceKey{resource, "default", name});
    return o.ok() ? *o : model::Object{};
  }
  void TaintUnreachable(const std::string& node) {
    auto n = store_.Get(model::ResourceKey{"nodes", "", node});
    ASSERT_TRUE(n.ok());
    model::Object tainted = *n;
    tainted.body =
        json({{"spec",
               {{"taints",
                 {{{"key", "node.kubernetes.io/unreachable"},
                   {"effect", "NoExecute"},
                   {"timeAdded", FormatRfc3339(clock_.Now())}}}}}},
              {"status", {{"conditions", {{{"type", "Ready"}, {"status", "Unknown"}}}}}}})
            .dump();
    ASSERT_TRUE(store_.Update(tainted, 0).ok());
  }
};

TEST_F(GracefulDeletionTest, APodWaitsForItsAgentToUnprepareAndOnlyThenFreesItsDevice) {
  Node("node-a", 1);
  Put(kClaims, "default", "c1", ClaimSpec());
  Put(kClaims, "default", "c2", ClaimSpec());
  Pod("old", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "c1"}}}}});
  EXPECT_EQ(Run().bound, 1);
  Prepare("c1", {"old"});
  auto del = Delete("old");
  ASSERT_TRUE(del.ok()) << del.status();
  EXPECT_FALSE(del->deleted);
  // A new workload for the only device.
  Pod("new", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "c2"}}}}});
  Run();
  Run();
  // Terminating: the claim no longer reserved for it (so the agent unprepares), but allocated.
  EXPECT_TRUE(Stored("pods", "old").meta.deletion_timestamp.has_value());
  EXPECT_FALSE(Body(kClaims, "c1")["status"].contains("reservedFor"));
  EXPECT_TRUE(Body(kClaims, "c1")["status"].contains("allocation"));
  EXPECT_FALSE(Body("pods", "new")["spec"].contains("nodeName"));
  // Even past the grace period: the node is reachable, the agent still holds the device.
  clock_.Advance(std::chrono::seconds(60));
  Run();
  EXPECT_FALSE(Body("pods", "old").is_null());
  EXPECT_FALSE(Body("pods", "new")["spec"].contains("nodeName"));

  Unprepare("c1");
  Run();
  EXPECT_TRUE(Body("pods", "old").is_null());
  EXPECT_FALSE(Body(kClaims, "c1")["status"].contains("allocation"));
  clock_.Advance(std::chrono::seconds(60));  // past the new pod's backoff
  Run();
  EXPECT_EQ(Body("pods", "new")["spec"]["nodeName"], "node-a");
}

TEST_F(GracefulDeletionTest, AForcedDeletionGoesAtOnceButTheDeviceWaitsForUnprepare) {
  Node("node-a", 1);
  Put(kClaims, "default", "c1", ClaimSpec());
  Put(kClaims, "default", "c2", ClaimSpec());
  Pod("old", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "c1"}}}}});
  EXPECT_EQ(Run().bound, 1);
  Prepare("c1", {"old"});
  auto del = Delete("old", 0);
  ASSERT_TRUE(del.ok()) << del.status();
  EXPECT_TRUE(del->deleted);
  EXPECT_TRUE(Body("pods", "old").is_null());
  Pod("new", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "c2"}}}}});
  Run();
  Run();
  EXPECT_TRUE(Body(kClaims, "c1")["status"].contains("allocation"));
  EXPECT_FALSE(Body("pods", "new")["spec"].contains("nodeName"));
  Unprepare("c1");
  Run();
  EXPECT_FALSE(Body(kClaims, "c1")["status"].contains("allocation"));
  clock_.Advance(std::chrono::seconds(60));
  Run();
  EXPECT_EQ(Body("pods", "new")["spec"]["nodeName"], "node-a");
}

TEST_F(GracefulDeletionTest, APodGoesAtOnceWhenItsClaimIsStillPreparedForAnotherPod) {
  Node("node-a", 1);
  Put(kClaims, "default", "shared", ClaimSpec());
  Pod("a", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "shared"}}}}});
  Pod("b", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "shared"}}}}});
  EXPECT_EQ(Run().bound + Run().bound, 2);
  ASSERT_EQ(Body(kClaims, "shared")["status"]["reservedFor"].size(), 2u);
  Prepare("shared", {"a", "b"});
  ASSERT_TRUE(Delete("a").ok());
  Run();
  EXPECT_TRUE(Body("pods", "a").is_null());
  EXPECT_EQ(Body(kClaims, "shared")["status"]["reservedFor"].size(), 1u);
  // The last user waits for the unprepare.
  ASSERT_TRUE(Delete("b").ok());
  Run();
  EXPECT_FALSE(Body("pods", "b").is_null());
  Unprepare("shared");
  Run();
  EXPECT_TRUE(Body("pods", "b").is_null());
}

TEST_F(GracefulDeletionTest, AnEvictedPodOnAnUnreachableNodeGoesAfterItsGracePeriod) {
  Node("node-a", 1);
  Put(kClaims, "default", "c1", ClaimSpec());
  json tolerate = {{{"key", "node.kubernetes.io/unreachable"},
                    {"operator", "Exists"},
                    {"effect", "NoExecute"},
                    {"tolerationSeconds", 5}}};
  Pod("old", {{"tolerations", tolerate},
              {"terminationGracePeriodSeconds", 10},
              {"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "c1"}}}}});
  EXPECT_EQ(Run().bound, 1);
  Prepare("c1", {"old"});
  TaintUnreachable("node-a");
  clock_.Advance(std::chrono::seconds(5));
  EXPECT_EQ(Run().evicted, 1);
  // Marked, not gone: deletionTimestamp = eviction + 10 s.
  model::Object pod = Stored("pods", "old");
  ASSERT_TRUE(pod.meta.deletion_timestamp.has_value());
  EXPECT_EQ(*pod.meta.deletion_timestamp, clock_.Now() + std::chrono::seconds(10));
  EXPECT_EQ(pod.meta.deletion_grace_period_seconds, 10);
  clock_.Advance(std::chrono::seconds(9));
  Run();
  EXPECT_FALSE(Body("pods", "old").is_null());
  EXPECT_TRUE(Body(kClaims, "c1")["status"].contains("allocation"));
  clock_.Advance(std::chrono::seconds(1));
  Run();
  EXPECT_TRUE(Body("pods", "old").is_null());
  Run();
  // Nobody waits for the unreachable agent any more: the device is free.
  EXPECT_FALSE(Body(kClaims, "c1")["status"].contains("allocation"));
}

TEST_F(GracefulDeletionTest, PodsWithoutPreparedDevicesGoAtOnce) {
  Node("node-a", 1);
  Put(kClaims, "default", "c1", ClaimSpec());
  Pod("old", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "c1"}}}}});
  EXPECT_EQ(Run().bound, 1);
  auto del = Delete("old");
  ASSERT_TRUE(del.ok());
  EXPECT_TRUE(del->deleted);
  Run();
  EXPECT_FALSE(Body(kClaims, "c1")["status"].contains("allocation"));
}

// Holds the first CommitAsync until Release(); later commits go through at once.
class HoldFirstCommitStore final : public fakes::ForwardingStore {
 public:
  std::future<absl::StatusOr<std::vector<model::Object>>> CommitAsync(
      store::Transaction txn) override {
    if (!holding_.exchange(false)) return Store::CommitAsync(std::move(txn));
    held_.set_value();
    return std::async(std::launch::async, [this, txn = std::move(txn)] {
      release_.get_future().wait();
      return Commit(txn);
    });
  }
  void WaitUntilHeld() { held_.get_future().wait(); }
  void Release() { release_.set_value(); }

 private:
  std::atomic<bool> holding_{true};
  std::promise<void> held_;
  std::promise<void> release_;
};

// A pod created while a pass waits for its commits is placed by that pass (a late arrival):
// its binding joins the next group commit instead of waiting for the pass to end.
TEST(SchedulerLateArrivalsTest, APodCreatedWhileCommitsAreInFlightIsBoundInTheSamePass) {
  HoldFirstCommitStore store;
  WatchHub hub(store, WatchHubOptions{});
  hub.Start();
  TestClock clock;
  CountingIds ids;
  SchedulerOptions options;
  options.late_arrival_window = std::chrono::seconds(10);  // bounded by the release below
  Scheduler scheduler(store, hub, clock, ids, options);
  auto put = [&](const std::string& resource, const std::string& ns, const std::string& name,
                 const json& body) { PutObject(store, ids, clock, resource, ns, name, body); };
  auto pod = [&](const std::string& name, const std::string& claim) {
    put("pods", "default", name,
        {{"spec",
          {{"containers", {{{"name", "c"}, {"image", "busybox"}}}},
           {"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", claim}}}}}},
         {"status", {{"phase", "Pending"}}}});
  };
  auto node_of = [&](const std::string& name) -> std::string {
    auto o = store.Get(model::ResourceKey{"pods", "default", name});
    if (!o.ok()) return "";
    return json::parse(o->body)["spec"].value("nodeName", "");
  };
  put("namespaces", "", "default", json::object());
  put("deviceclasses.resource.k8s.io", "", "gpu",
      {{"spec",
        {{"selectors", {{{"cel", {{"expression", "device.driver == 'gpu.example.com'"}}}}}}}}});
  put("nodes", "", "node-a", {{"spec", json::object()}});
  put("resourceslices.resource.k8s.io", "", "node-a-slice", NodeSliceBody("node-a", 2));
  put("resourceclaims.resource.k8s.io", "default", "c1", ClaimSpec());
  put("resourceclaims.resource.k8s.io", "default", "c2", ClaimSpec());
  pod("p1", "c1");

  // While p1's binding is held, p2 arrives; the pass must bind it before p1's commit is done.
  std::thread late([&] {
    store.WaitUntilHeld();
    pod("p2", "c2");
    for (int i = 0; i < 500 && node_of("p2").empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    store.Release();
  });
  auto stats = scheduler.RunOnce();
  late.join();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->bound, 2);
  EXPECT_EQ(node_of("p1"), "node-a");
  EXPECT_EQ(node_of("p2"), "node-a");
  // The next pass applies what the late round left (p1's and p2's own changes) and has nothing
  // to do.
  stats = scheduler.RunOnce();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->bound, 0);
  EXPECT_EQ(stats->unschedulable, 0);
  EXPECT_EQ(store.ListDeviceClaims()->size(), 2u);
  scheduler.Stop();
  hub.Stop();
}

TEST_F(SchedulerTest, TheLoopSchedulesOnChangesByItself) {
  Node("node-a", 1);
  scheduler_->Start();
  Put(kClaims, "default", "c", ClaimSpec());
  Pod("auto", {{"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "c"}}}}});
  json pod;
  for (int i = 0; i < 200; ++i) {
    pod = Body("pods", "auto");
    if (pod["spec"].contains("nodeName")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(pod["spec"]["nodeName"], "node-a");
  scheduler_->Stop();
}

}  // namespace
}  // namespace qm::service
