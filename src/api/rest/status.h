#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "model/field_error.h"

namespace qm::api {

// What an error looks like on the wire: an HTTP code and a Kubernetes Status object.
struct HttpError {
  int code = 500;
  nlohmann::json status;
};

// Details that name the object an error is about ("details" of the Status).
struct StatusDetails {
  std::string name;
  std::string group;
  std::string kind;  // the resource plural, as the apiserver puts it
};

// The one table from absl::Status codes to HTTP codes and Kubernetes Status reasons:
// NotFound 404 NotFound, AlreadyExists 409 AlreadyExists, Aborted 409 Conflict,
// FailedPrecondition 409 Conflict, InvalidArgument 400 BadRequest, PermissionDenied 403
// Forbidden, OutOfRange 410 Expired, Unimplemented 415 UnsupportedMediaType, ResourceExhausted
// 429 TooManyRequests, DeadlineExceeded 504 Timeout, Unavailable 503 ServiceUnavailable,
// everything else 500 InternalError.
HttpError ToHttpError(const absl::Status& status, const StatusDetails& details);

// 422 Invalid with one cause per field error, worded as kubectl expects:
// `ResourceClaim.resource.k8s.io "x" is invalid: [spec: Required value, ...]`.
HttpError InvalidError(const std::string& kind, const std::string& group, const std::string& name,
                       const model::FieldErrors& errors);

// A Status for an arbitrary code and reason (405 MethodNotAllowed, 404 for unknown paths).
HttpError MakeError(int code, const std::string& reason, const std::string& message);

// `body` as JSON text for a response. Text that quotes a client (a name from the path, a header)
// is checked for UTF-8 where it enters; should invalid UTF-8 slip through, it is written as
// U+FFFD rather than making nlohmann throw out of the handler.
std::string ResponseText(const nlohmann::json& body);

// The {"kind":"Status","status":"Success"} body of a finished delete.
nlohmann::json SuccessStatus(const StatusDetails& details, const std::string& uid);

}  // namespace qm::api
