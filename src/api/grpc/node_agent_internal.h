#pragma once

// What the files of NodeAgentApi share (node_agent_api.cc, node_agent_publish.cc,
// node_agent_reports.cc, node_agent_health.cc): reading hub JSON, conditions, errors in the
// wording REST uses, and the one way a method revises and writes an object. Not for use outside
// them.

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "auth/user.h"
#include "model/field_error.h"
#include "model/object.h"
#include "model/resource_types.h"
#include "nlohmann/json.hpp"
#include "service/object_service.h"

namespace qm::api::nodeapi::internal {

using nlohmann::json;

// Tries of a write that loses a race (a conflict, a create that meets an existing object).
inline constexpr int kMaxAttempts = 8;
// Condition and health messages are kept up to this many bytes (DRA's health limit).
inline constexpr size_t kMaxMessage = 1024;

const model::ResourceType& NodeType();
const model::ResourceType& PodType();
const model::ResourceType& SliceType();
const model::ResourceType& ClaimType();

// obj[key], or null when obj is not an object or has no such member.
const json& At(const json& obj, const char* key);
// obj[key] when it is a string, else "".
std::string Str(const json& obj, const char* key);
// `s` cut to `max` bytes ("..." at the end when cut), as valid UTF-8.
std::string Truncate(const std::string& s, size_t max);

// "prefix.field: message; ..." for a list of validation problems (INVALID_ARGUMENT).
absl::Status InvalidFields(const std::string& prefix, const model::FieldErrors& errors);
// Kubernetes' NewForbidden wording for an admission refusal; other statuses pass unchanged.
absl::Status Forbidden(const model::ResourceType& type, const std::string& name,
                       const absl::Status& st);

enum class ConditionStyle { kPod, kNode, kMeta };

// Sets condition `type` in obj.status.conditions (or in the array `conditions`). The transition
// time moves only when the status does. Returns whether anything but a heartbeat time changed.
bool SetCondition(json& conditions, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message, const std::string& now,
                  ConditionStyle style);

// How an object is written: the main resource, or its status subresource.
enum class Scope { kObject, kStatus };

// Applies `change` to `current`'s hub JSON and, when that changed something, returns the object
// to store as REST would write it: validated (the object's rules, or the status rules for a
// status write) and admitted by node restriction for `user`. nullopt when nothing changed.
absl::StatusOr<std::optional<model::Object>> Revise(
    const auth::UserInfo& user, const model::ResourceType& type, const model::Object& current,
    Scope scope, const std::function<absl::StatusOr<bool>(json&)>& change);

// Reads `key`, applies `change` (Revise) and, when that changed something, writes the result
// with optimistic concurrency (a concurrent write makes `change` run again on the fresh
// object). Returns the stored object, or nullopt when nothing changed. The caller holds the
// AuditScope.
absl::StatusOr<std::optional<model::Object>> WriteChange(
    service::ObjectService& objects, const auth::UserInfo& user, const model::ResourceType& type,
    const model::ResourceKey& key, Scope scope,
    const std::function<absl::StatusOr<bool>(json&)>& change);

}  // namespace qm::api::nodeapi::internal

namespace qm::api::nodeapi {
using namespace internal;  // NOLINT(google-build-using-namespace)
}  // namespace qm::api::nodeapi
