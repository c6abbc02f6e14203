// The request target as the REST API sees it: decoding, and the UTF-8 check that keeps bytes a
// JSON answer could not quote (the fuzzer's finding) out of the server.
#include "api/rest/request_target.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace qm::api {
namespace {

namespace http = boost::beast::http;

TEST(RequestTargetTest, DecodesPathAndQuery) {
  HttpRequest req;
  ASSERT_TRUE(ParseRequestTarget(
                  "/api/v1/namespaces/a%2Db/pods?labelSelector=app%3Dx+y&watch=1&limit", &req)
                  .ok());
  EXPECT_EQ(req.path, "/api/v1/namespaces/a-b/pods");
  EXPECT_EQ(req.query.at("labelSelector"), "app=x y");
  EXPECT_EQ(req.query.at("watch"), "1");
  EXPECT_EQ(req.query.at("limit"), "");
}

TEST(RequestTargetTest, PlusStaysInThePathAndStrayPercentIsKept) {
  HttpRequest req;
  ASSERT_TRUE(ParseRequestTarget("/a+b/%zz/%4", &req).ok());
  EXPECT_EQ(req.path, "/a+b/%zz/%4");
}

TEST(RequestTargetTest, InvalidUtf8IsRefusedInPathKeyAndValue) {
  for (const char* target : {"/api/v1/namespaces/%ff", "/api?%c0%af=1",
                             "/api?fieldSelector=%ed%a0%80", "/api/v1/\xfe"}) {
    HttpRequest req;
    absl::Status s = ParseRequestTarget(target, &req);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << target;
  }
  HttpRequest ok;
  EXPECT_TRUE(ParseRequestTarget("/api/v1/namespaces/%C3%A9?x=%E2%9C%93", &ok).ok());
  EXPECT_EQ(ok.path, "/api/v1/namespaces/\xc3\xa9");
}

TEST(RequestTargetTest, FromHttpMessageCopiesWhatTheApiReads) {
  http::request<http::string_body> msg{http::verb::post, "/apis/x?dryRun=All", 11};
  msg.set(http::field::content_type, "application/json");
  msg.set(http::field::accept, "application/json;as=Table");
  msg.set(http::field::user_agent, "kubectl/\xff");
  msg.set(http::field::authorization, "Bearer  tok-1 ");
  msg.set("Impersonate-User", "alice");
  msg.body() = "{}";
  HttpRequest req;
  std::optional<std::string> token;
  ASSERT_TRUE(FromHttpMessage(std::move(msg), &req, &token).ok());
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.path, "/apis/x");
  EXPECT_EQ(req.query.at("dryRun"), "All");
  EXPECT_EQ(req.content_type, "application/json");
  EXPECT_EQ(req.accept, "application/json;as=Table");
  EXPECT_EQ(req.user_agent, "kubectl/\xef\xbf\xbd");
  EXPECT_EQ(token, std::optional<std::string>("tok-1"));
  ASSERT_EQ(req.impersonation.size(), 1u);
  EXPECT_EQ(req.impersonation[0].first, "impersonate-user");
  EXPECT_EQ(req.impersonation[0].second, "alice");
  EXPECT_EQ(req.body, "{}");
}

TEST(RequestTargetTest, NonUtf8ImpersonationIsRefused) {
  http::request<http::string_body> msg{http::verb::get, "/api", 11};
  msg.set("Impersonate-Group", "a\xc3");
  HttpRequest req;
  std::optional<std::string> token;
  EXPECT_EQ(FromHttpMessage(std::move(msg), &req, &token).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace qm::api
