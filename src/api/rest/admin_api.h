#pragma once

// Endpoints of our own API group, admin.quartermaster.io/v1alpha1, for the web UI and for
// automation; Kubernetes conventions (a create-only review object, like SubjectAccessReview):
//   POST /apis/admin.quartermaster.io/v1alpha1/devicematchreviews
//     spec.className and/or spec.selectors[].cel.expression (and spec.limit, devices listed at
//     most: default 500, at most 5000) in; 201 with status.devices (nodeName, driver, pool,
//     device, attributes, capacity, taints, allocatedTo), status.matchedDevices,
//     status.allocatedDevices, status.nodes, status.truncated, status.errors (field, message,
//     line, column, offset per problem) and status.evaluationErrors out. Nothing is stored.
//   GET /apis/admin.quartermaster.io and /apis/admin.quartermaster.io/v1alpha1: the group and
//     its resources.
// Callers have been authenticated and authorized (create devicematchreviews in the group) before
// Handle runs.

#include <string>

#include "api/rest/rest_api.h"
#include "service/object_service.h"

namespace qm::api {

inline constexpr char kAdminGroup[] = "admin.quartermaster.io";
inline constexpr char kAdminVersion[] = "v1alpha1";

// True for /apis/admin.quartermaster.io and every path below it.
bool IsAdminApiPath(const std::string& path);

// 201 with the review; 400 for a body that is not JSON, 422 with field paths for a malformed
// review, 404 for unknown paths of the group, 405 for other methods.
HttpResponse HandleAdminApi(service::ObjectService& objects, const HttpRequest& req);

}  // namespace qm::api
