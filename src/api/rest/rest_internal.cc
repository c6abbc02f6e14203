#include "api/rest/rest_internal.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "api/rest/codec.h"
#include "common/status.h"

namespace qm::api::rest_internal {

std::string StringAt(const json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

HttpResponse JsonResponse(int code, const json& body) {
  HttpResponse r;
  r.code = code;
  r.body = ResponseText(body);
  return r;
}

HttpResponse TextResponse(int code, std::string body) {
  HttpResponse r;
  r.code = code;
  r.body = std::move(body);
  return r;
}

HttpResponse ErrorResponse(const HttpError& err) { return JsonResponse(err.code, err.status); }

HttpResponse NotFoundPath() {
  return ErrorResponse(
      MakeError(404, "NotFound", "the server could not find the requested resource"));
}

std::string QueryParam(const HttpRequest& r, const std::string& name) {
  auto it = r.query.find(name);
  return it == r.query.end() ? "" : it->second;
}

bool WantsTable(const HttpRequest& r) { return r.accept.find("as=Table") != std::string::npos; }

StatusDetails Details(const model::ResourceType& type, const std::string& name) {
  return StatusDetails{name, type.group, type.plural};
}

std::string EncodeContinue(const std::string& ns, const std::string& name) {
  return absl::WebSafeBase64Escape(json{{"ns", ns}, {"name", name}}.dump());
}

bool DecodeContinue(const std::string& token, std::string* ns, std::string* name) {
  std::string raw;
  if (!absl::WebSafeBase64Unescape(token, &raw)) return false;
  json j = json::parse(raw, nullptr, false);
  if (!j.is_object() || !j.contains("ns") || !j.contains("name") || !j["ns"].is_string() ||
      !j["name"].is_string()) {
    return false;
  }
  *ns = j["ns"];
  *name = j["name"];
  return true;
}

json EncodeFor(const model::ResourceType& type, const std::string& version,
               const model::Object& obj) {
  return FromHub(type, version, FromObject(type, obj));
}

absl::StatusOr<service::ListRequest> ListRequestFor(const RestApi::Target& t,
                                                    const HttpRequest& req) {
  service::ListRequest lr;
  lr.store.resource = t.type->GroupResource();
  lr.store.namespace_ = t.namespace_;
  QM_ASSIGN_OR_RETURN(lr.labels, model::LabelSelector::Parse(QueryParam(req, "labelSelector")));
  QM_ASSIGN_OR_RETURN(lr.fields, model::FieldSelector::Parse(QueryParam(req, "fieldSelector"),
                                                             t.type->field_selectors));
  std::string limit = QueryParam(req, "limit");
  if (!limit.empty()) lr.store.limit = std::max(0LL, std::atoll(limit.c_str()));
  std::string cont = QueryParam(req, "continue");
  if (!cont.empty() && !DecodeContinue(cont, &lr.store.after_namespace, &lr.store.after_name)) {
    return absl::InvalidArgumentError("invalid continue token");
  }
  return lr;
}

}  // namespace qm::api::rest_internal
