// service::InventoryCache over the in-memory store and a real WatchHub: one inventory per state
// of the ResourceSlices, DeviceClasses and DeviceTaintRules, reused while only other kinds
// change, and built ahead of the next Get by the prewarming thread while the views are in use.

#include "service/inventory_cache.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/id_generator.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/object_service.h"
#include "service/watch_hub.h"
#include "store/memory_store.h"

namespace qm::service {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr char kSlices[] = "resourceslices.resource.k8s.io";

class InventoryCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { hub_.Start(); }
  void TearDown() override {
    cache_.reset();
    hub_.Stop();
  }

  // Stores a ResourceSlice of `devices` GPUs on `node` (created, or replaced when it exists).
  void PutSlice(const std::string& node, int devices) {
    json list = json::array();
    for (int i = 0; i < devices; ++i) list.push_back({{"name", "gpu-" + std::to_string(i)}});
    model::Object o;
    o.resource = kSlices;
    o.meta.name = node + "-slice";
    o.meta.uid = "uid-" + node;
    o.meta.generation = 1;
    o.meta.creation_timestamp = clock_.Now();
    o.body = json{{"spec",
                   {{"driver", "gpu.example.com"},
                    {"nodeName", node},
                    {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
                    {"devices", list}}}}
                 .dump();
    auto stored = store_.Get(o.Key());
    auto put = stored.ok() ? store_.Update(o, 0) : store_.Create(o);
    ASSERT_TRUE(put.ok()) << put.status();
  }

  void PutPod(const std::string& name) {
    model::Object o;
    o.resource = "pods";
    o.meta.namespace_ = "default";
    o.meta.name = name;
    o.meta.uid = "uid-" + name;
    o.body = R"({"spec":{"containers":[{"name":"c","image":"busybox"}]}})";
    ASSERT_TRUE(store_.Create(o).ok());
  }

  size_t Devices() {
    auto snapshot = cache_->Get();
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    return snapshot.ok() ? (*snapshot)->inventory->devices().size() : 0;
  }

  // True once `builds()` reaches `n` (polled for up to five seconds).
  bool BuildsReach(uint64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (cache_->builds() < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    return cache_->builds() >= n;
  }

  SystemClock clock_;
  RandomIdGenerator ids_;
  store::MemoryStore store_;
  WatchHub hub_{store_, WatchHubOptions{}};
  ObjectService objects_{store_, clock_, ids_, &hub_};
  std::unique_ptr<InventoryCache> cache_ = std::make_unique<InventoryCache>(objects_);
};

TEST_F(InventoryCacheTest, OneInventoryPerStateOfTheDeviceKinds) {
  PutSlice("node-a", 2);
  EXPECT_EQ(Devices(), 2u);
  auto first = cache_->Get();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(cache_->builds(), 1u);

  // Pods and claims change all the time; the inventory stays.
  PutPod("p1");
  auto after_pod = cache_->Get();
  ASSERT_TRUE(after_pod.ok());
  EXPECT_EQ(after_pod->get(), first->get());
  EXPECT_EQ(cache_->builds(), 1u);

  // A slice written by this process is seen by the very next Get (read your writes).
  PutSlice("node-a", 3);
  EXPECT_EQ(Devices(), 3u);
  EXPECT_EQ(cache_->builds(), 2u);
  PutSlice("node-b", 1);
  EXPECT_EQ(Devices(), 4u);
  EXPECT_EQ(cache_->builds(), 3u);
  // The snapshot handed out before stays whole.
  EXPECT_EQ((*first)->inventory->devices().size(), 2u);
}

TEST_F(InventoryCacheTest, ARebuildDecodesOnlyTheSlicesThatChanged) {
  PutSlice("node-a", 2);
  PutSlice("node-b", 1);
  auto first = cache_->Get();
  ASSERT_TRUE(first.ok());
  PutSlice("node-b", 3);
  auto second = cache_->Get();
  ASSERT_TRUE(second.ok());
  const auto& before = (*first)->inventory->slices();
  const auto& after = (*second)->inventory->slices();
  ASSERT_EQ(before.size(), 2u);
  ASSERT_EQ(after.size(), 2u);
  // node-a's slice is the same decoded object; node-b's is new, with its three devices.
  EXPECT_EQ(after[0].slice->node_name, "node-a");
  EXPECT_EQ(after[0].slice.get(), before[0].slice.get());
  EXPECT_NE(after[1].slice.get(), before[1].slice.get());
  EXPECT_EQ(after[1].slice->devices.size(), 3u);
  EXPECT_EQ((*second)->inventory->devices().size(), 5u);
}

TEST_F(InventoryCacheTest, PrewarmingBuildsOnceTheKindsSettleWhileTheViewsAreInUse) {
  cache_->StartPrewarming(milliseconds(20), std::chrono::minutes(10));
  PutSlice("node-a", 2);
  EXPECT_EQ(Devices(), 2u);
  ASSERT_EQ(cache_->builds(), 1u);

  // A change: the next inventory is built without a Get, and the Get then finds it ready.
  PutSlice("node-a", 5);
  ASSERT_TRUE(BuildsReach(2));
  EXPECT_EQ(Devices(), 5u);
  EXPECT_EQ(cache_->builds(), 2u);

  // Other kinds do not count as a change.
  PutPod("p1");
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(cache_->builds(), 2u);
}

TEST_F(InventoryCacheTest, NothingIsBuiltAheadWhileNobodyLooks) {
  cache_->StartPrewarming(milliseconds(20), std::chrono::minutes(0));
  PutSlice("node-a", 2);
  EXPECT_EQ(Devices(), 2u);
  PutSlice("node-a", 4);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(cache_->builds(), 1u);  // the last view was longer ago than `idle` (0)
  EXPECT_EQ(Devices(), 4u);
  EXPECT_EQ(cache_->builds(), 2u);
}

}  // namespace
}  // namespace qm::service
