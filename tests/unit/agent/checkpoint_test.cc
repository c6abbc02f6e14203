// The checkpoint of prepared claims: round trip, corrupt files, another node's file.
#include "agent/checkpoint.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace qm::agent {
namespace {

using ::testing::HasSubstr;

CheckpointData Example() {
  CheckpointData d;
  d.node = "gpu-node-a";
  d.resource_version = 4711;
  PreparedClaim c;
  c.namespace_ = "ns";
  c.name = "claim";
  c.uid = "u1";
  c.allocation_id = "00ff";
  c.reported = true;
  c.devices.push_back({"gpu", "gpu-node-a", "gpu-0", "", {"k8s.gpu.nvidia.com/claim=u1-gpu-0"}});
  c.devices.push_back({"gpu", "gpu-node-a", "gpu-1", "s1", {}});
  // A MIG placement's device, with the instance the agent created for it.
  c.devices.push_back(
      {"mig",
       "gpu-node-a",
       "gpu-2-mig-1g-5gb-at-3",
       "",
       {"k8s.gpu.nvidia.com/claim=u1-gpu-2-mig-1g-5gb-at-3"},
       MigInstance{
           "GPU-2", 0, 3, 1, 7, 0, "MIG-7", {"/dev/nvidia2", "/dev/nvidia-caps/nvidia-cap66"}}});
  d.claims["u1"] = c;
  d.unreported["u2"] = UnpreparedClaim{"ns", "gone", "u2"};
  return d;
}

TEST(CheckpointTest, RoundTrips) {
  auto decoded = DecodeCheckpoint(EncodeCheckpoint(Example()));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, Example());
}

TEST(CheckpointTest, RecordsTheMigInstancesOfDevices) {
  const std::string text = EncodeCheckpoint(Example());
  EXPECT_THAT(text, HasSubstr(R"("gpuInstanceID": 7)"));
  EXPECT_THAT(text, HasSubstr(R"("placementStart": 3)"));
  auto decoded = DecodeCheckpoint(text);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const auto& devices = decoded->claims.at("u1").devices;
  EXPECT_FALSE(devices[0].mig_instance.has_value());
  ASSERT_TRUE(devices[2].mig_instance.has_value());
  EXPECT_EQ(devices[2].mig_instance->uuid, "MIG-7");
  EXPECT_EQ(devices[2].mig_instance->compute_instance_id, 0);
  // An instance record without its ids is corrupt, not an instance with made-up ids.
  std::string broken = text;
  broken.replace(broken.find(R"("gpuInstanceID": 7)"), 18, R"("gpuInstanceID": "x")");
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeCheckpoint(broken).status()));
}

TEST(CheckpointTest, CorruptTextIsInvalid) {
  for (const char* text : {"", "{", "[]", R"({"version": 2})",
                           R"({"version": 1, "claims": {"u": {"namespace": 1}}})"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(DecodeCheckpoint(text).status())) << text;
  }
}

TEST(CheckpointTest, LoadSaveAndNodeCheck) {
  char tmpl[] = "/tmp/qm-ckpt-test-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  Checkpoint cp(dir + "/checkpoint.json");
  auto empty = cp.Load("gpu-node-a");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->claims.empty());
  EXPECT_EQ(empty->node, "gpu-node-a");
  ASSERT_TRUE(cp.Save(Example()).ok());
  struct stat st {};
  ASSERT_EQ(stat(cp.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto loaded = cp.Load("gpu-node-a");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, Example());
  auto other = cp.Load("gpu-node-b");
  EXPECT_TRUE(absl::IsInvalidArgument(other.status()));
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("belongs to node \"gpu-node-a\""));
  std::ofstream(cp.path()) << "garbage";
  EXPECT_TRUE(absl::IsInvalidArgument(cp.Load("gpu-node-a").status()));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace qm::agent
