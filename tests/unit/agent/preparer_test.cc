// Preparing and unpreparing claims against a real directory: CDI specs and the checkpoint stay in
// agreement, prepare is idempotent per allocation, bad assignments prepare nothing, and Recover
// repairs what an interrupted agent left behind.
#include "agent/preparer.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

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
using ::testing::Not;

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
    for (const auto& d : devices)
      c.devices.push_back({"gpu", "gpu.nvidia.com", "node-a", d, "", {}});
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

// --- opaque configs: sharing strategies and consumable-capacity shares -----------------------

OpaqueConfig Config(const std::string& parameters, std::vector<std::string> requests = {},
                    const std::string& source = "FromClaim") {
  return OpaqueConfig{source, std::move(requests), "gpu.nvidia.com", parameters};
}

std::string Env(const json& edits) { return edits.contains("env") ? edits["env"].dump() : ""; }

TEST_F(PreparerTest, TimeSlicingSetsTheIntervalOfTheDevice) {
  ClaimAssignment c = Claim("a1", {"gpu-0", "gpu-1"});
  c.configs = {Config(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
      "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}})")};
  auto out = preparer_->Prepare(c);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_THAT(out->error, IsEmpty());
  json spec = Spec();
  EXPECT_THAT(Env(spec["devices"][0]["containerEdits"]),
              HasSubstr("QM_DEVICE_0_TIMESLICE_INTERVAL=Long"));
  EXPECT_THAT(Env(spec["devices"][1]["containerEdits"]),
              HasSubstr("QM_DEVICE_1_TIMESLICE_INTERVAL=Long"));
  EXPECT_THAT(Env(spec["containerEdits"]), Not(HasSubstr("CUDA_MPS")));
  EXPECT_FALSE(spec["containerEdits"].contains("mounts"));
}

// With nvidia-smi (the fake in tests/agent/fake_nvidia_smi), each whole GPU of the claim goes to
// the default compute mode and gets the time slice (Long = 3), before the spec is written; a GPU
// that refuses fails the claim and nothing is prepared.
TEST_F(PreparerTest, TimeSlicingSetsTheGpusTimeSliceThroughNvidiaSmi) {
  const std::string log = dir_ + "/nvidia-smi.log";
  setenv("QM_FAKE_NVIDIA_SMI_LOG", log.c_str(), 1);
  unsetenv("QM_FAKE_NVIDIA_SMI_FAIL");
  TimeSlicer slicer(QM_FAKE_NVIDIA_SMI, dir_ + "/nvidia-smi.out");
  preparer_->SetTimeSlicer(&slicer);
  ClaimAssignment c = Claim("a1", {"gpu-0"});
  c.configs = {Config(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
      "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}})")};
  auto out = preparer_->Prepare(c);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_THAT(out->error, IsEmpty());
  auto calls = [&] {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  EXPECT_EQ(calls(),
            "-i " + uuid0_ + " -c DEFAULT\ncompute-policy -i " + uuid0_ + " --set-timeslice 3\n");
  // A claim without a sharing config leaves the GPU alone.
  ASSERT_TRUE(preparer_->Unprepare(kUid, "ns", "claim").ok());
  std::filesystem::remove(log);
  ASSERT_THAT(preparer_->Prepare(Claim("a2", {"gpu-1"}))->error, IsEmpty());
  EXPECT_EQ(calls(), "");
  ASSERT_TRUE(preparer_->Unprepare(kUid, "ns", "claim").ok());

  // The GPU refuses the setting: the claim fails with nvidia-smi's words, no spec is written.
  setenv("QM_FAKE_NVIDIA_SMI_FAIL", "compute-policy", 1);
  auto refused = preparer_->Prepare(c);
  unsetenv("QM_FAKE_NVIDIA_SMI_FAIL");
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_THAT(refused->error, HasSubstr("setting the time slice of GPU " + uuid0_ + " to Long"));
  EXPECT_THAT(refused->error, HasSubstr("Setting the timeslice is not supported"));
  EXPECT_TRUE(refused->devices.empty());
  EXPECT_FALSE(std::filesystem::exists(CdiSpecPath(cdi_, kUid)));
  // No nvidia-smi at all: the error says how to name it.
  TimeSlicer missing(dir_ + "/no-such-nvidia-smi", dir_ + "/nvidia-smi.out");
  preparer_->SetTimeSlicer(&missing);
  auto absent = preparer_->Prepare(c);
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_THAT(absent->error, HasSubstr("--nvidia-smi PATH"));
}

TEST(TimeSliceTest, IntervalsAreNvidiaSmisValues) {
  EXPECT_EQ(TimeSliceValue("Default"), 0);
  EXPECT_EQ(TimeSliceValue("Short"), 1);
  EXPECT_EQ(TimeSliceValue("Medium"), 2);
  EXPECT_EQ(TimeSliceValue("Long"), 3);
  EXPECT_EQ(TimeSliceValue("long"), -1);
}

TEST_F(PreparerTest, MpsGivesTheClaimAPipeDirectoryAndLimits) {
  preparer_->SetMpsRoot(dir_ + "/mps");
  ClaimAssignment c = Claim("a1", {"gpu-0", "gpu-1"});
  // The class asks for time-slicing; the claim's own config (later) wins.
  c.configs = {Config(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                   "sharing": {"strategy": "TimeSlicing"}})",
                      {}, "FromClass"),
               Config(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
      "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50,
        "defaultPinnedDeviceMemoryLimit": "10Gi",
        "defaultPerDevicePinnedMemoryLimit": {"1": "5Gi"}}}})",
                      {"gpu"})};
  auto out = preparer_->Prepare(c);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_THAT(out->error, IsEmpty());
  json spec = Spec();
  const std::string env = Env(spec["containerEdits"]);
  EXPECT_THAT(env, HasSubstr("CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"));
  EXPECT_THAT(env, HasSubstr("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50"));
  EXPECT_THAT(env, HasSubstr("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=" + uuid0_ + "=10240M,GPU-"));
  EXPECT_THAT(env, HasSubstr("=5120M\""));
  EXPECT_THAT(Env(spec["devices"][0]["containerEdits"]), Not(HasSubstr("TIMESLICE")));
  const json& mount = spec["containerEdits"]["mounts"][0];
  EXPECT_EQ(mount["hostPath"], dir_ + "/mps/" + kUid + "/pipe");
  EXPECT_EQ(mount["containerPath"], "/tmp/nvidia-mps");
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/mps/" + kUid));
  ASSERT_TRUE(preparer_->Unprepare(kUid, "ns", "claim").ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/mps/" + kUid));

  // A directory left by an interrupted prepare goes at the next start; a held claim's stays.
  ASSERT_TRUE(preparer_->Prepare(c).ok());
  const std::string stale = dir_ + "/mps/0a5bd1f2-6a43-4b8e-9d1c-3b4f0f1f4c11";
  std::filesystem::create_directories(stale);
  Reopen();
  preparer_->SetMpsRoot(dir_ + "/mps");
  ASSERT_TRUE(preparer_->Recover().ok());
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/mps/" + kUid));
}

// With an MpsControl (the fake nvidia-cuda-mps-control) each MPS claim gets its own daemon, which
// the checkpoint remembers across a restart and unprepare quits.
TEST_F(PreparerTest, MpsStartsAControlDaemonThatOutlivesARestart) {
  const std::string calls = dir_ + "/calls.log";
  setenv("QM_FAKE_MPS_LOG", calls.c_str(), 1);
  MpsControl mps(QM_FAKE_MPS_CONTROL);
  preparer_->SetMpsRoot(dir_ + "/mps");
  preparer_->SetMpsControl(&mps);
  ClaimAssignment c = Claim();
  c.configs = {Config(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
      "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50,
        "defaultPinnedDeviceMemoryLimit": "10Gi"}}})")};
  auto out = preparer_->Prepare(c);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_THAT(out->error, IsEmpty());
  const std::string pipe = dir_ + "/mps/" + kUid + "/pipe";
  auto read = [&] {
    std::ifstream in(calls);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  EXPECT_EQ(read(),
            "start pipe=" + pipe + " log=" + dir_ + "/mps/" + kUid + "/log devices=" + uuid0_ +
                "\n" + "set_default_active_thread_percentage 50 pipe=" + pipe + "\n" +
                "set_default_device_pinned_mem_limit " + uuid0_ + " 10240M pipe=" + pipe + "\n");
  EXPECT_TRUE(data_.claims.at(kUid).mps_daemon);

  // The agent restarts: the daemon keeps running, the checkpoint says it is there.
  Reopen();
  preparer_->SetMpsRoot(dir_ + "/mps");
  preparer_->SetMpsControl(&mps);
  ASSERT_TRUE(preparer_->Recover().ok());
  EXPECT_TRUE(data_.claims.at(kUid).mps_daemon);
  EXPECT_THAT(read(), Not(HasSubstr("quit")));
  EXPECT_TRUE(std::filesystem::exists(pipe + "/control"));
  ASSERT_TRUE(preparer_->Unprepare(kUid, "ns", "claim").ok());
  EXPECT_THAT(read(), HasSubstr("quit pipe=" + pipe + "\n"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/mps/" + kUid));

  // A daemon of a claim the checkpoint does not hold (its spec was lost) is quit at start.
  ASSERT_TRUE(preparer_->Prepare(c).ok());
  std::filesystem::remove(CdiSpecPath(cdi_, kUid));
  std::filesystem::remove(calls);
  Reopen();
  preparer_->SetMpsRoot(dir_ + "/mps");
  preparer_->SetMpsControl(&mps);
  ASSERT_TRUE(preparer_->Recover().ok());
  EXPECT_EQ(read(), "quit pipe=" + pipe + "\n");
  EXPECT_FALSE(data_.claims.contains(kUid));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/mps/" + kUid));
}

TEST_F(PreparerTest, AMissingMpsBinaryFailsTheClaim) {
  MpsControl mps(dir_ + "/bin/nvidia-cuda-mps-control");
  preparer_->SetMpsRoot(dir_ + "/mps");
  preparer_->SetMpsControl(&mps);
  ClaimAssignment c = Claim();
  c.configs = {Config(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
      "sharing": {"strategy": "MPS"}})")};
  auto out = preparer_->Prepare(c);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->error,
            "the MPS control daemon of the claim did not start: cannot run the MPS "
            "control binary " +
                dir_ +
                "/bin/nvidia-cuda-mps-control: No such file or directory (is the "
                "NVIDIA driver's MPS installed? --mps-control-binary PATH names it)");
  EXPECT_THAT(out->devices, IsEmpty());
  EXPECT_FALSE(std::filesystem::exists(CdiSpecPath(cdi_, kUid)));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/mps/" + kUid));
  EXPECT_FALSE(data_.claims.contains(kUid));
}

TEST_F(PreparerTest, AConsumableCapacityShareCarriesItsLimits) {
  preparer_->SetMpsRoot(dir_ + "/mps");
  ClaimAssignment c = Claim();
  c.devices[0].share_id = "0a5bd1f2-6a43-4b8e-9d1c-3b4f0f1f4c11";
  c.devices[0].consumed_capacity = {{"memory", "10Gi"}, {"example.com/bandwidth", "100"}};
  c.configs = {Config(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
      "sharing": {"strategy": "MPS"}})")};
  auto out = preparer_->Prepare(c);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_THAT(out->error, IsEmpty());
  json spec = Spec();
  const std::string env = Env(spec["devices"][0]["containerEdits"]);
  EXPECT_THAT(env, HasSubstr("QM_DEVICE_0_MEMORY=10Gi"));
  EXPECT_THAT(env, HasSubstr("QM_DEVICE_0_EXAMPLE_COM_BANDWIDTH=100"));
  // MPS without an explicit limit holds the share to the memory it took.
  EXPECT_THAT(Env(spec["containerEdits"]),
              HasSubstr("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=" + uuid0_ + "=10240M"));
  EXPECT_EQ(spec["devices"][0]["name"],
            std::string(kUid) + "-gpu-0-0a5bd1f2-6a43-4b8e-9d1c-3b4f0f1f4c11");
}

TEST_F(PreparerTest, AnInvalidConfigPreparesNothing) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
           "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 150}}})",
       "sharing.mpsConfig.defaultActiveThreadPercentage: want a whole number from 1 to 100"},
      {R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
           "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Forever"}}})",
       "sharing.timeSlicingConfig.interval: want Default, Short, Medium or Long"},
      {R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
           "sharing": {"strategy": "Spatial"}})",
       "sharing.strategy: want TimeSlicing or MPS"},
      {R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
           "sharing": {"strategy": "MPS"}})",
       "a MigDeviceConfig applies to MIG devices only"},
  };
  for (const auto& [params, want] : cases) {
    ClaimAssignment c = Claim();
    c.configs = {Config(params)};
    auto out = preparer_->Prepare(c);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_THAT(out->error, HasSubstr(want));
    EXPECT_THAT(out->error, HasSubstr("gpu.nvidia.com/node-a/gpu-0"));
    EXPECT_THAT(out->devices, IsEmpty());
    EXPECT_FALSE(std::filesystem::exists(CdiSpecPath(cdi_, kUid)));
    EXPECT_FALSE(data_.claims.contains(kUid));
  }
}

TEST_F(PreparerTest, GpuConfigDoesNotApplyToMigDevices) {
  auto sim = ParseSimulation(
      "gpus: [{model: NVIDIA A100-SXM4-80GB, memory: 80Gi, mig: [3g.40gb, 3g.40gb]}]");
  ASSERT_TRUE(sim.ok());
  preparer_->SetInventory(*BuildInventory(*sim, "node-a"));
  ClaimAssignment c = Claim("a1", {"gpu-0-mig-3g-40gb-0"});
  c.configs = {Config(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
      "sharing": {"strategy": "TimeSlicing"}})")};
  auto out = preparer_->Prepare(c);
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(out->error, HasSubstr("a GpuConfig does not apply to a MIG device"));
  c.configs = {Config(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
      "sharing": {"strategy": "TimeSlicing"}})")};
  out = preparer_->Prepare(c);
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(out->error, IsEmpty());
}

TEST_F(PreparerTest, ConfigsOfOtherDriversAndRequestsAreIgnored) {
  ClaimAssignment c = Claim();
  c.configs = {Config(R"({"not": "ours"})", {}), Config(R"({"kind": "Nonsense"})", {"other"})};
  c.configs[0].driver = "example.com";
  auto out = preparer_->Prepare(c);
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(out->error, IsEmpty());
}

// ---- MIG placements (the dynamic MIG strategy) ----------------------------------------------

// A GPU's MIG instances as a MigInstanceManager makes them, kept across "restarts" of the
// Preparer as the GPU keeps them.
class FakeMigInstances : public MigInstanceManager {
 public:
  absl::StatusOr<MigInstance> Create(const LocalDevice& d) override {
    if (++creates == fail_create_at) {
      return absl::ResourceExhaustedError("the placement overlaps a GPU instance that exists");
    }
    const int64_t gi = next_gi++;
    MigInstance m{d.parent_uuid,
                  d.mig_placement->profile_id,
                  d.mig_placement->start,
                  d.mig_placement->size,
                  gi,
                  0,
                  "MIG-" + std::to_string(gi),
                  d.device_nodes};
    m.device_nodes.push_back("/dev/nvidia-caps/nvidia-cap" + std::to_string(100 + gi));
    live.push_back(m);
    return m;
  }
  absl::Status Destroy(const MigInstance& m) override {
    if (fail_destroy) return absl::UnavailableError("nvmlComputeInstanceDestroy: In use (19)");
    std::erase(live, m);
    destroyed.push_back(m.gpu_instance_id);
    return absl::OkStatus();
  }
  void Hold(const MigInstance& m) override { held.push_back(m.gpu_instance_id); }

  std::vector<MigInstance> live;
  std::vector<int64_t> destroyed, held;
  int creates = 0;
  int fail_create_at = 0;  // the how-manieth Create fails (0: none)
  bool fail_destroy = false;
  int64_t next_gi = 1;
};

class MigPreparerTest : public PreparerTest {
 protected:
  void SetUp() override {
    PreparerTest::SetUp();
    UseMig();
  }

  // After Reopen: an inventory with a whole GPU and two placements of a MIG-mode GPU, and the
  // instances of the "GPU"; Recover, as the agent runs it at start.
  void UseMig() {
    Inventory inv;
    inv.local["gpu-0"] = LocalDevice{"GPU-0", 0, "", {"/dev/nvidia0"}};
    for (const auto& [name, start, size] :
         {std::tuple<const char*, int64_t, int64_t>{"gpu-1-mig-1g-5gb-at-0", 0, 1},
          {"gpu-1-mig-2g-10gb-at-2", 2, 2}}) {
      LocalDevice l{"", 1, "GPU-1", {"/dev/nvidia1"}};
      l.mig_placement = LocalDevice::MigPlacement{size == 1 ? 0 : 1, start, size};
      inv.local[name] = l;
    }
    inv.common_device_nodes = {"/dev/nvidiactl"};
    preparer_->SetInventory(inv);
    preparer_->SetMigInstances(&mig_);
    ASSERT_TRUE(preparer_->Recover().ok());
  }

  FakeMigInstances mig_;
};

TEST_F(MigPreparerTest, PrepareCreatesTheInstanceOfAPlacement) {
  auto out = preparer_->Prepare(Claim("a1", {"gpu-1-mig-1g-5gb-at-0"}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->error, IsEmpty());
  ASSERT_EQ(mig_.live.size(), 1u);
  EXPECT_EQ(mig_.live[0].start, 0);
  json spec = Spec();
  EXPECT_THAT(spec["devices"][0]["containerEdits"]["env"].dump(), HasSubstr("QM_DEVICE_0=MIG-1"));
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"].dump(),
            R"([{"path":"/dev/nvidia1"},{"path":"/dev/nvidia-caps/nvidia-cap101"}])");
  EXPECT_THAT(spec["containerEdits"]["env"].dump(), HasSubstr("NVIDIA_VISIBLE_DEVICES=MIG-1"));
  // The checkpoint knows the instance.
  Reopen();
  ASSERT_TRUE(data_.claims.contains(kUid));
  ASSERT_TRUE(data_.claims[kUid].devices[0].mig_instance.has_value());
  EXPECT_EQ(*data_.claims[kUid].devices[0].mig_instance, mig_.live[0]);
  // Preparing it again reuses the instance.
  UseMig();
  auto again = preparer_->Prepare(Claim("a1", {"gpu-1-mig-1g-5gb-at-0"}));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->already_prepared);
  EXPECT_EQ(mig_.creates, 1);
  EXPECT_EQ(mig_.live.size(), 1u);
}

TEST_F(MigPreparerTest, UnprepareDestroysTheInstance) {
  ASSERT_TRUE(preparer_->Prepare(Claim("a1", {"gpu-0", "gpu-1-mig-2g-10gb-at-2"})).ok());
  ASSERT_EQ(mig_.live.size(), 1u);
  ASSERT_TRUE(preparer_->Unprepare(kUid, "ns", "claim").ok());
  EXPECT_THAT(mig_.live, IsEmpty());
  EXPECT_THAT(mig_.destroyed, ElementsAre(1));
  EXPECT_FALSE(std::filesystem::exists(CdiSpecPath(cdi_, kUid)));
  // A new allocation of the claim: the old instance goes, a new one is made.
  ASSERT_TRUE(preparer_->Prepare(Claim("a1", {"gpu-1-mig-1g-5gb-at-0"})).ok());
  ASSERT_TRUE(preparer_->Prepare(Claim("a2", {"gpu-1-mig-2g-10gb-at-2"})).ok());
  EXPECT_THAT(mig_.destroyed, ElementsAre(1, 2));
  ASSERT_EQ(mig_.live.size(), 1u);
  EXPECT_EQ(mig_.live[0].gpu_instance_id, 3);
}

TEST_F(MigPreparerTest, AFailedPrepareDestroysWhatItCreated) {
  // The second placement cannot be made: the first is destroyed again, nothing is prepared.
  mig_.fail_create_at = 2;
  auto out = preparer_->Prepare(Claim("a1", {"gpu-1-mig-1g-5gb-at-0", "gpu-1-mig-2g-10gb-at-2"}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->error,
              HasSubstr("gpu.nvidia.com/node-a/gpu-1-mig-2g-10gb-at-2: creating the MIG "
                        "instance of placement 2+2 (profile 1) of GPU-1: the placement "
                        "overlaps a GPU instance that exists"));
  EXPECT_THAT(out->devices, IsEmpty());
  EXPECT_THAT(mig_.live, IsEmpty());
  EXPECT_THAT(mig_.destroyed, ElementsAre(1));
  EXPECT_THAT(ListCdiSpecs(cdi_), IsEmpty());
  EXPECT_FALSE(data_.claims.contains(kUid));

  // Another device of the claim is wrong: the instance made for the first goes again.
  auto unknown = preparer_->Prepare(Claim("a1", {"gpu-1-mig-1g-5gb-at-0", "gpu-7"}));
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_THAT(unknown->error, HasSubstr("gpu-7: not published by this agent"));
  EXPECT_THAT(mig_.live, IsEmpty());

  // The spec cannot be written: the instance goes, and the checkpoint forgets the claim.
  std::filesystem::remove_all(cdi_);
  std::ofstream(cdi_) << "not a directory";
  auto unwritable = preparer_->Prepare(Claim("a1", {"gpu-1-mig-1g-5gb-at-0"}));
  EXPECT_FALSE(unwritable.ok());
  EXPECT_THAT(mig_.live, IsEmpty());
  Reopen();
  EXPECT_THAT(data_.claims, IsEmpty());
}

TEST_F(MigPreparerTest, ARestartedAgentDestroysTheInstancesOfItsCheckpoint) {
  ASSERT_TRUE(preparer_->Prepare(Claim("a1", {"gpu-1-mig-1g-5gb-at-0"})).ok());
  Reopen();  // the agent restarts: a new Preparer over the checkpoint
  UseMig();
  EXPECT_THAT(mig_.held, ElementsAre(1));  // its placements stay published
  ASSERT_EQ(mig_.live.size(), 1u);
  ASSERT_TRUE(preparer_->Unprepare(kUid, "ns", "claim").ok());
  EXPECT_THAT(mig_.live, IsEmpty());
  EXPECT_THAT(mig_.destroyed, ElementsAre(1));
}

TEST_F(MigPreparerTest, RecoverDestroysTheInstancesOfAClaimWithoutSpec) {
  ASSERT_TRUE(preparer_->Prepare(Claim("a1", {"gpu-1-mig-1g-5gb-at-0"})).ok());
  std::filesystem::remove(CdiSpecPath(cdi_, kUid));  // a crash between checkpoint and spec
  Reopen();
  UseMig();
  EXPECT_THAT(data_.claims, IsEmpty());
  EXPECT_THAT(mig_.live, IsEmpty());
  EXPECT_THAT(mig_.destroyed, ElementsAre(1));
  EXPECT_THAT(mig_.held, IsEmpty());
}

TEST_F(MigPreparerTest, AnInstanceInUseKeepsTheClaimPrepared) {
  ASSERT_TRUE(preparer_->Prepare(Claim("a1", {"gpu-1-mig-1g-5gb-at-0"})).ok());
  mig_.fail_destroy = true;
  absl::Status st = preparer_->Unprepare(kUid, "ns", "claim");
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("cannot destroy MIG instance MIG-1 (GPU instance 1, compute "
                                      "instance 0 of GPU-1) of gpu-1-mig-1g-5gb-at-0: "
                                      "nvmlComputeInstanceDestroy: In use (19)"));
  EXPECT_TRUE(std::filesystem::exists(CdiSpecPath(cdi_, kUid)));
  EXPECT_TRUE(data_.claims.contains(kUid));
  EXPECT_FALSE(data_.unreported.contains(kUid));
  mig_.fail_destroy = false;
  ASSERT_TRUE(preparer_->Unprepare(kUid, "ns", "claim").ok());
  EXPECT_THAT(mig_.live, IsEmpty());
  EXPECT_FALSE(std::filesystem::exists(CdiSpecPath(cdi_, kUid)));
}

TEST_F(MigPreparerTest, APlacementNeedsAnInstanceManager) {
  preparer_->SetMigInstances(nullptr);
  auto out = preparer_->Prepare(Claim("a1", {"gpu-1-mig-1g-5gb-at-0"}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->error, HasSubstr("a MIG placement, but this agent creates no MIG instances"));
  EXPECT_THAT(ListCdiSpecs(cdi_), IsEmpty());
}

}  // namespace
}  // namespace qm::agent
