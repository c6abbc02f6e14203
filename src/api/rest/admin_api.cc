#include "api/rest/admin_api.h"

#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/rest/status.h"
#include "model/field_error.h"
#include "nlohmann/json.hpp"
#include "service/device_match.h"

namespace qm::api {
namespace {

using nlohmann::json;

constexpr char kReviewKind[] = "DeviceMatchReview";
constexpr char kReviewResource[] = "devicematchreviews";
constexpr size_t kDefaultLimit = 500;
constexpr size_t kMaxLimit = 5000;
constexpr size_t kMaxSelectors = 32;

std::string GroupVersion() { return absl::StrCat(kAdminGroup, "/", kAdminVersion); }
std::string GroupPath() { return absl::StrCat("/apis/", kAdminGroup); }
std::string VersionPath() { return absl::StrCat(GroupPath(), "/", kAdminVersion); }

HttpResponse Json(int code, const json& body) {
  return HttpResponse{code, "application/json", ResponseText(body), {}};
}

HttpResponse Error(const HttpError& e) { return Json(e.code, e.status); }

// An attribute as the API writes it ({"string": ...}, {"ints": [...]}, ...).
json EncodeAttribute(const model::AttributeValue& value) {
  struct Visitor {
    json operator()(std::monostate) const { return json::object(); }
    json operator()(int64_t v) const { return {{"int", v}}; }
    json operator()(bool v) const { return {{"bool", v}}; }
    json operator()(const std::string& v) const { return {{"string", v}}; }
    json operator()(const model::Version& v) const { return {{"version", v.value}}; }
    json operator()(const std::vector<int64_t>& v) const { return {{"ints", v}}; }
    json operator()(const std::vector<bool>& v) const { return {{"bools", v}}; }
    json operator()(const std::vector<std::string>& v) const { return {{"strings", v}}; }
    json operator()(const std::vector<model::Version>& v) const {
      json out = json::array();
      for (const auto& x : v) out.push_back(x.value);
      return {{"versions", out}};
    }
  };
  return std::visit(Visitor{}, value);
}

json EncodeDevice(const service::MatchedDevice& d) {
  json out = {{"driver", d.driver}, {"pool", d.pool}, {"device", d.name}};
  if (!d.node_name.empty()) out["nodeName"] = d.node_name;
  if (d.all_nodes) out["allNodes"] = true;
  json attributes = json::object();
  for (const auto& [name, value] : d.attributes) attributes[name] = EncodeAttribute(value);
  out["attributes"] = std::move(attributes);
  json capacity = json::object();
  for (const auto& [name, c] : d.capacity) capacity[name] = {{"value", c.value.String()}};
  out["capacity"] = std::move(capacity);
  if (!d.taints.empty()) {
    json taints = json::array();
    for (const auto& t : d.taints) {
      json taint = {{"key", t.key}, {"effect", t.effect}};
      if (!t.value.empty()) taint["value"] = t.value;
      taints.push_back(std::move(taint));
    }
    out["taints"] = std::move(taints);
  }
  if (!d.allocated_to.empty()) out["allocatedTo"] = d.allocated_to;
  return out;
}

HttpResponse DeviceMatchReview(service::ObjectService& objects, const HttpRequest& req) {
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    return Error(MakeError(400, "BadRequest", "the request body is not a JSON object"));
  }
  model::FieldErrors errors;
  if (body.contains("kind") && body["kind"] != kReviewKind) {
    errors.push_back(
        model::Invalid("kind", body["kind"].dump(), absl::StrCat("must be ", kReviewKind)));
  }
  if (body.contains("apiVersion") && body["apiVersion"] != GroupVersion()) {
    errors.push_back(model::Invalid("apiVersion", body["apiVersion"].dump(),
                                    absl::StrCat("must be ", GroupVersion())));
  }
  const json spec = body.value("spec", json::object());
  service::DeviceMatchRequest request;
  request.limit = kDefaultLimit;
  if (!spec.is_object()) {
    errors.push_back(model::Invalid("spec", "", "must be an object"));
  } else {
    if (spec.contains("className")) {
      if (spec["className"].is_string()) {
        request.class_name = spec["className"].get<std::string>();
      } else {
        errors.push_back(
            model::Invalid("spec.className", spec["className"].dump(), "must be a string"));
      }
    }
    if (spec.contains("selectors")) {
      const json& selectors = spec["selectors"];
      if (!selectors.is_array()) {
        errors.push_back(model::Invalid("spec.selectors", "", "must be a list"));
      } else if (selectors.size() > kMaxSelectors) {
        errors.push_back(model::TooMany("spec.selectors", selectors.size(), kMaxSelectors));
      } else {
        for (size_t i = 0; i < selectors.size(); ++i) {
          const std::string path = absl::StrCat("spec.selectors[", i, "].cel.expression");
          const json& s = selectors[i];
          const json* expression = nullptr;
          if (s.is_object() && s.contains("cel") && s["cel"].is_object() &&
              s["cel"].contains("expression")) {
            expression = &s["cel"]["expression"];
          }
          if (expression == nullptr) {
            errors.push_back(model::Required(path));
          } else if (!expression->is_string()) {
            errors.push_back(model::Invalid(path, expression->dump(), "must be a string"));
          } else {
            request.selectors.push_back(expression->get<std::string>());
          }
        }
      }
    }
    if (spec.contains("limit")) {
      const json& limit = spec["limit"];
      if (!limit.is_number_integer() || limit.get<int64_t>() < 1) {
        errors.push_back(model::Invalid("spec.limit", limit.dump(), "must be a positive integer"));
      } else {
        request.limit = std::min<size_t>(limit.get<uint64_t>(), kMaxLimit);
      }
    }
    if (errors.empty() && request.class_name.empty() && request.selectors.empty()) {
      errors.push_back(model::Required("spec", "className or selectors are required"));
    }
  }
  if (!errors.empty()) return Error(InvalidError(kReviewKind, kAdminGroup, "", errors));

  auto result = service::PreviewDeviceMatches(objects, request);
  if (!result.ok()) return Error(ToHttpError(result.status(), StatusDetails{}));

  json status = {{"matchedDevices", result->matched},
                 {"allocatedDevices", result->allocated},
                 {"nodes", result->nodes},
                 {"truncated", result->devices.size() < result->matched}};
  json devices = json::array();
  for (const auto& d : result->devices) devices.push_back(EncodeDevice(d));
  status["devices"] = std::move(devices);
  json issues = json::array();
  for (const auto& issue : result->issues) {
    json e = {{"field", issue.field}, {"message", issue.message}};
    if (issue.line > 0) {
      e["line"] = issue.line;
      e["column"] = issue.column;
      e["offset"] = issue.offset;
    }
    issues.push_back(std::move(e));
  }
  status["errors"] = std::move(issues);
  status["evaluationErrors"] = result->evaluation_errors;
  json out = {{"apiVersion", GroupVersion()},
              {"kind", kReviewKind},
              {"metadata", body.value("metadata", json::object())},
              {"spec", spec},
              {"status", std::move(status)}};
  return Json(201, out);
}

}  // namespace

bool IsAdminApiPath(const std::string& path) {
  const std::string group = GroupPath();
  return path == group || absl::StartsWith(path, group + "/");
}

HttpResponse HandleAdminApi(service::ObjectService& objects, const HttpRequest& req) {
  std::string path = req.path;
  if (path.size() > 1 && path.back() == '/') path.pop_back();
  const json version = {{"groupVersion", GroupVersion()}, {"version", kAdminVersion}};
  if (path == GroupPath() && req.method == "GET") {
    return Json(200, {{"kind", "APIGroup"},
                      {"apiVersion", "v1"},
                      {"name", kAdminGroup},
                      {"versions", json::array({version})},
                      {"preferredVersion", version}});
  }
  if (path == VersionPath() && req.method == "GET") {
    return Json(200, {{"kind", "APIResourceList"},
                      {"apiVersion", "v1"},
                      {"groupVersion", GroupVersion()},
                      {"resources", json::array({{{"name", kReviewResource},
                                                  {"singularName", "devicematchreview"},
                                                  {"namespaced", false},
                                                  {"kind", kReviewKind},
                                                  {"verbs", json::array({"create"})}}})}});
  }
  if (path == VersionPath() + "/" + kReviewResource) {
    if (req.method != "POST") {
      return Error(MakeError(405, "MethodNotAllowed",
                             "the server does not allow this method on the requested resource"));
    }
    return DeviceMatchReview(objects, req);
  }
  return Error(MakeError(404, "NotFound", "the server could not find the requested resource"));
}

}  // namespace qm::api
