#pragma once

// What the REST API's files share and nothing else includes: rest_api.cc (routing, discovery,
// watches, manifests) and resource_request.cc (the verbs on one resource or collection).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "api/rest/rest_api.h"
#include "api/rest/status.h"
#include "model/object.h"
#include "model/resource_types.h"
#include "service/list_request.h"

namespace qm::api {

// What a resource path names.
struct RestApi::Target {
  const model::ResourceType* type = nullptr;
  std::string version;
  std::string namespace_;  // from /namespaces/<ns>/ in the path
  std::string name;
  std::string subresource;
};

namespace rest_internal {

using nlohmann::json;

// The string member `key` of `obj`, or "" when `obj` is not an object or the member is missing
// or not a string (client input may have any shape).
std::string StringAt(const json& obj, const char* key);

HttpResponse JsonResponse(int code, const json& body);
HttpResponse TextResponse(int code, std::string body);
HttpResponse ErrorResponse(const HttpError& err);
// 404 for a path that names no resource.
HttpResponse NotFoundPath();

// A query parameter ("" when absent).
std::string QueryParam(const HttpRequest& r, const std::string& name);
// Whether the client asked for a Table (kubectl get).
bool WantsTable(const HttpRequest& r);
StatusDetails Details(const model::ResourceType& type, const std::string& name);

// The continue token of a list page that ended at (ns, name), and back.
std::string EncodeContinue(const std::string& ns, const std::string& name);
bool DecodeContinue(const std::string& token, std::string* ns, std::string* name);

// A stored object as a client of `version` sees it.
json EncodeFor(const model::ResourceType& type, const std::string& version,
               const model::Object& obj);

// Builds the request for a list or watch from its query parameters.
absl::StatusOr<service::ListRequest> ListRequestFor(const RestApi::Target& t,
                                                    const HttpRequest& req);

}  // namespace rest_internal
}  // namespace qm::api
