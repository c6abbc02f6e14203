#include "api/rest/status.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "model/field_error.h"

namespace qm::api {
namespace {

using nlohmann::json;

struct CodeCase {
  absl::StatusCode code;
  int http;
  const char* reason;
};

const std::vector<CodeCase> kCodeTable = {
    {absl::StatusCode::kNotFound, 404, "NotFound"},
    {absl::StatusCode::kAlreadyExists, 409, "AlreadyExists"},
    {absl::StatusCode::kAborted, 409, "Conflict"},
    {absl::StatusCode::kFailedPrecondition, 409, "Conflict"},
    {absl::StatusCode::kInvalidArgument, 400, "BadRequest"},
    {absl::StatusCode::kPermissionDenied, 403, "Forbidden"},
    {absl::StatusCode::kOutOfRange, 410, "Expired"},
    {absl::StatusCode::kUnimplemented, 415, "UnsupportedMediaType"},
    {absl::StatusCode::kResourceExhausted, 429, "TooManyRequests"},
    {absl::StatusCode::kDeadlineExceeded, 504, "Timeout"},
    {absl::StatusCode::kUnavailable, 503, "ServiceUnavailable"},
    {absl::StatusCode::kInternal, 500, "InternalError"},
    {absl::StatusCode::kUnknown, 500, "InternalError"},
    {absl::StatusCode::kDataLoss, 500, "InternalError"},
    {absl::StatusCode::kCancelled, 500, "InternalError"},
    {absl::StatusCode::kUnauthenticated, 500, "InternalError"},
};

TEST(StatusTest, MapsEveryCodeToDocumentedHttpCodeAndReason) {
  for (const CodeCase& c : kCodeTable) {
    HttpError err = ToHttpError(absl::Status(c.code, "boom"), StatusDetails{});
    EXPECT_EQ(err.code, c.http) << absl::StatusCodeToString(c.code);
    EXPECT_EQ(err.status["code"], c.http) << absl::StatusCodeToString(c.code);
    EXPECT_EQ(err.status["reason"], c.reason) << absl::StatusCodeToString(c.code);
  }
}

TEST(StatusTest, ErrorBodyIsAKubernetesFailureStatus) {
  HttpError err =
      ToHttpError(absl::NotFoundError("resourceclaims.resource.k8s.io \"rc1\" not found"),
                  StatusDetails{"rc1", "resource.k8s.io", "resourceclaims"});
  EXPECT_EQ(err.code, 404);
  EXPECT_EQ(err.status, json::parse(R"({
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": "resourceclaims.resource.k8s.io \"rc1\" not found", "reason": "NotFound",
    "details": {"name": "rc1", "group": "resource.k8s.io", "kind": "resourceclaims"},
    "code": 404})"));
}

TEST(StatusTest, OmitsDetailsWhenNothingNamed) {
  HttpError err = ToHttpError(absl::InvalidArgumentError("bad"), StatusDetails{});
  EXPECT_FALSE(err.status.contains("details"));
  EXPECT_EQ(err.status["message"], "bad");
}

TEST(StatusTest, DetailsWithKindButNoNameOmitName) {
  HttpError err = ToHttpError(absl::AlreadyExistsError("x"), StatusDetails{"", "", "nodes"});
  ASSERT_TRUE(err.status.contains("details"));
  EXPECT_EQ(err.status["details"], json::parse(R"({"group": "", "kind": "nodes"})"));
}

TEST(StatusTest, InvalidErrorWithOneCauseHasNoBrackets) {
  HttpError err = InvalidError("ResourceClaim", "resource.k8s.io", "rc1",
                               {model::Required("spec.devices.requests[0].name")});
  EXPECT_EQ(err.code, 422);
  EXPECT_EQ(err.status["reason"], "Invalid");
  EXPECT_EQ(err.status["code"], 422);
  EXPECT_EQ(err.status["status"], "Failure");
  EXPECT_EQ(err.status["message"],
            "ResourceClaim.resource.k8s.io \"rc1\" is invalid: spec.devices.requests[0].name: "
            "Required value");
  EXPECT_EQ(err.status["details"], json::parse(R"({
    "name": "rc1", "group": "resource.k8s.io", "kind": "ResourceClaim",
    "causes": [{"reason": "FieldValueRequired", "message": "Required value",
                "field": "spec.devices.requests[0].name"}]})"));
}

TEST(StatusTest, InvalidErrorWithTwoCausesListsBothInBrackets) {
  HttpError err = InvalidError(
      "ResourceClaim", "resource.k8s.io", "Bad_Name",
      {model::Invalid("metadata.name", model::Quote("Bad_Name"), "a lowercase RFC 1123 subdomain"),
       model::NotSupported("spec.devices.requests[0].exactly.allocationMode", model::Quote("Some"),
                           {"All", "ExactCount"})});
  EXPECT_EQ(err.code, 422);
  EXPECT_EQ(err.status["message"],
            "ResourceClaim.resource.k8s.io \"Bad_Name\" is invalid: [metadata.name: Invalid "
            "value: \"Bad_Name\": a lowercase RFC 1123 subdomain, "
            "spec.devices.requests[0].exactly.allocationMode: Unsupported value: \"Some\": "
            "supported values: \"All\", \"ExactCount\"]");
  const json& causes = err.status["details"]["causes"];
  ASSERT_EQ(causes.size(), 2u);
  EXPECT_EQ(causes[0], json::parse(R"({"reason": "FieldValueInvalid",
      "message": "Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain",
      "field": "metadata.name"})"));
  EXPECT_EQ(causes[1], json::parse(R"({"reason": "FieldValueNotSupported",
      "message": "Unsupported value: \"Some\": supported values: \"All\", \"ExactCount\"",
      "field": "spec.devices.requests[0].exactly.allocationMode"})"));
}

TEST(StatusTest, InvalidErrorForCoreGroupUsesBareKind) {
  HttpError err = InvalidError("Namespace", "", "ns", {model::Forbidden("spec", "no")});
  EXPECT_EQ(err.status["message"], "Namespace \"ns\" is invalid: spec: Forbidden: no");
  EXPECT_EQ(err.status["details"]["group"], "");
}

TEST(StatusTest, MakeErrorUsesGivenCodeAndReason) {
  HttpError err = MakeError(405, "MethodNotAllowed", "the server does not allow this method");
  EXPECT_EQ(err.code, 405);
  EXPECT_EQ(err.status, json::parse(R"({
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": "the server does not allow this method", "reason": "MethodNotAllowed",
    "code": 405})"));
}

TEST(StatusTest, SuccessStatusNamesDeletedObject) {
  json s = SuccessStatus(StatusDetails{"rc1", "resource.k8s.io", "resourceclaims"}, "uid-1");
  EXPECT_EQ(s, json::parse(R"({
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
    "details": {"name": "rc1", "group": "resource.k8s.io", "kind": "resourceclaims",
                "uid": "uid-1"}})"));
}

}  // namespace
}  // namespace qm::api
