#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace qm::api {

enum class PatchType { kJsonPatch, kMergePatch, kStrategicMergePatch, kApply };

// Maps a request Content-Type to a patch type; UnimplementedError (415) for anything else.
absl::StatusOr<PatchType> PatchTypeFromContentType(const std::string& content_type);

// RFC 7386 JSON merge patch: null deletes, objects merge recursively, everything else replaces.
nlohmann::json ApplyMergePatch(const nlohmann::json& target, const nlohmann::json& patch);

// RFC 6902 JSON patch (add, remove, replace, move, copy, test). InvalidArgument when the patch
// is malformed or a path does not exist; a failed `test` is InvalidArgument as well.
absl::StatusOr<nlohmann::json> ApplyJsonPatch(const nlohmann::json& target,
                                              const nlohmann::json& patch);

// Kubernetes strategic merge patch: merge patch plus list merging by merge key for the lists
// Kubernetes declares with patchStrategy=merge (finalizers, ownerReferences, containers,
// conditions, reservedFor, ...), and the directives $patch (replace/delete/merge),
// $deleteFromPrimitiveList/<field>, $setElementOrder/<field> and $retainKeys.
absl::StatusOr<nlohmann::json> ApplyStrategicMergePatch(const nlohmann::json& target,
                                                        const nlohmann::json& patch);

}  // namespace qm::api
