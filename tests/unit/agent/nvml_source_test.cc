// NvmlSource against the fake NVML library (tests/agent/fake_nvml): what it publishes for plain
// GPUs and for a GPU in MIG mode, and the errors for a missing library, a library without the
// functions, and a driver that does not initialise.
#include "agent/nvml_source.h"

#include "agent/cdi.h"
#include "agent/health.h"
#include "agent/preparer.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <variant>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace qm::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Str(const model::Device& d, const std::string& key) {
  auto it = d.attributes.find(key);
  if (it == d.attributes.end()) return "<missing>";
  if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
  if (const auto* v = std::get_if<model::Version>(&it->second)) return "v" + v->value;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return "i" + std::to_string(*i);
  return "<other>";
}

class NvmlSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("qm-nvml-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    // A sysfs where GPU 0000:07:00.0 sits under root complex pci0000:3a; other GPUs are unknown.
    fs::create_directories(dir_ / "sys/devices/pci0000:3a/0000:3a:00.0/0000:07:00.0");
    fs::create_directories(dir_ / "sys/bus/pci/devices");
    fs::create_symlink("../../../devices/pci0000:3a/0000:3a:00.0/0000:07:00.0",
                       dir_ / "sys/bus/pci/devices/0000:07:00.0");
  }
  void TearDown() override { fs::remove_all(dir_); }

  absl::StatusOr<Inventory> Discover(const std::string& json) {
    const fs::path config = dir_ / "nvml.json";
    std::ofstream(config) << json;
    setenv("QM_FAKE_NVML_CONFIG", config.c_str(), 1);
    auto source =
        NvmlSource::Open(QM_FAKE_NVML_PATH, (dir_ / "sys").string(), (dir_ / "proc").string());
    if (!source.ok()) return source.status();
    auto inv = (*source)->Discover();
    // Every nvmlInit_v2 was matched by nvmlShutdown.
    void* h = dlopen(QM_FAKE_NVML_PATH, RTLD_NOW | RTLD_NOLOAD);
    EXPECT_NE(h, nullptr);
    if (h != nullptr) {
      auto count = reinterpret_cast<int (*)()>(dlsym(h, "qmFakeNvmlInitCount"));
      EXPECT_EQ(count(), 0);
      dlclose(h);
    }
    return inv;
  }

  fs::path dir_;
};

constexpr char kPlain[] = R"({
  "driverVersion": "560.35.03", "cudaDriverVersion": 12060,
  "gpus": [
    {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000000",
     "memoryMiB": 81559, "pciBusId": "00000000:07:00.0", "computeCapability": [9, 0],
     "architecture": 9, "brand": 14, "minor": 0, "migMode": "disabled"},
    {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000000",
     "memoryMiB": 81559, "pciBusId": "00000000:0F:00.0", "computeCapability": [9, 0],
     "architecture": 9, "brand": 14, "minor": 3, "migMode": "disabled"}]})";

TEST_F(NvmlSourceTest, PublishesPlainGpusAsNvidiasDriverDoes) {
  auto inv = Discover(kPlain);
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->driver, "gpu.nvidia.com");
  ASSERT_EQ(inv->devices.size(), 2u);
  EXPECT_TRUE(inv->shared_counters.empty());
  const model::Device& d = inv->devices[0];
  EXPECT_EQ(d.name, "gpu-0");
  EXPECT_EQ(Str(d, "productName"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(Str(d, "brand"), "Nvidia");
  EXPECT_EQ(Str(d, "architecture"), "Hopper");
  EXPECT_EQ(Str(d, "cudaComputeCapability"), "v9.0.0");
  EXPECT_EQ(Str(d, "driverVersion"), "v560.35.3");
  EXPECT_EQ(Str(d, "cudaDriverVersion"), "v12.6.0");
  EXPECT_EQ(Str(d, "uuid"), "GPU-aaaaaaaa-0000-0000-0000-000000000000");
  EXPECT_EQ(Str(d, "pcieBusID"), "0000:07:00.0");
  EXPECT_EQ(Str(d, "resource.kubernetes.io/pcieRoot"), "pci0000:3a");
  EXPECT_EQ(Str(d, "index"), "i0");
  EXPECT_EQ(Str(d, "minor"), "i0");
  EXPECT_EQ(Str(d, "type"), "gpu");
  EXPECT_EQ(d.capacity.at("memory").value.String(), "81559Mi");
  EXPECT_TRUE(d.consumes_counters.empty());

  const model::Device& d1 = inv->devices[1];
  EXPECT_EQ(d1.name, "gpu-1");
  EXPECT_EQ(Str(d1, "pcieBusID"), "0000:0f:00.0");
  // sysfs does not know this one: no guessed root.
  EXPECT_EQ(Str(d1, "resource.kubernetes.io/pcieRoot"), "<missing>");
  EXPECT_EQ(Str(d1, "index"), "i1");
  EXPECT_EQ(Str(d1, "minor"), "i3");
  EXPECT_EQ(inv->local.at("gpu-1").uuid, "GPU-bbbbbbbb-0000-0000-0000-000000000000");
  EXPECT_EQ(inv->local.at("gpu-1").device_nodes, std::vector<std::string>{"/dev/nvidia3"});

  const std::map<std::string, std::string> labels = {
      {"nvidia.com/gpu.present", "true"},      {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
      {"nvidia.com/gpu.count", "2"},           {"nvidia.com/gpu.memory", "81559"},
      {"nvidia.com/gpu.family", "hopper"},     {"nvidia.com/gpu.compute.major", "9"},
      {"nvidia.com/gpu.compute.minor", "0"},   {"nvidia.com/cuda.driver.major", "560"},
      {"nvidia.com/cuda.driver.minor", "35"},  {"nvidia.com/cuda.driver.rev", "03"},
      {"nvidia.com/cuda.runtime.major", "12"}, {"nvidia.com/cuda.runtime.minor", "6"},
      {"nvidia.com/mig.capable", "true"}};
  EXPECT_EQ(inv->node_labels, labels);
  EXPECT_EQ(inv->node_capacity.at("nvidia.com/gpu"), "2");
}

TEST_F(NvmlSourceTest, GpusWithoutMigAreNotMigCapable) {
  auto inv = Discover(R"({"gpus": [{"name": "NVIDIA L4", "memoryMiB": 23034,
      "computeCapability": [8, 9], "architecture": 8, "migMode": "unsupported"}]})");
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(Str(inv->devices[0], "architecture"), "Ada Lovelace");
  EXPECT_EQ(inv->node_labels.at("nvidia.com/mig.capable"), "false");
  EXPECT_EQ(inv->node_labels.at("nvidia.com/gpu.family"), "ada-lovelace");
}

TEST_F(NvmlSourceTest, PublishesMigDevicesOverTheirGpusCounters) {
  // The driver's capability files of GPU instance 9 (and its compute instance 0) on GPU minor 0.
  const fs::path gi = dir_ / "proc/driver/nvidia/capabilities/gpu0/mig/gi9";
  fs::create_directories(gi / "ci0");
  std::ofstream(gi / "access") << "DeviceFileMinor: 84\nDeviceFileMode: 292\n";
  std::ofstream(gi / "ci0/access") << "DeviceFileMinor: 85\nDeviceFileMode: 292\n";
  auto inv = Discover(R"({"gpus": [
    {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-cccccccc-0000-0000-0000-000000000000",
     "memoryMiB": 81920, "pciBusId": "00000000:07:00.0", "computeCapability": [8, 0],
     "architecture": 7, "migMode": "enabled", "maxMigDevices": 7,
     "mig": [
       {"slot": 0, "uuid": "MIG-11111111-0000-0000-0000-000000000000", "gpuInstanceSlices": 3,
        "memoryMiB": 40192, "multiprocessors": 42},
       {"slot": 3, "uuid": "MIG-22222222-0000-0000-0000-000000000000", "gpuInstanceSlices": 1,
        "memoryMiB": 9728, "multiprocessors": 14},
       {"slot": 4, "uuid": "MIG-33333333-0000-0000-0000-000000000000", "gpuInstanceSlices": 1,
        "memoryMiB": 9728, "multiprocessors": 14, "gpuInstanceId": 9, "computeInstanceId": 0}]},
    {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-dddddddd-0000-0000-0000-000000000000",
     "memoryMiB": 81920, "pciBusId": "00000000:0f:00.0", "computeCapability": [8, 0],
     "architecture": 7, "minor": 1, "migMode": "disabled"}]})");
  ASSERT_TRUE(inv.ok()) << inv.status();
  // The partitioned GPU is published as its MIG devices only; the other one whole.
  ASSERT_EQ(inv->devices.size(), 4u);
  EXPECT_EQ(inv->devices[0].name, "gpu-0-mig-3g-40gb-0");
  EXPECT_EQ(inv->devices[1].name, "gpu-0-mig-1g-10gb-0");
  EXPECT_EQ(inv->devices[2].name, "gpu-0-mig-1g-10gb-1");
  EXPECT_EQ(inv->devices[3].name, "gpu-1");

  ASSERT_EQ(inv->shared_counters.size(), 1u);
  const model::CounterSet& set = inv->shared_counters[0];
  EXPECT_EQ(set.name, "gpu-0-counter-set");
  EXPECT_EQ(set.counters.at("memory").String(), "80Gi");
  EXPECT_EQ(set.counters.at("compute-slices").String(), "7");

  const model::Device& m = inv->devices[0];
  EXPECT_EQ(Str(m, "type"), "mig");
  EXPECT_EQ(Str(m, "uuid"), "MIG-11111111-0000-0000-0000-000000000000");
  EXPECT_EQ(Str(m, "parentUUID"), "GPU-cccccccc-0000-0000-0000-000000000000");
  EXPECT_EQ(Str(m, "parentIndex"), "i0");
  EXPECT_EQ(Str(m, "profile"), "3g.40gb");
  EXPECT_EQ(Str(m, "productName"), "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(Str(m, "architecture"), "Ampere");
  EXPECT_EQ(Str(m, "resource.kubernetes.io/pcieRoot"), "pci0000:3a");
  EXPECT_EQ(m.capacity.at("memory").value.String(), "40192Mi");
  EXPECT_EQ(m.capacity.at("multiprocessors").value.String(), "42");
  ASSERT_EQ(m.consumes_counters.size(), 1u);
  EXPECT_EQ(m.consumes_counters[0].counter_set, "gpu-0-counter-set");
  EXPECT_EQ(m.consumes_counters[0].counters.at("memory").String(), "40192Mi");
  EXPECT_EQ(m.consumes_counters[0].counters.at("compute-slices").String(), "3");
  EXPECT_EQ(Str(inv->devices[2], "index"), "i1");
  EXPECT_EQ(inv->devices[2].consumes_counters[0].counters.at("compute-slices").String(), "1");

  const LocalDevice& local = inv->local.at("gpu-0-mig-1g-10gb-1");
  EXPECT_EQ(local.uuid, "MIG-33333333-0000-0000-0000-000000000000");
  EXPECT_EQ(local.parent_uuid, "GPU-cccccccc-0000-0000-0000-000000000000");
  EXPECT_EQ(local.device_nodes,
            (std::vector<std::string>{"/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap84",
                                      "/dev/nvidia-caps/nvidia-cap85"}));
  // Where the driver lists no capability files, only the GPU's device node.
  EXPECT_EQ(inv->local.at("gpu-0-mig-3g-40gb-0").device_nodes,
            std::vector<std::string>{"/dev/nvidia0"});
  EXPECT_EQ(inv->node_labels.at("nvidia.com/mig.strategy"), "mixed");
  EXPECT_EQ(inv->node_labels.at("nvidia.com/mig.capable"), "true");
  EXPECT_EQ(inv->node_labels.at("nvidia.com/gpu.count"), "2");
}

// Events injected through the fake's events file reach WatchEvents with the GPU's UUID and the
// MIG instance ids; ClassifyEvent maps them onto what Discover published.
TEST_F(NvmlSourceTest, WatchEventsReportsXidEventsOfRegisteredGpus) {
  const fs::path events = dir_ / "events.jsonl";
  // Written before the watch starts: reported once the GPUs are registered (the fake keeps
  // them); a line for a GPU that does not exist is dropped.
  std::ofstream(events) << R"({"gpu": 7, "type": "xid", "xid": 79})"
                           "\n"
                        << R"({"gpu": 1, "type": "xid", "xid": 13})"
                           "\n"
                        << R"({"gpu": 0, "type": "xid", "xid": 94, "gpuInstanceId": 9, )"
                           R"("computeInstanceId": 0})"
                           "\n"
                        << R"({"gpu": 1, "type": "dbe"})"
                           "\n"
                        << R"({"gpu": 1, "type": "xid", "xid": 79})"
                           "\n";
  const std::string json = R"({"eventsFile": ")" + events.string() + R"(", "gpus": [
    {"uuid": "GPU-cccccccc-0000-0000-0000-000000000000", "migMode": "enabled",
     "mig": [
       {"slot": 0, "uuid": "MIG-11111111-0000-0000-0000-000000000000", "gpuInstanceSlices": 3,
        "memoryMiB": 40192, "gpuInstanceId": 1, "computeInstanceId": 0},
       {"slot": 1, "uuid": "MIG-22222222-0000-0000-0000-000000000000", "gpuInstanceSlices": 1,
        "memoryMiB": 9728, "gpuInstanceId": 9, "computeInstanceId": 0}]},
    {"uuid": "GPU-dddddddd-0000-0000-0000-000000000000", "minor": 1, "migMode": "disabled"}]})";
  auto inv = Discover(json);
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->local.at("gpu-0-mig-1g-10gb-0").gpu_instance_id, 9);
  EXPECT_EQ(inv->local.at("gpu-0-mig-1g-10gb-0").compute_instance_id, 0);

  auto source = NvmlSource::Open(QM_FAKE_NVML_PATH);
  ASSERT_TRUE(source.ok()) << source.status();
  std::atomic<bool> stop{false};
  std::vector<DeviceEvent> seen;
  absl::Status st = (*source)->WatchEvents(
      [&](const DeviceEvent& e) {
        seen.push_back(e);
        if (seen.size() == 4) stop = true;
      },
      stop);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].gpu_uuid, "GPU-dddddddd-0000-0000-0000-000000000000");
  EXPECT_EQ(seen[0].type, kEventXidCriticalError);
  EXPECT_EQ(seen[0].data, 13u);
  EXPECT_EQ(seen[0].gpu_instance_id, -1);
  EXPECT_EQ(seen[1].gpu_uuid, "GPU-cccccccc-0000-0000-0000-000000000000");
  EXPECT_EQ(seen[1].data, 94u);
  EXPECT_EQ(seen[1].gpu_instance_id, 9);
  EXPECT_EQ(seen[1].compute_instance_id, 0);
  EXPECT_EQ(seen[2].type, kEventDoubleBitEccError);

  const auto ignored = DefaultIgnoredXids();
  EXPECT_FALSE(ClassifyEvent(seen[0], *inv, ignored).has_value()) << "XID 13 is ignored";
  auto mig = ClassifyEvent(seen[1], *inv, ignored);
  ASSERT_TRUE(mig.has_value());
  EXPECT_EQ(mig->devices, std::vector<std::string>{"gpu-0-mig-1g-10gb-0"});
  EXPECT_EQ(mig->reason, "XidCriticalError");
  EXPECT_EQ(mig->message,
            "XID 94 on GPU-cccccccc-0000-0000-0000-000000000000: contained ECC error");
  auto dbe = ClassifyEvent(seen[2], *inv, ignored);
  ASSERT_TRUE(dbe.has_value());
  EXPECT_EQ(dbe->devices, std::vector<std::string>{"gpu-1"});
  EXPECT_EQ(dbe->reason, "DoubleBitEccError");
  auto xid79 = ClassifyEvent(seen[3], *inv, ignored);
  ASSERT_TRUE(xid79.has_value());
  EXPECT_EQ(xid79->devices, std::vector<std::string>{"gpu-1"});

  // Consumed: a second watch reports nothing (it times out once a second and stops).
  stop = false;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    stop = true;
  });
  int more = 0;
  st = (*source)->WatchEvents([&](const DeviceEvent&) { ++more; }, stop);
  stopper.join();
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(more, 0);
  void* h = dlopen(QM_FAKE_NVML_PATH, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(reinterpret_cast<int (*)()>(dlsym(h, "qmFakeNvmlInitCount"))(), 0);
  dlclose(h);
}

TEST_F(NvmlSourceTest, WatchEventsIsUnimplementedWhenNoGpuSupportsEvents) {
  const fs::path config = dir_ / "nvml.json";
  std::ofstream(config) << R"({"events": false, "gpus": [{"migMode": "disabled"}]})";
  setenv("QM_FAKE_NVML_CONFIG", config.c_str(), 1);
  auto source = NvmlSource::Open(QM_FAKE_NVML_PATH);
  ASSERT_TRUE(source.ok()) << source.status();
  std::atomic<bool> stop{false};
  absl::Status st = (*source)->WatchEvents([](const DeviceEvent&) {}, stop);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
}

TEST_F(NvmlSourceTest, AMissingLibraryIsAClearError) {
  auto source = NvmlSource::Open((dir_ / "libnvidia-ml.so.1").string());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(source.status().message(), HasSubstr("cannot load the NVML library"));
  EXPECT_THAT(source.status().message(), HasSubstr("--simulate"));
}

TEST_F(NvmlSourceTest, ALibraryWithoutNvmlIsAClearError) {
  auto source = NvmlSource::Open("libm.so.6");
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(source.status().message(), HasSubstr("nvmlInit_v2"));
}

TEST_F(NvmlSourceTest, ADriverThatDoesNotInitialiseIsUnavailable) {
  auto inv = Discover(R"({"failInit": true})");
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(inv.status().message(), HasSubstr("nvmlInit_v2: Driver Not Loaded"));
}

// ---- The dynamic MIG strategy ----------------------------------------------------------------

class NvmlDynamicMigTest : public NvmlSourceTest {
 protected:
  // An A100-SXM4-40GB in MIG mode (the fake's A100-40GB profiles), plus `extra` JSON fields of
  // the GPU and of the configuration.
  std::unique_ptr<NvmlSource> Open(const std::string& gpu_extra = "",
                                   const std::string& config_extra = "") {
    const fs::path config = dir_ / "nvml.json";
    std::ofstream(config) << R"({"migStateFile": ")" << (dir_ / "mig-state.json").string() << "\""
                          << config_extra << R"(, "gpus": [
      {"name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-eeeeeeee-0000-0000-0000-000000000000",
       "memoryMiB": 40960, "pciBusId": "00000000:07:00.0", "computeCapability": [8, 0],
       "architecture": 7, "minor": 0, "migMode": "enabled", "maxMigDevices": 7)"
                          << gpu_extra << "}]}";
    setenv("QM_FAKE_NVML_CONFIG", config.c_str(), 1);
    auto source =
        NvmlSource::Open(QM_FAKE_NVML_PATH, (dir_ / "sys").string(), (dir_ / "proc").string());
    EXPECT_TRUE(source.ok()) << source.status();
    if (!source.ok()) return nullptr;
    EXPECT_TRUE((*source)->SetMigStrategy(MigStrategy::kDynamic).ok());
    return std::move(*source);
  }

  // The GPU instances the fake holds: "<gi>:<profile>@<start>" each.
  std::vector<std::string> Instances() {
    std::ifstream in(dir_ / "mig-state.json");
    if (!in) return {};
    nlohmann::json j = nlohmann::json::parse(in);
    std::vector<std::string> out;
    const nlohmann::json gpus = j.value("gpus", nlohmann::json::object());  // items() refers to it
    for (const auto& [gpu, list] : gpus.items()) {
      for (const auto& i : list) {
        out.push_back(std::to_string(i.value("gi", 0)) + ":" +
                      std::to_string(i.value("profileId", 0)) + "@" +
                      std::to_string(i.value("start", 0)));
      }
    }
    return out;
  }

  static int InitCount() {
    void* h = dlopen(QM_FAKE_NVML_PATH, RTLD_NOW | RTLD_NOLOAD);
    if (h == nullptr) return -1;
    auto count = reinterpret_cast<int (*)()>(dlsym(h, "qmFakeNvmlInitCount"));
    int n = count();
    dlclose(h);
    return n;
  }
};

TEST_F(NvmlDynamicMigTest, PublishesEveryPlacementOverPerSliceCounters) {
  auto source = Open();
  ASSERT_NE(source, nullptr);
  auto inv = source->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  std::vector<std::string> names;
  for (const auto& d : inv->devices) names.push_back(d.name);
  EXPECT_THAT(names, ::testing::ElementsAre("gpu-0-mig-1g-5gb-at-0", "gpu-0-mig-1g-5gb-at-1",
                                            "gpu-0-mig-1g-5gb-at-2", "gpu-0-mig-1g-5gb-at-3",
                                            "gpu-0-mig-1g-5gb-at-4", "gpu-0-mig-1g-5gb-at-5",
                                            "gpu-0-mig-1g-5gb-at-6", "gpu-0-mig-2g-10gb-at-0",
                                            "gpu-0-mig-2g-10gb-at-2", "gpu-0-mig-2g-10gb-at-4",
                                            "gpu-0-mig-3g-20gb-at-0", "gpu-0-mig-3g-20gb-at-4",
                                            "gpu-0-mig-4g-20gb-at-0", "gpu-0-mig-7g-40gb-at-0"));
  ASSERT_EQ(inv->shared_counters.size(), 1u);
  const model::CounterSet& set = inv->shared_counters[0];
  EXPECT_EQ(set.name, "gpu-0-counter-set");
  EXPECT_EQ(set.counters.size(), 10u);  // memory, compute-slices, memory-slice-0..7
  EXPECT_EQ(set.counters.at("memory").String(), "40Gi");
  EXPECT_EQ(set.counters.at("compute-slices").String(), "7");
  EXPECT_EQ(set.counters.at("memory-slice-7").String(), "1");

  const model::Device& three = inv->devices[11];  // 3g.20gb at 4: memory slices 4..7
  EXPECT_EQ(Str(three, "type"), "mig");
  EXPECT_EQ(Str(three, "profile"), "3g.20gb");
  EXPECT_EQ(Str(three, "placementStart"), "i4");
  EXPECT_EQ(Str(three, "placementSize"), "i4");
  EXPECT_EQ(Str(three, "parentUUID"), "GPU-eeeeeeee-0000-0000-0000-000000000000");
  EXPECT_EQ(Str(three, "productName"), "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(Str(three, "uuid"), "<missing>");
  EXPECT_EQ(three.capacity.at("memory").value.String(), "20096Mi");
  EXPECT_EQ(three.capacity.at("multiprocessors").value.String(), "42");
  const auto& use = three.consumes_counters.at(0).counters;
  EXPECT_EQ(use.size(), 6u);
  EXPECT_EQ(use.at("compute-slices").String(), "3");
  EXPECT_TRUE(use.contains("memory-slice-4") && use.contains("memory-slice-7"));
  EXPECT_FALSE(use.contains("memory-slice-3"));

  const LocalDevice& local = inv->local.at("gpu-0-mig-3g-20gb-at-4");
  ASSERT_TRUE(local.mig_placement.has_value());
  EXPECT_EQ(local.mig_placement->profile_id, 2);
  EXPECT_EQ(local.mig_placement->start, 4);
  EXPECT_EQ(local.mig_placement->size, 4);
  EXPECT_EQ(local.uuid, "");
  EXPECT_EQ(local.parent_uuid, "GPU-eeeeeeee-0000-0000-0000-000000000000");
  EXPECT_EQ(local.device_nodes, std::vector<std::string>{"/dev/nvidia0"});
  EXPECT_EQ(inv->node_labels.at("nvidia.com/mig.strategy"), "mixed");
  EXPECT_EQ(InitCount(), 0);
}

TEST_F(NvmlDynamicMigTest, ALibraryWithoutMigManagementCannotGoDynamic) {
  const fs::path config = dir_ / "nvml.json";
  std::ofstream(config) << R"({"gpus": [{"migMode": "enabled"}]})";
  setenv("QM_FAKE_NVML_CONFIG", config.c_str(), 1);
  auto source = NvmlSource::Open(QM_FAKE_NVML_NO_MIG_PATH);
  ASSERT_TRUE(source.ok()) << source.status();  // static MIG needs none of them
  EXPECT_EQ((*source)->mig_instances(), nullptr);
  absl::Status st = (*source)->SetMigStrategy(MigStrategy::kDynamic);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("the dynamic MIG strategy needs MIG functions the NVML "
                                      "library lacks (driver too old?): nvmlDeviceGetHandleByUUID, "
                                      "nvmlDeviceGetGpuInstanceProfileInfoV"));
  EXPECT_TRUE((*source)->SetMigStrategy(MigStrategy::kStatic).ok());
  auto inv = (*source)->Discover();
  EXPECT_TRUE(inv.ok()) << inv.status();
}

TEST_F(NvmlDynamicMigTest, ProfileNamesComeFromTheDriver) {
  // 7g on an 80 GB A100 has 80384 MiB, which rounds to 79 GB; the driver calls it 7g.80gb.
  auto source = Open(R"(, "memoryMiB": 81920)");
  ASSERT_NE(source, nullptr);
  auto inv = source->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->devices.back().name, "gpu-0-mig-7g-80gb-at-0");
  EXPECT_EQ(Str(inv->devices.front(), "profile"), "1g.10gb");
}

TEST_F(NvmlDynamicMigTest, TheStaticStrategyStillPublishesWhatExists) {
  auto source = Open(R"(, "mig": [{"slot": 0, "uuid": "MIG-44444444-0000-0000-0000-000000000000",
      "gpuInstanceSlices": 3, "memoryMiB": 20096, "multiprocessors": 42}])");
  ASSERT_NE(source, nullptr);
  ASSERT_TRUE(source->SetMigStrategy(MigStrategy::kStatic).ok());
  auto inv = source->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_EQ(inv->devices.size(), 1u);
  EXPECT_EQ(inv->devices[0].name, "gpu-0-mig-3g-20gb-0");
  EXPECT_EQ(inv->shared_counters[0].counters.size(), 2u);
}

TEST_F(NvmlDynamicMigTest, CreatesAndDestroysTheInstanceOfAPlacement) {
  // The driver's capability files of the GPU instance NVML will make (id 1) and its compute
  // instance 0.
  const fs::path gi = dir_ / "proc/driver/nvidia/capabilities/gpu0/mig/gi1";
  fs::create_directories(gi / "ci0");
  std::ofstream(gi / "access") << "DeviceFileMinor: 21\n";
  std::ofstream(gi / "ci0/access") << "DeviceFileMinor: 22\n";
  auto source = Open();
  ASSERT_NE(source, nullptr);
  ASSERT_EQ(source->mig_instances(), source.get());
  auto inv = source->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();

  auto made = source->Create(inv->local.at("gpu-0-mig-1g-5gb-at-3"));
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->parent_uuid, "GPU-eeeeeeee-0000-0000-0000-000000000000");
  EXPECT_EQ(made->profile_id, 0);
  EXPECT_EQ(made->start, 3);
  EXPECT_EQ(made->size, 1);
  EXPECT_EQ(made->gpu_instance_id, 1);
  EXPECT_EQ(made->compute_instance_id, 0);
  EXPECT_THAT(made->uuid, ::testing::StartsWith("MIG-"));
  EXPECT_EQ(made->device_nodes,
            (std::vector<std::string>{"/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap21",
                                      "/dev/nvidia-caps/nvidia-cap22"}));
  EXPECT_THAT(Instances(), ::testing::ElementsAre("1:0@3"));

  // An overlapping placement is refused, and leaves nothing behind.
  auto overlap = source->Create(inv->local.at("gpu-0-mig-2g-10gb-at-2"));
  EXPECT_EQ(overlap.status().code(), absl::StatusCode::kResourceExhausted) << overlap.status();
  EXPECT_THAT(overlap.status().message(), HasSubstr("Insufficient resources"));
  EXPECT_THAT(Instances(), ::testing::ElementsAre("1:0@3"));

  // The instance is the agent's: every placement stays published, and the one it fills knows
  // its MIG device (for health events), as NVML's MIG enumeration shows it.
  auto again = source->Discover();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->devices.size(), 14u);
  const LocalDevice& filled = again->local.at("gpu-0-mig-1g-5gb-at-3");
  EXPECT_EQ(filled.uuid, made->uuid);
  EXPECT_EQ(filled.gpu_instance_id, 1);
  EXPECT_EQ(filled.compute_instance_id, 0);

  ASSERT_TRUE(source->Destroy(*made).ok());
  EXPECT_THAT(Instances(), IsEmpty());
  // Gone already: nothing to do.
  EXPECT_TRUE(source->Destroy(*made).ok());
  EXPECT_EQ(InitCount(), 0);
}

TEST_F(NvmlDynamicMigTest, InstancesOfOthersHideThePlacementsTheyOverlap) {
  // A 3g.20gb at memory slices 0-3 made by someone else (nvidia-smi).
  const std::string foreign =
      R"(, "mig": [{"slot": 0, "uuid": "MIG-55555555-0000-0000-0000-000000000000",
      "gpuInstanceSlices": 3, "memoryMiB": 20096, "multiprocessors": 42, "gpuInstanceId": 2,
      "profileId": 2, "placementStart": 0}])";
  auto source = Open(foreign);
  ASSERT_NE(source, nullptr);
  auto inv = source->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  std::vector<std::string> names;
  for (const auto& d : inv->devices) names.push_back(d.name);
  EXPECT_THAT(names, ::testing::ElementsAre("gpu-0-mig-1g-5gb-at-4", "gpu-0-mig-1g-5gb-at-5",
                                            "gpu-0-mig-1g-5gb-at-6", "gpu-0-mig-2g-10gb-at-4",
                                            "gpu-0-mig-3g-20gb-at-4"));
  // Held by the agent (its checkpoint says it made it): all placements again.
  source->Hold(MigInstance{"GPU-eeeeeeee-0000-0000-0000-000000000000", 2, 0, 4, 2, 0, "", {}});
  auto held = source->Discover();
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(held->devices.size(), 14u);
  EXPECT_EQ(held->local.at("gpu-0-mig-3g-20gb-at-0").uuid,
            "MIG-55555555-0000-0000-0000-000000000000");
}

TEST_F(NvmlDynamicMigTest, AFailedStepDestroysWhatWasCreated) {
  auto source = Open("", R"(, "fail": {"nvmlGpuInstanceCreateComputeInstance": 999})");
  ASSERT_NE(source, nullptr);
  auto inv = source->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  auto made = source->Create(inv->local.at("gpu-0-mig-4g-20gb-at-0"));
  EXPECT_EQ(made.status().code(), absl::StatusCode::kUnavailable) << made.status();
  EXPECT_THAT(made.status().message(),
              HasSubstr("nvmlGpuInstanceCreateComputeInstance: Unknown Error (999)"));
  EXPECT_THAT(Instances(), IsEmpty());  // the GPU instance was destroyed again
  EXPECT_EQ(InitCount(), 0);

  // When even that fails, the error says so.
  source = Open("", R"(, "fail": {"nvmlGpuInstanceCreateComputeInstance": 999,
                                  "nvmlGpuInstanceDestroy": 19})");
  ASSERT_NE(source, nullptr);
  made = source->Create(inv->local.at("gpu-0-mig-4g-20gb-at-0"));
  EXPECT_THAT(made.status().message(), HasSubstr("; then nvmlGpuInstanceDestroy: In use"));
}

TEST_F(NvmlDynamicMigTest, AnInstanceThatCannotBeDestroyedStays) {
  auto source = Open();
  ASSERT_NE(source, nullptr);
  auto inv = source->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  auto made = source->Create(inv->local.at("gpu-0-mig-1g-5gb-at-0"));
  ASSERT_TRUE(made.ok()) << made.status();
  source = Open("", R"(, "fail": {"nvmlComputeInstanceDestroy": 19})");
  ASSERT_NE(source, nullptr);
  absl::Status st = source->Destroy(*made);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_THAT(st.message(), HasSubstr("nvmlComputeInstanceDestroy: In use by another client"));
  EXPECT_THAT(Instances(), ::testing::ElementsAre("1:0@0"));
  // A GPU instance id that now names another placement is not the agent's to destroy.
  MigInstance other = *made;
  other.start = 5;
  source = Open();
  ASSERT_NE(source, nullptr);
  EXPECT_TRUE(source->Destroy(other).ok());
  EXPECT_THAT(Instances(), ::testing::ElementsAre("1:0@0"));
  EXPECT_TRUE(source->Destroy(*made).ok());
  EXPECT_THAT(Instances(), IsEmpty());
}

// The agent's Preparer with NvmlSource as its MIG instance manager, over the fake NVML: a claim
// for a 1g.5gb placement gets an instance, which stays while the agent restarts and goes at
// unprepare.
TEST_F(NvmlDynamicMigTest, APreparedClaimOwnsItsInstanceAcrossARestart) {
  const std::string cdi = (dir_ / "cdi").string();
  fs::create_directories(cdi);
  Checkpoint checkpoint((dir_ / "checkpoint.json").string());
  constexpr char kUid[] = "0b9d7f3e-1c2a-4d5e-8f60-718293a4b5c6";
  ClaimAssignment claim{"ns", "mig-claim", kUid, "a1", {}, {}};
  claim.devices.push_back({"mig", kGpuDriver, "node-a", "gpu-0-mig-1g-5gb-at-2", "", {}});

  auto start_agent = [&](std::unique_ptr<NvmlSource>& source, CheckpointData& data,
                         std::unique_ptr<Preparer>& preparer) {
    source = Open();
    ASSERT_NE(source, nullptr);
    auto loaded = checkpoint.Load("node-a");
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    data = *loaded;
    preparer = std::make_unique<Preparer>("node-a", "node-a", cdi, &data, &checkpoint);
    preparer->SetMigInstances(source->mig_instances());
    ASSERT_TRUE(preparer->Recover().ok());
    auto inv = source->Discover();
    ASSERT_TRUE(inv.ok()) << inv.status();
    preparer->SetInventory(*inv);
  };

  std::unique_ptr<NvmlSource> source;
  CheckpointData data;
  std::unique_ptr<Preparer> preparer;
  start_agent(source, data, preparer);
  auto out = preparer->Prepare(claim);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_THAT(out->error, IsEmpty());
  EXPECT_THAT(Instances(), ::testing::ElementsAre("1:0@2"));
  std::ifstream spec_file(CdiSpecPath(cdi, kUid));
  const nlohmann::json spec = nlohmann::json::parse(spec_file);
  const std::string uuid = data.claims.at(kUid).devices.at(0).mig_instance->uuid;
  EXPECT_THAT(uuid, ::testing::StartsWith("MIG-fa4e0000-"));
  EXPECT_THAT(spec["containerEdits"]["env"].dump(), HasSubstr("NVIDIA_VISIBLE_DEVICES=" + uuid));

  // The agent restarts: the instance is its own (its placements all stay published), and the
  // claim stays prepared on it.
  preparer.reset();
  start_agent(source, data, preparer);
  auto inv = source->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->devices.size(), 14u);
  EXPECT_EQ(inv->local.at("gpu-0-mig-1g-5gb-at-2").uuid, uuid);
  auto again = preparer->Prepare(claim);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->already_prepared);
  EXPECT_THAT(Instances(), ::testing::ElementsAre("1:0@2"));

  ASSERT_TRUE(preparer->Unprepare(kUid, "ns", "mig-claim").ok());
  EXPECT_THAT(Instances(), IsEmpty());
  EXPECT_EQ(InitCount(), 0);
}

}  // namespace
}  // namespace qm::agent
