// ClassifyEvent: which published devices a device event makes unhealthy, and which events
// (NVIDIA's application XIDs, corrected ECC errors, unknown GPUs) change nothing.
#include "agent/health.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace qm::agent {
namespace {

using ::testing::ElementsAre;

constexpr char kGpu0[] = "GPU-00000000-0000-4000-8000-000000000000";
constexpr char kGpu1[] = "GPU-11111111-0000-4000-8000-000000000000";

// gpu-0 whole; GPU 1 in MIG mode with two MIG devices (GI 1/CI 0 and GI 2/CI 0) and one whose
// ids are unknown (as simulated MIG devices are).
Inventory TwoGpus() {
  Inventory inv;
  auto add = [&](const std::string& name, LocalDevice local) {
    model::Device d;
    d.name = name;
    inv.devices.push_back(d);
    inv.local[name] = std::move(local);
  };
  add("gpu-0", LocalDevice{kGpu0, 0, "", {"/dev/nvidia0"}});
  LocalDevice a{"MIG-a", 1, kGpu1, {"/dev/nvidia1"}};
  a.gpu_instance_id = 1;
  a.compute_instance_id = 0;
  add("gpu-1-mig-3g-40gb-0", a);
  LocalDevice b{"MIG-b", 1, kGpu1, {"/dev/nvidia1"}};
  b.gpu_instance_id = 2;
  b.compute_instance_id = 0;
  add("gpu-1-mig-2g-20gb-0", b);
  return inv;
}

DeviceEvent Xid(const std::string& uuid, uint64_t xid, int64_t gi = -1, int64_t ci = -1) {
  return DeviceEvent{uuid, kEventXidCriticalError, xid, gi, ci};
}

TEST(HealthTest, ACriticalXidMakesTheWholeGpuUnhealthy) {
  auto change = ClassifyEvent(Xid(kGpu0, 79), TwoGpus(), DefaultIgnoredXids());
  ASSERT_TRUE(change.has_value());
  EXPECT_THAT(change->devices, ElementsAre("gpu-0"));
  EXPECT_EQ(change->reason, "XidCriticalError");
  EXPECT_EQ(change->message, std::string("XID 79 on ") + kGpu0 + ": GPU has fallen off the bus");
}

TEST(HealthTest, NvidiasApplicationXidsAreIgnoredByDefault) {
  EXPECT_EQ(DefaultIgnoredXids(), (std::set<uint64_t>{13, 31, 43, 45, 68, 109}));
  for (uint64_t xid : {13, 31, 43, 45, 68, 109}) {
    EXPECT_FALSE(ClassifyEvent(Xid(kGpu0, xid), TwoGpus(), DefaultIgnoredXids()).has_value())
        << "XID " << xid;
  }
  // With another list, XID 13 counts and 79 does not.
  EXPECT_TRUE(ClassifyEvent(Xid(kGpu0, 13), TwoGpus(), {79}).has_value());
  EXPECT_FALSE(ClassifyEvent(Xid(kGpu0, 79), TwoGpus(), {79}).has_value());
}

TEST(HealthTest, AnEventWithInstanceIdsConcernsThatMigDeviceOnly) {
  auto change = ClassifyEvent(Xid(kGpu1, 94, 2, 0), TwoGpus(), DefaultIgnoredXids());
  ASSERT_TRUE(change.has_value());
  EXPECT_THAT(change->devices, ElementsAre("gpu-1-mig-2g-20gb-0"));
  // Another compute instance of that GPU instance: no published device.
  EXPECT_FALSE(ClassifyEvent(Xid(kGpu1, 94, 2, 5), TwoGpus(), {}).has_value());
}

TEST(HealthTest, AnEventWithoutInstanceIdsConcernsEveryMigDeviceOfTheGpu) {
  auto change = ClassifyEvent(Xid(kGpu1, 48), TwoGpus(), DefaultIgnoredXids());
  ASSERT_TRUE(change.has_value());
  EXPECT_THAT(change->devices, ElementsAre("gpu-1-mig-3g-40gb-0", "gpu-1-mig-2g-20gb-0"));
  EXPECT_EQ(change->message, std::string("XID 48 on ") + kGpu1 + ": double-bit ECC error");
}

TEST(HealthTest, EccErrors) {
  auto dbe = ClassifyEvent(DeviceEvent{kGpu0, kEventDoubleBitEccError, 0, -1, -1}, TwoGpus(),
                           DefaultIgnoredXids());
  ASSERT_TRUE(dbe.has_value());
  EXPECT_THAT(dbe->devices, ElementsAre("gpu-0"));
  EXPECT_EQ(dbe->reason, "DoubleBitEccError");
  // Corrected errors change nothing.
  EXPECT_FALSE(ClassifyEvent(DeviceEvent{kGpu0, kEventSingleBitEccError, 0, -1, -1}, TwoGpus(),
                             DefaultIgnoredXids())
                   .has_value());
}

TEST(HealthTest, AGpuTheAgentDoesNotPublishChangesNothing) {
  EXPECT_FALSE(ClassifyEvent(Xid("GPU-unknown", 79), TwoGpus(), DefaultIgnoredXids()).has_value());
}

TEST(HealthTest, ParsesXidLists) {
  EXPECT_EQ(*ParseXidList("13, 31,43"), (std::set<uint64_t>{13, 31, 43}));
  EXPECT_TRUE(ParseXidList("")->empty());
  auto bad = ParseXidList("13,x1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "not an XID: \"x1\"");
}

TEST(HealthTest, AnInstanceEventConcernsOnlyThePlacementWithThatInstance) {
  // Dynamic MIG: three placements of GPU 1, one with an instance (GI 3, CI 0).
  Inventory inv;
  for (const char* name :
       {"gpu-1-mig-1g-10gb-at-0", "gpu-1-mig-1g-10gb-at-1", "gpu-1-mig-7g-80gb-at-0"}) {
    model::Device d;
    d.name = name;
    inv.devices.push_back(d);
    LocalDevice l{"", 1, kGpu1, {"/dev/nvidia1"}};
    l.mig_placement = LocalDevice::MigPlacement{0, 0, 1};
    inv.local[name] = l;
  }
  inv.local["gpu-1-mig-1g-10gb-at-1"].uuid = "MIG-c";
  inv.local["gpu-1-mig-1g-10gb-at-1"].gpu_instance_id = 3;
  inv.local["gpu-1-mig-1g-10gb-at-1"].compute_instance_id = 0;
  auto change = ClassifyEvent(Xid(kGpu1, 79, 3, 0), inv, DefaultIgnoredXids());
  ASSERT_TRUE(change.has_value());
  EXPECT_THAT(change->devices, ElementsAre("gpu-1-mig-1g-10gb-at-1"));
  // An event of the whole GPU concerns every placement.
  change = ClassifyEvent(Xid(kGpu1, 79), inv, DefaultIgnoredXids());
  ASSERT_TRUE(change.has_value());
  EXPECT_EQ(change->devices.size(), 3u);
}

}  // namespace
}  // namespace qm::agent
