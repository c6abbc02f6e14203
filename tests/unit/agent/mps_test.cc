// MpsControl against the fake nvidia-cuda-mps-control (tests/agent/fake_mps_control), which
// records what it is asked: the daemon's environment, the defaults through the control
// interface, quit, and the errors for a missing binary and a refused setting.
#include "agent/mps.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace qm::agent {
namespace {

using ::testing::HasSubstr;

class MpsControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/qm-mps-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    setenv("QM_FAKE_MPS_LOG", (dir_ + "/calls.log").c_str(), 1);
    unsetenv("QM_FAKE_MPS_FAIL");
  }
  void TearDown() override {
    MpsControl(QM_FAKE_MPS_CONTROL).Stop(dir_ + "/pipe", dir_ + "/log").IgnoreError();
    std::filesystem::remove_all(dir_);
  }
  std::string Calls() {
    std::ifstream in(dir_ + "/calls.log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  MpsDaemonSpec Spec() {
    return MpsDaemonSpec{dir_ + "/pipe",
                         dir_ + "/log",
                         {"GPU-a", "GPU-b"},
                         40,
                         {{"GPU-a", "8192M"}, {"GPU-b", "4096M"}}};
  }
  std::string dir_;
};

TEST_F(MpsControlTest, StartsTheDaemonForTheClaimAndAppliesItsDefaults) {
  MpsControl mps(QM_FAKE_MPS_CONTROL);
  ASSERT_TRUE(mps.Start(Spec()).ok()) << mps.Start(Spec());
  const std::string p = dir_ + "/pipe";
  EXPECT_EQ(Calls(), "start pipe=" + p + " log=" + dir_ + "/log devices=GPU-a,GPU-b\n" +
                         "set_default_active_thread_percentage 40 pipe=" + p + "\n" +
                         "set_default_device_pinned_mem_limit GPU-a 8192M pipe=" + p + "\n" +
                         "set_default_device_pinned_mem_limit GPU-b 4096M pipe=" + p + "\n");
  EXPECT_TRUE(std::filesystem::exists(p + "/control"));
  // A second start on the same directory fails, with the binary's words.
  absl::Status again = mps.Start(Spec());
  EXPECT_EQ(again.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(again.message(), HasSubstr("An instance of this daemon is already running"));

  ASSERT_TRUE(mps.Stop(p, dir_ + "/log").ok());
  EXPECT_THAT(Calls(), HasSubstr("quit pipe=" + p + "\n"));
  EXPECT_FALSE(std::filesystem::exists(p + "/control"));
  // No daemon serves the directory any more: nothing to stop, and nothing is run.
  const std::string before = Calls();
  EXPECT_TRUE(mps.Stop(p, dir_ + "/log").ok());
  EXPECT_EQ(Calls(), before);
}

TEST_F(MpsControlTest, AMissingBinaryIsFailedPrecondition) {
  for (const std::string binary :
       {dir_ + "/nvidia-cuda-mps-control", std::string("qm-no-such-mps-control")}) {
    absl::Status st = MpsControl(binary).Start(Spec());
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_EQ(st.message(), "cannot run the MPS control binary " + binary +
                                ": No such file or directory (is the NVIDIA driver's MPS "
                                "installed? --mps-control-binary PATH names it)");
  }
  EXPECT_EQ(Calls(), "");
}

TEST_F(MpsControlTest, ARefusedSettingStopsTheDaemonAgain) {
  setenv("QM_FAKE_MPS_FAIL", "set_default_device_pinned_mem_limit", 1);
  absl::Status st = MpsControl(QM_FAKE_MPS_CONTROL).Start(Spec());
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(st.message(), HasSubstr("(set_default_device_pinned_mem_limit GPU-a 8192M) failed "
                                      "with exit status 1: set_default_device_pinned_mem_limit: "
                                      "refused"));
  EXPECT_THAT(Calls(), HasSubstr("quit pipe="));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/pipe/control"));
}

}  // namespace
}  // namespace qm::agent
