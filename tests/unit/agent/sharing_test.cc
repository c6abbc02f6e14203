// Opaque configs in NVIDIA's format: strict parsing with field paths, and which config applies
// to which request (class before claim, the last one wins, subrequests match their request).
#include "agent/sharing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace qm::agent {
namespace {

using ::testing::HasSubstr;

TEST(SharingTest, ParsesTimeSlicingAndMps) {
  auto ts = ParseDeviceConfig(R"({"apiVersion": "resource.nvidia.com/v1beta1",
      "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing",
      "timeSlicingConfig": {"interval": "Short"}}})");
  ASSERT_TRUE(ts.ok()) << ts.status();
  EXPECT_EQ(ts->kind, "GpuConfig");
  EXPECT_EQ(ts->sharing.strategy, SharingConfig::Strategy::kTimeSlicing);
  EXPECT_EQ(ts->sharing.interval, "Short");

  auto mps = ParseDeviceConfig(R"({"apiVersion": "resource.nvidia.com/v1beta1",
      "kind": "MigDeviceConfig", "sharing": {"strategy": "MPS", "mpsConfig": {
      "defaultActiveThreadPercentage": 25, "defaultPinnedDeviceMemoryLimit": "1Gi",
      "defaultPerDevicePinnedMemoryLimit": {"GPU-x": "512Mi"}}}})");
  ASSERT_TRUE(mps.ok()) << mps.status();
  EXPECT_EQ(mps->sharing.strategy, SharingConfig::Strategy::kMps);
  EXPECT_EQ(mps->sharing.active_thread_percentage, 25);
  EXPECT_EQ(mps->sharing.pinned_memory_limit->String(), "1Gi");
  EXPECT_EQ(mps->sharing.per_device_pinned_memory_limit.at("GPU-x").String(), "512Mi");

  auto plain = ParseDeviceConfig(R"({"apiVersion": "resource.nvidia.com/v1beta1",
      "kind": "GpuConfig"})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->sharing.strategy, SharingConfig::Strategy::kNone);
}

TEST(SharingTest, RefusesWhatNvidiasDriverRefuses) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[]", "parameters must be an object"},
      {"{", "not JSON"},
      {R"({"apiVersion": "resource.nvidia.com/v1", "kind": "GpuConfig"})", "apiVersion: want"},
      {R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "TpuConfig"})", "kind: want"},
      {R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharng": {}})",
       "sharng: unknown field"},
      {R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
           "sharing": {"strategy": "TimeSlicing", "mpsConfig": {}}})",
       "sharing.mpsConfig: only with strategy MPS"},
      {R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
           "sharing": {"strategy": "MPS", "timeSlicingConfig": {}}})",
       "sharing.timeSlicingConfig: only with strategy TimeSlicing"},
      {R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
           "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 0}}})",
       "defaultActiveThreadPercentage: want a whole number from 1 to 100"},
      {R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
           "sharing": {"strategy": "MPS", "mpsConfig": {"defaultPinnedDeviceMemoryLimit": "-1Gi"}}})",
       "defaultPinnedDeviceMemoryLimit: want a positive quantity"},
      {R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
           "sharing": {"strategy": "MPS", "mpsConfig": {
             "defaultPerDevicePinnedMemoryLimit": {"0": "lots"}}}})",
       "defaultPerDevicePinnedMemoryLimit[0]: want a positive quantity"},
      {R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
           "sharing": {"strategy": "MPS", "mpsConfig": {"threads": 3}}})",
       "sharing.mpsConfig.threads: unknown field"},
  };
  for (const auto& [params, want] : cases) {
    auto c = ParseDeviceConfig(params);
    ASSERT_FALSE(c.ok()) << params;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(c.status().message(), HasSubstr(want)) << params;
  }
}

TEST(SharingTest, TheLastMatchingConfigWinsClaimAfterClass) {
  std::vector<OpaqueConfig> configs = {
      {"FromClaim", {"gpu"}, "gpu.nvidia.com", "claim-gpu"},
      {"FromClass", {}, "gpu.nvidia.com", "class-all"},
      {"FromClaim", {"other"}, "gpu.nvidia.com", "claim-other"},
      {"FromClaim", {}, "example.com", "foreign"},
  };
  EXPECT_EQ(ConfigForRequest(configs, "gpu.nvidia.com", "gpu")->parameters_json, "claim-gpu");
  EXPECT_EQ(ConfigForRequest(configs, "gpu.nvidia.com", "gpu/a100")->parameters_json, "claim-gpu");
  EXPECT_EQ(ConfigForRequest(configs, "gpu.nvidia.com", "third")->parameters_json, "class-all");
  EXPECT_EQ(ConfigForRequest(configs, "example.com", "x")->parameters_json, "foreign");
  EXPECT_EQ(ConfigForRequest({}, "gpu.nvidia.com", "gpu"), nullptr);
}

}  // namespace
}  // namespace qm::agent
