#include "api/rest/validation.h"

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/rest/validation_limits.h"
#include "gtest/gtest.h"
#include "model/resource_types.h"

namespace qm::api {
namespace {

using json = nlohmann::json;
using Errors = std::vector<std::string>;

// Kubernetes' wording for the name formats (apimachinery util/validation), written out here so
// the tests do not depend on the helpers under test.
constexpr char kSubdomainMsg[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
constexpr char kLabelMsg[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
constexpr char kCIdentifierMsg[] =
    "a valid C identifier must start with alphabetic character or '_', followed by a string of "
    "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
    "validation is '[A-Za-z_][A-Za-z0-9_]*')";
constexpr char kLabelValueMsg[] =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  "
    "or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
constexpr char kNamePartMsg[] =
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
constexpr char kRequestRefMsg[] =
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'";

std::string Bad(const std::string& path, const std::string& value, const std::string& detail) {
  return path + ": Invalid value: " + value + ": " + detail;
}

const model::ResourceType& TypeOf(const std::string& kind) {
  for (const auto& type : model::AllResourceTypes()) {
    if (type.kind == kind) return type;
  }
  ADD_FAILURE() << "no resource type " << kind;
  return model::AllResourceTypes().front();
}

Errors Strings(const model::FieldErrors& errs) {
  Errors out;
  for (const auto& e : errs) out.push_back(e.ToString());
  return out;
}

Errors Check(const json& obj, const json* old = nullptr) {
  return Strings(ValidateObject(TypeOf(obj.at("kind").get<std::string>()), obj, old));
}

Errors CheckStatus(const json& obj, const json& old) {
  return Strings(ValidateStatusUpdate(TypeOf(obj.at("kind").get<std::string>()), obj, old));
}

bool Contains(const Errors& errs, const std::string& e) {
  return std::find(errs.begin(), errs.end(), e) != errs.end();
}

// ---- fixtures ------------------------------------------------------------------------------

json Slice() {
  return R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
    "metadata": {"name": "node-a-gpu"},
    "spec": {
      "driver": "gpu.example.com", "nodeName": "node-a",
      "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
      "devices": [{"name": "gpu-0"}]
    }
  })"_json;
}

json Claim() {
  return R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"name": "claim", "namespace": "team-a"},
    "spec": {"devices": {"requests": [
      {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com",
                                  "allocationMode": "ExactCount", "count": 1}}
    ]}}
  })"_json;
}

json AllocatedClaim() {
  json claim = Claim();
  claim["status"] = R"({"allocation": {"devices": {"results": [
      {"request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0"}
    ]}}})"_json;
  return claim;
}

json Class() {
  return R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {}
  })"_json;
}

json TaintRule() {
  return R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
    "metadata": {"name": "maintenance"},
    "spec": {"deviceSelector": {"driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0"},
             "taint": {"key": "example.com/maintenance", "value": "planned",
                       "effect": "NoSchedule"}}
  })"_json;
}

json Repeat(const json& item, size_t n) {
  json list = json::array();
  for (size_t i = 0; i < n; ++i) list.push_back(item);
  return list;
}

json NamedDevices(size_t n) {
  json list = json::array();
  for (size_t i = 0; i < n; ++i) list.push_back({{"name", "gpu-" + std::to_string(i)}});
  return list;
}

// ---- seed manifests (tests/../fixtures/seeds), as the v1 hub objects the codec produces ------

json SeedNode(const std::string& name, const json& labels, const json& spec) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"spec", spec}};
}

json SeedGpu(const std::string& name, const std::string& product, const std::string& arch,
             const std::string& cc, const std::string& uuid, const std::string& pcie_root,
             const std::string& memory) {
  return {{"name", name},
          {"attributes",
           {{"type", {{"string", "gpu"}}},
            {"productName", {{"string", product}}},
            {"brand", {{"string", "Nvidia"}}},
            {"architecture", {{"string", arch}}},
            {"cudaComputeCapability", {{"version", cc}}},
            {"driverVersion", {{"version", "560.35.3"}}},
            {"uuid", {{"string", uuid}}},
            {"resource.kubernetes.io/pcieRoot", {{"string", pcie_root}}}}},
          {"capacity", {{"memory", {{"value", memory}}}}}};
}

json SeedSlice(const std::string& node, const json& devices) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", node + "-gpu.nvidia.com"}}},
          {"spec",
           {{"driver", "gpu.nvidia.com"},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", devices}}}};
}

std::vector<json> SeedObjects() {
  const std::string a100 = "NVIDIA A100-SXM4-80GB", a100pcie = "NVIDIA A100-PCIE-40GB";
  const std::string l4 = "NVIDIA L4", h100 = "NVIDIA H100 80GB HBM3";
  std::vector<json> seeds;
  // 00-inventory.yaml
  seeds.push_back(SeedNode("gpu-node-a",
                           {{"kubernetes.io/hostname", "gpu-node-a"},
                            {"accelerator", "example-gpu-x100"},
                            {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}},
                           json::object()));
  seeds.push_back(SeedSlice(
      "gpu-node-a", {SeedGpu("gpu-0", a100, "Ampere", "8.0.0",
                             "GPU-6513270e-269e-0d37-f2a7-4de452e6b438", "pci0000:00", "80Gi"),
                     SeedGpu("gpu-1", a100, "Ampere", "8.0.0",
                             "GPU-d23f0824-128b-2f33-0c5c-7fd0a6a3a450", "pci0000:00", "80Gi"),
                     SeedGpu("gpu-2", a100, "Ampere", "8.0.0",
                             "GPU-9531985d-5d9d-c9f8-1818-e811892f902b", "pci0000:00", "80Gi"),
                     SeedGpu("gpu-3", a100, "Ampere", "8.0.0",
                             "GPU-36f675cc-81e7-4ef5-e8e2-5d940ed90475", "pci0000:00", "80Gi")}));
  seeds.push_back(SeedNode(
      "gpu-node-b", {{"kubernetes.io/hostname", "gpu-node-b"}, {"nvidia.com/gpu.product", "mixed"}},
      json::object()));
  seeds.push_back(SeedSlice(
      "gpu-node-b", {SeedGpu("gpu-0", a100pcie, "Ampere", "8.0.0",
                             "GPU-6b0d549b-6f03-675a-1600-a35a099950d8", "pci0000:00", "40Gi"),
                     SeedGpu("gpu-1", a100pcie, "Ampere", "8.0.0",
                             "GPU-8d116ece-1738-f7d9-3d9c-172411e20b8f", "pci0000:00", "40Gi"),
                     SeedGpu("gpu-2", l4, "Ada Lovelace", "8.9.0",
                             "GPU-90c192cf-d3ac-94af-0f21-ddb66cad4a26", "pci0000:00", "24Gi"),
                     SeedGpu("gpu-3", l4, "Ada Lovelace", "8.9.0",
                             "GPU-a170b338-3926-3059-f28c-105d1fb17c23", "pci0000:00", "24Gi"),
                     SeedGpu("gpu-4", l4, "Ada Lovelace", "8.9.0",
                             "GPU-0fd630f1-f29d-0da9-953f-48f1a09f76b5", "pci0000:40", "24Gi"),
                     SeedGpu("gpu-5", l4, "Ada Lovelace", "8.9.0",
                             "GPU-0cb1e29c-658c-da14-95e6-0af593bd04cf", "pci0000:40", "24Gi")}));
  seeds.push_back(SeedNode("gpu-node-c",
                           {{"kubernetes.io/hostname", "gpu-node-c"},
                            {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}},
                           R"({"taints": [{"key": "nvidia.com/gpu", "value": "present",
                       "effect": "NoSchedule"}]})"_json));
  seeds.push_back(SeedSlice(
      "gpu-node-c", {SeedGpu("gpu-0", h100, "Hopper", "9.0.0",
                             "GPU-8e81973e-0bec-d7b0-3898-d190f9ebdacc", "pci0000:00", "80Gi"),
                     SeedGpu("gpu-1", h100, "Hopper", "9.0.0",
                             "GPU-6b4cb242-4a23-d596-2217-beaddbc496cb", "pci0000:00", "80Gi"),
                     SeedGpu("gpu-2", h100, "Hopper", "9.0.0",
                             "GPU-92276658-1e27-a1c0-8a6a-63ec24ede6a4", "pci0000:00", "80Gi"),
                     SeedGpu("gpu-3", h100, "Hopper", "9.0.0",
                             "GPU-ae97ba94-d0ed-a82f-8f6d-05584ef8aa38", "pci0000:00", "80Gi"),
                     SeedGpu("gpu-4", h100, "Hopper", "9.0.0",
                             "GPU-923a7369-94e3-bf91-1a61-dbe22e44158b", "pci0000:40", "80Gi"),
                     SeedGpu("gpu-5", h100, "Hopper", "9.0.0",
                             "GPU-18f135d2-5f55-7203-3018-50c5a38fd547", "pci0000:40", "80Gi"),
                     SeedGpu("gpu-6", h100, "Hopper", "9.0.0",
                             "GPU-907a70c3-1012-f037-b64c-e4228c38fb29", "pci0000:40", "80Gi"),
                     SeedGpu("gpu-7", h100, "Hopper", "9.0.0",
                             "GPU-7f150524-34b9-b5df-9e77-69b10f4205b4", "pci0000:40", "80Gi")}));
  // 01-namespace.yaml
  seeds.push_back(R"({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": "dra-test"}})"_json);
  // 02-deviceclass-a100-80g.yaml
  seeds.push_back(R"({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
    "metadata": {"name": "a100-80g"}, "spec": {"selectors": [{"cel": {}}]}})"_json);
  seeds.back()["spec"]["selectors"][0]["cel"]["expression"] =
      "device.driver == \"gpu.nvidia.com\" &&\n"
      "device.attributes[\"gpu.nvidia.com\"].productName.lowerAscii().contains(\"a100\") &&\n"
      "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"80Gi\")) >= 0";
  // 03-deviceclass-gpu.yaml
  seeds.push_back(R"({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression":
      "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}],
      "extendedResourceName": "nvidia.com/gpu"}})"_json);
  // 04-resourceclaim-v1beta1.yaml, converted to v1 and defaulted
  seeds.push_back(R"({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"namespace": "dra-test", "name": "gpu-claim"},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
      "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}}})"_json);
  // 07-resourceclaim-v1.yaml, defaulted
  seeds.push_back(R"({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"namespace": "dra-test", "name": "gpu-claim-v1"},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
      "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}}})"_json);
  // 12-claimtemplate-per-pod.yaml, defaulted
  seeds.push_back(R"({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
    "metadata": {"namespace": "dra-test", "name": "one-gpu"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
      "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}}}}
  )"_json);
  // 14-claim-fallback-l4-or-a100.yaml, defaulted
  seeds.push_back(R"json({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"namespace": "dra-test", "name": "a100-or-two-l4"},
    "spec": {"devices": {"requests": [{"name": "accel", "firstAvailable": [
      {"name": "a100", "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
       "count": 1, "selectors": [{"cel": {}}]},
      {"name": "l4-pair", "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
       "count": 2, "selectors": [{"cel": {"expression":
        "device.attributes[\"gpu.nvidia.com\"].productName.contains(\"L4\")"}}]}
    ]}]}}})json"_json);
  seeds.back()["spec"]["devices"]["requests"][0]["firstAvailable"][0]["selectors"][0]["cel"]
              ["expression"] =
      "device.attributes[\"gpu.nvidia.com\"].productName.contains(\"A100\") &&\n"
      "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0";
  return seeds;
}

TEST(ValidationSeedsTest, EverySeedManifestIsValid) {
  std::vector<json> seeds = SeedObjects();
  ASSERT_EQ(seeds.size(), 13u);
  for (const json& seed : seeds) {
    EXPECT_EQ(Check(seed), Errors{}) << seed.at("kind") << " " << seed["metadata"]["name"];
  }
}

TEST(ValidationSeedsTest, SeedsStayValidOnUnchangedUpdate) {
  for (const json& seed : SeedObjects()) {
    EXPECT_EQ(Check(seed, &seed), Errors{}) << seed.at("kind") << " " << seed["metadata"]["name"];
  }
}

// ---- metadata ------------------------------------------------------------------------------

TEST(ValidationMetadataTest, NameIsRequiredUnlessGenerated) {
  json obj = Class();
  obj["metadata"].erase("name");
  EXPECT_EQ(Check(obj), Errors{"metadata.name: Required value: name or generateName is required"});
  obj["metadata"]["generateName"] = "gpu-";
  EXPECT_EQ(Check(obj), Errors{});
  obj["metadata"]["generateName"] = "Gpu-";
  EXPECT_EQ(Check(obj), Errors{Bad("metadata.generateName", "\"Gpu-\"", kSubdomainMsg)});
}

TEST(ValidationMetadataTest, NameMustBeDnsSubdomain) {
  json obj = Class();
  obj["metadata"]["name"] = "Bad_Name";
  EXPECT_EQ(Check(obj), Errors{Bad("metadata.name", "\"Bad_Name\"", kSubdomainMsg)});
  obj["metadata"]["name"] = std::string(254, 'a');
  EXPECT_EQ(Check(obj), Errors{Bad("metadata.name", "\"" + std::string(254, 'a') + "\"",
                                   "must be no more than 253 characters")});
}

TEST(ValidationMetadataTest, NamespaceNameMustBeDnsLabel) {
  json ns = R"({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dra.test"}})"_json;
  EXPECT_EQ(Check(ns), Errors{Bad("metadata.name", "\"dra.test\"", "must not contain dots")});
}

TEST(ValidationMetadataTest, NamespacedKindsNeedAValidNamespace) {
  json claim = Claim();
  claim["metadata"].erase("namespace");
  EXPECT_EQ(Check(claim), Errors{"metadata.namespace: Required value"});
  claim["metadata"]["namespace"] = "Team_A";
  EXPECT_EQ(Check(claim), Errors{Bad("metadata.namespace", "\"Team_A\"", kLabelMsg)});
}

TEST(ValidationMetadataTest, LabelKeysAndValuesAreChecked) {
  json obj = Class();
  obj["metadata"]["labels"] = {{"example.com/ok", "fine"}, {"bad key", "v"}, {"k", "bad value"}};
  EXPECT_EQ(Check(obj), (Errors{Bad("metadata.labels", "\"bad key\"", kNamePartMsg),
                                Bad("metadata.labels", "\"bad value\"", kLabelValueMsg)}));
}

TEST(ValidationMetadataTest, AnnotationKeysAndTotalSizeAreChecked) {
  json obj = Class();
  obj["metadata"]["annotations"] = {{"Example.com/Mixed-Case", "ok"}, {"bad key", "v"}};
  EXPECT_EQ(Check(obj), Errors{Bad("metadata.annotations", "\"bad key\"", kNamePartMsg)});
  obj["metadata"]["annotations"] = {{"a", std::string(256 * 1024, 'x')}};
  EXPECT_EQ(Check(obj),
            Errors{"metadata.annotations: Too long: may not be more than 262144 bytes"});
  obj["metadata"]["annotations"] = {{"a", std::string(256 * 1024 - 1, 'x')}};
  EXPECT_EQ(Check(obj), Errors{});
}

TEST(ValidationMetadataTest, GenerationMustNotBeNegative) {
  json obj = Class();
  obj["metadata"]["generation"] = -1;
  EXPECT_EQ(Check(obj),
            Errors{"metadata.generation: Invalid value: -1: must be greater than or equal to 0"});
}

TEST(ValidationMetadataTest, NameIsImmutableOnUpdate) {
  json old = Class();
  json obj = Class();
  obj["metadata"]["name"] = "other.example.com";
  EXPECT_EQ(Check(obj, &old), Errors{"metadata.name: Invalid value: field is immutable"});
}

TEST(ValidationMetadataTest, MistypedFieldsAreReportedNotThrown) {
  json obj = Slice();
  obj["spec"]["devices"] = "gpu-0";
  obj["spec"]["pool"]["generation"] = "one";
  EXPECT_EQ(Check(obj),
            (Errors{"spec.pool.generation: Invalid value: \"one\": must be of type integer",
                    "spec.devices: Invalid value: \"gpu-0\": must be of type array"}));
  EXPECT_EQ(Strings(ValidateObject(TypeOf("ResourceSlice"), json::array(), nullptr)),
            Errors{"Invalid value: the object must be a JSON object"});
}

// ---- DeviceClass ---------------------------------------------------------------------------

TEST(DeviceClassValidationTest, SelectorNeedsANonEmptyBoundedExpression) {
  json obj = Class();
  obj["spec"]["selectors"] =
      R"([{}, {"cel": {"expression": ""}}, {"cel": {"expression": "true"}}])"_json;
  obj["spec"]["selectors"].push_back({{"cel", {{"expression", std::string(10241, 'x')}}}});
  EXPECT_EQ(
      Check(obj),
      (Errors{"spec.selectors[0].cel: Required value",
              "spec.selectors[1].cel.expression: Required value",
              "spec.selectors[3].cel.expression: Too long: may not be more than 10240 bytes"}));
}

TEST(DeviceClassValidationTest, TooManySelectorsSkipsTheItems) {
  json obj = Class();
  obj["spec"]["selectors"] = Repeat(json::object(), 33);
  EXPECT_EQ(Check(obj), Errors{"spec.selectors: Too many: 33: must have at most 32 items"});
  obj["spec"]["selectors"] = Repeat(R"({"cel": {"expression": "true"}})"_json, 32);
  EXPECT_EQ(Check(obj), Errors{});
}

TEST(DeviceClassValidationTest, UnchangedSelectorsAreTreatedAsStored) {
  json old = Class();
  old["spec"]["selectors"] = {{{"cel", {{"expression", std::string(10241, 'x')}}}}};
  json obj = old;
  EXPECT_EQ(Check(obj, &old), Errors{});
  obj["spec"]["selectors"].push_back(R"({"cel": {"expression": "true"}})"_json);
  EXPECT_EQ(Check(obj, &old),
            Errors{"spec.selectors[0].cel.expression: Too long: may not be more than 10240 bytes"});
}

TEST(DeviceClassValidationTest, OpaqueConfigNeedsDriverAndObjectParameters) {
  json obj = Class();
  obj["spec"]["config"] = R"([
    {},
    {"opaque": {"driver": "gpu.example.com"}},
    {"opaque": {"driver": "gpu.example.com", "parameters": [1, 2]}},
    {"opaque": {"driver": "", "parameters": {}}},
    {"opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "timeSlicing"}}}
  ])"_json;
  obj["spec"]["config"].push_back(
      {{"opaque",
        {{"driver", "gpu.example.com"}, {"parameters", {{"x", std::string(10240, 'y')}}}}}});
  EXPECT_EQ(
      Check(obj),
      (Errors{"spec.config[0].opaque: Required value",
              "spec.config[1].opaque.parameters: Required value",
              Bad("spec.config[2].opaque.parameters", "\"<value omitted>\"",
                  "must be a valid JSON object"),
              "spec.config[3].opaque.driver: Required value",
              Bad("spec.config[3].opaque.driver", "\"\"", kSubdomainMsg),
              "spec.config[5].opaque.parameters: Too long: may not be more than 10240 bytes"}));
}

TEST(DeviceClassValidationTest, TooManyConfigEntries) {
  json obj = Class();
  obj["spec"]["config"] = Repeat(json::object(), 33);
  EXPECT_EQ(Check(obj), Errors{"spec.config: Too many: 33: must have at most 32 items"});
}

TEST(DeviceClassValidationTest, ExtendedResourceNameMustBeExtended) {
  json obj = Class();
  for (const char* bad : {"gpu", "kubernetes.io/gpu", "requests.example.com/gpu", "a/b/c"}) {
    obj["spec"]["extendedResourceName"] = bad;
    EXPECT_EQ(Check(obj), Errors{Bad("spec.extendedResourceName", "\"" + std::string(bad) + "\"",
                                     "must be a valid extended resource name")})
        << bad;
  }
  obj["spec"]["extendedResourceName"] = "example.com/gpu";
  EXPECT_EQ(Check(obj), Errors{});
}

// ---- ResourceSlice -------------------------------------------------------------------------

TEST(ResourceSliceValidationTest, DriverIsARequiredShortSubdomain) {
  json obj = Slice();
  obj["spec"].erase("driver");
  EXPECT_EQ(Check(obj),
            (Errors{"spec.driver: Required value", Bad("spec.driver", "\"\"", kSubdomainMsg)}));
  obj["spec"]["driver"] = std::string(60, 'a') + ".com";
  EXPECT_EQ(Check(obj), Errors{"spec.driver: Too long: may not be more than 63 bytes"});
  obj["spec"]["driver"] = "GPU.Example.com";  // upper case is tolerated, as for CSI drivers
  EXPECT_EQ(Check(obj), Errors{});
  obj["spec"]["driver"] = "gpu_example";
  EXPECT_EQ(Check(obj), Errors{Bad("spec.driver", "\"gpu_example\"", kSubdomainMsg)});
}

TEST(ResourceSliceValidationTest, PoolNameCountAndGeneration) {
  json obj = Slice();
  obj["spec"]["pool"] = R"({"name": "", "generation": -1, "resourceSliceCount": 0})"_json;
  EXPECT_EQ(Check(obj),
            (Errors{"spec.pool.name: Required value",
                    "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero",
                    "spec.pool.generation: Invalid value: -1: must be greater than or equal to "
                    "zero"}));
  obj["spec"]["pool"] =
      R"({"name": "rack-1/Node_A", "generation": 0, "resourceSliceCount": 2})"_json;
  EXPECT_EQ(Check(obj), Errors{Bad("spec.pool.name", "\"Node_A\"", kSubdomainMsg)});
  obj["spec"]["pool"]["name"] = "rack-1/node-a";
  EXPECT_EQ(Check(obj), Errors{});
  obj["spec"]["pool"]["name"] = std::string(251, 'a') + "/bb";
  EXPECT_EQ(Check(obj), Errors{"spec.pool.name: Too long: may not be more than 253 bytes"});
}

TEST(ResourceSliceValidationTest, ExactlyOneNodeSelection) {
  json obj = Slice();
  obj["spec"].erase("nodeName");
  EXPECT_EQ(Check(obj), Errors{"spec: Required value: exactly one of `nodeName`, `nodeSelector`, "
                               "`allNodes`, `perDeviceNodeSelection` is required"});
  obj["spec"]["nodeName"] = "node-a";
  obj["spec"]["allNodes"] = true;
  EXPECT_EQ(Check(obj),
            Errors{"spec: Invalid value: \"{`nodeName`, `allNodes`}\": exactly one of `nodeName`, "
                   "`nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but "
                   "multiple fields are set"});
  obj["spec"]["allNodes"] = false;
  EXPECT_EQ(Check(obj),
            Errors{"spec.allNodes: Invalid value: false: must be either unset or set to true"});
  obj["spec"].erase("allNodes");
  obj["spec"]["nodeName"] = "";
  EXPECT_EQ(Check(obj),
            (Errors{"spec.nodeName: Invalid value: \"\": must be either unset or set to a "
                    "non-empty string",
                    "spec: Required value: exactly one of `nodeName`, `nodeSelector`, "
                    "`allNodes`, `perDeviceNodeSelection` is required"}));
  obj["spec"]["nodeName"] = "Node_A";
  EXPECT_EQ(Check(obj), Errors{Bad("spec.nodeName", "\"Node_A\"", kSubdomainMsg)});
}

TEST(ResourceSliceValidationTest, NodeSelectorNeedsExactlyOneValidTerm) {
  json obj = Slice();
  obj["spec"].erase("nodeName");
  obj["spec"]["nodeSelector"] = R"({"nodeSelectorTerms": [{"matchExpressions": [
      {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a"]}]}]})"_json;
  EXPECT_EQ(Check(obj), Errors{});
  obj["spec"]["nodeSelector"] = R"({"nodeSelectorTerms": [{"matchExpressions": [
      {"key": "zone", "operator": "Near", "values": ["a"]},
      {"key": "zone", "operator": "In"},
      {"key": "zone", "operator": "Exists", "values": ["a"]},
      {"key": "bad key", "operator": "Gt", "values": ["1", "2"]},
      {"key": "zone", "operator": "In", "values": ["not valid"]}],
    "matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]},
                    {"key": "metadata.name", "operator": "Exists"},
                    {"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}]})"_json;
  const std::string e = "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions";
  const std::string f = "spec.nodeSelector.nodeSelectorTerms[0].matchFields";
  EXPECT_EQ(Check(obj),
            (Errors{Bad(e + "[0].operator", "\"Near\"", "not a valid selector operator"),
                    e + "[1].values: Required value: must be specified when `operator` is 'In' "
                        "or 'NotIn'",
                    e + "[2].values: Forbidden: may not be specified when `operator` is 'Exists' "
                        "or 'DoesNotExist'",
                    e + "[3].values: Required value: must be specified single value when "
                        "`operator` is 'Lt' or 'Gt'",
                    Bad(e + "[3].key", "\"bad key\"", kNamePartMsg),
                    Bad(e + "[4].values[0]", "\"not valid\"", kLabelValueMsg),
                    Bad(f + "[0].key", "\"metadata.uid\"", "not a valid field selector key"),
                    Bad(f + "[1].operator", "\"Exists\"", "not a valid selector operator"),
                    f + "[2].values: Required value: must be only one value when `operator` is "
                        "'In' or 'NotIn' for node field selector"}));
  obj["spec"]["nodeSelector"] = R"({"nodeSelectorTerms": [
      {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]},
      {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}]})"_json;
  EXPECT_EQ(Check(obj), Errors{Bad("spec.nodeSelector.nodeSelectorTerms",
                                   obj["spec"]["nodeSelector"]["nodeSelectorTerms"].dump(),
                                   "must have exactly one node selector term")});
  obj["spec"]["nodeSelector"] = R"({"nodeSelectorTerms": []})"_json;
  EXPECT_EQ(Check(obj), (Errors{"spec.nodeSelector.nodeSelectorTerms: Required value: must have "
                                "at least one node selector term",
                                Bad("spec.nodeSelector.nodeSelectorTerms", "[]",
                                    "must have exactly one node selector term")}));
}

TEST(ResourceSliceValidationTest, DevicesAndSharedCountersExcludeEachOther) {
  json obj = Slice();
  obj["spec"]["sharedCounters"] =
      R"([{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}])"_json;
  EXPECT_EQ(Check(obj), Errors{"spec: Invalid value: \"\": only one of `sharedCounters` or "
                               "`devices` is allowed"});
  obj["spec"].erase("devices");
  EXPECT_EQ(Check(obj), Errors{});
}

TEST(ResourceSliceValidationTest, DeviceLimitDependsOnAdvancedFeatures) {
  json obj = Slice();
  obj["spec"]["devices"] = NamedDevices(128);
  EXPECT_EQ(Check(obj), Errors{});
  obj["spec"]["devices"] = NamedDevices(129);
  EXPECT_EQ(Check(obj), Errors{"spec.devices: Too many: 129: must have at most 128 items"});
  obj["spec"]["devices"] = NamedDevices(65);
  obj["spec"]["devices"][7]["taints"] =
      R"([{"key": "example.com/broken", "effect": "NoSchedule"}])"_json;
  EXPECT_EQ(Check(obj), Errors{"spec.devices: Too many: 65: must have at most 64 items"});
  obj["spec"]["devices"] = NamedDevices(65);
  obj["spec"]["devices"][0]["attributes"] = R"({"ids": {"ints": [1, 2]}})"_json;
  EXPECT_EQ(Check(obj), Errors{"spec.devices: Too many: 65: must have at most 64 items"});
  obj["spec"]["devices"] = NamedDevices(65);
  obj["spec"]["devices"][0]["consumesCounters"] =
      R"([{"counterSet": "gpu-0", "counters": {"memory": {"value": "1Gi"}}}])"_json;
  EXPECT_EQ(Check(obj), Errors{"spec.devices: Too many: 65: must have at most 64 items"});
}

// Raised limits (--max-devices-per-slice, --max-results-per-claim), restored after the test.
class RaisedLimits {
 public:
  RaisedLimits(size_t devices, size_t results) { SetValidationLimits({devices, results}); }
  ~RaisedLimits() { SetValidationLimits(ValidationLimits{}); }
};

TEST(ResourceSliceValidationTest, DeviceLimitCanBeRaised) {
  RaisedLimits raised(1024, 256);
  json obj = Slice();
  obj["spec"]["devices"] = NamedDevices(1024);
  EXPECT_EQ(Check(obj), Errors{});
  obj["spec"]["devices"] = NamedDevices(1025);
  EXPECT_EQ(Check(obj), Errors{"spec.devices: Too many: 1025: must have at most 1024 items"});
  obj["spec"]["devices"] = NamedDevices(513);
  obj["spec"]["devices"][7]["taints"] =
      R"([{"key": "example.com/broken", "effect": "NoSchedule"}])"_json;
  EXPECT_EQ(Check(obj), Errors{"spec.devices: Too many: 513: must have at most 512 items"});
}

TEST(ResourceSliceValidationTest, DeviceNamesAreUniqueDnsLabels) {
  json obj = Slice();
  obj["spec"]["devices"] = R"([{"name": "gpu-0"}, {"name": "gpu.1"}, {"name": "gpu-0"}])"_json;
  EXPECT_EQ(Check(obj), (Errors{Bad("spec.devices[1].name", "\"gpu.1\"", "must not contain dots"),
                                "spec.devices[2]: Duplicate value: \"gpu-0\""}));
}

TEST(ResourceSliceValidationTest, AttributesAndCapacitiesAreLimitedTogether) {
  json obj = Slice();
  json& device = obj["spec"]["devices"][0];
  for (int i = 0; i < 20; ++i) device["attributes"]["a" + std::to_string(i)] = {{"int", i}};
  for (int i = 0; i < 12; ++i) device["capacity"]["c" + std::to_string(i)] = {{"value", "1"}};
  EXPECT_EQ(Check(obj), Errors{});
  device["capacity"]["c12"] = {{"value", "1"}};
  EXPECT_EQ(Check(obj), Errors{"spec.devices[0]: Invalid value: 33: the total number of "
                               "attributes and capacities must not exceed 32"});
}

TEST(ResourceSliceValidationTest, AttributeValuesCountListItems) {
  json obj = Slice();
  json& device = obj["spec"]["devices"][0];
  device["attributes"]["ids"] = {{"ints", Repeat(1, 47)}};
  device["attributes"]["model"] = {{"string", "x"}};
  EXPECT_EQ(Check(obj), Errors{});
  device["attributes"]["ids"] = {{"ints", Repeat(1, 48)}};
  EXPECT_EQ(Check(obj), Errors{"spec.devices[0]: Invalid value: 49: the total number of "
                               "attribute values must not exceed 48"});
}

TEST(ResourceSliceValidationTest, AttributeHoldsExactlyOneBoundedValue) {
  json obj = Slice();
  obj["spec"]["devices"][0]["attributes"] = {
      {"gpu.example.com/model", {{"string", std::string(65, 'x')}}},
      {"driverVersion", {{"version", "1.0"}}},
      {"empty", json::object()},
      {"twice", {{"int", 1}, {"bool", true}}},
      {"emptyList", {{"strings", json::array()}}},
      {"versions", {{"versions", {"1.0.0", "v2"}}}},
      {"ok", {{"version", "1.2.3-rc.1+build.5"}}}};
  const std::string a = "spec.devices[0].attributes";
  EXPECT_EQ(
      Check(obj),
      (Errors{Bad(a + "[driverVersion].version", "\"1.0\"",
                  "must be a string compatible with semver.org spec 2.0.0"),
              Bad(a + "[empty]", "\"\"", "exactly one value must be specified"),
              Bad(a + "[emptyList].strings", "[]string{}", "must not be empty if specified"),
              a + "[gpu.example.com/model].string: Too long: may not be more than 64 bytes",
              Bad(a + "[twice]", R"({"bool":true,"int":1})", "exactly one value must be specified"),
              Bad(a + "[versions].versions[1]", "\"v2\"",
                  "must be a string compatible with semver.org spec 2.0.0")}));
}

// One scalar of the wrong type, or an int beyond int64, is reported as the general path reports
// it (a lone well-typed scalar skips that path).
TEST(ResourceSliceValidationTest, AttributeScalarsOfTheWrongTypeAreReported) {
  json obj = Slice();
  obj["spec"]["devices"][0]["attributes"] = {{"a", {{"int", "1"}}},
                                             {"b", {{"bool", 1}}},
                                             {"c", {{"int", 18446744073709551615ULL}}},
                                             {"d", {{"string", 5}}},
                                             {"e", {{"version", true}}},
                                             {"f", {{"other", 1}}},
                                             {"g", {{"int", -9223372036854775807LL}}}};
  const std::string a = "spec.devices[0].attributes";
  EXPECT_EQ(Check(obj),
            (Errors{Bad(a + "[a].int", "\"1\"", "must be of type integer"),
                    Bad(a + "[b].bool", "1", "must be of type boolean"),
                    Bad(a + "[c].int", "18446744073709551615", "must be of type integer"),
                    Bad(a + "[d].string", "5", "must be of type string"),
                    Bad(a + "[d]", "\"\"", "exactly one value must be specified"),
                    Bad(a + "[e].version", "true", "must be of type string"),
                    Bad(a + "[e]", "\"\"", "exactly one value must be specified"),
                    Bad(a + "[f]", "\"\"", "exactly one value must be specified")}));
}

TEST(ResourceSliceValidationTest, AttributeNamesAreQualifiedNames) {
  json obj = Slice();
  const std::string long_id(33, 'a');
  obj["spec"]["devices"][0]["attributes"] = {
      {"bad-name", {{"int", 1}}}, {"a/b/c", {{"int", 1}}},
      {"/model", {{"int", 1}}},   {"gpu.example.com/", {{"int", 1}}},
      {long_id, {{"int", 1}}},    {"Bad_Domain/model", {{"int", 1}}}};
  const std::string a = "spec.devices[0].attributes";
  EXPECT_EQ(Check(obj), (Errors{Bad(a, "\"\"", "the domain must not be empty"),
                                Bad(a, "\"Bad_Domain\"", kSubdomainMsg),
                                Bad(a, "\"a/b/c\"", "must not contain more than one slash"),
                                a + ": Too long: may not be more than 32 bytes",
                                Bad(a, "\"bad-name\"", kCIdentifierMsg),
                                Bad(a, "\"\"", "the name must not be empty")}));
}

TEST(ResourceSliceValidationTest, LongMapKeysAreTruncatedInPaths) {
  json obj = Slice();
  const std::string key = std::string(63, 'd') + "/" + std::string(40, 'i');
  obj["spec"]["devices"][0]["attributes"] = {{key, {{"string", std::string(65, 'x')}}}};
  const Errors errs = Check(obj);
  const std::string shortened =
      std::string(47, 'd') + "..." + std::string(5, 'd') + "/" + std::string(40, 'i');
  EXPECT_TRUE(Contains(errs, "spec.devices[0].attributes[" + shortened +
                                 "].string: Too long: may not be more than 64 bytes"))
      << testing::PrintToString(errs);
}

TEST(ResourceSliceValidationTest, CapacityQuantitiesMustParse) {
  json obj = Slice();
  obj["spec"]["devices"][0]["capacity"] = R"({"memory": {"value": "80K"},
                                              "cores": {"value": "1.5.5"}})"_json;
  EXPECT_EQ(Check(obj), (Errors{Bad("spec.devices[0].capacity[cores].value", "\"1.5.5\"",
                                    "quantities must match the regular expression "
                                    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
                                Bad("spec.devices[0].capacity[memory].value", "\"80K\"",
                                    "unable to parse quantity's suffix")}));
}

TEST(ResourceSliceValidationTest, RequestPolicyNeedsMultipleAllocations) {
  json obj = Slice();
  obj["spec"]["devices"][0]["capacity"] =
      R"({"memory": {"value": "80Gi", "requestPolicy": {"default": "1Gi"}}})"_json;
  EXPECT_EQ(Check(obj), Errors{"spec.devices[0].capacity[memory].requestPolicy: Forbidden: "
                               "allowMultipleAllocations must be true"});
  obj["spec"]["devices"][0]["allowMultipleAllocations"] = true;
  EXPECT_EQ(Check(obj), Errors{});
}

json SharedDevice(const json& policy) {
  json obj = Slice();
  obj["spec"]["devices"][0]["allowMultipleAllocations"] = true;
  obj["spec"]["devices"][0]["capacity"] = {
      {"memory", {{"value", "10Gi"}, {"requestPolicy", policy}}}};
  return obj;
}

const char kPolicy[] = "spec.devices[0].capacity[memory].requestPolicy";

TEST(ResourceSliceValidationTest, RequestPolicyValidValues) {
  const std::string p = kPolicy;
  EXPECT_EQ(Check(SharedDevice(R"({"default": "2Gi", "validValues": ["1Gi", "2Gi", "4Gi"]})"_json)),
            Errors{});
  EXPECT_EQ(Check(SharedDevice(R"({"validValues": ["1Gi"]})"_json)),
            Errors{p + ".default: Required value: required when validValues is defined"});
  EXPECT_EQ(
      Check(SharedDevice(R"({"default": "3Gi", "validValues": ["4Gi", "2048Mi", "12Gi"]})"_json)),
      (Errors{Bad(p + ".validValues[1]", "\"2Gi\"", "values must be sorted in ascending order"),
              Bad(p + ".validValues[2]", "\"12Gi\"", "option is larger than capacity value: 10Gi"),
              Bad(p + ".validValues", "\"3Gi\"",
                  "default value is not valid according to the requestPolicy")}));
  EXPECT_EQ(Check(SharedDevice(R"({"default": "1Gi", "validValues": ["1Gi", "1024Mi"]})"_json)),
            Errors{p + ".validValues[1]: Duplicate value: \"1073741824\""});
  json eleven = R"({"default": "1", "validValues": []})"_json;
  for (int i = 1; i <= 11; ++i) eleven["validValues"].push_back(std::to_string(i));
  EXPECT_EQ(Check(SharedDevice(eleven)),
            (Errors{p + ".validValues: Too many: 11: must have at most 10 items",
                    Bad(p + ".validValues", "\"1\"",
                        "default value is not valid according to the requestPolicy")}));
  EXPECT_EQ(
      Check(SharedDevice(
          R"({"default": "1Gi", "validValues": ["1Gi"], "validRange": {"min": "1Gi"}})"_json)),
      Errors{p + ": Forbidden: exactly one policy can be specified, cannot specify "
                 "\"validValues\" and \"validRange\" at the same time"});
  EXPECT_EQ(Check(SharedDevice(R"({"default": "1K", "validValues": ["1Gi"]})"_json)),
            Errors{Bad(p + ".default", "\"1K\"", "unable to parse quantity's suffix")});
}

TEST(ResourceSliceValidationTest, RequestPolicyValidRange) {
  const std::string r = std::string(kPolicy) + ".validRange";
  EXPECT_EQ(
      Check(SharedDevice(
          R"({"default": "2Gi", "validRange": {"min": "1Gi", "max": "8Gi", "step": "1Gi"}})"_json)),
      Errors{});
  EXPECT_EQ(Check(SharedDevice(R"({"validRange": {"min": "1Gi"}})"_json)),
            Errors{std::string(kPolicy) +
                   ".default: Required value: required when validRange is defined"});
  EXPECT_EQ(Check(SharedDevice(R"({"default": "1Gi", "validRange": {"max": "2Gi"}})"_json)),
            Errors{r + ".min: Required value: required when validRange is defined"});
  EXPECT_EQ(Check(SharedDevice(
                R"({"default": "1Gi", "validRange": {"min": "11Gi", "max": "12Gi"}})"_json)),
            (Errors{Bad(r + ".min", "\"11Gi\"", "min is larger than capacity value: 10Gi"),
                    Bad(r + ".default", "\"1Gi\"", "default is less than min: 11Gi"),
                    Bad(r + ".max", "\"12Gi\"", "max is larger than capacity value: 10Gi")}));
  EXPECT_EQ(
      Check(SharedDevice(R"({"default": "4Gi", "validRange": {"min": "2Gi", "max": "1Gi"}})"_json)),
      (Errors{Bad(r + ".max", "\"2Gi\"", "min is larger than max: 1Gi"),
              Bad(r + ".default", "\"4Gi\"", "default is more than max: 1Gi")}));
  EXPECT_EQ(
      Check(SharedDevice(R"({"default": "1Gi", "validRange": {"min": "1Gi", "step": "0"}})"_json)),
      Errors{Bad(r + ".step", "\"0\"", "must be greater than zero")});
  EXPECT_EQ(
      Check(
          SharedDevice(R"({"default": "2Gi", "validRange": {"min": "1Gi", "step": "10Gi"}})"_json)),
      (Errors{Bad(r + ".step", "\"10Gi\"", "one step 11Gi is larger than capacity value: 10Gi"),
              Bad(r + ".step", "\"2Gi\"",
                  "value is not a multiple of a given step (10Gi) from (1Gi)")}));
  EXPECT_EQ(
      Check(SharedDevice(
          R"({"default": "3Gi", "validRange": {"min": "1Gi", "max": "6Gi", "step": "2Gi"}})"_json)),
      Errors{
          Bad(r + ".step", "\"6Gi\"", "value is not a multiple of a given step (2Gi) from (1Gi)")});
  EXPECT_EQ(
      Check(SharedDevice(R"({"default": "-1", "validRange": {"min": "-2", "step": "1"}})"_json)),
      (Errors{Bad(r + ".default", "\"-1\"", "must be greater than or equal to 0"),
              Bad(r + ".min", "\"-2\"", "must be greater than or equal to 0")}));
}

TEST(ResourceSliceValidationTest, SharedCounterSets) {
  json obj = Slice();
  obj["spec"].erase("devices");
  obj["spec"]["sharedCounters"] = R"([
    {"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}, "Bad_Counter": {"value": "1"}}},
    {"name": "", "counters": {}},
    {"name": "gpu-0", "counters": {"memory": {"value": "lots"}}}
  ])"_json;
  const std::string s = "spec.sharedCounters";
  EXPECT_EQ(Check(obj), (Errors{Bad(s + "[0].counters", "\"Bad_Counter\"", kLabelMsg),
                                s + "[1].name: Required value", s + "[1].counters: Required value",
                                Bad(s + "[2].counters[memory].value", "\"lots\"",
                                    "quantities must match the regular expression "
                                    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
                                s + "[2]: Duplicate value: \"gpu-0\""}));
  obj["spec"]["sharedCounters"] = Repeat(json::object(), 9);
  EXPECT_EQ(Check(obj), Errors{s + ": Too many: 9: must have at most 8 items"});
  json counters = json::object();
  for (int i = 0; i < 33; ++i) counters["c" + std::to_string(i)] = {{"value", "1"}};
  obj["spec"]["sharedCounters"] = {{{"name", "set"}, {"counters", counters}}};
  EXPECT_EQ(Check(obj), Errors{s + "[0].counters: Too many: 33: must have at most 32 items"});
}

TEST(ResourceSliceValidationTest, DeviceCounterConsumption) {
  json obj = Slice();
  obj["spec"]["devices"][0]["consumesCounters"] = R"([
    {"counterSet": "gpu-0", "counters": {"memory": {"value": "1Gi"}}},
    {"counterSet": "gpu-0", "counters": {"memory": {"value": "1Gi"}}}
  ])"_json;
  const std::string c = "spec.devices[0].consumesCounters";
  EXPECT_EQ(Check(obj), Errors{c + "[1]: Duplicate value: \"gpu-0\""});
  obj["spec"]["devices"][0]["consumesCounters"] = R"([{"counters": {}}, {}, {}])"_json;
  EXPECT_EQ(Check(obj), Errors{c + ": Too many: 3: must have at most 2 items"});
  obj["spec"]["devices"][0]["consumesCounters"] = R"([{"counterSet": "Set"}])"_json;
  EXPECT_EQ(Check(obj), (Errors{Bad(c + "[0].counterSet", "\"Set\"", kLabelMsg),
                                c + "[0].counters: Required value"}));
}

TEST(ResourceSliceValidationTest, DeviceTaints) {
  json obj = Slice();
  obj["spec"]["devices"][0]["taints"] = R"([
    {"key": "example.com/unhealthy", "value": "ecc", "effect": "NoExecute"},
    {"key": "example.com/info", "effect": "None"},
    {"key": "", "effect": "NoSchedule"},
    {"key": "example.com/x", "value": "bad value"},
    {"key": "example.com/y", "effect": "PreferNoSchedule"}
  ])"_json;
  const std::string t = "spec.devices[0].taints";
  EXPECT_EQ(Check(obj),
            (Errors{Bad(t + "[2].key", "\"\"", "name part must be non-empty"),
                    Bad(t + "[2].key", "\"\"", kNamePartMsg),
                    Bad(t + "[3].value", "\"bad value\"", kLabelValueMsg),
                    t + "[3].effect: Required value",
                    t + "[4].effect: Unsupported value: \"PreferNoSchedule\": supported values: "
                        "\"NoExecute\", \"NoSchedule\", \"None\""}));
  obj["spec"]["devices"][0]["taints"] = Repeat(json::object(), 17);
  EXPECT_EQ(Check(obj), Errors{t + ": Too many: 17: must have at most 16 items"});
}

TEST(ResourceSliceValidationTest, BindingConditions) {
  json obj = Slice();
  json& device = obj["spec"]["devices"][0];
  device["bindingConditions"] = {"example.com/ready", "example.com/ready"};
  device["bindingFailureConditions"] = {"example.com/failed", "example.com/ready", "bad key"};
  const std::string d = "spec.devices[0]";
  EXPECT_EQ(Check(obj),
            (Errors{Bad(d + ".bindingFailureConditions[2]", "\"bad key\"", kNamePartMsg),
                    d + ".bindingConditions[1]: Duplicate value: \"example.com/ready\"",
                    Bad(d + ".bindingFailureConditions[1]", "\"example.com/ready\"",
                        "bindingFailureConditions must not overlap with bindingConditions")}));
  device.erase("bindingConditions");
  device["bindingFailureConditions"] = {"example.com/failed"};
  EXPECT_EQ(Check(obj), Errors{Bad(d + ".bindingConditions", "[]string(nil)",
                                   "bindingConditions are required to use "
                                   "bindingFailureConditions")});
  device["bindingConditions"] = {"a", "b", "c", "d", "e"};
  EXPECT_EQ(Check(obj), Errors{d + ".bindingConditions: Too many: 5: must have at most 4 items"});
}

TEST(ResourceSliceValidationTest, PerDeviceNodeSelection) {
  json obj = Slice();
  obj["spec"].erase("nodeName");
  obj["spec"]["perDeviceNodeSelection"] = true;
  obj["spec"]["devices"] = R"([{"name": "gpu-0", "nodeName": "node-a"},
                               {"name": "gpu-1", "allNodes": true},
                               {"name": "gpu-2"},
                               {"name": "gpu-3", "nodeName": "node-a", "allNodes": true},
                               {"name": "gpu-4", "nodeName": ""}])"_json;
  const std::string msg =
      "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required "
      "when `perDeviceNodeSelection` is set to true in the ResourceSlice spec";
  EXPECT_EQ(Check(obj),
            (Errors{"spec.devices[2]: Required value: " + msg,
                    "spec.devices[3]: Invalid value: \"{`nodeName`, `allNodes`}\": " + msg,
                    "spec.devices[4].nodeName: Invalid value: \"\": must not be empty",
                    "spec.devices[4]: Required value: " + msg}));
  obj = Slice();
  obj["spec"]["devices"][0]["nodeName"] = "node-a";
  EXPECT_EQ(Check(obj), Errors{"spec.devices[0]: Invalid value: \"null\": `nodeName`, "
                               "`nodeSelector` and `allNodes` can only be set if "
                               "`perDeviceNodeSelection` is set to true in the ResourceSlice "
                               "spec"});
}

TEST(ResourceSliceValidationTest, DriverPoolAndNodeNameAreImmutable) {
  json old = Slice();
  json obj = Slice();
  obj["spec"]["driver"] = "other.example.com";
  obj["spec"]["pool"]["name"] = "node-b";
  obj["spec"]["nodeName"] = "node-b";
  EXPECT_EQ(Check(obj, &old), (Errors{"spec.pool.name: Invalid value: field is immutable",
                                      "spec.driver: Invalid value: field is immutable",
                                      "spec.nodeName: Invalid value: field is immutable"}));
  obj = Slice();
  obj["spec"]["pool"]["generation"] = 2;
  obj["spec"]["devices"] = NamedDevices(3);
  EXPECT_EQ(Check(obj, &old), Errors{});
}

TEST(ResourceSliceValidationTest, UnchangedCapacityAndTaintsAreNotRevalidated) {
  json old = Slice();
  old["spec"]["devices"][0]["capacity"] =
      R"({"memory": {"value": "1Gi", "requestPolicy": {"default": "1Gi"}}})"_json;
  old["spec"]["devices"][0]["taints"] = R"([{"key": "example.com/k", "effect": "Legacy"}])"_json;
  json obj = old;
  obj["spec"]["pool"]["generation"] = 2;
  EXPECT_EQ(Check(obj, &old), Errors{});
  EXPECT_EQ(Check(obj).size(), 2u);
}

// ---- ResourceClaim spec --------------------------------------------------------------------

constexpr char kRequests[] = "spec.devices.requests";

TEST(ResourceClaimValidationTest, RequestsAreBoundedUniqueAndNamed) {
  json obj = Claim();
  json request = obj["spec"]["devices"]["requests"][0];
  obj["spec"]["devices"]["requests"] = Repeat(request, 33);
  EXPECT_EQ(Check(obj),
            Errors{std::string(kRequests) + ": Too many: 33: must have at most 32 items"});
  obj["spec"]["devices"]["requests"] = Repeat(request, 2);
  obj["spec"]["devices"]["requests"][1]["name"] = "gpu";
  EXPECT_EQ(Check(obj), Errors{std::string(kRequests) + "[1]: Duplicate value: \"gpu\""});
  obj["spec"]["devices"]["requests"][1]["name"] = "GPU";
  EXPECT_EQ(Check(obj), Errors{Bad(std::string(kRequests) + "[1].name", "\"GPU\"", kLabelMsg)});
}

TEST(ResourceClaimValidationTest, RequestNeedsExactlyOrFirstAvailable) {
  json obj = Claim();
  json& request = obj["spec"]["devices"]["requests"][0];
  json exactly = request["exactly"];
  request.erase("exactly");
  EXPECT_EQ(Check(obj),
            Errors{std::string(kRequests) + "[0]: Required value: exactly one of "
                                            "`exactly` or `firstAvailable` is required"});
  request["firstAvailable"] = json::array();
  EXPECT_EQ(Check(obj).size(), 1u);
  request["exactly"] = exactly;
  request["firstAvailable"] = {exactly};
  request["firstAvailable"][0]["name"] = "one";
  EXPECT_EQ(Check(obj), Errors{std::string(kRequests) +
                               "[0]: Invalid value: \"null\": exactly one of `exactly` or "
                               "`firstAvailable` is required, but multiple fields are set"});
}

TEST(ResourceClaimValidationTest, DeviceClassNameIsARequiredSubdomain) {
  json obj = Claim();
  json& exactly = obj["spec"]["devices"]["requests"][0]["exactly"];
  exactly.erase("deviceClassName");
  const std::string p = std::string(kRequests) + "[0].exactly.deviceClassName";
  EXPECT_EQ(Check(obj), Errors{p + ": Required value"});
  exactly["deviceClassName"] = "GPU";
  EXPECT_EQ(Check(obj), Errors{Bad(p, "\"GPU\"", kSubdomainMsg)});
}

TEST(ResourceClaimValidationTest, AllocationModeAndCount) {
  json obj = Claim();
  json& exactly = obj["spec"]["devices"]["requests"][0]["exactly"];
  const std::string p = std::string(kRequests) + "[0].exactly";
  exactly["allocationMode"] = "All";
  exactly["count"] = 2;
  EXPECT_EQ(Check(obj), Errors{p + ".count: Invalid value: 2: must not be specified when "
                                   "allocationMode is 'All'"});
  exactly.erase("count");
  EXPECT_EQ(Check(obj), Errors{});
  exactly["allocationMode"] = "ExactCount";
  exactly["count"] = 0;
  EXPECT_EQ(Check(obj), Errors{p + ".count: Invalid value: 0: must be greater than zero"});
  exactly["count"] = -3;
  EXPECT_EQ(Check(obj), Errors{p + ".count: Invalid value: -3: must be greater than zero"});
  exactly["allocationMode"] = "Some";
  exactly["count"] = 1;
  EXPECT_EQ(Check(obj), Errors{p + ".allocationMode: Unsupported value: \"Some\": supported "
                                   "values: \"All\", \"ExactCount\""});
}

TEST(ResourceClaimValidationTest, RequestSelectors) {
  json obj = Claim();
  json& exactly = obj["spec"]["devices"]["requests"][0]["exactly"];
  const std::string p = std::string(kRequests) + "[0].exactly.selectors";
  exactly["selectors"] = Repeat(R"({"cel": {"expression": "true"}})"_json, 33);
  EXPECT_EQ(Check(obj), Errors{p + ": Too many: 33: must have at most 32 items"});
  exactly["selectors"] = {{{"cel", {{"expression", std::string(10 * 1024 + 1, ' ')}}}}};
  EXPECT_EQ(Check(obj),
            Errors{p + "[0].cel.expression: Too long: may not be more than 10240 bytes"});
  // Exactly at the limit, and compilable.
  exactly["selectors"] = {{{"cel", {{"expression", "true" + std::string(10 * 1024 - 4, ' ')}}}}};
  EXPECT_EQ(Check(obj), Errors{});
}

TEST(ResourceClaimValidationTest, SelectorsMustCompile) {
  json obj = Claim();
  json& exactly = obj["spec"]["devices"]["requests"][0]["exactly"];
  const std::string p = std::string(kRequests) + "[0].exactly.selectors";
  exactly["selectors"] = R"([{"cel": {"expression": "device.driver == 'a'"}},
                             {"cel": {"expression": "devise.driver == 'a'"}},
                             {"cel": {"expression": "1"}}])"_json;
  EXPECT_EQ(Check(obj),
            (Errors{p + "[1].cel.expression: Invalid value: \"devise.driver == 'a'\": compilation "
                        "failed: ERROR: <input>:1:1: undeclared reference to 'devise' (in "
                        "container '')\n | devise.driver == 'a'\n | ^",
                    p + "[2].cel.expression: Invalid value: \"1\": must evaluate to bool or the "
                        "unknown type, not int"}));
}

TEST(ResourceClaimValidationTest, Tolerations) {
  json obj = Claim();
  json& exactly = obj["spec"]["devices"]["requests"][0]["exactly"];
  const std::string t = std::string(kRequests) + "[0].exactly.tolerations";
  exactly["tolerations"] = R"([
    {"key": "example.com/unhealthy", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 30},
    {"operator": "Exists"},
    {"key": "example.com/k", "value": "v"},
    {"key": "example.com/k", "operator": "Exists", "value": "v"},
    {"key": "example.com/k", "operator": "Above", "value": "v"},
    {"key": "bad key", "operator": "Equal", "value": "bad value", "effect": "PreferNoSchedule"}
  ])"_json;
  EXPECT_EQ(Check(obj),
            (Errors{Bad(t + "[3].value", "\"v\"", "must be empty for operator `Exists`"),
                    t + "[4].operator: Unsupported value: \"Above\": supported values: "
                        "\"Equal\", \"Exists\"",
                    Bad(t + "[5].key", "\"bad key\"", kNamePartMsg),
                    Bad(t + "[5].value", "\"bad value\"", kLabelValueMsg),
                    t + "[5].effect: Unsupported value: \"PreferNoSchedule\": supported values: "
                        "\"NoExecute\", \"NoSchedule\", \"None\""}));
  exactly["tolerations"] = Repeat(R"({"operator": "Exists"})"_json, 17);
  EXPECT_EQ(Check(obj), Errors{t + ": Too many: 17: must have at most 16 items"});
}

TEST(ResourceClaimValidationTest, FirstAvailableSubrequests) {
  json obj = Claim();
  json& request = obj["spec"]["devices"]["requests"][0];
  json sub = request["exactly"];
  request.erase("exactly");
  const std::string f = std::string(kRequests) + "[0].firstAvailable";
  request["firstAvailable"] = Repeat(sub, 9);
  for (int i = 0; i < 9; ++i) request["firstAvailable"][i]["name"] = "s" + std::to_string(i);
  EXPECT_EQ(Check(obj), Errors{f + ": Too many: 9: must have at most 8 items"});
  request["firstAvailable"] = Repeat(sub, 3);
  request["firstAvailable"][0]["name"] = "big";
  request["firstAvailable"][1]["name"] = "big";
  request["firstAvailable"][2]["name"] = "Small";
  request["firstAvailable"][2].erase("deviceClassName");
  request["firstAvailable"][2]["allocationMode"] = "All";
  EXPECT_EQ(Check(obj), (Errors{Bad(f + "[2].name", "\"Small\"", kLabelMsg),
                                f + "[2].deviceClassName: Required value",
                                f + "[2].count: Invalid value: 1: must not be specified when "
                                    "allocationMode is 'All'",
                                f + "[1]: Duplicate value: \"big\""}));
}

json ClaimWithSubrequests() {
  json obj = Claim();
  json exact = obj["spec"]["devices"]["requests"][0]["exactly"];
  json sub = exact;
  sub["name"] = "a100";
  obj["spec"]["devices"]["requests"].push_back({{"name", "accel"}, {"firstAvailable", {sub}}});
  return obj;
}

TEST(ResourceClaimValidationTest, ConstraintRequestReferences) {
  json obj = ClaimWithSubrequests();
  const std::string c = "spec.devices.constraints[0]";
  obj["spec"]["devices"]["constraints"] =
      R"([{"requests": ["gpu", "accel", "accel/a100"],
           "matchAttribute": "example.com/numa"}])"_json;
  EXPECT_EQ(Check(obj), Errors{});
  obj["spec"]["devices"]["constraints"] = R"([{"requests":
      ["other", "gpu/sub", "accel/other", "a/b/c", "Gpu", "gpu"],
      "matchAttribute": "example.com/numa"}, {"requests": ["gpu", "gpu"],
      "matchAttribute": "example.com/numa"}])"_json;
  EXPECT_EQ(Check(obj),
            (Errors{Bad(c + ".requests[0]", "\"other\"", kRequestRefMsg),
                    Bad(c + ".requests[1]", "\"gpu/sub\"", kRequestRefMsg),
                    Bad(c + ".requests[2]", "\"accel/other\"", kRequestRefMsg),
                    Bad(c + ".requests[3]", "\"a/b/c\"", kRequestRefMsg),
                    Bad(c + ".requests[4]", "\"Gpu\"", kLabelMsg),
                    Bad(c + ".requests[4]", "\"Gpu\"", kRequestRefMsg),
                    "spec.devices.constraints[1].requests[1]: Duplicate value: \"gpu\""}));
}

TEST(ResourceClaimValidationTest, ConstraintNeedsOneFullyQualifiedAttribute) {
  json obj = Claim();
  const std::string c = "spec.devices.constraints";
  obj["spec"]["devices"]["constraints"] = R"([
    {},
    {"matchAttribute": "example.com/a", "distinctAttribute": "example.com/b"},
    {"matchAttribute": "numa"},
    {"distinctAttribute": "example.com/bad-id"}
  ])"_json;
  const std::string one_of =
      "exactly one of \"matchAttribute\" or \"distinctAttribute\" is "
      "required, but multiple fields are set";
  EXPECT_EQ(Check(obj),
            (Errors{c + "[0]: Required value: " + one_of,
                    Bad(c + "[1]", "\"{`matchAttribute`, `distinctAttribute`}\"", one_of),
                    Bad(c + "[2].matchAttribute", "\"numa\"",
                        "a fully qualified name must be a domain and a name separated by a slash"),
                    Bad(c + "[3].distinctAttribute", "\"bad-id\"", kCIdentifierMsg)}));
  obj["spec"]["devices"]["constraints"] = Repeat(R"({"matchAttribute": "example.com/a"})"_json, 33);
  EXPECT_EQ(Check(obj), Errors{c + ": Too many: 33: must have at most 32 items"});
}

TEST(ResourceClaimValidationTest, ClaimConfig) {
  json obj = Claim();
  const std::string c = "spec.devices.config";
  obj["spec"]["devices"]["config"] = R"([
    {"requests": ["gpu"], "opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}}},
    {"requests": ["cpu"], "opaque": {"driver": "gpu.example.com", "parameters": "text"}},
    {"requests": ["gpu"]}
  ])"_json;
  EXPECT_EQ(Check(obj), (Errors{Bad(c + "[1].requests[0]", "\"cpu\"", kRequestRefMsg),
                                Bad(c + "[1].opaque.parameters", "\"<value omitted>\"",
                                    "must be a valid JSON object"),
                                c + "[2].opaque: Required value"}));
  obj["spec"]["devices"]["config"] = Repeat(json::object(), 33);
  EXPECT_EQ(Check(obj), Errors{c + ": Too many: 33: must have at most 32 items"});
}

TEST(ResourceClaimValidationTest, CapacityRequests) {
  json obj = Claim();
  const std::string p = std::string(kRequests) + "[0].exactly.capacity.requests";
  obj["spec"]["devices"]["requests"][0]["exactly"]["capacity"] =
      R"({"requests": {"memory": "10Gi", "example.com/bw": 100,
                       "bad-key": "1", "cores": "x"}})"_json;
  EXPECT_EQ(Check(obj), (Errors{Bad(p, "\"bad-key\"", kCIdentifierMsg),
                                Bad(p + "[cores]", "\"x\"",
                                    "quantities must match the regular expression "
                                    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")}));
}

TEST(ResourceClaimValidationTest, SpecIsImmutable) {
  json old = Claim();
  json obj = Claim();
  obj["metadata"]["labels"] = {{"team", "a"}};
  EXPECT_EQ(Check(obj, &old), Errors{});
  obj["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2;
  EXPECT_EQ(Check(obj, &old), Errors{"spec: Invalid value: field is immutable"});
}

// ---- ResourceClaimTemplate -----------------------------------------------------------------

json Template() {
  json obj = Claim();
  obj["kind"] = "ResourceClaimTemplate";
  obj["spec"] = {{"spec", obj["spec"]}};
  return obj;
}

TEST(ResourceClaimTemplateValidationTest, ClaimSpecIsValidatedUnderSpecSpec) {
  json obj = Template();
  obj["spec"]["spec"]["devices"]["requests"][0]["exactly"].erase("deviceClassName");
  obj["spec"]["spec"]["devices"]["constraints"] =
      R"([{"requests": ["cpu"], "matchAttribute": "example.com/numa"}])"_json;
  EXPECT_EQ(
      Check(obj),
      (Errors{"spec.spec.devices.requests[0].exactly.deviceClassName: Required value",
              Bad("spec.spec.devices.constraints[0].requests[0]", "\"cpu\"", kRequestRefMsg)}));
}

TEST(ResourceClaimTemplateValidationTest, EmbeddedMetadataOnlyCarriesLabelsAndAnnotations) {
  json obj = Template();
  obj["spec"]["metadata"] = {{"labels", {{"app", "trainer"}, {"bad key", "x"}}},
                             {"annotations", {{"example.com/note", "x"}}},
                             {"name", "fixed"},
                             {"uid", "1234"},
                             {"namespace", ""},
                             {"finalizers", json::array()}};
  EXPECT_EQ(Check(obj), (Errors{Bad("spec.metadata.labels", "\"bad key\"", kNamePartMsg),
                                "spec.metadata.name: Forbidden: cannot be set",
                                "spec.metadata.uID: Forbidden: cannot be set"}));
}

TEST(ResourceClaimTemplateValidationTest, SpecIsImmutable) {
  json old = Template();
  json obj = Template();
  obj["spec"]["metadata"] = {{"labels", {{"app", "x"}}}};
  EXPECT_EQ(Check(obj, &old), Errors{"spec: Invalid value: field is immutable"});
}

// ---- ResourceClaim status ------------------------------------------------------------------

constexpr char kResults[] = "status.allocation.devices.results";

TEST(ResourceClaimStatusTest, NewAllocationIsValidatedAgainstTheSpec) {
  json old = Claim();
  json obj = AllocatedClaim();
  EXPECT_EQ(CheckStatus(obj, old), Errors{});
  json& result = obj["status"]["allocation"]["devices"]["results"][0];
  result = R"({"request": "other", "driver": "", "pool": "Pool_A", "device": "GPU0",
               "shareID": "ABC", "adminAccess": true})"_json;
  const std::string r = std::string(kResults) + "[0]";
  EXPECT_EQ(
      CheckStatus(obj, old),
      (Errors{Bad(r + ".request", "\"other\"", kRequestRefMsg), r + ".driver: Required value",
              Bad(r + ".driver", "\"\"", kSubdomainMsg),
              Bad(r + ".pool", "\"Pool_A\"", kSubdomainMsg),
              Bad(r + ".device", "\"GPU0\"", kLabelMsg),
              Bad(r + ".shareID", "\"ABC\"", "error validating uid: invalid UUID length: 3")}));
}

TEST(ResourceClaimStatusTest, ShareIdMustBeANormalizedUuid) {
  json old = Claim();
  json obj = AllocatedClaim();
  json& result = obj["status"]["allocation"]["devices"]["results"][0];
  result["shareID"] = "5f0c7a4e-8b6f-4a2e-9d55-1f2a3b4c5d6e";
  EXPECT_EQ(CheckStatus(obj, old), Errors{});
  result["shareID"] = "5F0C7A4E-8B6F-4A2E-9D55-1F2A3B4C5D6E";
  EXPECT_EQ(
      CheckStatus(obj, old),
      Errors{Bad(std::string(kResults) + "[0].shareID", "\"5F0C7A4E-8B6F-4A2E-9D55-1F2A3B4C5D6E\"",
                 "uid must be in RFC 4122 normalized form, "
                 "`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal "
                 "characters")});
  result["shareID"] = "5f0c7a4e-8b6f-4a2e-9d55x1f2a3b4c5d6e";
  EXPECT_EQ(CheckStatus(obj, old), Errors{Bad(std::string(kResults) + "[0].shareID",
                                              "\"5f0c7a4e-8b6f-4a2e-9d55x1f2a3b4c5d6e\"",
                                              "error validating uid: invalid UUID format")});
}

TEST(ResourceClaimStatusTest, ResultsReferToSubrequests) {
  json old = ClaimWithSubrequests();
  json obj = old;
  obj["status"] = R"({"allocation": {"devices": {"results": [
      {"request": "accel/a100", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0"},
      {"request": "accel/h100", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-1"}
    ]}}})"_json;
  EXPECT_EQ(CheckStatus(obj, old),
            Errors{Bad(std::string(kResults) + "[1].request", "\"accel/h100\"", kRequestRefMsg)});
}

TEST(ResourceClaimStatusTest, TooManyResultsAndConfigs) {
  json old = Claim();
  json obj = AllocatedClaim();
  json& devices = obj["status"]["allocation"]["devices"];
  devices["results"] = Repeat(devices["results"][0], 33);
  devices["config"] = Repeat(json::object(), 65);
  EXPECT_EQ(CheckStatus(obj, old),
            (Errors{std::string(kResults) + ": Too many: 33: must have at most 32 items",
                    "status.allocation.devices.config: Too many: 65: must have at most 64 "
                    "items"}));
}

TEST(ResourceClaimStatusTest, ResultLimitCanBeRaised) {
  RaisedLimits raised(128, 256);
  json old = Claim();
  json obj = AllocatedClaim();
  json& devices = obj["status"]["allocation"]["devices"];
  devices["results"] = Repeat(devices["results"][0], 256);
  EXPECT_EQ(CheckStatus(obj, old), Errors{});
  devices["results"] = Repeat(devices["results"][0], 257);
  EXPECT_EQ(CheckStatus(obj, old),
            Errors{std::string(kResults) + ": Too many: 257: must have at most 256 items"});
}

TEST(ResourceClaimStatusTest, AllocationConfigSource) {
  json old = Claim();
  json obj = AllocatedClaim();
  obj["status"]["allocation"]["devices"]["config"] = R"([
    {"source": "FromClass", "opaque": {"driver": "gpu.example.com", "parameters": {}}},
    {"source": "FromPod", "requests": ["gpu"],
     "opaque": {"driver": "gpu.example.com", "parameters": {}}},
    {"opaque": {"driver": "gpu.example.com", "parameters": {}}}
  ])"_json;
  const std::string c = "status.allocation.devices.config";
  EXPECT_EQ(CheckStatus(obj, old),
            (Errors{c + "[1].source: Unsupported value: \"FromPod\": supported values: "
                        "\"FromClaim\", \"FromClass\"",
                    c + "[2].source: Required value"}));
}

TEST(ResourceClaimStatusTest, AllocationNodeSelector) {
  json old = Claim();
  json obj = AllocatedClaim();
  obj["status"]["allocation"]["nodeSelector"] = R"({"nodeSelectorTerms": [{"matchFields": [
      {"key": "metadata.name", "operator": "In", "values": ["Node_A"]}]}]})"_json;
  EXPECT_EQ(CheckStatus(obj, old),
            Errors{Bad("status.allocation.nodeSelector.nodeSelectorTerms[0].matchFields[0]"
                       ".values[0]",
                       "\"Node_A\"", kSubdomainMsg)});
}

TEST(ResourceClaimStatusTest, ReservedFor) {
  json old = AllocatedClaim();
  json obj = AllocatedClaim();
  obj["status"]["reservedFor"] = R"([
    {"resource": "pods", "name": "pod-1", "uid": "u1"},
    {"name": "pod-2", "uid": "u2"},
    {"resource": "pods", "name": "pod-3", "uid": "u1"},
    {}
  ])"_json;
  EXPECT_EQ(CheckStatus(obj, old), (Errors{"status.reservedFor[1].resource: Required value",
                                           "status.reservedFor[3].resource: Required value",
                                           "status.reservedFor[3].name: Required value",
                                           "status.reservedFor[3].uid: Required value",
                                           "status.reservedFor[2]: Duplicate value: \"u1\""}));
  obj["status"]["reservedFor"] = json::array();
  for (int i = 0; i < 257; ++i) {
    obj["status"]["reservedFor"].push_back(
        {{"resource", "pods"}, {"name", "p"}, {"uid", "u" + std::to_string(i)}});
  }
  EXPECT_EQ(CheckStatus(obj, old),
            Errors{"status.reservedFor: Too many: 257: must have at most 256 items"});
}

TEST(ResourceClaimStatusTest, ReservedForNeedsAnAllocation) {
  json old = Claim();
  json obj = Claim();
  obj["status"]["reservedFor"] = R"([{"resource": "pods", "name": "p", "uid": "u1"}])"_json;
  EXPECT_EQ(CheckStatus(obj, old), Errors{"status.reservedFor: Forbidden: may not be specified "
                                          "when `allocated` is not set"});
}

TEST(ResourceClaimStatusTest, AllocationCannotChangeButCanBeRemoved) {
  json old = AllocatedClaim();
  json obj = AllocatedClaim();
  obj["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-1";
  EXPECT_EQ(CheckStatus(obj, old), Errors{"status.allocation: Invalid value: field is immutable"});
  obj["status"].erase("allocation");
  EXPECT_EQ(CheckStatus(obj, old), Errors{});
  // A stored allocation is not re-validated even where today's rules would reject it.
  old["status"]["allocation"]["devices"]["results"][0]["request"] = "gone";
  EXPECT_EQ(CheckStatus(old, old), Errors{});
}

TEST(ResourceClaimStatusTest, NoNewConsumersWhileDeleting) {
  json old = AllocatedClaim();
  old["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  old["status"]["reservedFor"] = R"([{"resource": "pods", "name": "p1", "uid": "u1"},
                                     {"resource": "pods", "name": "p2", "uid": "u2"}])"_json;
  json obj = old;
  obj["status"]["reservedFor"].erase(0);
  EXPECT_EQ(CheckStatus(obj, old), Errors{});
  obj["status"]["reservedFor"].push_back({{"resource", "pods"}, {"name", "p3"}, {"uid", "u3"}});
  EXPECT_EQ(CheckStatus(obj, old),
            Errors{"status.reservedFor: Forbidden: new entries may not be added while "
                   "`deallocationRequested` or `deletionTimestamp` are set"});
}

TEST(ResourceClaimStatusTest, DeviceStatusMustReferToAnAllocatedDevice) {
  json old = AllocatedClaim();
  json obj = AllocatedClaim();
  obj["status"]["devices"] = R"([
    {"driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0",
     "conditions": [{"type": "Ready", "status": "True", "reason": "Prepared",
                     "lastTransitionTime": "2026-01-01T00:00:00Z"}],
     "data": {"pci": "0000:3b:00.0"},
     "networkData": {"interfaceName": "eth1", "ips": ["10.9.8.7/24", "2001:db8::1/64"]}},
    {"driver": "gpu.example.com", "pool": "node-a", "device": "gpu-9"},
    {"driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0"}
  ])"_json;
  EXPECT_EQ(CheckStatus(obj, old),
            (Errors{"status.devices[1]: Invalid value: gpu.example.com/node-a/gpu-9: must be an "
                    "allocated device in the claim",
                    "status.devices[2]: Duplicate value: gpu.example.com/node-a/gpu-0"}));
}

TEST(ResourceClaimStatusTest, DeviceStatusConditionsDataAndNetwork) {
  json old = AllocatedClaim();
  json obj = AllocatedClaim();
  json device = R"({"driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0"})"_json;
  device["conditions"] = R"([
    {"type": "Ready", "status": "Maybe", "reason": "bad reason", "observedGeneration": -1},
    {"type": "Ready", "status": "True", "reason": "Ok",
     "lastTransitionTime": "2026-01-01T00:00:00Z"}
  ])"_json;
  device["data"] = json::array();
  device["networkData"] = {
      {"interfaceName", std::string(257, 'e')},
      {"hardwareAddress", std::string(129, 'a')},
      {"ips", {"10.9.8.7", "010.9.8.7/24", "2001:DB8::1/64", "10.9.8.7/24", "10.9.8.7/24"}}};
  obj["status"]["devices"] = {device};
  const std::string d = "status.devices[0]";
  EXPECT_EQ(
      CheckStatus(obj, old),
      (Errors{d + ".conditions[0].status: Unsupported value: \"Maybe\": supported values: "
                  "\"False\", \"True\", \"Unknown\"",
              d + ".conditions[0].observedGeneration: Invalid value: -1: must be greater than or "
                  "equal to zero",
              d + ".conditions[0].lastTransitionTime: Required value: must be set",
              Bad(d + ".conditions[0].reason", "\"bad reason\"",
                  "a condition reason must start with alphabetic character, optionally followed "
                  "by a string of alphanumeric characters or '_,:', and must end with an "
                  "alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  "
                  "or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is "
                  "'[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')"),
              d + ".conditions[1].type: Duplicate value: \"Ready\"",
              Bad(d + ".data", "\"<value omitted>\"", "must be a valid JSON object"),
              d + ".networkData.interfaceName: Too long: may not be more than 256 bytes",
              d + ".networkData.hardwareAddress: Too long: may not be more than 128 bytes",
              Bad(d + ".networkData.ips[0]", "\"10.9.8.7\"",
                  "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)"),
              Bad(d + ".networkData.ips[1]", "\"010.9.8.7/24\"",
                  "must be in canonical form (\"10.9.8.7/24\")"),
              Bad(d + ".networkData.ips[2]", "\"2001:DB8::1/64\"",
                  "must be in canonical form (\"2001:db8::1/64\")"),
              d + ".networkData.ips[4]: Duplicate value: \"10.9.8.7/24\""}));
  obj["status"]["devices"][0] = R"({"driver": "gpu.example.com", "pool": "node-a",
                                    "device": "gpu-0"})"_json;
  obj["status"]["devices"][0]["conditions"] = json::array();
  for (int i = 0; i < 9; ++i) {
    obj["status"]["devices"][0]["conditions"].push_back(
        {{"type", "T" + std::to_string(i)},
         {"status", "True"},
         {"reason", "R"},
         {"lastTransitionTime", "2026-01-01T00:00:00Z"}});
  }
  EXPECT_EQ(CheckStatus(obj, old),
            Errors{d + ".conditions: Too many: 9: must have at most 8 items"});
}

TEST(ResourceClaimStatusTest, StatusSentOnCreateIsChecked) {
  json obj = Claim();
  obj["status"] = R"({"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]})"_json;
  EXPECT_EQ(Check(obj), Errors{"status.reservedFor: Forbidden: may not be specified when "
                               "`allocated` is not set"});
}

// ---- DeviceTaintRule -----------------------------------------------------------------------

TEST(DeviceTaintRuleValidationTest, ValidRule) { EXPECT_EQ(Check(TaintRule()), Errors{}); }

TEST(DeviceTaintRuleValidationTest, TaintIsRequired) {
  json obj = TaintRule();
  obj["spec"].erase("taint");
  EXPECT_EQ(Check(obj), (Errors{Bad("spec.taint.key", "\"\"", "name part must be non-empty"),
                                Bad("spec.taint.key", "\"\"", kNamePartMsg),
                                "spec.taint.effect: Required value"}));
  obj["spec"]["taint"] = R"({"key": "example.com/k", "effect": "Evict"})"_json;
  EXPECT_EQ(Check(obj), Errors{"spec.taint.effect: Unsupported value: \"Evict\": supported "
                               "values: \"NoExecute\", \"NoSchedule\", \"None\""});
}

TEST(DeviceTaintRuleValidationTest, SelectorFieldFormats) {
  json obj = TaintRule();
  obj["spec"]["deviceSelector"] =
      R"({"driver": "Bad_Driver", "pool": "a//b", "device": "GPU"})"_json;
  EXPECT_EQ(Check(obj), (Errors{Bad("spec.deviceSelector.driver", "\"Bad_Driver\"", kSubdomainMsg),
                                Bad("spec.deviceSelector.pool", "\"\"", kSubdomainMsg),
                                Bad("spec.deviceSelector.device", "\"GPU\"", kLabelMsg)}));
  obj["spec"].erase("deviceSelector");
  EXPECT_EQ(Check(obj), Errors{});
}

TEST(DeviceTaintRuleValidationTest, UnchangedEffectIsNotRechecked) {
  json old = TaintRule();
  old["spec"]["taint"]["effect"] = "Legacy";
  json obj = old;
  obj["spec"]["taint"]["value"] = "unplanned";
  EXPECT_EQ(Check(obj, &old), Errors{});
  obj["spec"]["taint"]["effect"] = "Legacy2";
  EXPECT_EQ(Check(obj, &old).size(), 1u);
}

TEST(DeviceTaintRuleValidationTest, StatusConditions) {
  json old = TaintRule();
  json obj = TaintRule();
  obj["status"]["conditions"] = json::array();
  for (int i = 0; i < 9; ++i) {
    obj["status"]["conditions"].push_back({{"type", "T" + std::to_string(i)},
                                           {"status", "True"},
                                           {"reason", "R"},
                                           {"lastTransitionTime", "2026-01-01T00:00:00Z"}});
  }
  EXPECT_EQ(CheckStatus(obj, old),
            Errors{"status.conditions: Too many: 9: must have at most 8 items"});
  obj["status"]["conditions"].erase(8);
  EXPECT_EQ(CheckStatus(obj, old), Errors{});
}

// ---- core Node -----------------------------------------------------------------------------

TEST(NodeValidationTest, Taints) {
  json node = SeedNode("node-a", json::object(), R"({"taints": [
    {"key": "example.com/a", "effect": "PreferNoSchedule"},
    {"key": "example.com/a", "effect": "None"},
    {"key": "bad key", "value": "bad value"},
    {"key": "example.com/a", "value": "x", "effect": "PreferNoSchedule"}
  ]})"_json);
  const std::string t = "spec.taints";
  EXPECT_EQ(Check(node), (Errors{t + "[1].effect: Unsupported value: \"None\": supported values: "
                                     "\"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
                                 Bad(t + "[2].key", "\"bad key\"", kNamePartMsg),
                                 Bad(t + "[2].value", "\"bad value\"", kLabelValueMsg),
                                 t + "[2].effect: Required value",
                                 t + "[3]: Duplicate value: " + node["spec"]["taints"][3].dump() +
                                     ": taints must be unique by key and effect pair"}));
}

TEST(NodeValidationTest, NameIsADnsSubdomain) {
  json node = SeedNode("Node_A", json::object(), json::object());
  EXPECT_EQ(Check(node), Errors{Bad("metadata.name", "\"Node_A\"", kSubdomainMsg)});
}

// ---- core Pod, Event, ResourceQuota --------------------------------------------------------

// A pod as the codec hands it to validation: defaulted (restartPolicy, phase).
json Pod() {
  return R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "pod1", "namespace": "dra-test"},
    "spec": {
      "restartPolicy": "OnFailure",
      "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}],
      "containers": [
        {"name": "ctr0", "image": "cuda:12", "resources": {"claims": [{"name": "gpu"}]}},
        {"name": "ctr1", "image": "cuda:12", "resources": {"claims": [{"name": "gpu"}]}}
      ]
    },
    "status": {"phase": "Pending"}
  })"_json;
}

TEST(PodValidationTest, ValidPod) { EXPECT_EQ(Check(Pod()), Errors{}); }

TEST(PodValidationTest, NameIsADnsSubdomain) {
  json pod = Pod();
  pod["metadata"]["name"] = "Bad_Pod";
  EXPECT_EQ(Check(pod), (Errors{Bad("metadata.name", "\"Bad_Pod\"", kSubdomainMsg)}));
}

TEST(PodValidationTest, AtLeastOneContainer) {
  json pod = Pod();
  pod["spec"]["containers"] = json::array();
  EXPECT_EQ(Check(pod), (Errors{"spec.containers: Required value"}));
  pod["spec"].erase("containers");
  EXPECT_EQ(Check(pod), (Errors{"spec.containers: Required value"}));
}

TEST(PodValidationTest, ContainerNamesAreUniqueDnsLabels) {
  json pod = Pod();
  pod["spec"]["containers"][1]["name"] = "ctr0";
  pod["spec"]["initContainers"] = R"([{"name": "ctr0", "image": "init"},
                                      {"name": "Init_1", "image": "init"},
                                      {"image": "init"}])"_json;
  EXPECT_EQ(Check(pod), (Errors{
                            "spec.containers[1].name: Duplicate value: \"ctr0\"",
                            "spec.initContainers[0].name: Duplicate value: \"ctr0\"",
                            Bad("spec.initContainers[1].name", "\"Init_1\"", kLabelMsg),
                            "spec.initContainers[2].name: Required value",
                        }));
}

TEST(PodValidationTest, ContainerImageIsRequired) {
  json pod = Pod();
  pod["spec"]["containers"][0].erase("image");
  EXPECT_EQ(Check(pod), (Errors{"spec.containers[0].image: Required value"}));
}

TEST(PodValidationTest, ResourceClaimsNeedExactlyOneSource) {
  json pod = Pod();
  pod["spec"]["resourceClaims"] = R"([
    {"name": "a", "resourceClaimName": "c", "resourceClaimTemplateName": "t"},
    {"name": "b"},
    {"name": "a", "resourceClaimName": "c"},
    {"resourceClaimTemplateName": "Bad_T"}
  ])"_json;
  pod["spec"]["containers"][0]["resources"]["claims"] = json::array();
  pod["spec"]["containers"][1]["resources"]["claims"] = json::array();
  EXPECT_EQ(Check(pod),
            (Errors{
                "spec.resourceClaims[0]: Invalid value: "
                "{\"name\":\"a\",\"resourceClaimName\":\"c\",\"resourceClaimTemplateName\":\"t\"}: "
                "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be "
                "specified",
                "spec.resourceClaims[1]: Invalid value: {\"name\":\"b\"}: must specify one of: "
                "`resourceClaimName`, `resourceClaimTemplateName`",
                "spec.resourceClaims[2].name: Duplicate value: \"a\"",
                "spec.resourceClaims[3].name: Required value",
                Bad("spec.resourceClaims[3].resourceClaimTemplateName", "\"Bad_T\"", kSubdomainMsg),
            }));
}

TEST(PodValidationTest, ContainerClaimsMustNameAPodClaim) {
  json pod = Pod();
  pod["spec"]["containers"][0]["resources"]["claims"] =
      R"([{"name": "gpu"}, {"name": "gpu"}, {"name": "nic"}, {}])"_json;
  EXPECT_EQ(Check(pod), (Errors{
                            "spec.containers[0].resources.claims[1]: Duplicate value: \"gpu\"",
                            "spec.containers[0].resources.claims[2]: Not found: \"nic\": must be "
                            "one of the names in pod.spec.resourceClaims: gpu",
                            "spec.containers[0].resources.claims[3]: Required value",
                        }));
  pod["spec"].erase("resourceClaims");
  pod["spec"]["containers"][0]["resources"]["claims"] = R"([{"name": "gpu"}])"_json;
  pod["spec"]["containers"][1].erase("resources");
  EXPECT_EQ(Check(pod), (Errors{"spec.containers[0].resources.claims[0]: Not found: \"gpu\": must "
                                "be one of the names in pod.spec.resourceClaims which is empty"}));
}

TEST(PodValidationTest, ResourceQuantities) {
  json pod = Pod();
  pod["spec"]["containers"][0]["resources"]["limits"] = R"({"nvidia.com/gpu": 1, "cpu": "1"})"_json;
  pod["spec"]["containers"][0]["resources"]["requests"] =
      R"({"nvidia.com/gpu": 2, "cpu": "2", "gpus": "1"})"_json;
  EXPECT_EQ(Check(pod),
            (Errors{
                "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or "
                "equal to cpu limit of 1",
                "spec.containers[0].resources.requests[gpus]: Invalid value: \"gpus\": must be a "
                "standard resource for containers",
                "spec.containers[0].resources.requests: Invalid value: \"2\": must be equal to "
                "nvidia.com/gpu limit of 1",
            }));
}

TEST(PodValidationTest, TolerationsAndRestartPolicy) {
  json pod = Pod();
  pod["spec"]["restartPolicy"] = "Sometimes";
  pod["spec"]["tolerations"] = R"([
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"operator": "Equal", "value": "x"},
    {"key": "k", "operator": "Exists", "value": "v"},
    {"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5},
    {"key": "k", "operator": "Like"}
  ])"_json;
  EXPECT_EQ(Check(pod),
            (Errors{
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: "
                "\"Always\", \"OnFailure\", \"Never\"",
                "spec.tolerations[1].operator: Invalid value: \"Equal\": operator must be Exists "
                "when `key` is empty, which means \"match all values and all keys\"",
                "spec.tolerations[2].operator: Invalid value: "
                "{\"key\":\"k\",\"operator\":\"Exists\",\"value\":\"v\"}: value must be empty when "
                "`operator` is 'Exists'",
                "spec.tolerations[3].effect: Invalid value: \"NoSchedule\": effect must be "
                "'NoExecute' when `tolerationSeconds` is set",
                "spec.tolerations[4].operator: Unsupported value: \"Like\": supported values: "
                "\"Equal\", \"Exists\"",
            }));
}

TEST(PodValidationTest, TemplateClaimNameMustFitTheGeneratedClaimName) {
  json pod = Pod();
  pod["metadata"]["name"] = std::string(250, 'p');
  pod["spec"]["resourceClaims"][0] = R"({"name": "gpu", "resourceClaimTemplateName": "t"})"_json;
  Errors errs = Check(pod);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].rfind("spec.resourceClaims[0].name: Invalid value: \"" + std::string(250, 'p') +
                              "-gpu\": final ResourceClaim name: ",
                          0),
            0u)
      << errs[0];
}

TEST(PodValidationTest, UpdateMayChangeImagesAndAddTolerations) {
  json old = Pod();
  json pod = Pod();
  pod["spec"]["containers"][0]["image"] = "cuda:13";
  pod["spec"]["tolerations"] = R"([{"key": "k", "operator": "Exists"}])"_json;
  pod["metadata"]["labels"] = R"({"app": "x"})"_json;
  EXPECT_EQ(Check(pod, &old), Errors{});
  json removed = Pod();
  EXPECT_EQ(Check(removed, &pod),
            (Errors{"spec.tolerations: Forbidden: existing toleration can not be modified except "
                    "its tolerationSeconds"}));
}

TEST(PodValidationTest, NodeNameCanBeSetOnceOnly) {
  json old = Pod();
  json bound = Pod();
  bound["spec"]["nodeName"] = "gpu-node-a";
  EXPECT_EQ(Check(bound, &old), Errors{});
  json moved = bound;
  moved["spec"]["nodeName"] = "gpu-node-b";
  Errors errs = Check(moved, &bound);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].rfind("spec: Forbidden: pod updates may not change fields other than "
                          "`spec.containers[*].image`",
                          0),
            0u)
      << errs[0];
  EXPECT_NE(errs[0].find("spec.nodeName: \"gpu-node-a\" -> \"gpu-node-b\""), std::string::npos)
      << errs[0];
  json unbound = Pod();
  EXPECT_EQ(Check(unbound, &bound).size(), 1u);
}

TEST(PodValidationTest, OtherSpecChangesAndContainerCountAreForbidden) {
  json old = Pod();
  json pod = Pod();
  pod["spec"]["restartPolicy"] = "Never";
  Errors errs = Check(pod, &old);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].find("spec.restartPolicy: \"OnFailure\" -> \"Never\""), std::string::npos);
  pod = Pod();
  pod["spec"]["containers"].push_back(R"({"name": "ctr2", "image": "x"})"_json);
  EXPECT_EQ(Check(pod, &old),
            (Errors{"spec.containers: Forbidden: pod updates may not add or remove containers"}));
}

TEST(PodValidationTest, ActiveDeadlineCanOnlyDecrease) {
  json old = Pod();
  old["spec"]["activeDeadlineSeconds"] = 100;
  json pod = old;
  pod["spec"]["activeDeadlineSeconds"] = 50;
  EXPECT_EQ(Check(pod, &old), Errors{});
  pod["spec"]["activeDeadlineSeconds"] = 200;
  EXPECT_EQ(Check(pod, &old), (Errors{"spec.activeDeadlineSeconds: Invalid value: 200: must be "
                                      "less than or equal to previous value"}));
  pod["spec"].erase("activeDeadlineSeconds");
  EXPECT_EQ(Check(pod, &old), (Errors{"spec.activeDeadlineSeconds: Invalid value: null: must not "
                                      "update from a positive integer to nil value"}));
}

// The update check compares containers with their stored images put back: a container that is
// not an object is reported where it is, never indexed into.
TEST(PodValidationTest, MistypedContainerOnUpdateIsReportedNotThrown) {
  const json old = Pod();
  json pod = Pod();
  pod["spec"]["containers"][0] = "x";
  Errors errs;
  ASSERT_NO_THROW(errs = Check(pod, &old));
  ASSERT_EQ(errs.size(), 5u) << ::testing::PrintToString(errs);
  EXPECT_EQ(errs[0], "spec.containers[0]: Invalid value: \"x\": must be of type object");
  EXPECT_EQ(errs[1], "spec.containers[0].name: Required value");
  EXPECT_EQ(errs[2], "spec.containers[0].image: Required value");
  EXPECT_EQ(errs[3], "spec.containers[0].image: Required value");
  EXPECT_EQ(errs[4].rfind("spec: Forbidden: pod updates may not change fields other than ", 0), 0u)
      << errs[4];
  EXPECT_NE(errs[4].find("\n  spec.containers: "), std::string::npos) << errs[4];

  json with_init = Pod();
  with_init["spec"]["initContainers"] = R"([{"name": "init", "image": "busybox"}])"_json;
  pod = with_init;
  pod["spec"]["initContainers"][0] = 42;
  ASSERT_NO_THROW(errs = Check(pod, &with_init));
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs[0], "spec.initContainers[0]: Invalid value: 42: must be of type object");
  EXPECT_TRUE(Contains(errs, "spec.initContainers[0].image: Required value"))
      << ::testing::PrintToString(errs);
}

TEST(PodValidationTest, StatusUpdate) {
  json old = Pod();
  old["spec"]["resourceClaims"].push_back(
      R"({"name": "t", "resourceClaimTemplateName": "x"})"_json);
  json pod = old;
  pod["status"] = R"({"phase": "Running",
    "conditions": [{"type": "PodScheduled", "status": "True"}],
    "resourceClaimStatuses": [{"name": "t", "resourceClaimName": "pod1-t-abcde"}]})"_json;
  EXPECT_EQ(CheckStatus(pod, old), Errors{});
  pod["status"] = R"({"phase": "Sleeping",
    "conditions": [{"type": "PodScheduled", "status": "Maybe"}],
    "resourceClaimStatuses": [{"name": "nope"}, {"name": "t"}, {"name": "t"}]})"_json;
  EXPECT_EQ(CheckStatus(pod, old),
            (Errors{
                "status.phase: Unsupported value: \"Sleeping\": supported values: \"Pending\", "
                "\"Running\", \"Succeeded\", \"Failed\", \"Unknown\"",
                "status.conditions[0].status: Unsupported value: \"Maybe\": supported values: "
                "\"True\", \"False\", \"Unknown\"",
                "status.resourceClaimStatuses[0].name: Invalid value: \"nope\": must match the "
                "name of an entry in `spec.resourceClaims`",
                "status.resourceClaimStatuses[2].name: Duplicate value: \"t\"",
            }));
}

json Event() {
  return R"({
    "apiVersion": "v1", "kind": "Event",
    "metadata": {"name": "pod1.17f0a1b2c3d4", "namespace": "dra-test"},
    "involvedObject": {"kind": "Pod", "name": "pod1", "namespace": "dra-test", "uid": "u1"},
    "reason": "FailedScheduling", "message": "0/3 nodes are available", "type": "Warning",
    "count": 1, "source": {"component": "quartermaster-scheduler"}
  })"_json;
}

TEST(EventValidationTest, ValidEvent) { EXPECT_EQ(Check(Event()), Errors{}); }

TEST(EventValidationTest, InvolvedObjectNamespaceMustMatch) {
  json ev = Event();
  ev["involvedObject"]["namespace"] = "other";
  EXPECT_EQ(Check(ev), (Errors{"involvedObject.namespace: Invalid value: \"other\": does not "
                               "match event.namespace"}));
  ev["involvedObject"].erase("namespace");
  EXPECT_EQ(Check(ev), (Errors{"involvedObject.namespace: Invalid value: \"\": does not match "
                               "event.namespace"}));
  ev["metadata"]["namespace"] = "default";
  EXPECT_EQ(Check(ev), Errors{});
}

TEST(EventValidationTest, NewStyleEventNeedsReportingFields) {
  json ev = Event();
  ev["eventTime"] = "2026-01-02T03:04:05.000000Z";
  ev["reportingComponent"] = "quartermaster.io/scheduler";
  ev.erase("reason");
  EXPECT_EQ(Check(ev), (Errors{
                           "reportingInstance: Required value",
                           "action: Required value",
                           "reason: Required value",
                       }));
  ev["reportingComponent"] = "Bad Component";
  ev["reportingInstance"] = "qm-0";
  ev["action"] = "Scheduling";
  ev["reason"] = "Scheduled";
  Errors errs = Check(ev);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].rfind("reportingComponent: Invalid value: \"Bad Component\": ", 0), 0u)
      << errs[0];
}

json Quota() {
  return R"({
    "apiVersion": "v1", "kind": "ResourceQuota",
    "metadata": {"name": "gpus", "namespace": "dra-test"},
    "spec": {"hard": {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "4",
                      "count/pods": 10, "requests.nvidia.com/gpu": "2", "limits.cpu": "8"}}
  })"_json;
}

TEST(ResourceQuotaValidationTest, ValidQuota) { EXPECT_EQ(Check(Quota()), Errors{}); }

TEST(ResourceQuotaValidationTest, HardResourcesAndScopes) {
  json quota = Quota();
  quota["spec"]["hard"] = R"({"pods": "-1", "gpus": "1", "count/pods": "1500m",
                             "cpu": "abc"})"_json;
  quota["spec"]["scopes"] = R"(["BestEffort", "Sometimes"])"_json;
  EXPECT_EQ(Check(quota),
            (Errors{
                "spec.hard[count/pods]: Invalid value: \"1500m\": must be an integer",
                "spec.hard[cpu]: Invalid value: \"abc\": quantities must match the regular "
                "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                "spec.hard[gpus]: Invalid value: \"gpus\": must be a standard resource for quota",
                "spec.hard[pods]: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.scopes: Invalid value: \"Sometimes\": unsupported scope",
            }));
}

TEST(ResourceQuotaValidationTest, ScopesAreImmutableAndStatusIsChecked) {
  json old = Quota();
  json quota = Quota();
  quota["spec"]["scopes"] = R"(["BestEffort"])"_json;
  EXPECT_EQ(Check(quota, &old), (Errors{"spec.scopes: Invalid value: field is immutable"}));
  quota = Quota();
  quota["status"] = R"({"hard": {"count/pods": "10"}, "used": {"count/pods": "-2"}})"_json;
  EXPECT_EQ(CheckStatus(quota, old), (Errors{"status.used[count/pods]: Invalid value: \"-2\": "
                                             "must be greater than or equal to 0"}));
}

// ---- rbac.authorization.k8s.io and core ServiceAccount -------------------------------------

json Role() {
  return R"({
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
    "metadata": {"name": "claim-reader", "namespace": "team-a"},
    "rules": [{"verbs": ["get", "list"], "apiGroups": ["resource.k8s.io"],
               "resources": ["resourceclaims", "resourceclaims/status"],
               "resourceNames": ["rc1"]}]
  })"_json;
}

json ClusterRole() {
  return R"({
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
    "metadata": {"name": "system:metrics-reader"},
    "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics", "/debug/*"]},
              {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
    "aggregationRule": {"clusterRoleSelectors": [
      {"matchLabels": {"rbac.example.com/aggregate": "true"},
       "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}]}
  })"_json;
}

json RoleBinding() {
  return R"({
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
    "metadata": {"name": "viewers", "namespace": "team-a"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
    "subjects": [
      {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
      {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "team-a-devs"},
      {"kind": "ServiceAccount", "apiGroup": "", "name": "ci"}]
  })"_json;
}

json ClusterRoleBinding() {
  json b = RoleBinding();
  b["kind"] = "ClusterRoleBinding";
  b["metadata"] = R"({"name": "system:viewers"})"_json;
  b["subjects"][2]["namespace"] = "tools";
  return b;
}

TEST(RbacValidationTest, ValidObjects) {
  EXPECT_EQ(Check(Role()), Errors{});
  EXPECT_EQ(Check(ClusterRole()), Errors{});
  EXPECT_EQ(Check(RoleBinding()), Errors{});
  EXPECT_EQ(Check(ClusterRoleBinding()), Errors{});
  json sa = R"({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "ci", "namespace": "team-a"},
                "secrets": [{"name": "ci-token"}], "imagePullSecrets": [{"name": "registry"}],
                "automountServiceAccountToken": false})"_json;
  EXPECT_EQ(Check(sa), Errors{});
}

TEST(RbacValidationTest, NamesArePathSegmentsNotSubdomains) {
  json role = ClusterRole();
  role["metadata"]["name"] = "system:Node Reader";  // colons, capitals and spaces are fine
  EXPECT_EQ(Check(role), Errors{});
  role["metadata"]["name"] = "a/b%c";
  EXPECT_EQ(Check(role), (Errors{"metadata.name: Invalid value: \"a/b%c\": may not contain '/'",
                                 "metadata.name: Invalid value: \"a/b%c\": may not contain '%'"}));
  role["metadata"]["name"] = "..";
  EXPECT_EQ(Check(role), (Errors{"metadata.name: Invalid value: \"..\": may not be '..'"}));
  json sa = R"({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "CI", "namespace": "team-a"}})"_json;
  EXPECT_EQ(Check(sa), (Errors{Bad("metadata.name", "\"CI\"", kSubdomainMsg)}));
}

TEST(RbacValidationTest, PolicyRules) {
  json role = Role();
  role["rules"] = R"([
    {"apiGroups": [""], "resources": ["pods"]},
    {"verbs": ["get"]},
    {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
    {"verbs": ["get"], "nonResourceURLs": ["/healthz"], "resources": ["pods"]}
  ])"_json;
  EXPECT_EQ(Check(role),
            (Errors{
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[1].apiGroups: Required value: resource rules must supply at least one api "
                "group",
                "rules[1].resources: Required value: resource rules must supply at least one "
                "resource",
                "rules[2].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced "
                "rules cannot apply to non-resource URLs",
                "rules[3].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced "
                "rules cannot apply to non-resource URLs",
                "rules[3].nonResourceURLs: Invalid value: []string{\"/healthz\"}: rules cannot "
                "apply to both regular resources and non-resource URLs",
            }));
  json cluster = ClusterRole();
  cluster["rules"][0]["apiGroups"] = R"([""])"_json;
  EXPECT_EQ(Check(cluster),
            (Errors{"rules[0].nonResourceURLs: Invalid value: []string{\"/metrics\", "
                    "\"/debug/*\"}: rules cannot apply to both regular resources and "
                    "non-resource URLs"}));
  cluster = ClusterRole();
  cluster["rules"][1]["verbs"] = R"(["get", 7])"_json;
  EXPECT_EQ(Check(cluster),
            (Errors{"rules[1].verbs[1]: Invalid value: 7: must be of type string"}));
}

TEST(RbacValidationTest, AggregationRuleSelectors) {
  json role = ClusterRole();
  role["aggregationRule"] = R"({"clusterRoleSelectors": []})"_json;
  EXPECT_EQ(Check(role), (Errors{"aggregationRule.clusterRoleSelectors: Required value: at least "
                                 "one clusterRoleSelector required if aggregationRule is "
                                 "non-nil"}));
  role["aggregationRule"] = R"({"clusterRoleSelectors": [
    {"matchExpressions": [{"key": "tier", "operator": "In"},
                          {"key": "tier", "operator": "Exists", "values": ["a"]},
                          {"key": "tier", "operator": "Near"}]}]})"_json;
  EXPECT_EQ(Check(role),
            (Errors{
                "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values: Required "
                "value: must be specified when `operator` is 'In' or 'NotIn'",
                "aggregationRule.clusterRoleSelectors[0].matchExpressions[1].values: Forbidden: "
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                "aggregationRule.clusterRoleSelectors[0].matchExpressions[2].operator: Invalid "
                "value: \"Near\": not a valid selector operator",
            }));
}

TEST(RbacValidationTest, RoleRefAndSubjects) {
  json b = RoleBinding();
  b["roleRef"] = R"({"apiGroup": "example.com", "kind": "Secret", "name": ""})"_json;
  b["subjects"] = R"([
    {"kind": "User", "name": "alice"},
    {"kind": "ServiceAccount", "apiGroup": "rbac.authorization.k8s.io", "name": "Bad_SA"},
    {"kind": "Robot", "name": "r2"},
    {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io"}
  ])"_json;
  EXPECT_EQ(
      Check(b),
      (Errors{
          "roleRef.apiGroup: Unsupported value: \"example.com\": supported values: "
          "\"rbac.authorization.k8s.io\"",
          "roleRef.kind: Unsupported value: \"Secret\": supported values: \"Role\", "
          "\"ClusterRole\"",
          "roleRef.name: Required value",
          "subjects[0].apiGroup: Unsupported value: \"\": supported values: "
          "\"rbac.authorization.k8s.io\"",
          Bad("subjects[1].name", "\"Bad_SA\"", kSubdomainMsg),
          "subjects[1].apiGroup: Unsupported value: \"rbac.authorization.k8s.io\": supported "
          "values: \"\"",
          "subjects[2].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", "
          "\"User\", \"Group\"",
          "subjects[3].name: Required value",
      }));
}

TEST(RbacValidationTest, ClusterRoleBindingsNeedClusterRolesAndServiceAccountNamespaces) {
  json b = ClusterRoleBinding();
  b["roleRef"]["kind"] = "Role";
  b["subjects"][2].erase("namespace");
  EXPECT_EQ(Check(b),
            (Errors{"roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                    "subjects[2].namespace: Required value"}));
  // A RoleBinding may refer to a ClusterRole, and its service accounts default to its namespace.
  EXPECT_EQ(Check(RoleBinding()), Errors{});
}

TEST(RbacValidationTest, RoleRefIsImmutable) {
  json old = RoleBinding();
  json b = RoleBinding();
  b["subjects"].push_back(R"({"kind": "User", "apiGroup": "rbac.authorization.k8s.io",
                              "name": "bob"})"_json);
  EXPECT_EQ(Check(b, &old), Errors{});  // subjects may change
  b["roleRef"]["name"] = "edit";
  EXPECT_EQ(Check(b, &old),
            (Errors{"roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", "
                    "Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"}));
}

}  // namespace
}  // namespace qm::api
