// Credentials from the kubeconfigs `quartermaster credential` writes (rendered by the same code),
// and the gRPC target derived from a REST URL.
#include "agent/credentials.h"

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "auth/pki.h"

namespace qm::agent {
namespace {

using ::testing::HasSubstr;

class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/qm-cred-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(CredentialsTest, ReadsAMintedNodeKubeconfig) {
  const std::string path = Write(
      "node.kubeconfig", auth::RenderKubeconfig("https://10.0.0.5:8080", "CA PEM\n",
                                                auth::KubeconfigUser{"system:node:gpu-node-a", "",
                                                                     "CERT PEM\n", "KEY PEM\n"}));
  auto creds = LoadKubeconfig(path);
  ASSERT_TRUE(creds.ok()) << creds.status();
  EXPECT_EQ(creds->server_url, "https://10.0.0.5:8080");
  EXPECT_EQ(creds->ca_pem, "CA PEM\n");
  EXPECT_EQ(creds->cert_pem, "CERT PEM\n");
  EXPECT_EQ(creds->key_pem, "KEY PEM\n");
  EXPECT_EQ(creds->token, "");
}

TEST_F(CredentialsTest, ReadsTokensFilesAndTheCurrentContext) {
  Write("ca.crt", "FILE CA\n");
  const std::string path = Write("multi.kubeconfig", R"(apiVersion: v1
kind: Config
clusters:
- name: other
  cluster: {server: "https://other:8080"}
- name: mine
  cluster:
    server: "https://[::1]:9443"
    certificate-authority: ca.crt
users:
- name: nobody
  user: {token: "wrong"}
- name: me
  user: {token: "s3cret"}
contexts:
- name: c
  context: {cluster: mine, user: me}
current-context: c
)");
  auto creds = LoadKubeconfig(path);
  ASSERT_TRUE(creds.ok()) << creds.status();
  EXPECT_EQ(creds->server_url, "https://[::1]:9443");
  EXPECT_EQ(creds->ca_pem, "FILE CA\n");
  EXPECT_EQ(creds->token, "s3cret");
}

TEST_F(CredentialsTest, BadKubeconfigsSayWhy) {
  EXPECT_THAT(std::string(LoadKubeconfig(dir_ + "/missing").status().message()),
              HasSubstr("cannot read"));
  EXPECT_THAT(
      std::string(
          LoadKubeconfig(Write("a", "current-context: x\nclusters: []\n")).status().message()),
      HasSubstr("context \"x\" not found"));
  EXPECT_THAT(std::string(LoadKubeconfig(Write("b",
                                               "clusters:\n- name: c\n  cluster:\n"
                                               "    certificate-authority-data: '!!'\n"))
                              .status()
                              .message()),
              HasSubstr("not base64"));
}

TEST(GrpcTargetTest, KeepsTheHostAndSwapsThePort) {
  EXPECT_EQ(GrpcTargetForUrl("https://10.0.0.5:8080", 8081), "10.0.0.5:8081");
  EXPECT_EQ(GrpcTargetForUrl("https://qm.example.com", 8081), "qm.example.com:8081");
  EXPECT_EQ(GrpcTargetForUrl("https://[::1]:8080/", 9000), "[::1]:9000");
}

}  // namespace
}  // namespace qm::agent
