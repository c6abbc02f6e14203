#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "auth/user.h"
#include "common/clock.h"
#include "model/field_error.h"
#include "model/resource_types.h"
#include "nlohmann/json.hpp"
#include "service/authorizer.h"
#include "service/object_service.h"
#include "service/watch_hub.h"

namespace qm::api {

class AuthEndpoints;

// The built-in ClusterRoles and ClusterRoleBindings (service::BootstrapPolicy) as a JSON array
// of manifests, for RestApi::ApplyManifests at start: `kubectl get clusterroles` lists them
// (labelled kubernetes.io/bootstrapping=rbac-defaults), as in a Kubernetes cluster.
std::string BootstrapRbacManifests();

// A transport-neutral HTTP request as the REST API sees it.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string
  std::map<std::string, std::string> query;
  std::string content_type;
  std::string accept;
  std::string body;
  // Set by the transport: the authenticated user (nullopt: anonymous), a request id for logs
  // and audit, where the request came from, and the Impersonate-* headers (names lowercased).
  std::optional<auth::UserInfo> user;
  std::string request_id;
  std::string remote_address;
  std::string user_agent;
  std::vector<std::pair<std::string, std::string>> impersonation;
};

struct HttpResponse {
  int code = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::string> warnings;  // sent as `Warning: 299 - "<text>"` headers
};

// Where a watch writes its stream. Implemented by the transport; used from the watch hub's
// thread after StartWatch returns.
class WatchSink {
 public:
  virtual ~WatchSink() = default;
  // Sends the response head (200, chunked) once, before the first Write.
  virtual void Begin(const std::vector<std::string>& warnings) = 0;
  // Sends one chunk and flushes it. False when the client is gone.
  virtual bool Write(const std::string& chunk) = 0;
  // Ends the chunked stream.
  virtual void End() = 0;
};

// The Kubernetes-style REST API (ARCHITECTURE.md §6): discovery, OpenAPI, and the resource
// verbs for every type in model::AllResourceTypes(). Decodes a request, calls the service and
// encodes the answer; the HTTP server around it only moves bytes. Thread-safe.
class AdminApi;

class RestApi {
 public:
  // Observer of finished requests, for metrics and logs: verb, resource, code.
  using RequestObserver =
      std::function<void(const std::string& verb, const std::string& resource, int code)>;

  RestApi(service::ObjectService& objects, service::WatchHub& hub, const Clock& clock);
  ~RestApi();

  // True when the request is a watch (GET with watch=true|1): use StartWatch instead.
  static bool IsWatch(const HttpRequest& request);

  // Answers every non-watch request.
  HttpResponse Handle(const HttpRequest& request);

  // Starts a watch. Returns an error response when the watch cannot start (bad selector, 410
  // Expired is streamed as an ERROR event instead); otherwise nullopt, and events flow into
  // `sink` until the client leaves, timeoutSeconds passes, or the hub stops.
  std::optional<HttpResponse> StartWatch(const HttpRequest& request,
                                         std::shared_ptr<WatchSink> sink);

  // Has the admin views' inventory (service::InventoryCache) built ahead of the request that
  // needs it once ResourceSlices, DeviceClasses or DeviceTaintRules settle after a change, while
  // the views are in use. The server calls this; tests leave it off.
  void PrewarmAdminViews();

  // Names the verb and resource of a request for metrics ("list", "resourceclaims").
  static std::pair<std::string, std::string> Describe(const HttpRequest& request);

  // Serves the authentication/authorization review endpoints and the ServiceAccount token
  // subresource through `endpoints` (not owned; null: they are 404).
  void SetAuthEndpoints(const AuthEndpoints* endpoints) { auth_endpoints_ = endpoints; }
  // Applies RBAC escalation prevention to writes of the RBAC kinds by authenticated users
  // (not owned; null: no check, for in-process callers without users).
  void SetAuthorizer(const service::Authorizer* authorizer) { authorizer_ = authorizer; }

  // Creates the "default" namespace when it is missing (as a Kubernetes cluster always has it).
  absl::Status EnsureDefaultNamespace();

  // Creates or updates every object of a multi-document list (sample inventory loading):
  // `objects` is a JSON array of manifests.
  absl::Status ApplyManifests(const std::string& json_array);

  // The resource a request path names (defined in rest_api.cc).
  struct Target;

 private:
  // The verbs on one resource or collection (resource_request.cc).
  class ResourceRequest;
  HttpResponse HandleResource(const HttpRequest& request, const Target& target);
  // Admin access to devices only in namespaces labelled resource.kubernetes.io/admin-access:
  // "true" (Kubernetes' DRAAdminAccess rule): a Forbidden error per request that asks for it.
  void CheckAdminAccess(const model::ResourceType& type, const nlohmann::json& hub,
                        model::FieldErrors* errors);

  service::ObjectService& objects_;
  service::WatchHub& hub_;
  const Clock& clock_;
  // Escalation prevention for a Role/ClusterRole/binding about to be stored (rbac_admission.cc):
  // OK for other kinds or without an authorizer or user.
  absl::Status AdmitRbac(const model::ResourceType& type, const nlohmann::json& hub,
                         const HttpRequest& req);

  const AuthEndpoints* auth_endpoints_ = nullptr;
  const service::Authorizer* authorizer_ = nullptr;
  std::unique_ptr<AdminApi> admin_;  // admin.quartermaster.io (admin_api.h)
};

}  // namespace qm::api
