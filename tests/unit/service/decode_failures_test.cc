// Objects whose stored bodies do not decode, written straight into the store as a database edit
// or an older version would leave them: the scheduler never takes their devices for free, never
// allocates such a claim anew, and logs, counts and reports each object version once with a
// DecodeFailed Event.

#include "service/decode_failures.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/scheduler.h"
#include "store/memory_store.h"
#include "stored_objects.h"

namespace qm::service {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class FixedClock final : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override {
    return std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  }
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
constexpr char kSlices[] = "resourceslices.resource.k8s.io";
constexpr char kClasses[] = "deviceclasses.resource.k8s.io";
constexpr char kTaintRules[] = "devicetaintrules.resource.k8s.io";

json ClaimSpec() {
  return {{"devices",
           {{"requests",
             {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu"}, {"count", 1}}}}}}}}};
}

// An allocation result that names its device but does not decode (a capacity that is no
// quantity).
json BrokenResult(const std::string& device) {
  return {{"request", "gpu"},
          {"driver", "gpu.example.com"},
          {"pool", "node-a"},
          {"device", device},
          {"consumedCapacity", {{"memory", "lots"}}}};
}

class DecodeFailuresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hub_ = std::make_unique<WatchHub>(store_, WatchHubOptions{});
    hub_->Start();
    scheduler_ = std::make_unique<Scheduler>(store_, *hub_, clock_, ids_);
    Put("namespaces", "", "default", json::object());
    Put(kClasses, "", "gpu",
        {{"spec",
          {{"selectors", {{{"cel", {{"expression", "device.driver == 'gpu.example.com'"}}}}}}}}});
    Put("nodes", "", "node-a", {{"spec", json::object()}}, {{"kubernetes.io/hostname", "node-a"}});
  }
  void TearDown() override {
    scheduler_.reset();
    hub_->Stop();
  }

  // Stores `body` as it is: no codec, no validation.
  model::Object Put(const std::string& resource, const std::string& ns, const std::string& name,
                    const json& body, std::map<std::string, std::string> labels = {}) {
    return qm::testing::PutObject(store_, ids_, clock_, resource, ns, name, body,
                                  std::move(labels));
  }

  void Slice(int devices) {
    json list = json::array();
    for (int i = 0; i < devices; ++i) list.push_back({{"name", "gpu-" + std::to_string(i)}});
    Put(kSlices, "", "node-a-slice",
        {{"spec",
          {{"driver", "gpu.example.com"},
           {"nodeName", "node-a"},
           {"pool", {{"name", "node-a"}, {"generation", 1}, {"resourceSliceCount", 1}}},
           {"devices", list}}}});
  }

  void ClaimWithAllocation(const std::string& name, json allocation) {
    Put(kClaims, "default", name,
        {{"spec", ClaimSpec()}, {"status", {{"allocation", allocation}}}});
  }

  void Pod(const std::string& name, const std::string& claim) {
    Put("pods", "default", name,
        {{"spec",
          {{"containers", {{{"name", "c"}, {"image", "busybox"}}}},
           {"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", claim}}}}}},
         {"status", {{"phase", "Pending"}}}});
  }

  json Body(const std::string& resource, const std::string& name,
            const std::string& ns = "default") {
    auto o = store_.Get(model::ResourceKey{resource, ns, name});
    return o.ok() ? json::parse(o->body) : json();
  }

  PassStats Run() {
    auto stats = scheduler_->RunOnce();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? *stats : PassStats{};
  }

  // DecodeFailed Events about `name`.
  std::vector<json> DecodeEvents(const std::string& name) {
    std::vector<json> out;
    auto listed = store_.List(store::ListOptions{"events", "", "", "", 0});
    EXPECT_TRUE(listed.ok());
    for (const auto& e_ptr : listed->items) {
      const model::Object& e = *e_ptr;
      json body = json::parse(e.body);
      if (body["reason"] == "DecodeFailed" && body["involvedObject"]["name"] == name) {
        out.push_back(body);
      }
    }
    return out;
  }

  uint64_t Count(const std::string& resource) {
    auto counts = scheduler_->decode_failures().Counts();
    auto it = counts.find(resource);
    return it == counts.end() ? 0 : it->second;
  }

  std::set<std::string> AllocatedDevices() {
    std::set<std::string> out;
    auto listed = store_.List(store::ListOptions{kClaims, "", "", "", 0});
    for (const auto& c_ptr : listed->items) {
      const model::Object& c = *c_ptr;
      json body = json::parse(c.body);
      const json& results = body["status"]["allocation"]["devices"]["results"];
      if (c.meta.name == "broken" || !results.is_array()) continue;
      for (const auto& r : results) out.insert(r["device"].get<std::string>());
    }
    return out;
  }

  store::MemoryStore store_;
  FixedClock clock_;
  CountingIds ids_;
  std::unique_ptr<WatchHub> hub_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(DecodeFailuresTest, UndecodableAllocationKeepsItsDevicesInUse) {
  Slice(2);
  ClaimWithAllocation("broken", {{"devices", {{"results", {BrokenResult("gpu-0")}}}}});
  Put(kClaims, "default", "c1", {{"spec", ClaimSpec()}});
  Put(kClaims, "default", "c2", {{"spec", ClaimSpec()}});
  Pod("p1", "c1");
  Pod("p2", "c2");
  PassStats stats = Run();
  // Two devices, one held by the claim that does not decode: one pod fits, on gpu-1.
  EXPECT_EQ(stats.bound, 1);
  EXPECT_EQ(stats.unschedulable, 1);
  EXPECT_EQ(AllocatedDevices(), std::set<std::string>{"gpu-1"});

  EXPECT_EQ(Count(kClaims), 1u);
  auto events = DecodeEvents("broken");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_EQ(events[0]["involvedObject"]["kind"], "ResourceClaim");
  EXPECT_EQ(events[0]["involvedObject"]["namespace"], "default");
  EXPECT_THAT(events[0]["message"].get<std::string>(), HasSubstr("consumedCapacity"));
  EXPECT_THAT(events[0]["message"].get<std::string>(), HasSubstr("treated as in use"));

  // Once per object version: later passes neither count nor report it again.
  Run();
  Run();
  EXPECT_EQ(Count(kClaims), 1u);
  EXPECT_EQ(DecodeEvents("broken").size(), 1u);
}

// An allocation whose results cannot be read at all could hold any device: none is handed out.
TEST_F(DecodeFailuresTest, UnreadableAllocationBlocksEveryDevice) {
  Slice(2);
  ClaimWithAllocation("broken", {{"devices", {{"results", "gpu-0 and gpu-1"}}}});
  Put(kClaims, "default", "c1", {{"spec", ClaimSpec()}});
  Pod("p1", "c1");
  PassStats stats = Run();
  EXPECT_EQ(stats.bound, 0);
  EXPECT_EQ(stats.unschedulable, 1);
  EXPECT_TRUE(AllocatedDevices().empty());
  EXPECT_EQ(DecodeEvents("broken").size(), 1u);

  // Deleting it frees them.
  ASSERT_TRUE(store_.Delete(model::ResourceKey{kClaims, "default", "broken"}, 0).ok());
  Put(kClaims, "default", "c2", {{"spec", ClaimSpec()}});
  Pod("p2", "c2");
  EXPECT_EQ(Run().bound, 1);
}

// A result that names its pool but not its device holds the whole pool.
TEST_F(DecodeFailuresTest, ResultWithoutADeviceBlocksItsPool) {
  Slice(2);
  json result = BrokenResult("gpu-0");
  result["device"] = 7;
  ClaimWithAllocation("broken", {{"devices", {{"results", {result}}}}});
  Put(kClaims, "default", "c1", {{"spec", ClaimSpec()}});
  Pod("p1", "c1");
  EXPECT_EQ(Run().bound, 0);
  EXPECT_TRUE(AllocatedDevices().empty());
}

// A pod using a claim whose allocation does not decode is not scheduled, and the claim is not
// allocated a second time.
TEST_F(DecodeFailuresTest, ClaimWithUndecodableAllocationIsNotAllocatedAgain) {
  Slice(2);
  json allocation = {{"devices", {{"results", {BrokenResult("gpu-0")}}}}};
  ClaimWithAllocation("broken", allocation);
  Pod("p1", "broken");
  PassStats stats = Run();
  EXPECT_EQ(stats.bound, 0);
  EXPECT_EQ(stats.unschedulable, 1);
  EXPECT_EQ(Body(kClaims, "broken")["status"]["allocation"], allocation);
  EXPECT_THAT(Body("pods", "p1")["status"]["conditions"][0]["message"].get<std::string>(),
              HasSubstr("status.allocation cannot be decoded"));
  auto ledger = store_.ListDeviceClaims();
  ASSERT_TRUE(ledger.ok());
  EXPECT_TRUE(ledger->empty());
}

TEST_F(DecodeFailuresTest, UndecodableSliceClassAndTaintRuleAreReported) {
  Slice(1);
  Put(kSlices, "", "bad-slice",
      {{"spec",
        {{"driver", "gpu.example.com"},
         {"nodeName", "node-b"},
         {"pool", {{"name", "node-b"}, {"generation", "one"}, {"resourceSliceCount", 1}}},
         {"devices", json::array()}}}});
  Put(kClasses, "", "bad-class", {{"spec", {{"selectors", "all of them"}}}});
  // A broken rule for another pool: it taints what it may select (node-b's devices), not node-a's.
  Put(kTaintRules, "", "bad-rule",
      {{"spec", {{"deviceSelector", {{"pool", "node-b"}, {"device", 5}}}}}});
  Put(kClaims, "default", "c1", {{"spec", ClaimSpec()}});
  Pod("p1", "c1");
  EXPECT_EQ(Run().bound, 1);  // the good inventory is still used

  EXPECT_EQ(Count(kSlices), 1u);
  EXPECT_EQ(Count(kClasses), 1u);
  EXPECT_EQ(Count(kTaintRules), 1u);
  for (const std::string name : {"bad-slice", "bad-class", "bad-rule"}) {
    auto events = DecodeEvents(name);
    ASSERT_EQ(events.size(), 1u) << name;
    // Cluster-scoped objects: the event lives in "default" and names no namespace.
    EXPECT_FALSE(events[0]["involvedObject"].contains("namespace")) << name;
  }
  auto listed = store_.List(store::ListOptions{"events", "default", "", "", 0});
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(DecodeEvents("bad-slice")[0]["involvedObject"]["kind"], "ResourceSlice");

  // A new version of a broken object is a new report.
  auto bad = store_.Get(model::ResourceKey{kClasses, "", "bad-class"});
  ASSERT_TRUE(bad.ok());
  model::Object next = *bad;
  next.body = json({{"spec", {{"selectors", "still not a list"}}}}).dump();
  ASSERT_TRUE(store_.Update(next, bad->meta.resource_version).ok());
  Run();
  EXPECT_EQ(Count(kClasses), 2u);
  EXPECT_EQ(DecodeEvents("bad-class").size(), 2u);
}

// A DeviceTaintRule that does not decode keeps new pods off every device it may select (a
// selector field it cannot read selects everything, as an absent one does) instead of being
// ignored; pods already bound stay (NoSchedule, nothing is evicted). Fixed, the devices are free.
TEST_F(DecodeFailuresTest, UndecodableTaintRuleKeepsNewWorkOffItsDevices) {
  Slice(2);
  Put(kClaims, "default", "c0", {{"spec", ClaimSpec()}});
  Pod("p0", "c0");
  ASSERT_EQ(Run().bound, 1);
  const model::Object bad =
      Put(kTaintRules, "", "drain-node-a",
          {{"spec",
            {{"deviceSelector", {{"pool", "node-a"}, {"device", json::array({"gpu-1"})}}},
             {"taint", {{"key", "maintenance"}, {"effect", "NoExecute"}}}}}});
  Put(kClaims, "default", "c1", {{"spec", ClaimSpec()}});
  Pod("p1", "c1");
  EXPECT_EQ(Run().bound, 0);  // gpu-1 is free but may be what the rule meant
  EXPECT_EQ(DecodeEvents("drain-node-a").size(), 1u);
  EXPECT_TRUE(Body(kClaims, "c0")["status"].contains("allocation"));  // not evicted
  EXPECT_EQ(Body("pods", "p0")["spec"].value("nodeName", ""), "node-a");
  EXPECT_FALSE(Body(kClaims, "c1")["status"].contains("allocation"));

  model::Object fixed = bad;
  fixed.body = json({{"spec",
                      {{"deviceSelector", {{"pool", "node-a"}, {"device", "gpu-0"}}},
                       {"taint", {{"key", "maintenance"}, {"effect", "NoSchedule"}}}}}})
                   .dump();
  ASSERT_TRUE(store_.Update(fixed, bad.meta.resource_version).ok());
  // A new pod binds at once (p1 waits out its backoff, on this test's fixed clock forever).
  Put(kClaims, "default", "c2", {{"spec", ClaimSpec()}});
  Pod("p2", "c2");
  EXPECT_EQ(Run().bound, 1);
  EXPECT_EQ(Body(kClaims, "c2")["status"]["allocation"]["devices"]["results"][0]["device"],
            "gpu-1");
}

// Replicas reporting the same object version write one Event between them.
TEST(DecodeFailedEventTest, NamedAfterTheObjectVersion) {
  model::Object claim;
  claim.resource = kClaims;
  claim.meta.namespace_ = "team-a";
  claim.meta.name = "c";
  claim.meta.uid = "u";
  claim.meta.resource_version = 42;
  auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  model::Object a = DecodeFailedEvent(claim, "m", now, "x", "1");
  model::Object b = DecodeFailedEvent(claim, "m", now, "y", "2");
  EXPECT_EQ(a.meta.name, b.meta.name);
  EXPECT_EQ(a.meta.namespace_, "team-a");
  EXPECT_EQ(a.fields.at("involvedObject.name"), "c");
  EXPECT_EQ(a.fields.at("reason"), "DecodeFailed");
  claim.meta.resource_version = 43;
  EXPECT_NE(DecodeFailedEvent(claim, "m", now, "x", "1").meta.name, a.meta.name);
  claim.meta.name = std::string(253, 'n');
  EXPECT_LE(DecodeFailedEvent(claim, "m", now, "x", "1").meta.name.size(), 253u);
}

}  // namespace
}  // namespace qm::service
