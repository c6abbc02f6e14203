#pragma once

// The authentication.k8s.io and authorization.k8s.io endpoints kubectl uses, and the
// ServiceAccount TokenRequest subresource:
//   POST /apis/authentication.k8s.io/v1/selfsubjectreviews          (kubectl auth whoami)
//   POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews     (kubectl auth can-i)
//   POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews      (kubectl auth can-i --list)
//   POST /apis/authorization.k8s.io/v1/subjectaccessreviews         (admins: may X do Y?)
//   POST /apis/authorization.k8s.io/v1/namespaces/NS/localsubjectaccessreviews
//   POST /api/v1/namespaces/NS/serviceaccounts/NAME/token           (kubectl create token)
// Callers have been authenticated and authorized for the request itself (create on the review
// resource) before Handle runs.

#include <chrono>
#include <optional>
#include <string>

#include "api/rest/rest_api.h"
#include "common/clock.h"
#include "service/authorizer.h"
#include "service/object_service.h"

namespace qm::api {

struct AuthEndpointsOptions {
  std::string service_account_key;  // HMAC key for ServiceAccount tokens
  std::chrono::seconds default_token_ttl = std::chrono::hours(1);
  std::chrono::seconds max_token_ttl = std::chrono::hours(48);
};

class AuthEndpoints {
 public:
  AuthEndpoints(service::ObjectService& objects, const service::Authorizer& authorizer,
                const Clock& clock, AuthEndpointsOptions options);

  // True when `path` is one of the paths above (for any method).
  static bool Serves(const std::string& path);

  // Answers a request to one of the paths above: 201 with the review or token, 405 for other
  // methods, 400/422 for a malformed body, 404 for a missing ServiceAccount.
  HttpResponse Handle(const HttpRequest& req) const;

 private:
  HttpResponse SelfSubjectReview(const HttpRequest& req) const;
  HttpResponse AccessReview(const HttpRequest& req, const std::string& kind,
                            const std::string& namespace_name) const;
  HttpResponse RulesReview(const HttpRequest& req) const;
  HttpResponse TokenRequest(const HttpRequest& req, const std::string& namespace_name,
                            const std::string& name) const;

  service::ObjectService& objects_;
  const service::Authorizer& authorizer_;
  const Clock& clock_;
  const AuthEndpointsOptions options_;
};

}  // namespace qm::api
