// The web UI's files: loaded once, served for every non-API path, never shadowing the API.
#include "api/rest/static_files.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace qm::api {
namespace {

class StaticFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A directory of its own: ctest runs these tests as parallel processes, and a shared one was
    // emptied by one test's SetUp while another read it.
    std::string tmpl = ::testing::TempDir() + "/qm_static_files_test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    std::filesystem::create_directories(root_ + "/assets");
    std::ofstream(root_ + "/index.html") << "<html>app</html>";
    std::ofstream(root_ + "/assets/index-1.js") << "js";
    std::ofstream(root_ + "/assets/index-1.css") << "css";
    std::ofstream(root_ + "/favicon.svg") << "<svg/>";
  }

  static HttpRequest Get(const std::string& path) {
    HttpRequest r;
    r.method = "GET";
    r.path = path;
    return r;
  }

  void TearDown() override { std::filesystem::remove_all(root_); }

  std::string root_;
};

TEST_F(StaticFilesTest, ServesFilesWithTheirContentTypes) {
  auto files = StaticFiles::Load(root_);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ((*files)->file_count(), 4u);
  auto js = (*files)->Serve(Get("/assets/index-1.js"));
  ASSERT_TRUE(js.has_value());
  EXPECT_EQ(js->code, 200);
  EXPECT_EQ(js->body, "js");
  EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ((*files)->Serve(Get("/assets/index-1.css"))->content_type, "text/css; charset=utf-8");
  EXPECT_EQ((*files)->Serve(Get("/favicon.svg"))->content_type, "image/svg+xml");
}

TEST_F(StaticFilesTest, ClientRoutesGetIndexAndMissingAssetsAre404) {
  auto files = StaticFiles::Load(root_);
  ASSERT_TRUE(files.ok());
  for (const char* path :
       {"/", "/inventory", "/inventory/gpu-node-a.example.com", "/device-classes/new"}) {
    auto r = (*files)->Serve(Get(path));
    ASSERT_TRUE(r.has_value()) << path;
    EXPECT_EQ(r->code, 200) << path;
    EXPECT_EQ(r->body, "<html>app</html>") << path;
    EXPECT_EQ(r->content_type, "text/html; charset=utf-8");
  }
  auto missing = (*files)->Serve(Get("/assets/gone.js"));
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->code, 404);
  EXPECT_FALSE((*files)->Serve(Get("/../../etc/passwd"))->body.empty());  // index, not a file
}

TEST_F(StaticFilesTest, ApiPathsAndOtherMethodsAreLeftToTheApi) {
  auto files = StaticFiles::Load(root_);
  ASSERT_TRUE(files.ok());
  for (const char* path :
       {"/api", "/api/v1/nodes", "/apis", "/apis/resource.k8s.io/v1/deviceclasses", "/openapi/v3",
        "/version", "/healthz", "/livez", "/readyz", "/metrics", "//api/v1/pods"}) {
    EXPECT_FALSE((*files)->Serve(Get(path)).has_value()) << path;
  }
  HttpRequest post = Get("/");
  post.method = "POST";
  EXPECT_FALSE((*files)->Serve(post).has_value());
  EXPECT_FALSE(StaticFiles::IsApiPath("/apiary"));
  EXPECT_TRUE(StaticFiles::IsApiPath("/apis/"));
}

TEST_F(StaticFilesTest, ARootWithoutIndexIsRefused) {
  std::filesystem::remove(root_ + "/index.html");
  auto files = StaticFiles::Load(root_);
  EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StaticFiles::Load(root_ + "/nope").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace qm::api
