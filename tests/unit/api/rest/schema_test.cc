#include "api/rest/schema.h"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/resource_types.h"

namespace qm::api {
namespace {

using nlohmann::json;
using Paths = std::vector<std::string>;

constexpr char kRefPrefix[] = "#/components/schemas/";

const std::vector<std::string> kGroupVersions = {
    "v1", "resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1",
    "rbac.authorization.k8s.io/v1"};

const model::ResourceType& Type(const std::string& group, const std::string& plural) {
  const model::ResourceType* type = model::FindResourceType(group, plural);
  EXPECT_NE(type, nullptr) << plural;
  return *type;
}

const json& Schemas(const std::string& gv) { return OpenApiDocument(gv)["components"]["schemas"]; }

std::string ItemPath(const model::ResourceType& type, const std::string& version) {
  std::string prefix =
      type.group.empty() ? "/api/" + version : "/apis/" + type.group + "/" + version;
  if (type.namespaced) prefix += "/namespaces/{namespace}";
  return prefix + "/" + type.plural + "/{name}";
}

bool HasQueryParam(const json& op, const std::string& name) {
  for (const json& p : op.value("parameters", json::array())) {
    if (p.value("name", "") == name && p.value("in", "") == "query") return true;
  }
  return false;
}

void CollectRefs(const json& node, std::vector<std::string>& refs) {
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      if (key == "$ref" && value.is_string()) {
        refs.push_back(value.get<std::string>());
      } else {
        CollectRefs(value, refs);
      }
    }
  } else if (node.is_array()) {
    for (const json& v : node) CollectRefs(v, refs);
  }
}

// What `kubectl explain` does to reach the schema behind a property: follow a lone allOf, a
// $ref, and array items.
const json& Resolve(const json& schemas, const json& schema) {
  if (schema.contains("items")) return Resolve(schemas, schema["items"]);
  if (schema.contains("allOf") && schema["allOf"].size() == 1) {
    return Resolve(schemas, schema["allOf"][0]);
  }
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"].get<std::string>();
    return Resolve(schemas, schemas[ref.substr(std::string(kRefPrefix).size())]);
  }
  return schema;
}

// The schema reached from the kind's schema along `fields`, as `kubectl explain kind.a.b` does.
const json& Explain(const std::string& gv, const std::string& kind_key,
                    const std::vector<std::string>& fields) {
  const json& schemas = Schemas(gv);
  const json* schema = &schemas[kind_key];
  for (const std::string& f : fields) {
    const json& props = (*schema)["properties"];
    EXPECT_TRUE(props.contains(f)) << kind_key << " ... " << f;
    schema = &Resolve(schemas, props[f]);
  }
  return *schema;
}

// ---------------------------------------------------------------------------------------------
// Seed manifests (tests/../fixtures/seeds), restated as JSON.

const char kSeedNode[] = R"({
  "apiVersion": "v1", "kind": "Node",
  "metadata": {"name": "gpu-node-c", "labels": {"kubernetes.io/hostname": "gpu-node-c",
               "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
  "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}
})";

const char kSeedSlice[] = R"({
  "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
  "metadata": {"name": "gpu-node-a-gpu.nvidia.com"},
  "spec": {
    "driver": "gpu.nvidia.com", "nodeName": "gpu-node-a",
    "pool": {"name": "gpu-node-a", "generation": 1, "resourceSliceCount": 1},
    "devices": [{
      "name": "gpu-0",
      "attributes": {
        "type": {"string": "gpu"}, "productName": {"string": "NVIDIA A100-SXM4-80GB"},
        "brand": {"string": "Nvidia"}, "architecture": {"string": "Ampere"},
        "cudaComputeCapability": {"version": "8.0.0"}, "driverVersion": {"version": "560.35.3"},
        "uuid": {"string": "GPU-6513270e-269e-0d37-f2a7-4de452e6b438"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"}},
      "capacity": {"memory": {"value": "80Gi"}}}]}
})";

const char kSeedNamespace[] = R"({
  "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dra-test"}
})";

const char kSeedClassA100[] =
    R"json({
  "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "a100-80g"},
  "spec": {"selectors": [{"cel": {"expression":
    "device.driver == \"gpu.nvidia.com\" &&\n)json"
    R"json(device.attributes[\"gpu.nvidia.com\"].productName)json"
    R"json(.lowerAscii().contains(\"a100\") &&\n)json"
    R"json(device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"80Gi\")) >= 0"}}]}
})json";

const char kSeedClassGpu[] = R"({
  "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
  "metadata": {"name": "gpu.nvidia.com"},
  "spec": {"selectors": [{"cel": {"expression":
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}],
    "extendedResourceName": "nvidia.com/gpu"}
})";

const char kSeedClaimV1beta1[] = R"({
  "apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
  "metadata": {"namespace": "dra-test", "name": "gpu-claim"},
  "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}}
})";

const char kSeedClaimV1[] = R"({
  "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
  "metadata": {"namespace": "dra-test", "name": "gpu-claim-v1"},
  "spec": {"devices": {"requests": [{"name": "gpu",
                                     "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}
})";

const char kSeedTemplate[] = R"({
  "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
  "metadata": {"namespace": "dra-test", "name": "one-gpu"},
  "spec": {"spec": {"devices": {"requests": [
    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}
})";

const char kSeedFallbackClaim[] = R"json({
  "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
  "metadata": {"namespace": "dra-test", "name": "a100-or-two-l4"},
  "spec": {"devices": {"requests": [{"name": "accel", "firstAvailable": [
    {"name": "a100", "deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression":
      "device.attributes[\"gpu.nvidia.com\"].productName.contains(\"A100\")"}}]},
    {"name": "l4-pair", "deviceClassName": "gpu.nvidia.com", "count": 2, "selectors": [
      {"cel": {"expression": "device.attributes[\"gpu.nvidia.com\"].productName.contains(\"L4\")"}}
    ]}]}]}}
})json";

struct Seed {
  const char* group;
  const char* plural;
  const char* version;
  const char* text;
};

const std::vector<Seed> kSeeds = {
    {"", "nodes", "v1", kSeedNode},
    {"resource.k8s.io", "resourceslices", "v1", kSeedSlice},
    {"", "namespaces", "v1", kSeedNamespace},
    {"resource.k8s.io", "deviceclasses", "v1", kSeedClassA100},
    {"resource.k8s.io", "deviceclasses", "v1", kSeedClassGpu},
    {"resource.k8s.io", "resourceclaims", "v1beta1", kSeedClaimV1beta1},
    {"resource.k8s.io", "resourceclaims", "v1", kSeedClaimV1},
    {"resource.k8s.io", "resourceclaimtemplates", "v1", kSeedTemplate},
    {"resource.k8s.io", "resourceclaims", "v1", kSeedFallbackClaim},
};

std::vector<std::string> Unknown(const std::string& group, const std::string& plural,
                                 const std::string& version, const std::string& text) {
  return UnknownFields(Type(group, plural), version, json::parse(text));
}

// ---------------------------------------------------------------------------------------------
// OpenAPI documents

TEST(OpenApiTest, IndexListsEveryServedGroupVersion) {
  const json index = OpenApiIndex();
  ASSERT_TRUE(index["paths"].is_object());
  std::set<std::string> keys;
  for (const auto& [key, entry] : index["paths"].items()) {
    keys.insert(key);
    EXPECT_EQ(entry["serverRelativeURL"], "/openapi/v3/" + key);
  }
  EXPECT_EQ(keys, (std::set<std::string>{
                      "api/v1", "apis/resource.k8s.io/v1", "apis/resource.k8s.io/v1beta2",
                      "apis/resource.k8s.io/v1beta1", "apis/rbac.authorization.k8s.io/v1",
                      "apis/admin.quartermaster.io/v1alpha1"}));
}

// The create-only reviews: POST on the collection; a PATCH operation with the kind and
// fieldValidation, which is what kubectl looks for before it lets the server validate a
// manifest (without one, `kubectl create -f` fails); schemas for `kubectl explain`; strict
// decoding from the same table.
TEST(OpenApiTest, ReviewKindsAreCreatableAndServerValidated) {
  const json& doc = OpenApiDocument("admin.quartermaster.io/v1alpha1");
  ASSERT_TRUE(doc.is_object());
  for (const char* kind :
       {"DeviceMatchReview", "UtilizationHistoryReview", "DeviceAllocationHistoryReview"}) {
    std::string plural = kind;
    for (auto& c : plural) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    plural += "s";
    const std::string collection = "/apis/admin.quartermaster.io/v1alpha1/" + plural;
    const json gvk = {{"group", "admin.quartermaster.io"}, {"version", "v1alpha1"}, {"kind", kind}};
    ASSERT_TRUE(doc["paths"].contains(collection)) << collection;
    EXPECT_EQ(doc["paths"][collection]["post"]["x-kubernetes-group-version-kind"], gvk);
    const json& patch = doc["paths"][collection + "/{name}"]["patch"];
    EXPECT_EQ(patch["x-kubernetes-group-version-kind"], gvk);
    EXPECT_TRUE(HasQueryParam(patch, "fieldValidation")) << kind;
    const json& schema =
        doc["components"]["schemas"][std::string("io.quartermaster.admin.v1alpha1.") + kind];
    EXPECT_EQ(schema["x-kubernetes-group-version-kind"], json::array({gvk}));
    EXPECT_TRUE(schema["properties"].contains("spec")) << kind;
  }
  const json review = json::parse(R"({"apiVersion":"admin.quartermaster.io/v1alpha1",
      "kind":"DeviceMatchReview","metadata":{"name":"x"},"status":{"anything":1},
      "spec":{"className":"a","selectors":[{"cel":{"expression":"true","bogus":1}}],"limit":1,
      "extra":true}})");
  EXPECT_EQ(UnknownFields("admin.quartermaster.io", "v1alpha1", "DeviceMatchReview", review),
            (std::vector<std::string>{".spec.extra", ".spec.selectors[0].cel.bogus"}));
  EXPECT_TRUE(UnknownFields("admin.quartermaster.io", "v1alpha1", "NoSuchReview", review).empty());
}

TEST(OpenApiTest, EveryIndexedGroupVersionHasADocument) {
  for (const std::string& gv : kGroupVersions) {
    const json& doc = OpenApiDocument(gv);
    ASSERT_TRUE(doc.is_object()) << gv;
    EXPECT_EQ(doc["openapi"], "3.0.0") << gv;
    EXPECT_TRUE(doc["info"].is_object()) << gv;
    EXPECT_FALSE(doc["paths"].empty()) << gv;
    EXPECT_FALSE(doc["components"]["schemas"].empty()) << gv;
  }
}

TEST(OpenApiTest, UnknownGroupVersionIsNull) {
  EXPECT_TRUE(OpenApiDocument("apps/v1").is_null());
  EXPECT_TRUE(OpenApiDocument("resource.k8s.io/v1alpha3").is_null());
  EXPECT_TRUE(OpenApiDocument("").is_null());
}

TEST(OpenApiTest, DocumentIsBuiltOnce) {
  EXPECT_EQ(&OpenApiDocument("resource.k8s.io/v1"), &OpenApiDocument("resource.k8s.io/v1"));
  EXPECT_NE(&OpenApiDocument("resource.k8s.io/v1"), &OpenApiDocument("resource.k8s.io/v1beta1"));
}

TEST(OpenApiTest, EveryServedKindHasPatchWithGvkAndFieldValidation) {
  int checked = 0;
  for (const model::ResourceType& type : model::AllResourceTypes()) {
    for (const std::string& version : type.versions) {
      const json& doc = OpenApiDocument(type.ApiVersion(version));
      const std::string path = ItemPath(type, version);
      ASSERT_TRUE(doc["paths"].contains(path)) << path;
      const json& patch = doc["paths"][path]["patch"];
      EXPECT_EQ(patch["x-kubernetes-group-version-kind"],
                (json{{"group", type.group}, {"version", version}, {"kind", type.kind}}))
          << path;
      for (const char* param : {"fieldValidation", "dryRun", "fieldManager", "force"}) {
        EXPECT_TRUE(HasQueryParam(patch, param)) << path << " " << param;
      }
      std::set<std::string> content_types;
      for (const auto& [ct, unused] : patch["requestBody"]["content"].items()) {
        content_types.insert(ct);
      }
      EXPECT_EQ(content_types, (std::set<std::string>{"application/json-patch+json",
                                                      "application/merge-patch+json",
                                                      "application/apply-patch+yaml"}))
          << path;
      for (const char* verb : {"get", "put", "delete"}) {
        EXPECT_TRUE(doc["paths"][path].contains(verb)) << path << " " << verb;
      }
      ++checked;
    }
  }
  // Namespace, Node, Pod, Event, ResourceQuota, ServiceAccount, 4 resource.k8s.io kinds in 3
  // versions, DeviceTaintRule in 2, the 4 rbac kinds in v1.
  EXPECT_EQ(checked, 6 + 4 * 3 + 2 + 4);
}

// kubectl picks whichever PATCH op with the GVK it meets first, status subresource included.
TEST(OpenApiTest, EveryPatchOperationOffersFieldValidationAndNoStrategicMerge) {
  int patches = 0;
  for (const std::string& gv : kGroupVersions) {
    for (const auto& [path, item] : OpenApiDocument(gv)["paths"].items()) {
      if (!item.contains("patch")) continue;
      ++patches;
      const json& patch = item["patch"];
      EXPECT_TRUE(patch["x-kubernetes-group-version-kind"].is_object()) << path;
      EXPECT_TRUE(HasQueryParam(patch, "fieldValidation")) << path;
      EXPECT_FALSE(
          patch["requestBody"]["content"].contains("application/strategic-merge-patch+json"))
          << path;
    }
  }
  EXPECT_GT(patches, 16);
}

TEST(OpenApiTest, PathsFollowTheResourceScope) {
  const json& v1 = OpenApiDocument("resource.k8s.io/v1")["paths"];
  EXPECT_TRUE(v1.contains("/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"));
  EXPECT_TRUE(v1.contains("/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"));
  EXPECT_TRUE(v1.contains("/apis/resource.k8s.io/v1/resourceclaims"));
  EXPECT_TRUE(
      v1.contains("/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}/status"));
  EXPECT_TRUE(v1.contains("/apis/resource.k8s.io/v1/deviceclasses/{name}"));
  EXPECT_FALSE(v1.contains("/apis/resource.k8s.io/v1/deviceclasses/{name}/status"));
  EXPECT_FALSE(v1.contains("/apis/resource.k8s.io/v1/namespaces/{namespace}/deviceclasses"));
  const json& core = OpenApiDocument("v1")["paths"];
  EXPECT_TRUE(core.contains("/api/v1/nodes/{name}"));
  EXPECT_TRUE(core.contains("/api/v1/nodes/{name}/status"));
  EXPECT_TRUE(core.contains("/api/v1/namespaces/{name}"));
  EXPECT_EQ(core["/api/v1/nodes/{name}"]["patch"]["x-kubernetes-group-version-kind"],
            (json{{"group", ""}, {"version", "v1"}, {"kind", "Node"}}));
  for (const auto& [path, unused] : core.items()) {
    EXPECT_EQ(path.rfind("/api/v1/", 0), 0u) << path;
  }
}

TEST(OpenApiTest, ResourceClaimSchemaCarriesGvkArray) {
  const json& claim = Schemas("resource.k8s.io/v1")["io.k8s.api.resource.v1.ResourceClaim"];
  ASSERT_TRUE(claim.is_object());
  EXPECT_EQ(
      claim["x-kubernetes-group-version-kind"],
      json::array({{{"group", "resource.k8s.io"}, {"version", "v1"}, {"kind", "ResourceClaim"}}}));
  EXPECT_FALSE(claim["description"].get<std::string>().empty());
  for (const char* field : {"apiVersion", "kind", "metadata", "spec", "status"}) {
    EXPECT_TRUE(claim["properties"].contains(field)) << field;
  }
  EXPECT_EQ(claim["required"], json::array({"spec"}));
  EXPECT_EQ(claim["properties"]["metadata"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
}

TEST(OpenApiTest, EveryKindAndListSchemaCarriesItsGvk) {
  for (const model::ResourceType& type : model::AllResourceTypes()) {
    for (const std::string& version : type.versions) {
      const std::string base = type.group.empty() ? "io.k8s.api.core.v1."
                               : type.group == "rbac.authorization.k8s.io"
                                   ? "io.k8s.api.rbac.v1."
                                   : "io.k8s.api.resource." + version + ".";
      const json& schemas = Schemas(type.ApiVersion(version));
      for (const std::string& kind : {type.kind, type.kind + "List"}) {
        ASSERT_TRUE(schemas.contains(base + kind)) << base + kind;
        EXPECT_EQ(schemas[base + kind]["x-kubernetes-group-version-kind"],
                  json::array({{{"group", type.group}, {"version", version}, {"kind", kind}}}))
            << base + kind;
      }
    }
  }
}

TEST(OpenApiTest, EveryRefResolves) {
  for (const std::string& gv : kGroupVersions) {
    const json& doc = OpenApiDocument(gv);
    std::vector<std::string> refs;
    CollectRefs(doc, refs);
    EXPECT_GT(refs.size(), 20u) << gv;
    for (const std::string& ref : refs) {
      ASSERT_EQ(ref.rfind(kRefPrefix, 0), 0u) << ref;
      EXPECT_TRUE(doc["components"]["schemas"].contains(ref.substr(std::string(kRefPrefix).size())))
          << gv << ": " << ref;
    }
  }
}

TEST(OpenApiTest, EverySchemaAndPropertyHasADescription) {
  for (const std::string& gv : kGroupVersions) {
    for (const auto& [key, schema] : Schemas(gv).items()) {
      EXPECT_FALSE(schema.value("description", "").empty()) << key;
      const json props = schema.value("properties", json::object());
      for (const auto& [name, prop] : props.items()) {
        EXPECT_FALSE(prop.value("description", "").empty()) << key << "." << name;
      }
    }
  }
}

TEST(OpenApiTest, V1beta1DeviceHasBasicAndV1DoesNot) {
  const json& beta1 = Schemas("resource.k8s.io/v1beta1");
  const json& device = beta1["io.k8s.api.resource.v1beta1.Device"]["properties"];
  EXPECT_TRUE(device.contains("basic"));
  EXPECT_FALSE(device.contains("attributes"));
  EXPECT_TRUE(
      beta1["io.k8s.api.resource.v1beta1.BasicDevice"]["properties"].contains("attributes"));

  for (const char* version : {"v1", "v1beta2"}) {
    const std::string key = std::string("io.k8s.api.resource.") + version + ".Device";
    const json& props = Schemas(std::string("resource.k8s.io/") + version)[key]["properties"];
    EXPECT_FALSE(props.contains("basic")) << version;
    EXPECT_TRUE(props.contains("attributes")) << version;
    EXPECT_TRUE(props.contains("capacity")) << version;
    EXPECT_FALSE(Schemas(std::string("resource.k8s.io/") + version)
                     .contains(std::string("io.k8s.api.resource.") + version + ".BasicDevice"));
  }
}

TEST(OpenApiTest, V1beta1RequestIsFlatAndV1HasExactly) {
  const json& beta1 =
      Schemas("resource.k8s.io/v1beta1")["io.k8s.api.resource.v1beta1.DeviceRequest"];
  EXPECT_TRUE(beta1["properties"].contains("deviceClassName"));
  EXPECT_TRUE(beta1["properties"].contains("firstAvailable"));
  EXPECT_FALSE(beta1["properties"].contains("exactly"));
  EXPECT_EQ(beta1["required"], json::array({"name"}));

  const json& v1 = Schemas("resource.k8s.io/v1")["io.k8s.api.resource.v1.DeviceRequest"];
  EXPECT_TRUE(v1["properties"].contains("exactly"));
  EXPECT_FALSE(v1["properties"].contains("deviceClassName"));
  const json& exact = Schemas("resource.k8s.io/v1")["io.k8s.api.resource.v1.ExactDeviceRequest"];
  EXPECT_EQ(exact["required"], json::array({"deviceClassName"}));
}

TEST(OpenApiTest, DeviceTaintRuleOnlyInV1AndV1beta2) {
  EXPECT_TRUE(Schemas("resource.k8s.io/v1").contains("io.k8s.api.resource.v1.DeviceTaintRule"));
  EXPECT_TRUE(
      Schemas("resource.k8s.io/v1beta2").contains("io.k8s.api.resource.v1beta2.DeviceTaintRule"));
  EXPECT_FALSE(
      Schemas("resource.k8s.io/v1beta1").contains("io.k8s.api.resource.v1beta1.DeviceTaintRule"));
  EXPECT_FALSE(OpenApiDocument("resource.k8s.io/v1beta1")["paths"].contains(
      "/apis/resource.k8s.io/v1beta1/devicetaintrules/{name}"));
}

TEST(OpenApiTest, ExplainReachesNestedFields) {
  const json& devices =
      Explain("resource.k8s.io/v1", "io.k8s.api.resource.v1.ResourceClaim", {"spec", "devices"});
  for (const char* field : {"requests", "constraints", "config"}) {
    EXPECT_FALSE(devices["properties"][field].value("description", "").empty()) << field;
  }
  const json& exact = Explain("resource.k8s.io/v1", "io.k8s.api.resource.v1.ResourceClaim",
                              {"spec", "devices", "requests", "exactly"});
  EXPECT_EQ(exact["properties"]["count"]["type"], "integer");

  const json& basic =
      Explain("resource.k8s.io/v1beta1", "io.k8s.api.resource.v1beta1.ResourceSlice",
              {"spec", "devices", "basic"});
  EXPECT_EQ(basic["properties"]["capacity"]["type"], "object");
  EXPECT_TRUE(basic["properties"]["capacity"].contains("additionalProperties"));

  const json& taint = Explain("v1", "io.k8s.api.core.v1.Node", {"spec", "taints"});
  for (const char* field : {"key", "value", "effect", "timeAdded"}) {
    EXPECT_TRUE(taint["properties"].contains(field)) << field;
  }
  const json& status = Explain("resource.k8s.io/v1", "io.k8s.api.resource.v1.ResourceClaim",
                               {"status", "allocation", "devices", "results"});
  EXPECT_TRUE(status["properties"].contains("device"));
}

TEST(OpenApiTest, CoreKindsModelTheirStatus) {
  const json& schemas = Schemas("v1");
  const json& node_status = schemas["io.k8s.api.core.v1.NodeStatus"]["properties"];
  for (const char* field : {"capacity", "allocatable", "phase", "conditions", "addresses",
                            "daemonEndpoints", "nodeInfo", "images", "volumesInUse",
                            "volumesAttached", "config", "features", "runtimeHandlers"}) {
    EXPECT_TRUE(node_status.contains(field)) << field;
  }
  EXPECT_EQ(node_status["allocatable"]["additionalProperties"]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity");
  EXPECT_EQ(node_status["config"]["x-kubernetes-preserve-unknown-fields"], true);
  const json& ns = schemas["io.k8s.api.core.v1.NamespaceStatus"]["properties"];
  EXPECT_TRUE(ns.contains("phase"));
  EXPECT_TRUE(ns.contains("conditions"));
  EXPECT_TRUE(schemas["io.k8s.api.core.v1.NamespaceSpec"]["properties"].contains("finalizers"));
}

// ---------------------------------------------------------------------------------------------
// UnknownFields

TEST(UnknownFieldsTest, FindsUnknownSpecField) {
  EXPECT_EQ(Unknown("resource.k8s.io", "resourceclaims", "v1", R"({
      "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
      "metadata": {"name": "c", "namespace": "n"},
      "spec": {"foo": 1, "devices": {"requests": []}}})"),
            (Paths{".spec.foo"}));
}

TEST(UnknownFieldsTest, FindsNestedUnknownInRequest) {
  EXPECT_EQ(Unknown("resource.k8s.io", "resourceclaims", "v1", R"({
      "spec": {"devices": {"requests": [
        {"name": "a", "exactly": {"deviceClassName": "c"}},
        {"name": "b", "bar": true, "exactly": {"deviceClassName": "c", "baz": 2}}]}}})"),
            (Paths{".spec.devices.requests[1].bar", ".spec.devices.requests[1].exactly.baz"}));
}

TEST(UnknownFieldsTest, ReportsEveryUnknownField) {
  EXPECT_EQ(Unknown("resource.k8s.io", "resourceclaims", "v1", R"({
      "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "extra": {},
      "metadata": {"name": "c", "nam": "typo", "ownerReferences": [{"uid": "u", "oops": 1}]},
      "spec": {"devices": {"constraints": [{"matchAttribute": "a/b", "x": 1}]}},
      "status": {"allocation": {"devices": {"results": [{"device": "d", "y": 1}]}}}})"),
            (Paths{".extra", ".metadata.nam", ".metadata.ownerReferences[0].oops",
                   ".spec.devices.constraints[0].x", ".status.allocation.devices.results[0].y"}));
}

TEST(UnknownFieldsTest, AcceptsSeedManifests) {
  for (const Seed& seed : kSeeds) {
    EXPECT_EQ(Unknown(seed.group, seed.plural, seed.version, seed.text), Paths{})
        << seed.plural << " " << seed.version << "\n"
        << seed.text;
  }
}

TEST(UnknownFieldsTest, SeedClaimsAreVersionSpecific) {
  // The v1beta1 claim puts deviceClassName on the request; v1 does not know it there.
  EXPECT_EQ(Unknown("resource.k8s.io", "resourceclaims", "v1", kSeedClaimV1beta1),
            (Paths{".spec.devices.requests[0].deviceClassName"}));
  EXPECT_EQ(Unknown("resource.k8s.io", "resourceclaims", "v1beta1", kSeedClaimV1),
            (Paths{".spec.devices.requests[0].exactly"}));
  EXPECT_EQ(Unknown("resource.k8s.io", "resourceclaims", "v1beta2", kSeedClaimV1), Paths{});
}

TEST(UnknownFieldsTest, V1beta1SliceNestsDeviceFieldsUnderBasic) {
  const char kBeta1Slice[] = R"({
      "apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceSlice",
      "metadata": {"name": "s"},
      "spec": {"driver": "d", "nodeName": "n", "allNodes": false,
               "pool": {"name": "p", "generation": 0, "resourceSliceCount": 1},
               "devices": [{"name": "gpu-0", "basic": {
                  "attributes": {"type": {"string": "gpu"}},
                  "capacity": {"memory": {"value": "80Gi"}},
                  "taints": [{"key": "k", "effect": "NoSchedule"}]}}]}})";
  EXPECT_EQ(Unknown("resource.k8s.io", "resourceslices", "v1beta1", kBeta1Slice), Paths{});
  EXPECT_EQ(Unknown("resource.k8s.io", "resourceslices", "v1", kBeta1Slice),
            (Paths{".spec.devices[0].basic"}));
  EXPECT_EQ(Unknown("resource.k8s.io", "resourceslices", "v1beta1", kSeedSlice),
            (Paths{".spec.devices[0].attributes", ".spec.devices[0].capacity"}));
}

TEST(UnknownFieldsTest, ChecksMapValuesButNotMapKeys) {
  EXPECT_EQ(
      Unknown("resource.k8s.io", "resourceslices", "v1", R"({
      "metadata": {"labels": {"any/key": "v"}, "annotations": {"whatever": "x"}},
      "spec": {"driver": "d", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
               "allNodes": true,
               "devices": [{"name": "g", "attributes": {"example.com/anything": {"int": 3},
                                                        "type": {"string": "gpu", "bogus": 1}},
                            "capacity": {"mem": {"value": "1Gi", "requestPolicy": {
                               "default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}}}}],
               "sharedCounters": [{"name": "cs", "counters": {"c": {"value": "1", "x": 0}}}]}})"),
      (Paths{".spec.devices[0].attributes.type.bogus", ".spec.sharedCounters[0].counters.c.x"}));
}

TEST(UnknownFieldsTest, AcceptsOpaqueParametersWithAnyContent) {
  const char kClaim[] = R"({
      "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
      "metadata": {"name": "c", "namespace": "n"},
      "spec": {"devices": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
        "config": [{"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
          "apiVersion": "gpu.nvidia.com/v1", "kind": "GpuConfig",
          "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
          "deeply": [{"nested": {"unknown": [1, {"x": null}]}}]}}}]}}})";
  EXPECT_EQ(Unknown("resource.k8s.io", "resourceclaims", "v1", kClaim), Paths{});

  EXPECT_EQ(Unknown("resource.k8s.io", "deviceclasses", "v1beta1", R"({
      "spec": {"config": [{"opaque": {"driver": "d", "parameters": {"anything": {"goes": 1}},
                                      "notHere": 1}}]}})"),
            (Paths{".spec.config[0].opaque.notHere"}));
}

TEST(UnknownFieldsTest, SkipsFreeFormParts) {
  EXPECT_EQ(Unknown("", "nodes", "v1", R"({
      "apiVersion": "v1", "kind": "Node",
      "metadata": {"name": "n", "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
      "spec": {"podCIDR": "10.0.0.0/24", "unschedulable": true,
               "configSource": {"configMap": {"name": "x", "kubeletConfigKey": "k"}}},
      "status": {"capacity": {"cpu": "8", "nvidia.com/gpu": "4"}, "allocatable": {"cpu": "7"},
                 "conditions": [{"type": "Ready", "status": "True",
                                 "lastHeartbeatTime": "2026-01-01T00:00:00Z"}],
                 "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
                 "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                 "nodeInfo": {"kubeletVersion": "v1.32.0", "swap": {"capacity": 0}},
                 "images": [{"names": ["a"], "sizeBytes": 5}],
                 "config": {"active": {"anything": 1}},
                 "features": {"supplementalGroupsPolicy": true},
                 "runtimeHandlers": [{"name": "runc", "features": {"userNamespaces": true}}]}})"),
            Paths{});
  EXPECT_EQ(Unknown("", "nodes", "v1", R"({
      "spec": {"taints": [{"key": "k", "effect": "NoSchedule", "operator": "Exists"}]},
      "status": {"nodeInfo": {"kernel": "6.1"}}})"),
            (Paths{".spec.taints[0].operator", ".status.nodeInfo.kernel"}));
}

TEST(UnknownFieldsTest, AcceptsAllocatedClaimStatus) {
  EXPECT_EQ(Unknown("resource.k8s.io", "resourceclaims", "v1", R"({
      "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c",
        "allocationMode": "ExactCount", "count": 1,
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]}}]}},
      "status": {
        "allocation": {
          "devices": {"results": [{"request": "gpu", "driver": "d", "pool": "p", "device": "g",
                                   "shareID": "0b0c1e49-f0b6-4b0c-8f4e-2c6f2d5e8a11",
                                   "consumedCapacity": {"memory": "10Gi"}}],
                      "config": [{"source": "FromClass", "opaque": {"driver": "d",
                                                                    "parameters": {}}}]},
          "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["gpu-node-a"]}]}]},
          "allocationTimestamp": "2026-01-01T00:00:00Z"},
        "reservedFor": [{"resource": "pods", "name": "pod1", "uid": "u1"}],
        "devices": [{"driver": "d", "pool": "p", "device": "g",
                     "conditions": [{"type": "Ready", "status": "True", "reason": "R",
                                     "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                     "data": {"free": ["form"]},
                     "networkData": {"interfaceName": "eth1", "ips": ["192.0.2.5/24"]}}]}})"),
            Paths{});
}

TEST(UnknownFieldsTest, DeviceTaintRuleAndNamespace) {
  EXPECT_EQ(Unknown("resource.k8s.io", "devicetaintrules", "v1beta2", R"({
      "spec": {"deviceSelector": {"driver": "d", "pool": "p", "device": "g", "zone": "z"},
               "taint": {"key": "k", "value": "v", "effect": "NoExecute"}},
      "status": {"conditions": []}})"),
            (Paths{".spec.deviceSelector.zone"}));
  EXPECT_EQ(Unknown("", "namespaces", "v1", R"({
      "spec": {"finalizers": ["kubernetes"]},
      "status": {"phase": "Active", "conditions": [{"type": "T", "status": "False", "why": 1}]}})"),
            (Paths{".status.conditions[0].why"}));
}

TEST(UnknownFieldsTest, TemplateChecksTheEmbeddedClaim) {
  EXPECT_EQ(Unknown("resource.k8s.io", "resourceclaimtemplates", "v1", R"({
      "spec": {"metadata": {"labels": {"a": "b"}, "color": "red"},
               "spec": {"devices": {"requests": [{"name": "r", "count": 1}]}}}})"),
            (Paths{".spec.metadata.color", ".spec.spec.devices.requests[0].count"}));
}

TEST(UnknownFieldsTest, IgnoresInputItCannotJudge) {
  const model::ResourceType& claims = Type("resource.k8s.io", "resourceclaims");
  EXPECT_EQ(UnknownFields(claims, "v1", json::array({1, 2})), Paths{});
  EXPECT_EQ(UnknownFields(claims, "v1", json("text")), Paths{});
  EXPECT_EQ(UnknownFields(claims, "v1alpha3", json{{"foo", 1}}), Paths{});
  // Wrong JSON types are a decoding problem, not an unknown field.
  EXPECT_EQ(UnknownFields(claims, "v1", json{{"spec", json{{"devices", "nope"}}}}), Paths{});
}

// ---------------------------------------------------------------------------------------------
// core Pod, Event, ResourceQuota

// The seed pods, restated as JSON (tests/testdata/seeds/05, 06, 20, 21): securityContext,
// restartPolicy, extended resources and tolerations must all be accepted.
const char kSeedPodRhel[] = R"({
  "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod1-rhel", "namespace": "dra-test"},
  "spec": {"restartPolicy": "OnFailure",
    "securityContext": {"seLinuxOptions": {"type": "nvidia_container_t"}},
    "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}],
    "containers": [
      {"name": "ctr0", "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
       "resources": {"claims": [{"name": "gpu"}]}}]}})";
const char kSeedPodTolerating[] = R"({
  "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-tolerating", "namespace": "dra-test"},
  "spec": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "nodeSelector": {"accelerator": "example-gpu-x100"},
    "containers": [{"name": "cuda", "image": "registry.example/cuda-app:v1",
                    "resources": {"limits": {"nvidia.com/gpu": 1}}}]}})";

TEST(UnknownFieldsTest, AcceptsSeedPods) {
  EXPECT_EQ(Unknown("", "pods", "v1", kSeedPodRhel), Paths{});
  EXPECT_EQ(Unknown("", "pods", "v1", kSeedPodTolerating), Paths{});
}

TEST(UnknownFieldsTest, PodSpecContainersAndStatusKeepUnmodelledFields) {
  // Fields of a real pod manifest this service does not model are not unknown...
  EXPECT_EQ(Unknown("", "pods", "v1", R"({
      "spec": {"hostAliases": [{"ip": "10.0.0.1"}], "dnsConfig": {"nameservers": ["1.1.1.1"]},
        "containers": [{"name": "c", "image": "i", "livenessProbe": {"exec": {}},
                        "env": [{"name": "A", "value": "1"}], "stdin": true}]},
      "status": {"hostIP": "10.0.0.2", "somethingNew": 1}})"),
            Paths{});
  // ...but typos in the modelled parts and in metadata still are.
  EXPECT_EQ(Unknown("", "pods", "v1", R"({
      "metadata": {"nme": "x"},
      "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimNme": "c"}],
        "tolerations": [{"ky": "k"}],
        "containers": [{"name": "c", "resources": {"claim": []}}]}})"),
            (Paths{".metadata.nme", ".spec.containers[0].resources.claim",
                   ".spec.resourceClaims[0].resourceClaimNme", ".spec.tolerations[0].ky"}));
}

TEST(UnknownFieldsTest, EventAndResourceQuotaAreStrict) {
  EXPECT_EQ(Unknown("", "events", "v1", R"({
      "involvedObject": {"kind": "Pod", "name": "p", "namespace": "n", "uid": "u", "x": 1},
      "reason": "R", "message": "m", "type": "Normal", "count": 1, "source": {"component": "c"},
      "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
      "reportingComponent": "c", "bogus": true})"),
            (Paths{".bogus", ".involvedObject.x"}));
  EXPECT_EQ(Unknown("", "resourcequotas", "v1", R"({
      "spec": {"hard": {"count/pods": "10"}, "hrad": {}},
      "status": {"hard": {"count/pods": "10"}, "used": {"count/pods": "1"}}})"),
            (Paths{".spec.hrad"}));
}

TEST(OpenApiTest, PodSchemaPreservesUnknownFieldsWhereItShould) {
  const json& schemas = Schemas("v1");
  for (const char* key : {"io.k8s.api.core.v1.PodSpec", "io.k8s.api.core.v1.Container",
                          "io.k8s.api.core.v1.PodStatus"}) {
    ASSERT_TRUE(schemas.contains(key)) << key;
    EXPECT_EQ(schemas[key]["x-kubernetes-preserve-unknown-fields"], true) << key;
  }
  for (const char* key : {"io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.PodResourceClaim",
                          "io.k8s.api.core.v1.Event", "io.k8s.api.core.v1.ResourceQuotaSpec"}) {
    ASSERT_TRUE(schemas.contains(key)) << key;
    EXPECT_FALSE(schemas[key].contains("x-kubernetes-preserve-unknown-fields")) << key;
  }
  const json& spec = schemas["io.k8s.api.core.v1.PodSpec"];
  EXPECT_EQ(spec["required"], json::array({"containers"}));
  for (const char* field :
       {"nodeName", "nodeSelector", "affinity", "tolerations", "resourceClaims", "containers",
        "initContainers", "priority", "priorityClassName", "schedulerName", "restartPolicy"}) {
    EXPECT_TRUE(spec["properties"].contains(field)) << field;
  }
  EXPECT_EQ(
      schemas["io.k8s.api.core.v1.ResourceRequirements"]["properties"]["claims"]["items"]["$ref"],
      "#/components/schemas/io.k8s.api.core.v1.ResourceClaim");
}

TEST(OpenApiTest, CorePathsForPodsEventsAndQuotas) {
  const json& core = OpenApiDocument("v1")["paths"];
  EXPECT_TRUE(core.contains("/api/v1/namespaces/{namespace}/pods/{name}/status"));
  EXPECT_TRUE(core.contains("/api/v1/namespaces/{namespace}/resourcequotas/{name}/status"));
  EXPECT_TRUE(core.contains("/api/v1/namespaces/{namespace}/events/{name}"));
  EXPECT_FALSE(core.contains("/api/v1/namespaces/{namespace}/events/{name}/status"));
  EXPECT_TRUE(core.contains("/api/v1/pods"));
  EXPECT_TRUE(core.contains("/api/v1/events"));
  EXPECT_EQ(core["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
                ["x-kubernetes-group-version-kind"],
            (json{{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}));
}

// rbac.authorization.k8s.io and core ServiceAccount

TEST(OpenApiTest, RbacPathsSchemasAndOperationIdsFollowKubernetes) {
  const json& doc = OpenApiDocument("rbac.authorization.k8s.io/v1");
  const json& paths = doc["paths"];
  const std::string prefix = "/apis/rbac.authorization.k8s.io/v1";
  EXPECT_TRUE(paths.contains(prefix + "/namespaces/{namespace}/roles/{name}"));
  EXPECT_TRUE(paths.contains(prefix + "/namespaces/{namespace}/rolebindings/{name}"));
  EXPECT_TRUE(paths.contains(prefix + "/rolebindings"));  // across namespaces
  EXPECT_TRUE(paths.contains(prefix + "/clusterroles/{name}"));
  EXPECT_TRUE(paths.contains(prefix + "/clusterrolebindings/{name}"));
  EXPECT_FALSE(paths.contains(prefix + "/namespaces/{namespace}/clusterroles/{name}"));
  EXPECT_FALSE(paths.contains(prefix + "/clusterroles/{name}/status"));
  const json& patch = paths[prefix + "/namespaces/{namespace}/roles/{name}"]["patch"];
  EXPECT_EQ(patch["operationId"], "patchRbacAuthorizationV1NamespacedRole");
  EXPECT_EQ(patch["tags"], json::array({"rbacAuthorization_v1"}));
  EXPECT_EQ(paths[prefix + "/clusterrolebindings/{name}"]["get"]["operationId"],
            "readRbacAuthorizationV1ClusterRoleBinding");
  const json& schemas = doc["components"]["schemas"];
  const json& binding = schemas["io.k8s.api.rbac.v1.RoleBinding"];
  EXPECT_EQ(binding["required"], json::array({"roleRef"}));
  EXPECT_EQ(binding["properties"]["subjects"]["items"]["$ref"],
            "#/components/schemas/io.k8s.api.rbac.v1.Subject");
  EXPECT_EQ(schemas["io.k8s.api.rbac.v1.PolicyRule"]["required"], json::array({"verbs"}));
  EXPECT_EQ(Resolve(schemas, schemas["io.k8s.api.rbac.v1.AggregationRule"]["properties"]
                                    ["clusterRoleSelectors"])["properties"]
                .contains("matchExpressions"),
            true);
  // Only the rbac group's kinds are in its document.
  EXPECT_FALSE(schemas.contains("io.k8s.api.core.v1.Pod"));
}

TEST(UnknownFieldsTest, RbacKindsAndServiceAccountsAreStrict) {
  // What `kubectl create rolebinding --clusterrole=view --user=alice` sends.
  EXPECT_EQ(Unknown("rbac.authorization.k8s.io", "rolebindings", "v1", R"({
      "kind": "RoleBinding", "apiVersion": "rbac.authorization.k8s.io/v1",
      "metadata": {"name": "alice-view", "creationTimestamp": null},
      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
      "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]})"),
            Paths{});
  EXPECT_EQ(Unknown("rbac.authorization.k8s.io", "clusterroles", "v1", R"({
      "metadata": {"name": "r"},
      "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"],
                 "resourceNames": ["p"], "verb": ["x"]},
                {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}],
      "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}, "x": 1}]},
      "spec": {}})"),
            (Paths{".aggregationRule.clusterRoleSelectors[0].x", ".rules[0].verb", ".spec"}));
  EXPECT_EQ(Unknown("rbac.authorization.k8s.io", "clusterrolebindings", "v1", R"({
      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "v",
                  "namespace": "x"},
      "subjects": [{"kind": "ServiceAccount", "name": "ci", "namespace": "tools", "uid": "u"}]})"),
            (Paths{".roleRef.namespace", ".subjects[0].uid"}));
  EXPECT_EQ(Unknown("", "serviceaccounts", "v1", R"({
      "metadata": {"name": "ci"}, "secrets": [{"name": "t", "namespace": "n"}],
      "imagePullSecrets": [{"name": "r", "key": "k"}], "automountServiceAccountToken": true,
      "spec": {}})"),
            (Paths{".imagePullSecrets[0].key", ".spec"}));
}

}  // namespace
}  // namespace qm::api
