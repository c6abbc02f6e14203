#include "api/rest/auth_endpoints.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "api/rest/status.h"
#include "auth/service_account_token.h"
#include "nlohmann/json.hpp"

namespace qm::api {
namespace {

using nlohmann::json;

constexpr char kAuthnPrefix[] = "/apis/authentication.k8s.io/v1/";
constexpr char kAuthzPrefix[] = "/apis/authorization.k8s.io/v1/";

HttpResponse Json(int code, const json& body) {
  return HttpResponse{code, "application/json", ResponseText(body), {}};
}

HttpResponse Error(const HttpError& e) { return Json(e.code, e.status); }

HttpResponse BadRequest(const std::string& message) {
  return Error(MakeError(400, "BadRequest", message));
}

json UserJson(const auth::UserInfo& u) {
  json j = {{"username", u.name}, {"groups", u.groups}};
  if (!u.uid.empty()) j["uid"] = u.uid;
  return j;
}

// Path segments of `path` below `prefix`.
std::vector<std::string> Segments(const std::string& path, size_t from) {
  std::vector<std::string> out;
  for (auto s : absl::StrSplit(path.substr(from), '/', absl::SkipEmpty())) out.emplace_back(s);
  return out;
}

// The body of a review request: a JSON object, or an error response.
std::optional<HttpResponse> ParseBody(const HttpRequest& req, json* body) {
  *body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (!body->is_object()) return BadRequest("the request body must be a JSON object");
  return std::nullopt;
}

std::string StringField(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

AuthEndpoints::AuthEndpoints(service::ObjectService& objects, const service::Authorizer& authorizer,
                             const Clock& clock, AuthEndpointsOptions options)
    : objects_(objects), authorizer_(authorizer), clock_(clock), options_(std::move(options)) {}

bool AuthEndpoints::Serves(const std::string& path) {
  if (absl::StartsWith(path, kAuthnPrefix) || absl::StartsWith(path, kAuthzPrefix)) return true;
  auto seg = Segments(path, 0);
  return seg.size() == 7 && seg[0] == "api" && seg[1] == "v1" && seg[2] == "namespaces" &&
         seg[4] == "serviceaccounts" && seg[6] == "token";
}

HttpResponse AuthEndpoints::Handle(const HttpRequest& req) const {
  const std::string& p = req.path;
  std::vector<std::string> seg;
  std::string kind;
  if (absl::StartsWith(p, kAuthnPrefix)) {
    seg = Segments(p, sizeof(kAuthnPrefix) - 1);
    if (seg.size() != 1 || seg[0] != "selfsubjectreviews") {
      return Error(MakeError(404, "NotFound", "the server could not find the requested resource"));
    }
  } else if (absl::StartsWith(p, kAuthzPrefix)) {
    seg = Segments(p, sizeof(kAuthzPrefix) - 1);
    bool local = seg.size() == 3 && seg[0] == "namespaces" && seg[2] == "localsubjectaccessreviews";
    bool known = seg.size() == 1 &&
                 (seg[0] == "selfsubjectaccessreviews" || seg[0] == "selfsubjectrulesreviews" ||
                  seg[0] == "subjectaccessreviews");
    if (!local && !known) {
      return Error(MakeError(404, "NotFound", "the server could not find the requested resource"));
    }
  } else {
    seg = Segments(p, 0);
  }
  if (req.method != "POST") {
    return Error(MakeError(405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource"));
  }
  if (!req.user.has_value()) return Error(MakeError(401, "Unauthorized", "Unauthorized"));
  if (absl::StartsWith(p, kAuthnPrefix)) return SelfSubjectReview(req);
  if (absl::StartsWith(p, kAuthzPrefix)) {
    if (seg.size() == 3) return AccessReview(req, "LocalSubjectAccessReview", seg[1]);
    if (seg[0] == "selfsubjectrulesreviews") return RulesReview(req);
    return AccessReview(
        req, seg[0] == "subjectaccessreviews" ? "SubjectAccessReview" : "SelfSubjectAccessReview",
        "");
  }
  return TokenRequest(req, seg[3], seg[5]);
}

HttpResponse AuthEndpoints::SelfSubjectReview(const HttpRequest& req) const {
  json out = {{"kind", "SelfSubjectReview"},
              {"apiVersion", "authentication.k8s.io/v1"},
              {"metadata", {{"creationTimestamp", FormatRfc3339(clock_.Now())}}},
              {"status", {{"userInfo", UserJson(*req.user)}}}};
  return Json(201, out);
}

HttpResponse AuthEndpoints::AccessReview(const HttpRequest& req, const std::string& kind,
                                         const std::string& namespace_name) const {
  json body;
  if (auto err = ParseBody(req, &body)) return *err;
  json spec = body.value("spec", json::object());
  if (!spec.is_object()) return BadRequest("spec must be an object");
  auth::UserInfo subject = *req.user;
  if (kind != "SelfSubjectAccessReview") {
    subject = auth::UserInfo{StringField(spec, "user"), StringField(spec, "uid"), {}};
    if (auto g = spec.find("groups"); g != spec.end() && g->is_array()) {
      for (const auto& v : *g) {
        if (v.is_string()) subject.groups.push_back(v.get<std::string>());
      }
    }
    if (subject.name.empty() && subject.groups.empty()) {
      return Error(InvalidError(
          kind, "authorization.k8s.io", "",
          {model::Required("spec.user", "at least one of user or group must be specified")}));
    }
  }
  service::AuthzAttributes attrs;
  const json ra = spec.value("resourceAttributes", json());
  const json nra = spec.value("nonResourceAttributes", json());
  if (ra.is_object() == nra.is_object()) {
    return Error(InvalidError(
        kind, "authorization.k8s.io", "",
        {model::Invalid("spec", "",
                        "exactly one of nonResourceAttributes or resourceAttributes must be "
                        "specified")}));
  }
  if (ra.is_object()) {
    attrs.resource_request = true;
    attrs.verb = StringField(ra, "verb");
    attrs.api_group = StringField(ra, "group");
    attrs.resource = StringField(ra, "resource");
    attrs.subresource = StringField(ra, "subresource");
    attrs.name = StringField(ra, "name");
    attrs.namespace_name = StringField(ra, "namespace");
    if (kind == "LocalSubjectAccessReview") {
      if (!attrs.namespace_name.empty() && attrs.namespace_name != namespace_name) {
        return Error(
            InvalidError(kind, "authorization.k8s.io", "",
                         {model::Invalid("spec.resourceAttributes.namespace", attrs.namespace_name,
                                         "must match metadata.namespace")}));
      }
      attrs.namespace_name = namespace_name;
    }
  } else {
    attrs.resource_request = false;
    attrs.verb = StringField(nra, "verb");
    attrs.path = StringField(nra, "path");
  }
  service::AuthzDecision decision = authorizer_.Authorize(subject, attrs);
  // As kube-apiserver: a denial by RBAC carries no reason (kubectl prints "no - <reason>").
  json status = {{"allowed", decision.allowed}};
  if (decision.allowed && !decision.reason.empty()) status["reason"] = decision.reason;
  body["apiVersion"] = "authorization.k8s.io/v1";
  body["kind"] = kind;
  if (!body.contains("metadata") || !body["metadata"].is_object()) {
    body["metadata"] = json::object();
  }
  body["metadata"]["creationTimestamp"] = FormatRfc3339(clock_.Now());
  if (kind == "LocalSubjectAccessReview") body["metadata"]["namespace"] = namespace_name;
  body["status"] = status;
  return Json(201, body);
}

HttpResponse AuthEndpoints::RulesReview(const HttpRequest& req) const {
  json body;
  if (auto err = ParseBody(req, &body)) return *err;
  json spec = body.value("spec", json::object());
  if (!spec.is_object()) return BadRequest("spec must be an object");
  const std::string ns = StringField(spec, "namespace");
  service::Authorizer::Rules rules = authorizer_.RulesFor(*req.user, ns);
  json resource_rules = json::array(), non_resource_rules = json::array();
  for (const auto& r : rules.resource_rules) {
    json j = {{"verbs", r.verbs}, {"apiGroups", r.api_groups}, {"resources", r.resources}};
    if (!r.resource_names.empty()) j["resourceNames"] = r.resource_names;
    resource_rules.push_back(std::move(j));
  }
  for (const auto& r : rules.non_resource_rules) {
    non_resource_rules.push_back({{"verbs", r.verbs}, {"nonResourceURLs", r.non_resource_urls}});
  }
  json status = {{"resourceRules", resource_rules},
                 {"nonResourceRules", non_resource_rules},
                 {"incomplete", rules.incomplete}};
  if (!rules.evaluation_error.empty()) status["evaluationError"] = rules.evaluation_error;
  json out = {{"kind", "SelfSubjectRulesReview"},
              {"apiVersion", "authorization.k8s.io/v1"},
              {"metadata", {{"creationTimestamp", FormatRfc3339(clock_.Now())}}},
              {"spec", spec},
              {"status", status}};
  return Json(201, out);
}

HttpResponse AuthEndpoints::TokenRequest(const HttpRequest& req, const std::string& namespace_name,
                                         const std::string& name) const {
  json body;
  if (auto err = ParseBody(req, &body)) return *err;
  json spec = body.value("spec", json::object());
  if (!spec.is_object()) return BadRequest("spec must be an object");
  auto ttl = options_.default_token_ttl;
  if (auto e = spec.find("expirationSeconds"); e != spec.end() && !e->is_null()) {
    if (!e->is_number_integer() || e->get<int64_t>() < 600) {
      return Error(
          InvalidError("TokenRequest", "authentication.k8s.io", name,
                       {model::Invalid("spec.expirationSeconds", e->dump(),
                                       "may not specify a duration less than 10 minutes")}));
    }
    ttl = std::min(options_.max_token_ttl, std::chrono::seconds(e->get<int64_t>()));
  }
  std::vector<std::string> audiences = {"quartermaster"};
  if (auto a = spec.find("audiences"); a != spec.end() && a->is_array() && !a->empty()) {
    audiences.clear();
    for (const auto& v : *a) {
      if (v.is_string()) audiences.push_back(v.get<std::string>());
    }
  }
  auto sa = objects_.Get(model::ResourceKey{"serviceaccounts", namespace_name, name});
  if (!sa.ok()) {
    return Error(ToHttpError(sa.status(), StatusDetails{name, "", "serviceaccounts"}));
  }
  auto now = clock_.Now();
  auth::ServiceAccountClaims claims{namespace_name,
                                    name,
                                    sa->meta.uid,
                                    audiences,
                                    std::chrono::time_point_cast<std::chrono::seconds>(now),
                                    std::chrono::time_point_cast<std::chrono::seconds>(now + ttl)};
  std::string token = auth::SignServiceAccountToken(options_.service_account_key, claims);
  json out = {
      {"kind", "TokenRequest"},
      {"apiVersion", "authentication.k8s.io/v1"},
      {"metadata",
       {{"name", name}, {"namespace", namespace_name}, {"creationTimestamp", FormatRfc3339(now)}}},
      {"spec",
       {{"audiences", audiences},
        {"expirationSeconds", ttl.count()},
        {"boundObjectRef", spec.value("boundObjectRef", json())}}},
      {"status", {{"token", token}, {"expirationTimestamp", FormatRfc3339(claims.expires_at)}}}};
  return Json(201, out);
}

}  // namespace qm::api
