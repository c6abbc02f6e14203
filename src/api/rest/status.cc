#include "api/rest/status.h"

namespace qm::api {
namespace {

using nlohmann::json;

json BaseStatus(int code, const std::string& reason, const std::string& message) {
  return json{{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
              {"status", "Failure"}, {"message", message}, {"reason", reason},
              {"code", code}};
}

}  // namespace

HttpError MakeError(int code, const std::string& reason, const std::string& message) {
  return HttpError{code, BaseStatus(code, reason, message)};
}

HttpError ToHttpError(const absl::Status& status, const StatusDetails& details) {
  int code = 500;
  std::string reason = "InternalError";
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      code = 404;
      reason = "NotFound";
      break;
    case absl::StatusCode::kAlreadyExists:
      code = 409;
      reason = "AlreadyExists";
      break;
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kFailedPrecondition:
      code = 409;
      reason = "Conflict";
      break;
    case absl::StatusCode::kInvalidArgument:
      code = 400;
      reason = "BadRequest";
      break;
    case absl::StatusCode::kPermissionDenied:
      code = 403;
      reason = "Forbidden";
      break;
    case absl::StatusCode::kOutOfRange:
      code = 410;
      reason = "Expired";
      break;
    case absl::StatusCode::kUnimplemented:
      code = 415;
      reason = "UnsupportedMediaType";
      break;
    case absl::StatusCode::kResourceExhausted:
      code = 429;
      reason = "TooManyRequests";
      break;
    case absl::StatusCode::kDeadlineExceeded:
      code = 504;
      reason = "Timeout";
      break;
    case absl::StatusCode::kUnavailable:
      code = 503;
      reason = "ServiceUnavailable";
      break;
    default:
      break;
  }
  HttpError err{code, BaseStatus(code, reason, std::string(status.message()))};
  if (!details.name.empty() || !details.kind.empty()) {
    json d = json::object();
    if (!details.name.empty()) d["name"] = details.name;
    d["group"] = details.group;
    d["kind"] = details.kind;
    err.status["details"] = d;
  }
  return err;
}

HttpError InvalidError(const std::string& kind, const std::string& group, const std::string& name,
                       const model::FieldErrors& errors) {
  std::string qualified = group.empty() ? kind : kind + "." + group;
  std::string message = qualified + " \"" + name + "\" is invalid: ";
  if (errors.size() > 1) message += "[";
  json causes = json::array();
  for (size_t i = 0; i < errors.size(); ++i) {
    if (i) message += ", ";
    message += errors[i].ToString();
    causes.push_back({{"reason", errors[i].Reason()},
                      {"message", errors[i].Message()},
                      {"field", errors[i].field}});
  }
  if (errors.size() > 1) message += "]";
  HttpError err{422, BaseStatus(422, "Invalid", message)};
  err.status["details"] = {{"name", name}, {"group", group}, {"kind", kind}, {"causes", causes}};
  return err;
}

json SuccessStatus(const StatusDetails& details, const std::string& uid) {
  return json{
      {"kind", "Status"},
      {"apiVersion", "v1"},
      {"metadata", json::object()},
      {"status", "Success"},
      {"details",
       {{"name", details.name}, {"group", details.group}, {"kind", details.kind}, {"uid", uid}}}};
}

std::string ResponseText(const nlohmann::json& body) {
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace qm::api
