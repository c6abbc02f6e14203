#include "api/rest/schema.h"

#include <cctype>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "api/rest/discovery.h"

namespace qm::api {
namespace {

using nlohmann::json;
using schema_internal::Def;
using schema_internal::FindDef;
using schema_internal::kV1beta1Shape;
using schema_internal::kV1Shape;
using schema_internal::Prop;
using schema_internal::Shape;
using schema_internal::ValueType;

constexpr char kRefPrefix[] = "#/components/schemas/";
constexpr char kQuantityKey[] = "io.k8s.apimachinery.pkg.api.resource.Quantity";
constexpr char kTimeKey[] = "io.k8s.apimachinery.pkg.apis.meta.v1.Time";
constexpr char kRawExtensionKey[] = "io.k8s.apimachinery.pkg.runtime.RawExtension";
constexpr char kPatchKey[] = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
constexpr char kGvkExtension[] = "x-kubernetes-group-version-kind";
constexpr char kPreserveUnknown[] = "x-kubernetes-preserve-unknown-fields";

// resource.k8s.io v1beta1 has its own shape; every other served version uses the v1 shape.
unsigned ShapeFor(const std::string& group, const std::string& version) {
  return group == model::kResourceGroup && version == "v1beta1" ? kV1beta1Shape : kV1Shape;
}

std::string PackageOf(const model::ResourceType& type) {
  return schema_internal::PackageOf(type.group);
}

// The prefix of tags and operation ids, as Kubernetes derives it from the group:
// "core", "resource", "rbacAuthorization".
std::string GroupTag(const std::string& group) {
  if (group.empty()) return "core";
  std::string name = group;
  if (absl::EndsWith(name, ".k8s.io")) name.resize(name.size() - std::string(".k8s.io").size());
  std::string tag;
  bool upper = false;
  for (char c : name) {
    if (c == '.') {
      upper = true;
      continue;
    }
    tag += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return tag;
}

// "resource.Device" served as resource.k8s.io/v1beta2 -> "io.k8s.api.resource.v1beta2.Device",
// keyed as Kubernetes keys its own documents.
std::string SchemaKey(const std::string& id, const std::string& version) {
  const size_t dot = id.find('.');
  const std::string package = id.substr(0, dot);
  const std::string name = id.substr(dot + 1);
  if (package == "resource") return "io.k8s.api.resource." + version + "." + name;
  if (package == "core") return "io.k8s.api.core.v1." + name;
  if (package == "rbac") return "io.k8s.api.rbac.v1." + name;
  if (package == "admin") return "io.quartermaster.admin." + version + "." + name;
  return "io.k8s.apimachinery.pkg.apis.meta.v1." + name;
}

json RefTo(const std::string& key) { return json{{"$ref", kRefPrefix + key}}; }

std::string GroupVersionString(const std::string& group, const std::string& version) {
  return group.empty() ? version : group + "/" + version;
}

std::string IndexKey(const std::string& group, const std::string& version) {
  return group.empty() ? "api/" + version : "apis/" + group + "/" + version;
}

std::string UpperFirst(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

json QueryParam(const std::string& name, const std::string& type, const std::string& description) {
  return json{{"name", name},
              {"in", "query"},
              {"description", description},
              {"schema", json{{"type", type}}},
              {"uniqueItems", true}};
}

json PathParam(const std::string& name, const std::string& description) {
  return json{{"name", name},
              {"in", "path"},
              {"required", true},
              {"description", description},
              {"schema", json{{"type", "string"}}},
              {"uniqueItems", true}};
}

json DryRunParam() {
  return QueryParam("dryRun", "string",
                    "When All, the request is validated and answered but nothing is persisted.");
}
json FieldManagerParam() {
  return QueryParam("fieldManager", "string",
                    "Name of the actor making the change, recorded for server-side apply.");
}
json FieldValidationParam() {
  return QueryParam("fieldValidation", "string",
                    "What to do with unknown or duplicate fields: Ignore, Warn or Strict "
                    "(reject the request).");
}

json WriteParams() {
  return json::array({DryRunParam(), FieldManagerParam(), FieldValidationParam()});
}

json PatchParams() {
  json params = WriteParams();
  params.push_back(QueryParam("force", "boolean",
                              "For apply patches: take over fields owned by other managers."));
  return params;
}

json DeleteParams() {
  return json::array(
      {DryRunParam(),
       QueryParam("gracePeriodSeconds", "integer",
                  "Seconds before the object is deleted; 0 deletes at once."),
       QueryParam("propagationPolicy", "string",
                  "How dependents are garbage collected: Orphan, Background or Foreground.")});
}

json ListParams() {
  return json::array(
      {QueryParam("labelSelector", "string", "Only objects whose labels match."),
       QueryParam("fieldSelector", "string", "Only objects whose fields match."),
       QueryParam("limit", "integer", "At most this many objects; the rest via continue."),
       QueryParam("continue", "string", "Token from a previous limited list."),
       QueryParam("resourceVersion", "string", "Resource version to list or watch from."),
       QueryParam("resourceVersionMatch", "string", "How resourceVersion applies to a list."),
       QueryParam("watch", "boolean", "Stream changes instead of listing."),
       QueryParam("allowWatchBookmarks", "boolean", "Allow BOOKMARK events in a watch."),
       QueryParam("sendInitialEvents", "boolean", "Start a watch with the current objects."),
       QueryParam("timeoutSeconds", "integer", "End the list or watch after this long.")});
}

json JsonContent(const std::string& key) {
  return json{{"application/json", json{{"schema", RefTo(key)}}},
              {"application/yaml", json{{"schema", RefTo(key)}}}};
}

json Response(const std::string& description, const std::string& key) {
  return json{{"description", description}, {"content", JsonContent(key)}};
}

// Builds the OpenAPI v3 document of one group version from the schema table.
class DocumentBuilder {
 public:
  DocumentBuilder(std::string group, std::string version)
      : group_(std::move(group)),
        version_(std::move(version)),
        shape_(ShapeFor(group_, version_)),
        tag_(GroupTag(group_) + "_" + version_) {}

  json Build() {
    AddDef("meta.Status");
    AddDef("meta.DeleteOptions");
    schemas_[kPatchKey] =
        json{{"type", "object"},
             {"description", "A patch document; its format is given by the request Content-Type."}};
    for (const model::ResourceType& type : model::AllResourceTypes()) {
      if (type.group != group_ || !type.ServesVersion(version_)) continue;
      const std::string id = PackageOf(type) + "." + type.kind;
      if (FindDef(id, shape_) == nullptr) continue;
      AddKind(id, type.kind);
      AddKind(id + "List", type.kind + "List");
      AddPaths(type);
    }
    for (const ReviewResource& review : ReviewResources()) {
      if (review.group != group_ || review.version != version_) continue;
      const std::string id = schema_internal::PackageOf(review.group) + "." + review.kind;
      if (FindDef(id, shape_) == nullptr) continue;
      AddKind(id, review.kind);
      if (review.verbs == std::vector<std::string>{"create"}) {
        AddReviewPaths(review, id);
      } else {
        AddReadOnlyPaths(review, id);
      }
    }
    return json{{"openapi", "3.0.0"},
                {"info", json{{"title", "Quartermaster"}, {"version", "unversioned"}}},
                {"paths", std::move(paths_)},
                {"components", json{{"schemas", std::move(schemas_)}}}};
  }

 private:
  json Gvk(const std::string& kind) const {
    return json{{"group", group_}, {"version", version_}, {"kind", kind}};
  }

  void AddKind(const std::string& id, const std::string& kind) {
    AddDef(id);
    schemas_[SchemaKey(id, version_)][kGvkExtension] = json::array({Gvk(kind)});
  }

  // Adds the schema of `id` and, transitively, every schema it references.
  void AddDef(const std::string& id) {
    const std::string key = SchemaKey(id, version_);
    if (schemas_.contains(key)) return;
    const Def* def = FindDef(id, shape_);
    if (def == nullptr) return;
    schemas_[key] = json::object();  // reserve first: guards against reference cycles
    json properties = json::object();
    json required = json::array();
    for (const Prop& p : def->props) {
      properties[p.name] = PropSchema(p);
      if (p.required) required.push_back(p.name);
    }
    json schema{{"type", "object"}, {"description", def->description}};
    if (!properties.empty()) schema["properties"] = std::move(properties);
    if (!required.empty()) schema["required"] = std::move(required);
    if (def->preserve_unknown) schema[kPreserveUnknown] = true;
    schemas_[key] = std::move(schema);
  }

  // The schema of one value: a primitive, or a reference to a named schema.
  json ValueSchema(ValueType type, const std::string& ref) {
    switch (type) {
      case ValueType::kString:
        return json{{"type", "string"}};
      case ValueType::kInt64:
        return json{{"type", "integer"}, {"format", "int64"}};
      case ValueType::kInt32:
        return json{{"type", "integer"}, {"format", "int32"}};
      case ValueType::kBool:
        return json{{"type", "boolean"}};
      case ValueType::kQuantity:
        // No "type": like Kubernetes, a quantity is a string or a number, and kubectl explain
        // then names it Quantity.
        schemas_[kQuantityKey] =
            json{{"oneOf", json::array({json{{"type", "string"}}, json{{"type", "number"}}})},
                 {"description",
                  "A fixed-point number with an optional unit suffix, e.g. 80Gi, 500m or 1e3."}};
        return RefTo(kQuantityKey);
      case ValueType::kTime:
        schemas_[kTimeKey] =
            json{{"type", "string"},
                 {"format", "date-time"},
                 {"description", "An RFC 3339 timestamp in UTC, e.g. 2026-01-02T15:04:05Z."}};
        return RefTo(kTimeKey);
      case ValueType::kRawExtension:
        schemas_[kRawExtensionKey] =
            json{{"type", "object"},
                 {kPreserveUnknown, true},
                 {"description", "Arbitrary JSON, stored and returned as sent."}};
        return RefTo(kRawExtensionKey);
      case ValueType::kFreeForm:
        return json{{"type", "object"}, {kPreserveUnknown, true}};
      case ValueType::kRef:
        AddDef(ref);
        return RefTo(SchemaKey(ref, version_));
    }
    return json::object();
  }

  // A property: single references go through allOf so that a description can sit next to them,
  // as in the Kubernetes documents.
  json PropSchema(const Prop& p) {
    json value = ValueSchema(p.type, p.ref);
    json schema;
    switch (p.shape) {
      case Shape::kOne:
        schema = value.contains("$ref") ? json{{"allOf", json::array({std::move(value)})}}
                                        : std::move(value);
        break;
      case Shape::kList:
        schema = json{{"type", "array"}, {"items", std::move(value)}};
        break;
      case Shape::kMap:
        schema = json{{"type", "object"}, {"additionalProperties", std::move(value)}};
        break;
    }
    schema["description"] = p.description;
    return schema;
  }

  json Operation(const std::string& action, const std::string& verb, const std::string& kind,
                 const std::string& what, const std::string& description, json params,
                 json responses) const {
    return json{{"operationId", verb + what},       {"description", description},
                {"tags", json::array({tag_})},      {"x-kubernetes-action", action},
                {kGvkExtension, Gvk(kind)},         {"parameters", std::move(params)},
                {"responses", std::move(responses)}};
  }

  void AddPaths(const model::ResourceType& type) {
    const std::string prefix =
        type.group.empty() ? "/api/" + version_ : "/apis/" + type.group + "/" + version_;
    const std::string collection = type.namespaced
                                       ? prefix + "/namespaces/{namespace}/" + type.plural
                                       : prefix + "/" + type.plural;
    const std::string item = collection + "/{name}";
    const std::string kind_key = SchemaKey(PackageOf(type) + "." + type.kind, version_);
    const std::string list_key = SchemaKey(PackageOf(type) + "." + type.kind + "List", version_);
    const std::string status_key = SchemaKey("meta.Status", version_);
    const std::string delete_options_key = SchemaKey("meta.DeleteOptions", version_);
    // "ResourceV1beta1NamespacedResourceClaim", as Kubernetes names its operations.
    const std::string what = UpperFirst(GroupTag(type.group)) + UpperFirst(version_) +
                             (type.namespaced ? "Namespaced" : "") + type.kind;

    json path_params = json::array();
    if (type.namespaced) {
      path_params.push_back(PathParam("namespace", "Namespace of the objects."));
    }
    json item_params = path_params;
    item_params.push_back(PathParam("name", "Name of the " + type.kind + "."));
    const json pretty = QueryParam("pretty", "string", "When true, indent the output.");
    path_params.push_back(pretty);
    item_params.push_back(pretty);

    json& coll = paths_[collection];
    coll["parameters"] = path_params;
    coll["get"] = Operation("list", "list", type.kind, what,
                            "List or watch objects of kind " + type.kind + ".", ListParams(),
                            json{{"200", Response("OK", list_key)}});
    coll["post"] =
        Operation("post", "create", type.kind, what, "Create a " + type.kind + ".", WriteParams(),
                  json{{"200", Response("OK", kind_key)},
                       {"201", Response("Created", kind_key)},
                       {"202", Response("Accepted", kind_key)}});
    coll["post"]["requestBody"] = json{{"content", JsonContent(kind_key)}, {"required", true}};
    coll["delete"] = Operation("deletecollection", "deletecollection", type.kind, what,
                               "Delete a collection of " + type.kind + " objects.", ListParams(),
                               json{{"200", Response("OK", status_key)}});
    coll["delete"]["requestBody"] = json{{"content", JsonContent(delete_options_key)}};

    if (type.namespaced) {
      const std::string all = prefix + "/" + type.plural;
      paths_[all]["parameters"] = json::array({pretty});
      paths_[all]["get"] = Operation(
          "list", "list", type.kind,
          UpperFirst(GroupTag(type.group)) + UpperFirst(version_) + type.kind + "ForAllNamespaces",
          "List or watch objects of kind " + type.kind + " in every namespace.", ListParams(),
          json{{"200", Response("OK", list_key)}});
    }

    AddItemPaths(item, item_params, type.kind, what, kind_key, delete_options_key, false);
    if (type.has_status) {
      AddItemPaths(item + "/status", item_params, type.kind, what + "Status", kind_key, "", true);
    }
  }

  // get/put/patch (and delete unless `status`) on one object or its status subresource.
  void AddItemPaths(const std::string& path, const json& params, const std::string& kind,
                    const std::string& what, const std::string& kind_key,
                    const std::string& delete_options_key, bool status) {
    const std::string target = status ? "status of the " + kind : "the " + kind;
    json& p = paths_[path];
    p["parameters"] = params;
    p["get"] = Operation("get", "read", kind, what, "Read " + target + ".", json::array(),
                         json{{"200", Response("OK", kind_key)}});
    p["put"] =
        Operation("put", "replace", kind, what, "Replace " + target + ".", WriteParams(),
                  json{{"200", Response("OK", kind_key)}, {"201", Response("Created", kind_key)}});
    p["put"]["requestBody"] = json{{"content", JsonContent(kind_key)}, {"required", true}};
    // Strategic merge patch is deliberately not listed: kubectl would then compute one from
    // this schema instead of sending a JSON merge patch.
    json patch_content = json::object();
    for (const char* type : {"application/json-patch+json", "application/merge-patch+json",
                             "application/apply-patch+yaml"}) {
      patch_content[type] = json{{"schema", RefTo(kPatchKey)}};
    }
    p["patch"] =
        Operation("patch", "patch", kind, what, "Partially update " + target + ".", PatchParams(),
                  json{{"200", Response("OK", kind_key)}, {"201", Response("Created", kind_key)}});
    p["patch"]["requestBody"] = json{{"content", std::move(patch_content)}, {"required", true}};
    if (!status) {
      p["delete"] = Operation(
          "delete", "delete", kind, what, "Delete " + target + ".", DeleteParams(),
          json{{"200", Response("OK", kind_key)}, {"202", Response("Accepted", kind_key)}});
      p["delete"]["requestBody"] = json{{"content", JsonContent(delete_options_key)}};
    }
  }

  // A create-only review: POST on its collection. Plus a PATCH operation on an item path that is
  // not served (405): kubectl decides whether the server validates fields (fieldValidation) by
  // looking for a PATCH operation of the manifest's kind, and without one `kubectl create -f`
  // would fall back to OpenAPI v2 and fail.
  void AddReviewPaths(const ReviewResource& review, const std::string& id) {
    const std::string collection = "/apis/" + review.group + "/" + version_ + "/" + review.plural;
    const std::string kind_key = SchemaKey(id, version_);
    const std::string what =
        UpperFirst(GroupTag(review.group)) + UpperFirst(version_) + review.kind;
    json& coll = paths_[collection];
    coll["parameters"] =
        json::array({QueryParam("pretty", "string", "When true, indent the output.")});
    coll["post"] =
        Operation("post", "create", review.kind, what,
                  "Create a " + review.kind +
                      ": answered with its status at once; "
                      "nothing is stored.",
                  WriteParams(),
                  json{{"200", Response("OK", kind_key)}, {"201", Response("Created", kind_key)}});
    coll["post"]["requestBody"] = json{{"content", JsonContent(kind_key)}, {"required", true}};
    json& item = paths_[collection + "/{name}"];
    item["parameters"] = json::array({PathParam("name", "Name of the " + review.kind + ".")});
    item["patch"] =
        Operation("patch", "patch", review.kind, what,
                  "Not served (405 MethodNotAllowed): reviews are create-only. Listed "
                  "so that kubectl lets the server validate the fields of review "
                  "manifests (fieldValidation).",
                  json::array({FieldValidationParam()}),
                  json{{"405", Response("MethodNotAllowed", SchemaKey("meta.Status", version_))}});
  }

  // A computed, read-only resource of our group (clustersummaries): get of the object; the list
  // and watch are described in words.
  void AddReadOnlyPaths(const ReviewResource& r, const std::string& id) {
    const std::string collection = "/apis/" + r.group + "/" + version_ + "/" + r.plural;
    const std::string kind_key = SchemaKey(id, version_);
    const std::string what = UpperFirst(GroupTag(r.group)) + UpperFirst(version_) + r.kind;
    const json pretty = QueryParam("pretty", "string", "When true, indent the output.");
    json& item = paths_[collection + "/{name}"];
    item["parameters"] = json::array({PathParam("name", "Name of the " + r.kind + "."), pretty});
    item["get"] = Operation("get", "read", r.kind, what,
                            "Read the " + r.kind +
                                " (computed by the server; a list has the one object, "
                                "a watch sends its changes).",
                            json::array(), json{{"200", Response("OK", kind_key)}});
  }

  const std::string group_;
  const std::string version_;
  const unsigned shape_;
  const std::string tag_;
  json schemas_ = json::object();
  json paths_ = json::object();
};

// Every served group version, keyed by "v1" or "resource.k8s.io/v1".
std::map<std::string, json> BuildAllDocuments() {
  std::map<std::string, json> docs;
  for (const model::ResourceType& type : model::AllResourceTypes()) {
    for (const std::string& version : type.versions) {
      const std::string gv = GroupVersionString(type.group, version);
      if (docs.count(gv) == 0) docs[gv] = DocumentBuilder(type.group, version).Build();
    }
  }
  for (const ReviewResource& review : ReviewResources()) {
    const std::string gv = GroupVersionString(review.group, review.version);
    if (docs.count(gv) == 0) docs[gv] = DocumentBuilder(review.group, review.version).Build();
  }
  return docs;
}

const Prop* FindProp(const Def& def, const std::string& name) {
  for (const Prop& p : def.props) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

void CheckObject(const Def& def, const json& obj, const std::string& path, unsigned shape,
                 std::vector<std::string>& unknown);

void CheckField(const Def& def, const std::string& name, const json& value, const std::string& path,
                unsigned shape, std::vector<std::string>& unknown) {
  const std::string field_path = path + "." + name;
  const Prop* prop = FindProp(def, name);
  if (prop == nullptr) {
    if (!def.preserve_unknown) unknown.push_back(field_path);
    return;
  }
  // Scalars, opaque JSON and free-form objects have no fields to check.
  if (prop->type != ValueType::kRef) return;
  const Def* child = FindDef(prop->ref, shape);
  if (child == nullptr) return;
  switch (prop->shape) {
    case Shape::kOne:
      if (value.is_object()) CheckObject(*child, value, field_path, shape, unknown);
      break;
    case Shape::kList:
      if (!value.is_array()) break;
      for (size_t i = 0; i < value.size(); ++i) {
        if (value[i].is_object()) {
          CheckObject(*child, value[i], field_path + "[" + std::to_string(i) + "]", shape, unknown);
        }
      }
      break;
    case Shape::kMap:
      // Keys are data, not fields; only the values have a schema.
      if (!value.is_object()) break;
      for (const auto& [key, entry] : value.items()) {
        if (entry.is_object()) CheckObject(*child, entry, field_path + "." + key, shape, unknown);
      }
      break;
  }
}

void CheckObject(const Def& def, const json& obj, const std::string& path, unsigned shape,
                 std::vector<std::string>& unknown) {
  for (const auto& [name, value] : obj.items()) {
    CheckField(def, name, value, path, shape, unknown);
  }
}

}  // namespace

namespace schema_internal {

std::string PackageOf(const std::string& group) {
  if (group.empty()) return "core";
  if (group == model::kRbacGroup) return "rbac";
  if (group == "admin.quartermaster.io") return "admin";
  return "resource";
}

}  // namespace schema_internal

nlohmann::json OpenApiIndex() {
  json paths = json::object();
  for (const model::ResourceType& type : model::AllResourceTypes()) {
    for (const std::string& version : type.versions) {
      const std::string key = IndexKey(type.group, version);
      paths[key] = json{{"serverRelativeURL", "/openapi/v3/" + key}};
    }
  }
  for (const ReviewResource& review : ReviewResources()) {
    const std::string key = IndexKey(review.group, review.version);
    paths[key] = json{{"serverRelativeURL", "/openapi/v3/" + key}};
  }
  return json{{"paths", std::move(paths)}};
}

const nlohmann::json& OpenApiDocument(const std::string& group_version) {
  static const auto* docs = new std::map<std::string, json>(BuildAllDocuments());
  static const auto* null_doc = new json();
  auto it = docs->find(group_version);
  return it == docs->end() ? *null_doc : it->second;
}

absl::Status ApplyFieldValidation(const std::string& mode, const std::vector<std::string>& unknown,
                                  std::vector<std::string>* warnings) {
  if (mode == "Ignore" || unknown.empty()) return absl::OkStatus();
  std::vector<std::string> problems;
  for (const std::string& path : unknown) {
    problems.push_back("unknown field \"" + (absl::StartsWith(path, ".") ? path.substr(1) : path) +
                       "\"");
  }
  if (mode == "Strict") {
    return absl::InvalidArgumentError("strict decoding error: " + absl::StrJoin(problems, ", "));
  }
  warnings->insert(warnings->end(), problems.begin(), problems.end());
  return absl::OkStatus();
}

std::vector<std::string> UnknownFields(const model::ResourceType& type, const std::string& version,
                                       const nlohmann::json& obj) {
  if (!type.ServesVersion(version)) return {};
  return UnknownFields(type.group, version, type.kind, obj);
}

std::vector<std::string> UnknownFields(const std::string& group, const std::string& version,
                                       const std::string& kind, const nlohmann::json& obj) {
  std::vector<std::string> unknown;
  if (!obj.is_object()) return unknown;
  const unsigned shape = ShapeFor(group, version);
  const Def* root = FindDef(schema_internal::PackageOf(group) + "." + kind, shape);
  if (root == nullptr) return unknown;
  for (const auto& [name, value] : obj.items()) {
    if (name == "apiVersion" || name == "kind") continue;
    CheckField(*root, name, value, "", shape, unknown);
  }
  return unknown;
}

}  // namespace qm::api
