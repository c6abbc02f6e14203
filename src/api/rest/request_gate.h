#pragma once

// What happens to an authenticated request before it is served: impersonation (Impersonate-User,
// Impersonate-Group, Impersonate-Uid for callers allowed the `impersonate` verb) and RBAC
// authorization of the request's attributes, the way kube-apiserver derives them (RequestInfo).

#include <optional>

#include "api/rest/rest_api.h"
#include "service/authorizer.h"

namespace qm::api {

// The authorization attributes of a request: resource requests under /api/v1 and
// /apis/<group>/<version> (verb from the method and the path: get/list/watch/create/update/
// patch/delete/deletecollection; namespace, resource, subresource, name), everything else a
// non-resource request with the lowercase method as its verb.
service::AuthzAttributes RequestAttributes(const HttpRequest& req);

class RequestGate {
 public:
  explicit RequestGate(const service::Authorizer& authorizer) : authorizer_(authorizer) {}

  // Nullopt when `req` may proceed (its user replaced by the impersonated one, if any);
  // otherwise the answer to send: 403 Forbidden with Kubernetes' message. Anonymous requests
  // (only health and version reach here) pass.
  std::optional<HttpResponse> Admit(HttpRequest* req) const;

 private:
  const service::Authorizer& authorizer_;
};

}  // namespace qm::api
