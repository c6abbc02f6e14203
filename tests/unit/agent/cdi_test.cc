// CDI spec files: the JSON a container runtime reads (checked as parsed JSON, against the CDI
// 0.6 schema's field names), atomic writes, and uids that could escape the directory.
#include "agent/cdi.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace qm::agent {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/qm-cdi-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CdiSpec Example() {
  CdiSpec spec;
  spec.annotations = {{"quartermaster.io/claim", "ns/c"}};
  spec.devices.push_back({"u1-gpu-0", {"QM_DEVICE_0=GPU-a"}, {"/dev/nvidia0"}, {}});
  spec.devices.push_back({"u1-gpu-1", {}, {"/dev/nvidia1"}, {}});
  spec.env = {"NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b"};
  spec.device_nodes = {"/dev/nvidiactl"};
  return spec;
}

TEST(CdiTest, SpecIsCdi06Json) {
  json j = json::parse(CdiSpecJson(Example()));
  EXPECT_EQ(j["cdiVersion"], "0.6.0");
  EXPECT_EQ(j["kind"], "k8s.gpu.nvidia.com/claim");
  EXPECT_EQ(j["annotations"]["quartermaster.io/claim"], "ns/c");
  ASSERT_EQ(j["devices"].size(), 2u);
  EXPECT_EQ(j["devices"][0]["name"], "u1-gpu-0");
  EXPECT_EQ(j["devices"][0]["containerEdits"]["env"], json({"QM_DEVICE_0=GPU-a"}));
  EXPECT_EQ(j["devices"][1]["containerEdits"]["deviceNodes"],
            json::parse(R"([{"path":"/dev/nvidia1"}])"));
  EXPECT_FALSE(j["devices"][1]["containerEdits"].contains("env"));
  EXPECT_EQ(j["containerEdits"]["env"], json({"NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b"}));
  EXPECT_EQ(j["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidiactl");
}

TEST(CdiTest, QualifiedIdsAndPaths) {
  EXPECT_EQ(QualifiedDeviceId(kCdiKind, "u1-gpu-0"), "k8s.gpu.nvidia.com/claim=u1-gpu-0");
  EXPECT_EQ(CdiSpecPath("/var/run/cdi", "u1"), "/var/run/cdi/k8s.gpu.nvidia.com-claim_u1.json");
}

TEST(CdiTest, RefusesUidsThatAreNotUuidLike) {
  EXPECT_TRUE(IsSafeClaimUid("72bfb82f-dcf3-4617-99f8-99aec37e963e"));
  for (const char* bad : {"", "../etc/passwd", "a/b", "a.b", "a b", "x\n"}) {
    EXPECT_FALSE(IsSafeClaimUid(bad)) << bad;
  }
  EXPECT_FALSE(IsSafeClaimUid(std::string(65, 'a')));
  TempDir dir;
  EXPECT_TRUE(absl::IsInvalidArgument(WriteCdiSpec(dir.path(), "../x", Example())));
  EXPECT_TRUE(absl::IsInvalidArgument(RemoveCdiSpec(dir.path(), "../x")));
}

TEST(CdiTest, WriteListRemove) {
  TempDir dir;
  ASSERT_TRUE(WriteCdiSpec(dir.path(), "u1", Example()).ok());
  ASSERT_TRUE(WriteCdiSpec(dir.path(), "u2", Example()).ok());
  std::ofstream(dir.path() + "/other-vendor.json") << "{}";
  EXPECT_THAT(ListCdiSpecs(dir.path()), UnorderedElementsAre("u1", "u2"));
  // The file is complete JSON with the runtime-readable mode, and no temporary is left.
  EXPECT_EQ(json::parse(Read(CdiSpecPath(dir.path(), "u1")))["kind"], kCdiKind);
  struct stat st {};
  ASSERT_EQ(stat(CdiSpecPath(dir.path(), "u1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 3);
  // Rewriting replaces the contents.
  CdiSpec changed = Example();
  changed.devices.pop_back();
  ASSERT_TRUE(WriteCdiSpec(dir.path(), "u1", changed).ok());
  EXPECT_EQ(json::parse(Read(CdiSpecPath(dir.path(), "u1")))["devices"].size(), 1u);
  ASSERT_TRUE(RemoveCdiSpec(dir.path(), "u1").ok());
  EXPECT_THAT(ListCdiSpecs(dir.path()), ElementsAre("u2"));
  EXPECT_TRUE(RemoveCdiSpec(dir.path(), "u1").ok());  // already gone
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/other-vendor.json"));
}

}  // namespace
}  // namespace qm::agent
