#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "model/json/fields.h"
#include "model/object.h"
#include "model/resource_types.h"

namespace qm::api {

// The JSON mapping of API objects: one codec per served version, all converging on the hub
// version (v1) that is stored. The only place objects are turned into and out of JSON.

// Converts an object as a client sent it in `version` to the hub shape, applying the
// defaulting of that version first (so v1beta1's "default only when deviceClassName is set"
// rule holds). apiVersion/kind are rewritten to the hub version.
nlohmann::json ToHub(const model::ResourceType& type, const std::string& version,
                     nlohmann::json obj, const Clock& clock);

// tolerationSeconds of the node.kubernetes.io/not-ready and node.kubernetes.io/unreachable
// NoExecute tolerations that pod defaulting adds to pods without them, as Kubernetes'
// DefaultTolerationSeconds admission does (--default-unreachable-toleration-seconds; 300).
// Process-wide: set once at start, before requests are served.
void SetDefaultTolerationSeconds(int64_t seconds);

// Converts a hub object to `version` (the inverse of ToHub, without defaulting).
nlohmann::json FromHub(const model::ResourceType& type, const std::string& version,
                       nlohmann::json obj);

// Splits a hub-shape JSON object into the stored form: typed metadata, body text without
// metadata/apiVersion/kind, spec digest and field-selector values. InvalidArgument (400) when
// metadata has the wrong types (e.g. a non-string label value or a bad resourceVersion). Takes
// the hub by value: a caller done with it moves it in and saves a copy.
absl::StatusOr<model::Object> ToObject(const model::ResourceType& type, nlohmann::json hub);

// Rebuilds the full hub-shape JSON object (apiVersion, kind, metadata, body).
nlohmann::json FromObject(const model::ResourceType& type, const model::Object& obj);

// The JSON text of a stored object in `version`. Versions whose shape equals the hub's (v1,
// v1beta2, and v1beta1 of kinds v1beta1 did not reshape) splice the stored body text in
// without parsing it, which keeps large lists and watch fan-out cheap.
std::string EncodeObjectText(const model::ResourceType& type, const std::string& version,
                             const model::Object& obj);

// The "metadata" member as the API shows it, as compact text (members in key order, as
// model::json::Write writes a tree), and as a tree (that text read).
std::string EncodeMetaText(const model::ObjectMeta& meta);
nlohmann::json EncodeMeta(const model::ObjectMeta& meta);

// Field-selector values of a hub-shape body (model/json/fields.h).
using model::json::SelectableFields;

}  // namespace qm::api
