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
  d.claims["u1"] = c;
  d.unreported["u2"] = UnpreparedClaim{"ns", "gone", "u2"};
  return d;
}

TEST(CheckpointTest, RoundTrips) {
  auto decoded = DecodeCheckpoint(EncodeCheckpoint(Example()));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, Example());
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
