#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"

#include "model/resource_types.h"

namespace qm::api {

// One table of schema definitions drives both the OpenAPI v3 documents (so `kubectl explain`
// and kubectl's server-side field validation work) and strict decoding (unknown fields).

// The /openapi/v3 index: {"paths":{"api/v1":{"serverRelativeURL":...},
// "apis/resource.k8s.io/v1":...}}.
nlohmann::json OpenApiIndex();

// The OpenAPI v3 document for "v1" (core) or "resource.k8s.io/<version>"; a null json value
// when that group version is not served.
const nlohmann::json& OpenApiDocument(const std::string& group_version);

// Paths (".spec.foo", ".spec.devices.requests[0].bar") of fields in `obj` that the schema of
// `type` at `version` does not know. `obj` is the object as the client sent it, in `version`.
std::vector<std::string> UnknownFields(const model::ResourceType& type, const std::string& version,
                                       const nlohmann::json& obj);
// The same for any kind of the schema table by group, version and kind (the review kinds of
// ReviewResources() too); nothing for a kind the table does not have.
std::vector<std::string> UnknownFields(const std::string& group, const std::string& version,
                                       const std::string& kind, const nlohmann::json& obj);

// fieldValidation over the unknown fields found (paths as UnknownFields gives them): "Strict"
// is InvalidArgument `strict decoding error: unknown field "spec.foo", ...`; "Ignore" lets them
// through; anything else ("Warn", the default) adds `unknown field "spec.foo"` to `warnings`.
absl::Status ApplyFieldValidation(const std::string& mode, const std::vector<std::string>& unknown,
                                  std::vector<std::string>* warnings);

// The schema table itself. Internal to schema.cc and schema_defs.cc; other code uses the three
// functions above.
namespace schema_internal {

// How a property holds its values.
enum class Shape { kOne, kList, kMap };

// The type of one value. kRawExtension is opaque JSON (driver parameters); kFreeForm is an
// object whose fields are not modelled. Both accept any content.
enum class ValueType {
  kString,
  kInt64,
  kInt32,
  kBool,
  kQuantity,
  kTime,
  kRawExtension,
  kFreeForm,
  kRef
};

struct Prop {
  std::string name;
  Shape shape = Shape::kOne;
  ValueType type = ValueType::kString;
  // kRef only: "<package>.<Name>" with package resource (the version being served), core (core
  // v1), rbac (rbac.authorization.k8s.io v1) or meta (apimachinery meta v1).
  std::string ref;
  std::string description;
  bool required = false;
};

// The resource.k8s.io shapes a definition belongs to: v1 and v1beta2 share kV1Shape.
// Definitions outside resource.k8s.io use kAllShapes.
inline constexpr unsigned kV1Shape = 1;
inline constexpr unsigned kV1beta1Shape = 2;
inline constexpr unsigned kAllShapes = kV1Shape | kV1beta1Shape;

struct Def {
  std::string id;  // "resource.ResourceClaim", "core.Node", "meta.ObjectMeta"
  unsigned shapes = kAllShapes;
  std::string description;
  std::vector<Prop> props;
  // Fields beyond `props` are kept as sent and are not unknown to strict decoding
  // (x-kubernetes-preserve-unknown-fields): core kinds of which only a subset is modelled,
  // such as a Pod's spec and containers.
  bool preserve_unknown = false;
};

// The package of the definitions of a group's kinds: "core" for the core group, "resource"
// for resource.k8s.io, "rbac" for rbac.authorization.k8s.io.
std::string PackageOf(const std::string& group);

// Every definition, including one "<Kind>List" per served kind. Built once; thread-safe.
const std::vector<Def>& SchemaDefs();

// The definition `id` in `shape` (kV1Shape or kV1beta1Shape); nullptr when there is none.
const Def* FindDef(const std::string& id, unsigned shape);

}  // namespace schema_internal

}  // namespace qm::api
