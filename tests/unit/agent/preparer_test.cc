// Preparing and unpreparing claims against a real directory: CDI specs and the checkpoint stay in
// agreement, prepare is idempotent per allocation, bad assignments prepare nothing, and Recover
// repairs what an interrupted agent left behind.
#include "agent/preparer.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/cdi.h"
#include "agent/simulated_source.h"

namespace qm::agent {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kUid[] = "72bfb82f-dcf3-4617-99f8-99aec37e963e";

class PreparerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/qm-prep-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    cdi_ = dir_ + "/cdi";
    mkdir(cdi_.c_str(), 0755);
    checkpoint_ = std::make_unique<Checkpoint>(dir_ + "/checkpoint.json");
    data_.node = "node-a";
    Reopen();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A fresh Preparer over what is on disk, as after an agent restart.
  void Reopen() {
    auto loaded = checkpoint_->Load("node-a");
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    data_ = *loaded;
    preparer_ = std::make_unique<Preparer>("node-a", "node-a", cdi_, &data_, checkpoint_.get());
    auto sim = ParseSimulation("gpus: [{model: NVIDIA A100-SXM4-80GB, memory: 80Gi, count: 2}]");
    auto inv = BuildInventory(*sim, "node-a");
    preparer_->SetInventory(*inv);
    uuid0_ = inv->local.at("gpu-0").uuid;
  }

  ClaimAssignment Claim(const std::string& allocation_id = "a1",
                        std::vector<std::string> devices = {"gpu-0"}) {
    ClaimAssignment c;
    c.namespace_ = "ns";
    c.name = "claim";
    c.uid = kUid;
    c.allocation_id = allocation_id;
    for (const auto& d : devices) c.devices.push_back({"gpu", "gpu.nvidia.com", "node-a", d, ""});
    return c;
  }

  json Spec() {
    std::ifstream in(CdiSpecPath(cdi_, kUid));
    std::stringstream ss;
    ss << in.rdbuf();
    return json::parse(ss.str());
  }

  std::string dir_, cdi_, uuid0_;
  std::unique_ptr<Checkpoint> checkpoint_;
  CheckpointData data_;
  std::unique_ptr<Preparer> preparer_;
};

TEST_F(PreparerTest, PrepareWritesSpecAndCheckpoint) {
  auto out = preparer_->Prepare(Claim());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->error, IsEmpty());
  EXPECT_FALSE(out->already_prepared);
  ASSERT_EQ(out->devices.size(), 1u);
  const std::string id = std::string("k8s.gpu.nvidia.com/claim=") + kUid + "-gpu-0";
  EXPECT_THAT(out->devices[0].cdi_device_ids, ElementsAre(id));
  json spec = Spec();
  EXPECT_EQ(spec["devices"][0]["name"], std::string(kUid) + "-gpu-0");
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidia0");
  EXPECT_THAT(spec["containerEdits"]["env"].dump(), HasSubstr("NVIDIA_VISIBLE_DEVICES=" + uuid0_));
  Reopen();
  ASSERT_TRUE(data_.claims.contains(kUid));
  EXPECT_EQ(data_.claims[kUid].allocation_id, "a1");
  EXPECT_FALSE(data_.claims[kUid].reported);
  ASSERT_TRUE(preparer_->MarkPreparedReported(kUid).ok());
  Reopen();
  EXPECT_TRUE(data_.claims[kUid].reported);
}

TEST_F(PreparerTest, PrepareIsIdempotentPerAllocation) {
  ASSERT_TRUE(preparer_->Prepare(Claim()).ok());
  // Remove the file behind the preparer's back: an idempotent prepare must not touch disk.
  std::filesystem::remove(CdiSpecPath(cdi_, kUid));
  auto again = preparer_->Prepare(Claim());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_prepared);
  EXPECT_EQ(again->devices.size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(CdiSpecPath(cdi_, kUid)));
}

TEST_F(PreparerTest, ANewAllocationReplacesTheOldOne) {
  ASSERT_TRUE(preparer_->Prepare(Claim("a1", {"gpu-0"})).ok());
  auto out = preparer_->Prepare(Claim("a2", {"gpu-1"}));
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->already_prepared);
  EXPECT_EQ(Spec()["devices"][0]["name"], std::string(kUid) + "-gpu-1");
  EXPECT_EQ(data_.claims[kUid].allocation_id, "a2");
  // Re-preparing is one outcome to report, not an unprepare followed by a prepare.
  EXPECT_THAT(data_.unreported, IsEmpty());
}

TEST_F(PreparerTest, BadAssignmentsPrepareNothing) {
  auto unknown = preparer_->Prepare(Claim("a1", {"gpu-0", "gpu-9"}));
  ASSERT_TRUE(unknown.ok());
  EXPECT_THAT(unknown->error,
              HasSubstr("gpu.nvidia.com/node-a/gpu-9: not published by this agent"));
  EXPECT_THAT(unknown->devices, IsEmpty());
  ClaimAssignment other_pool = Claim();
  other_pool.devices[0].pool = "node-b";
  EXPECT_THAT(preparer_->Prepare(other_pool)->error, HasSubstr("not a device of this agent"));
  ClaimAssignment evil = Claim();
  evil.uid = "../../etc";
  EXPECT_THAT(preparer_->Prepare(evil)->error, HasSubstr("is not a UUID"));
  EXPECT_THAT(preparer_->Prepare(Claim("a1", {}))->error, HasSubstr("no devices"));
  EXPECT_THAT(ListCdiSpecs(cdi_), IsEmpty());
  EXPECT_THAT(data_.claims, IsEmpty());
}

TEST_F(PreparerTest, UnprepareRemovesSpecAndRecordsTheReport) {
  ASSERT_TRUE(preparer_->Prepare(Claim()).ok());
  ASSERT_TRUE(preparer_->Unprepare(kUid, "ns", "claim").ok());
  EXPECT_FALSE(std::filesystem::exists(CdiSpecPath(cdi_, kUid)));
  Reopen();
  EXPECT_THAT(data_.claims, IsEmpty());
  ASSERT_TRUE(data_.unreported.contains(kUid));
  ASSERT_TRUE(preparer_->MarkUnpreparedReported(kUid).ok());
  Reopen();
  EXPECT_THAT(data_.unreported, IsEmpty());
  // Unpreparing what is not held is fine.
  EXPECT_TRUE(preparer_->Unprepare(kUid, "ns", "claim").ok());
}

TEST_F(PreparerTest, RecoverRepairsInterruptedWork) {
  // A spec without a checkpoint entry (crash after writing the spec) ...
  const std::string orphan = "11111111-2222-3333-4444-555555555555";
  ASSERT_TRUE(WriteCdiSpec(cdi_, orphan, CdiSpec{}).ok());
  // ... and a checkpoint entry without its spec (crash after removing the spec).
  ASSERT_TRUE(preparer_->Prepare(Claim()).ok());
  std::filesystem::remove(CdiSpecPath(cdi_, kUid));
  Reopen();
  ASSERT_TRUE(preparer_->Recover().ok());
  EXPECT_THAT(ListCdiSpecs(cdi_), IsEmpty());
  EXPECT_THAT(data_.claims, IsEmpty());
  Reopen();
  EXPECT_THAT(data_.claims, IsEmpty());
  // Nothing to repair: Recover keeps what agrees.
  ASSERT_TRUE(preparer_->Prepare(Claim()).ok());
  ASSERT_TRUE(preparer_->Recover().ok());
  EXPECT_TRUE(data_.claims.contains(kUid));
  EXPECT_THAT(ListCdiSpecs(cdi_), ElementsAre(kUid));
}

TEST_F(PreparerTest, ResourceVersionOnlyMovesForward) {
  ASSERT_TRUE(preparer_->SetResourceVersion(10).ok());
  ASSERT_TRUE(preparer_->SetResourceVersion(5).ok());
  Reopen();
  EXPECT_EQ(data_.resource_version, 10);
}

}  // namespace
}  // namespace qm::agent
