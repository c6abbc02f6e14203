#include "api/rest/request_gate.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "api/rest/status.h"
#include "auth/authenticator.h"
#include "service/node_restriction.h"

namespace qm::api {
namespace {

// `reason`, when set, follows the RBAC wording as the node authorizer's does ("...: node 'n'
// can only list/watch pods with spec.nodeName field selector").
HttpResponse Forbidden(const auth::UserInfo& user, const service::AuthzAttributes& attrs,
                       const std::string& reason = "") {
  std::string message = service::ForbiddenMessage(user, attrs);
  if (!reason.empty()) message += ": " + reason;
  HttpError e = MakeError(403, "Forbidden", message);
  if (attrs.resource_request) {
    nlohmann::json details = {{"kind", attrs.resource}};
    if (!attrs.api_group.empty()) details["group"] = attrs.api_group;
    if (!attrs.name.empty()) details["name"] = attrs.name;
    e.status["details"] = details;
  }
  return HttpResponse{403, "application/json", ResponseText(e.status), {}};
}

}  // namespace

service::AuthzAttributes RequestAttributes(const HttpRequest& req) {
  service::AuthzAttributes a;
  a.path = req.path;
  std::string method = absl::AsciiStrToLower(req.method);
  std::vector<std::string> parts;
  for (auto s : absl::StrSplit(req.path, '/', absl::SkipEmpty())) parts.emplace_back(s);
  size_t rest = 0;
  if (parts.size() >= 3 && parts[0] == "api") {
    a.api_group = "";
    rest = 2;
  } else if (parts.size() >= 4 && parts[0] == "apis") {
    a.api_group = parts[1];
    rest = 3;
  } else {
    a.resource_request = false;
    a.verb = method == "head" ? "get" : method;
    return a;
  }
  a.resource_request = true;
  std::vector<std::string> p(parts.begin() + static_cast<long>(rest), parts.end());
  if (p[0] == "namespaces") {
    if (p.size() > 1) {
      a.namespace_name = p[1];
      // /namespaces/NS/status and /finalize are subresources of the namespace itself.
      if (p.size() > 2 && p[2] != "status" && p[2] != "finalize") {
        p.erase(p.begin(), p.begin() + 2);
      }
    }
  }
  a.resource = p[0];
  if (p.size() >= 2) a.name = p[1];
  if (p.size() >= 3) a.subresource = p[2];
  if (method == "get" || method == "head") {
    a.verb = "get";
    if (p.size() < 2) {
      a.verb = "list";
      auto w = req.query.find("watch");
      if (w != req.query.end() && (w->second == "true" || w->second == "1")) a.verb = "watch";
      // A list or watch of one object by field selector is about that object (kubectl get X -w).
      if (auto fs = req.query.find("fieldSelector"); fs != req.query.end()) {
        constexpr char kByName[] = "metadata.name=";
        if (fs->second.rfind(kByName, 0) == 0 && fs->second.find(',') == std::string::npos) {
          a.name = fs->second.substr(sizeof(kByName) - 1);
        }
      }
    }
  } else if (method == "post") {
    a.verb = "create";
  } else if (method == "put") {
    a.verb = "update";
  } else if (method == "patch") {
    a.verb = "patch";
  } else if (method == "delete") {
    a.verb = a.name.empty() ? "deletecollection" : "delete";
  } else {
    a.verb = method;
  }
  return a;
}

std::optional<HttpResponse> RequestGate::Admit(HttpRequest* req) const {
  if (!req->user.has_value()) return std::nullopt;
  if (!req->impersonation.empty()) {
    auth::UserInfo as;
    bool has_user = false;
    std::vector<std::pair<service::AuthzAttributes, std::string>> checks;
    for (const auto& [header, value] : req->impersonation) {
      service::AuthzAttributes a;
      a.verb = "impersonate";
      a.resource_request = true;
      if (header == "impersonate-user") {
        as.name = value;
        has_user = true;
        // system:serviceaccount:NS:NAME is impersonated as that ServiceAccount object.
        constexpr char kSa[] = "system:serviceaccount:";
        if (value.rfind(kSa, 0) == 0) {
          std::string rest = value.substr(sizeof(kSa) - 1);
          auto colon = rest.find(':');
          a.resource = "serviceaccounts";
          a.namespace_name = rest.substr(0, colon);
          a.name = colon == std::string::npos ? "" : rest.substr(colon + 1);
        } else {
          a.resource = "users";
          a.name = value;
        }
      } else if (header == "impersonate-group") {
        as.groups.push_back(value);
        a.resource = "groups";
        a.name = value;
      } else if (header == "impersonate-uid") {
        as.uid = value;
        a.api_group = "authentication.k8s.io";
        a.resource = "uids";
        a.name = value;
      } else {
        continue;  // Impersonate-Extra-*: not modelled; ignored
      }
      checks.emplace_back(a, value);
    }
    if (!has_user) {
      HttpError e =
          MakeError(400, "BadRequest",
                    "requested impersonation of groups or uid without impersonating a user");
      return HttpResponse{400, "application/json", ResponseText(e.status), {}};
    }
    for (const auto& [a, value] : checks) {
      if (!authorizer_.Authorize(*req->user, a).allowed) return Forbidden(*req->user, a);
    }
    req->user = auth::WithAuthenticatedGroup(std::move(as));
  }
  service::AuthzAttributes attrs = RequestAttributes(*req);
  service::AuthzDecision decision = authorizer_.Authorize(*req->user, attrs);
  if (!decision.allowed) return Forbidden(*req->user, attrs);
  auto selector = req->query.find("fieldSelector");
  absl::Status node =
      service::AdmitNodeCollectionRead(*req->user, attrs.api_group, attrs.resource, attrs.verb,
                                       selector == req->query.end() ? "" : selector->second);
  if (!node.ok()) return Forbidden(*req->user, attrs, std::string(node.message()));
  return std::nullopt;
}

}  // namespace qm::api
