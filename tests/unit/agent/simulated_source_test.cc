// The --simulate file: parsing with field paths in errors, and the inventory it yields (the
// attributes NVIDIA's DRA driver publishes, GPU Feature Discovery labels, stable UUIDs, MIG).
#include "agent/simulated_source.h"

#include <filesystem>
#include <fstream>
#include <variant>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace qm::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Str(const model::Device& d, const std::string& key) {
  auto it = d.attributes.find(key);
  if (it == d.attributes.end()) return "<missing>";
  if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
  if (const auto* v = std::get_if<model::Version>(&it->second)) return "v" + v->value;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return "i" + std::to_string(*i);
  return "<other>";
}

Inventory Build(const std::string& yaml, const std::string& node = "gpu-node-a") {
  auto sim = ParseSimulation(yaml);
  EXPECT_TRUE(sim.ok()) << sim.status();
  auto inv = BuildInventory(*sim, node);
  EXPECT_TRUE(inv.ok()) << inv.status();
  return *inv;
}

TEST(SimulatedSourceTest, TheIssueExampleGivesFourA100s) {
  Inventory inv = Build("gpus:\n- model: NVIDIA A100-SXM4-80GB\n  memory: 80Gi\n  count: 4\n");
  EXPECT_EQ(inv.driver, "gpu.nvidia.com");
  ASSERT_EQ(inv.devices.size(), 4u);
  const model::Device& d = inv.devices[2];
  EXPECT_EQ(d.name, "gpu-2");
  EXPECT_EQ(Str(d, "type"), "gpu");
  EXPECT_EQ(Str(d, "productName"), "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(Str(d, "brand"), "Nvidia");
  EXPECT_EQ(Str(d, "architecture"), "Ampere");
  EXPECT_EQ(Str(d, "cudaComputeCapability"), "v8.0.0");
  EXPECT_EQ(Str(d, "driverVersion"), "v560.35.3");
  EXPECT_EQ(Str(d, "cudaDriverVersion"), "v12.6.0");
  EXPECT_EQ(Str(d, "index"), "i2");
  EXPECT_EQ(Str(d, "resource.kubernetes.io/pcieRoot"), "pci0000:00");
  EXPECT_EQ(Str(d, "pcieBusID"), "0000:12:00.0");
  EXPECT_THAT(Str(d, "uuid"), StartsWith("GPU-"));
  EXPECT_EQ(d.capacity.at("memory").value.String(), "80Gi");
  EXPECT_EQ(inv.local.at("gpu-2").uuid, Str(d, "uuid"));
  EXPECT_EQ(inv.local.at("gpu-2").device_nodes, std::vector<std::string>{"/dev/nvidia2"});

  EXPECT_EQ(inv.node_labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(inv.node_labels.at("nvidia.com/gpu.count"), "4");
  EXPECT_EQ(inv.node_labels.at("nvidia.com/gpu.memory"), "81920");
  EXPECT_EQ(inv.node_labels.at("nvidia.com/gpu.family"), "ampere");
  EXPECT_EQ(inv.node_labels.at("nvidia.com/cuda.driver.major"), "560");
  EXPECT_EQ(inv.node_labels.at("nvidia.com/mig.capable"), "true");
  EXPECT_EQ(inv.node_capacity.at("nvidia.com/gpu"), "4");
}

TEST(SimulatedSourceTest, UuidsAreStablePerNodeAndDistinct) {
  const std::string yaml = "gpus: [{model: NVIDIA L4, memory: 24Gi, count: 2}]";
  Inventory a1 = Build(yaml, "node-a"), a2 = Build(yaml, "node-a"), b = Build(yaml, "node-b");
  EXPECT_EQ(Str(a1.devices[0], "uuid"), Str(a2.devices[0], "uuid"));
  EXPECT_NE(Str(a1.devices[0], "uuid"), Str(a1.devices[1], "uuid"));
  EXPECT_NE(Str(a1.devices[0], "uuid"), Str(b.devices[0], "uuid"));
  EXPECT_EQ(Str(a1.devices[0], "architecture"), "Ada Lovelace");
  EXPECT_EQ(a1.node_labels.at("nvidia.com/gpu.family"), "ada-lovelace");
  EXPECT_EQ(a1.node_labels.at("nvidia.com/mig.capable"), "false");
}

TEST(SimulatedSourceTest, MixedModelsAreLabelledMixedAndNumberedAcross) {
  Inventory inv = Build(
      "gpus:\n- {model: NVIDIA A100-PCIE-40GB, memory: 40Gi, count: 2}\n"
      "- {model: NVIDIA L4, memory: 24Gi, count: 4}\n");
  ASSERT_EQ(inv.devices.size(), 6u);
  EXPECT_EQ(inv.devices[5].name, "gpu-5");
  EXPECT_EQ(Str(inv.devices[5], "productName"), "NVIDIA L4");
  EXPECT_EQ(inv.node_labels.at("nvidia.com/gpu.product"), "mixed");
  EXPECT_EQ(inv.node_labels.at("nvidia.com/gpu.count"), "6");
}

TEST(SimulatedSourceTest, MigLayoutsBecomeMigDevices) {
  Inventory inv = Build(
      "gpus:\n- model: NVIDIA A100-SXM4-80GB\n  memory: 80Gi\n  mig: [3g.40gb, 2g.20gb, "
      "2g.20gb]\n");
  ASSERT_EQ(inv.devices.size(), 3u);
  EXPECT_EQ(inv.devices[0].name, "gpu-0-mig-3g-40gb-0");
  EXPECT_EQ(inv.devices[2].name, "gpu-0-mig-2g-20gb-1");
  EXPECT_EQ(Str(inv.devices[1], "type"), "mig");
  EXPECT_EQ(Str(inv.devices[1], "profile"), "2g.20gb");
  EXPECT_THAT(Str(inv.devices[1], "uuid"), StartsWith("MIG-"));
  EXPECT_EQ(inv.devices[0].capacity.at("memory").value.String(), "40Gi");
  EXPECT_EQ(Str(inv.devices[0], "parentUUID"), inv.local.at("gpu-0-mig-3g-40gb-0").parent_uuid);
  EXPECT_EQ(inv.node_labels.at("nvidia.com/mig.strategy"), "mixed");
}

// Simulated MIG devices are published as NVML's are: each consumes memory and compute slices of
// a counter set of its GPU, which holds the GPU's memory and the model's slices.
TEST(SimulatedSourceTest, MigDevicesConsumeTheirGpusCounters) {
  Inventory inv = Build(
      "gpus:\n- model: NVIDIA A30\n  memory: 24Gi\n  count: 2\n  mig: [2g.12gb, 1g.6gb]\n"
      "- model: NVIDIA L4\n  memory: 24Gi\n");
  ASSERT_EQ(inv.shared_counters.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const model::CounterSet& set = inv.shared_counters[i];
    EXPECT_EQ(set.name, "gpu-" + std::to_string(i) + "-counter-set");
    EXPECT_EQ(set.counters.at("memory").String(), "24Gi");
    EXPECT_EQ(set.counters.at("compute-slices").String(), "4");  // an A30 has 4 slices
  }
  ASSERT_EQ(inv.devices.size(), 5u);
  const model::Device& m = inv.devices[2];
  EXPECT_EQ(m.name, "gpu-1-mig-2g-12gb-0");
  ASSERT_EQ(m.consumes_counters.size(), 1u);
  EXPECT_EQ(m.consumes_counters[0].counter_set, "gpu-1-counter-set");
  EXPECT_EQ(m.consumes_counters[0].counters.at("memory").String(), "12Gi");
  EXPECT_EQ(m.consumes_counters[0].counters.at("compute-slices").String(), "2");
  EXPECT_EQ(m.capacity.at("multiprocessors").value.String(), "28");
  EXPECT_EQ(inv.devices[3].consumes_counters[0].counters.at("compute-slices").String(), "1");
  // The whole GPU consumes nothing.
  EXPECT_EQ(inv.devices[4].name, "gpu-2");
  EXPECT_TRUE(inv.devices[4].consumes_counters.empty());
}

TEST(SimulatedSourceTest, ErrorsNameTheField) {
  auto err = [](const std::string& yaml) {
    auto sim = ParseSimulation(yaml);
    if (sim.ok()) {
      auto inv = BuildInventory(*sim, "n");
      return inv.ok() ? std::string("ok") : std::string(inv.status().message());
    }
    return std::string(sim.status().message());
  };
  EXPECT_THAT(err("gpus: []"), StartsWith("gpus: required"));
  EXPECT_THAT(err("gpus: [{model: NVIDIA L4}]"), StartsWith("gpus[0].memory: required"));
  EXPECT_THAT(err("gpus: [{model: NVIDIA L4, memory: lots}]"), StartsWith("gpus[0].memory:"));
  EXPECT_THAT(err("gpus: [{model: NVIDIA L4, memory: 1Gi, count: 0}]"),
              StartsWith("gpus[0].count: want 1 to 1024"));
  EXPECT_THAT(err("gpus: [{model: NVIDIA L4, memory: 1Gi, colour: red}]"),
              StartsWith("gpus[0].colour: unknown field"));
  EXPECT_THAT(err("gpus: [{model: Acme X1, memory: 1Gi}]"),
              StartsWith("gpus[0].architecture: required for model \"Acme X1\""));
  EXPECT_EQ(err("gpus: [{model: Acme X1, memory: 1Gi, architecture: Acme, "
                "cudaComputeCapability: '1.0'}]"),
            "ok");
  EXPECT_THAT(err("gpus: [{model: NVIDIA L4, memory: 24Gi, mig: [1g.6gb]}]"),
              HasSubstr("does not support MIG"));
  EXPECT_THAT(err("gpus: [{model: NVIDIA A100, memory: 80Gi, mig: [7g.80gb, 1g.10gb]}]"),
              StartsWith("gpus[0].mig: the profiles need more than 7 compute slices"));
  EXPECT_EQ(err("gpus: [{model: NVIDIA A30, memory: 24Gi, mig: [2g.12gb, 2g.12gb, 1g.6gb]}]"),
            "gpus[0].mig: the profiles need 5 compute slices, NVIDIA A30 has 4");
  EXPECT_EQ(err("gpus: [{model: NVIDIA A100, memory: 40Gi, mig: [3g.40gb, 3g.40gb]}]"),
            "gpus[0].mig: the profiles need more memory than the GPU's 40Gi");
  EXPECT_THAT(err("gpus: [{model: NVIDIA A100, memory: 80Gi, mig: [big]}]"),
              StartsWith("gpus[0].mig[0]: want a MIG profile"));
  EXPECT_THAT(err("driverVersion: abc\ngpus: [{model: NVIDIA L4, memory: 1Gi}]"),
              StartsWith("driverVersion: want a version"));
  EXPECT_THAT(err("[1, 2"), StartsWith("not YAML"));
  EXPECT_THAT(err("gpus: [{model: NVIDIA L4, memory: 24Gi, mig: dynamic}]"),
              HasSubstr("does not support MIG"));
  EXPECT_THAT(err("gpus: [{model: NVIDIA A100, memory: 80Gi, mig: static}]"),
              StartsWith("gpus[0].mig: want a list of MIG profiles, or dynamic"));
}

TEST(SimulatedSourceTest, DynamicMigPublishesEveryPlacement) {
  Inventory inv = Build(R"(
gpus:
- {model: NVIDIA A100-SXM4-40GB, memory: 40Gi, mig: dynamic}
- {model: NVIDIA A30, memory: 24Gi, mig: dynamic}
)");
  ASSERT_EQ(inv.devices.size(), 14u + 7u);
  EXPECT_EQ(inv.devices[0].name, "gpu-0-mig-1g-5gb-at-0");
  EXPECT_EQ(inv.devices[13].name, "gpu-0-mig-7g-40gb-at-0");
  EXPECT_EQ(inv.devices[20].name, "gpu-1-mig-4g-24gb-at-0");
  EXPECT_EQ(Str(inv.devices[12], "productName"), "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(Str(inv.devices[12], "placementSize"), "i4");
  ASSERT_EQ(inv.shared_counters.size(), 2u);
  EXPECT_EQ(inv.shared_counters[0].counters.size(), 2u + 8u);
  EXPECT_EQ(inv.shared_counters[1].counters.size(), 2u + 4u);
  EXPECT_EQ(inv.shared_counters[1].counters.at("compute-slices").String(), "4");
  const LocalDevice& l = inv.local.at("gpu-0-mig-2g-10gb-at-4");
  ASSERT_TRUE(l.mig_placement.has_value());
  EXPECT_EQ(l.mig_placement->start, 4);
  EXPECT_EQ(l.uuid, "");
  EXPECT_EQ(inv.node_labels.at("nvidia.com/mig.strategy"), "mixed");
}

TEST(SimulatedSourceTest, SimulatedMigInstancesDoNotOverlap) {
  Inventory inv = Build("gpus: [{model: NVIDIA A100-SXM4-40GB, memory: 40Gi, mig: dynamic}]");
  SimulatedSource source("unused.yaml", "gpu-node-a");
  ASSERT_EQ(source.mig_instances(), &source);
  auto a = source.Create(inv.local.at("gpu-0-mig-3g-20gb-at-0"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->gpu_instance_id, 1);
  EXPECT_THAT(a->uuid, StartsWith("MIG-"));
  EXPECT_EQ(a->device_nodes, std::vector<std::string>{"/dev/nvidia0"});
  auto overlap = source.Create(inv.local.at("gpu-0-mig-1g-5gb-at-3"));
  EXPECT_EQ(overlap.status().code(), absl::StatusCode::kResourceExhausted);
  auto b = source.Create(inv.local.at("gpu-0-mig-1g-5gb-at-4"));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->gpu_instance_id, 2);
  EXPECT_NE(b->uuid, a->uuid);
  ASSERT_TRUE(source.Destroy(*a).ok());
  EXPECT_TRUE(source.Create(inv.local.at("gpu-0-mig-1g-5gb-at-3")).ok());
  // After a restart the checkpoint's instances are held again, and still exclude their slices.
  SimulatedSource restarted("unused.yaml", "gpu-node-a");
  restarted.Hold(*b);
  EXPECT_EQ(restarted.Create(inv.local.at("gpu-0-mig-2g-10gb-at-4")).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(SimulatedSourceTest, SourceRereadsTheFile) {
  auto path = std::filesystem::temp_directory_path() / "qm-sim-test.yaml";
  std::ofstream(path) << "gpus: [{model: NVIDIA L4, memory: 24Gi, count: 1}]\n";
  SimulatedSource source(path.string(), "n1");
  auto first = source.Discover();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->devices.size(), 1u);
  std::ofstream(path) << "gpus: [{model: NVIDIA L4, memory: 24Gi, count: 3}]\n";
  auto second = source.Discover();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->devices.size(), 3u);
  std::ofstream(path) << "gpus: 7\n";
  auto bad = source.Discover();
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(path.string()));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace qm::agent
