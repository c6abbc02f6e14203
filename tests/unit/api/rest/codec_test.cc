#include "api/rest/codec.h"

#include <chrono>
#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "common/clock.h"
#include "model/json/document.h"
#include "model/json/fields.h"
#include "model/json/write.h"
#include "model/object.h"
#include "model/resource_types.h"

namespace qm::api {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

// 2026-11-22T02:06:17.750Z: the fraction shows that defaulted timestamps are truncated.
constexpr int64_t kNowSeconds = 1795313177;
constexpr char kNowText[] = "2026-11-22T02:06:17Z";

class FakeClock final : public Clock {
 public:
  explicit FakeClock(std::chrono::system_clock::time_point now) : now_(now) {}
  std::chrono::system_clock::time_point Now() const override { return now_; }

 private:
  std::chrono::system_clock::time_point now_;
};

json J(const char* text) { return json::parse(text); }

const model::ResourceType& Type(const std::string& kind) {
  const model::ResourceType* type = model::FindResourceTypeByKind(model::kResourceGroup, kind);
  EXPECT_NE(type, nullptr) << kind;
  return *type;
}

const model::ResourceType& CoreType(const std::string& kind) {
  const model::ResourceType* type = model::FindResourceTypeByKind("", kind);
  EXPECT_NE(type, nullptr) << kind;
  return *type;
}

class CodecTest : public ::testing::Test {
 protected:
  json Hub(const std::string& kind, const std::string& version, json obj) {
    return ToHub(Type(kind), version, std::move(obj), clock_);
  }

  json Claim(const std::string& version, const char* spec) {
    json obj = J(R"({"kind":"ResourceClaim","metadata":{"name":"rc1","namespace":"default"}})");
    obj["apiVersion"] = "resource.k8s.io/" + version;
    obj["spec"] = J(spec);
    return obj;
  }

  FakeClock clock_{std::chrono::system_clock::time_point(std::chrono::seconds(kNowSeconds)) +
                   std::chrono::milliseconds(750)};
};

// --- v1beta1 ResourceClaim -> hub -------------------------------------------------------------

TEST_F(CodecTest, V1beta1FlatRequestMovesUnderExactlyWithDefaults) {
  json hub = Hub("ResourceClaim", "v1beta1", Claim("v1beta1", R"({"devices":{"requests":[{
      "name":"gpu","deviceClassName":"gpu.example.com",
      "selectors":[{"cel":{"expression":"device.driver == 'gpu.example.com'"}}],
      "adminAccess":false,"tolerations":[{"key":"k","effect":"NoSchedule"}],
      "capacity":{"requests":{"memory":"1Gi"}}}]}})"));
  EXPECT_EQ(hub["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(hub["kind"], "ResourceClaim");
  EXPECT_EQ(hub["metadata"], J(R"({"name":"rc1","namespace":"default"})"));
  EXPECT_EQ(hub["spec"], J(R"({"devices":{"requests":[{"name":"gpu","exactly":{
      "deviceClassName":"gpu.example.com",
      "selectors":[{"cel":{"expression":"device.driver == 'gpu.example.com'"}}],
      "allocationMode":"ExactCount","count":1,"adminAccess":false,
      "tolerations":[{"key":"k","operator":"Equal","effect":"NoSchedule"}],
      "capacity":{"requests":{"memory":"1Gi"}}}}]}})"));
}

TEST_F(CodecTest, V1beta1KeepsExplicitAllocationModeAndCount) {
  json hub = Hub("ResourceClaim", "v1beta1", Claim("v1beta1", R"({"devices":{"requests":[
      {"name":"all","deviceClassName":"c","allocationMode":"All"},
      {"name":"three","deviceClassName":"c","count":3}]}})"));
  EXPECT_EQ(hub["spec"]["devices"]["requests"], J(R"([
      {"name":"all","exactly":{"deviceClassName":"c","allocationMode":"All"}},
      {"name":"three","exactly":{"deviceClassName":"c","allocationMode":"ExactCount","count":3}}
  ])"));
}

TEST_F(CodecTest, V1beta1DefaultsOnlyWhenDeviceClassNameIsSet) {
  // Without a class name the flat fields still move under "exactly", undefaulted.
  json hub = Hub("ResourceClaim", "v1beta1", Claim("v1beta1", R"({"devices":{"requests":[
      {"name":"r","count":2},
      {"name":"s","deviceClassName":"","selectors":[]}]}})"));
  EXPECT_EQ(hub["spec"]["devices"]["requests"], J(R"([
      {"name":"r","exactly":{"count":2}},
      {"name":"s","exactly":{"selectors":[]}}])"));
}

TEST_F(CodecTest, V1beta1FirstAvailableIsKeptAndSubrequestsDefaulted) {
  json hub = Hub("ResourceClaim", "v1beta1", Claim("v1beta1", R"({"devices":{"requests":[{
      "name":"gpu","firstAvailable":[
        {"name":"big","deviceClassName":"big.example.com","tolerations":[{"key":"t"}]},
        {"name":"small","deviceClassName":"small.example.com","allocationMode":"ExactCount",
         "count":2}]}]}})"));
  EXPECT_EQ(hub["spec"]["devices"]["requests"], J(R"([{"name":"gpu","firstAvailable":[
      {"name":"big","deviceClassName":"big.example.com","allocationMode":"ExactCount","count":1,
       "tolerations":[{"key":"t","operator":"Equal"}]},
      {"name":"small","deviceClassName":"small.example.com","allocationMode":"ExactCount",
       "count":2}]}])"));
}

TEST_F(CodecTest, V1beta1ClaimWithoutRequestsIsOnlyRelabelled) {
  json in = Claim("v1beta1", R"({"devices":{"config":[]}})");
  json hub = Hub("ResourceClaim", "v1beta1", in);
  in["apiVersion"] = "resource.k8s.io/v1";
  EXPECT_EQ(hub, in);
}

// --- hub -> v1beta1 ---------------------------------------------------------------------------

TEST_F(CodecTest, HubToV1beta1FlattensExactly) {
  json hub = Claim("v1", R"({"devices":{"requests":[
      {"name":"gpu","exactly":{"deviceClassName":"c","allocationMode":"ExactCount","count":2}},
      {"name":"alt","firstAvailable":[{"name":"a","deviceClassName":"c","allocationMode":"All"}]}
  ]}})");
  hub["status"] = J(R"({"allocation":{"devices":{"results":[]}}})");
  json out = FromHub(Type("ResourceClaim"), "v1beta1", hub);
  EXPECT_EQ(out["apiVersion"], "resource.k8s.io/v1beta1");
  EXPECT_EQ(out["kind"], "ResourceClaim");
  EXPECT_EQ(out["spec"], J(R"({"devices":{"requests":[
      {"name":"gpu","deviceClassName":"c","allocationMode":"ExactCount","count":2},
      {"name":"alt","firstAvailable":[{"name":"a","deviceClassName":"c","allocationMode":"All"}]}
  ]}})"));
  EXPECT_EQ(out["status"], hub["status"]);
  EXPECT_EQ(out["metadata"], hub["metadata"]);
}

TEST_F(CodecTest, HubToV1AndV1beta2OnlyRewritesApiVersion) {
  json hub = Claim("v1", R"({"devices":{"requests":[{"name":"gpu","exactly":{"count":1}}]}})");
  for (const char* version : {"v1", "v1beta2"}) {
    json out = FromHub(Type("ResourceClaim"), version, hub);
    json want = hub;
    want["apiVersion"] = std::string("resource.k8s.io/") + version;
    EXPECT_EQ(out, want) << version;
  }
}

// --- Round trips ------------------------------------------------------------------------------

TEST_F(CodecTest, ClaimRoundTripsV1beta1ToHubToV1beta1) {
  // Already defaulted, so nothing is added on the way.
  json beta = Claim("v1beta1", R"({"devices":{"requests":[
      {"name":"gpu","deviceClassName":"c","allocationMode":"ExactCount","count":1,
       "selectors":[{"cel":{"expression":"true"}}],
       "tolerations":[{"key":"k","operator":"Exists"}]},
      {"name":"alt","firstAvailable":[{"name":"a","deviceClassName":"c","allocationMode":"All"}]}
  ],"constraints":[{"requests":["gpu"],"matchAttribute":"example.com/numa"}]}})");
  json hub = Hub("ResourceClaim", "v1beta1", beta);
  EXPECT_TRUE(hub["spec"]["devices"]["requests"][0].contains("exactly"));
  EXPECT_EQ(FromHub(Type("ResourceClaim"), "v1beta1", hub), beta);
}

TEST_F(CodecTest, ClaimRoundTripsHubToV1beta1ToHub) {
  json hub = Claim("v1", R"({"devices":{"requests":[
      {"name":"gpu","exactly":{"deviceClassName":"c","allocationMode":"ExactCount","count":4,
                               "adminAccess":true}},
      {"name":"alt","firstAvailable":[
         {"name":"a","deviceClassName":"c","allocationMode":"ExactCount","count":1}]}]}})");
  json beta = FromHub(Type("ResourceClaim"), "v1beta1", hub);
  EXPECT_FALSE(beta["spec"]["devices"]["requests"][0].contains("exactly"));
  EXPECT_EQ(Hub("ResourceClaim", "v1beta1", beta), hub);
}

TEST_F(CodecTest, TemplateConvertsNestedClaimSpec) {
  json beta = J(R"({"apiVersion":"resource.k8s.io/v1beta1","kind":"ResourceClaimTemplate",
      "metadata":{"name":"t","namespace":"default"},
      "spec":{"metadata":{"labels":{"a":"b"}},"spec":{"devices":{"requests":[
        {"name":"gpu","deviceClassName":"c"}]}}}})");
  json hub = Hub("ResourceClaimTemplate", "v1beta1", beta);
  EXPECT_EQ(hub["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(hub["spec"], J(R"({"metadata":{"labels":{"a":"b"}},"spec":{"devices":{"requests":[
      {"name":"gpu","exactly":{"deviceClassName":"c","allocationMode":"ExactCount",
                               "count":1}}]}}})"));

  json back = FromHub(Type("ResourceClaimTemplate"), "v1beta1", hub);
  EXPECT_EQ(back["apiVersion"], "resource.k8s.io/v1beta1");
  EXPECT_EQ(back["spec"], J(R"({"metadata":{"labels":{"a":"b"}},"spec":{"devices":{"requests":[
      {"name":"gpu","deviceClassName":"c","allocationMode":"ExactCount","count":1}]}}})"));
  EXPECT_EQ(Hub("ResourceClaimTemplate", "v1beta1", back), hub);
}

// --- ResourceSlice ----------------------------------------------------------------------------

TEST_F(CodecTest, V1beta1SliceUnwrapsBasicAndDropsEmptyNodeFields) {
  json beta = J(R"({"apiVersion":"resource.k8s.io/v1beta1","kind":"ResourceSlice",
      "metadata":{"name":"s1"},
      "spec":{"driver":"gpu.example.com","nodeName":"","allNodes":true,
              "pool":{"name":"p","generation":1,"resourceSliceCount":1},
              "devices":[
                {"name":"gpu-0","basic":{"attributes":{"model":{"string":"h100"}},
                                         "capacity":{"memory":{"value":"80Gi"}}}},
                {"name":"gpu-1","basic":{}},
                {"name":"gpu-2"}]}})");
  json hub = Hub("ResourceSlice", "v1beta1", beta);
  EXPECT_EQ(hub["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(hub["spec"], J(R"({"driver":"gpu.example.com","allNodes":true,
      "pool":{"name":"p","generation":1,"resourceSliceCount":1},
      "devices":[
        {"name":"gpu-0","attributes":{"model":{"string":"h100"}},
                        "capacity":{"memory":{"value":"80Gi"}}},
        {"name":"gpu-1"},
        {"name":"gpu-2"}]})"));
}

TEST_F(CodecTest, V1beta1SliceKeepsNodeNameAndDropsAllNodesFalse) {
  json hub = Hub("ResourceSlice", "v1beta1", J(R"({"spec":{"driver":"d","nodeName":"node-a",
      "allNodes":false,"pool":{"name":"p"},"devices":[]}})"));
  EXPECT_EQ(hub["spec"], J(R"({"driver":"d","nodeName":"node-a","pool":{"name":"p"},
                              "devices":[]})"));
}

TEST_F(CodecTest, HubSliceToV1beta1AlwaysWrapsDevicesInBasic) {
  json hub = J(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice",
      "metadata":{"name":"s1"},
      "spec":{"driver":"d","nodeName":"node-a","pool":{"name":"p"},"devices":[
        {"name":"gpu-0","attributes":{"a":{"int":1}},"taints":[
           {"key":"k","effect":"NoSchedule","timeAdded":"2026-01-01T00:00:00Z"}]},
        {"name":"gpu-1"}]}})");
  json beta = FromHub(Type("ResourceSlice"), "v1beta1", hub);
  EXPECT_EQ(beta["apiVersion"], "resource.k8s.io/v1beta1");
  EXPECT_EQ(beta["spec"], J(R"({"driver":"d","nodeName":"node-a","pool":{"name":"p"},
      "devices":[
        {"name":"gpu-0","basic":{"attributes":{"a":{"int":1}},"taints":[
           {"key":"k","effect":"NoSchedule","timeAdded":"2026-01-01T00:00:00Z"}]}},
        {"name":"gpu-1","basic":{}}]})"));
}

TEST_F(CodecTest, SliceRoundTripsBothWays) {
  json hub = J(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice",
      "metadata":{"name":"s1"},
      "spec":{"driver":"d","allNodes":true,"pool":{"name":"p"},"devices":[
        {"name":"gpu-0","attributes":{"a":{"bool":true}},"consumesCounters":[]},
        {"name":"gpu-1"}]}})");
  json beta = FromHub(Type("ResourceSlice"), "v1beta1", hub);
  EXPECT_EQ(Hub("ResourceSlice", "v1beta1", beta), hub);
  EXPECT_EQ(FromHub(Type("ResourceSlice"), "v1beta1", Hub("ResourceSlice", "v1beta1", beta)), beta);
}

// --- v1 / v1beta2 defaulting ------------------------------------------------------------------

TEST_F(CodecTest, V1DefaultsExactRequests) {
  for (const char* version : {"v1", "v1beta2"}) {
    json hub = Hub("ResourceClaim", version, Claim(version, R"({"devices":{"requests":[
        {"name":"a","exactly":{"deviceClassName":"c"}},
        {"name":"b","exactly":{"deviceClassName":"c","count":0}},
        {"name":"c","exactly":{"deviceClassName":"c","allocationMode":""}},
        {"name":"d","exactly":{"deviceClassName":"c","allocationMode":"All"}},
        {"name":"e","exactly":{"deviceClassName":"c","count":5}}]}})"));
    EXPECT_EQ(hub["apiVersion"], "resource.k8s.io/v1") << version;
    EXPECT_EQ(hub["spec"]["devices"]["requests"], J(R"([
        {"name":"a","exactly":{"deviceClassName":"c","allocationMode":"ExactCount","count":1}},
        {"name":"b","exactly":{"deviceClassName":"c","allocationMode":"ExactCount","count":1}},
        {"name":"c","exactly":{"deviceClassName":"c","allocationMode":"ExactCount","count":1}},
        {"name":"d","exactly":{"deviceClassName":"c","allocationMode":"All"}},
        {"name":"e","exactly":{"deviceClassName":"c","allocationMode":"ExactCount","count":5}}
    ])"))
        << version;
  }
}

TEST_F(CodecTest, V1DefaultsSubrequestsAndTolerationOperator) {
  json hub = Hub("ResourceClaim", "v1", Claim("v1", R"({"devices":{"requests":[
      {"name":"x","exactly":{"deviceClassName":"c","tolerations":[
         {"key":"a"},{"key":"b","operator":""},{"operator":"Exists"}]}},
      {"name":"y","firstAvailable":[{"name":"s","deviceClassName":"c",
         "tolerations":[{"key":"t","value":"v"}]}]}]}})"));
  EXPECT_EQ(hub["spec"]["devices"]["requests"], J(R"([
      {"name":"x","exactly":{"deviceClassName":"c","allocationMode":"ExactCount","count":1,
         "tolerations":[{"key":"a","operator":"Equal"},{"key":"b","operator":"Equal"},
                        {"operator":"Exists"}]}},
      {"name":"y","firstAvailable":[{"name":"s","deviceClassName":"c",
         "allocationMode":"ExactCount","count":1,
         "tolerations":[{"key":"t","value":"v","operator":"Equal"}]}]}])"));
}

TEST_F(CodecTest, SliceTaintTimeAddedDefaultsToClockTruncatedToSeconds) {
  for (const char* version : {"v1", "v1beta1"}) {
    json in = J(R"({"spec":{"driver":"d","pool":{"name":"p"}}})");
    json taints = J(R"([{"key":"new","effect":"NoSchedule"},
                        {"key":"old","effect":"NoExecute","timeAdded":"2020-01-01T00:00:00Z"}])");
    if (std::string(version) == "v1") {
      in["spec"]["devices"] = json::array({{{"name", "gpu-0"}, {"taints", taints}}});
    } else {
      in["spec"]["devices"] = json::array({{{"name", "gpu-0"}, {"basic", {{"taints", taints}}}}});
    }
    json hub = Hub("ResourceSlice", version, in);
    EXPECT_EQ(
        hub["spec"]["devices"][0]["taints"],
        json::array(
            {{{"key", "new"}, {"effect", "NoSchedule"}, {"timeAdded", kNowText}},
             {{"key", "old"}, {"effect", "NoExecute"}, {"timeAdded", "2020-01-01T00:00:00Z"}}}))
        << version;
  }
}

TEST_F(CodecTest, DeviceTaintRuleTaintTimeAddedDefaults) {
  json hub = Hub("DeviceTaintRule", "v1beta2",
                 J(R"({"spec":{"taint":{"key":"k","effect":"NoSchedule"}}})"));
  EXPECT_EQ(hub["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(hub["spec"]["taint"],
            J(R"({"key":"k","effect":"NoSchedule","timeAdded":"2026-11-22T02:06:17Z"})"));
}

TEST_F(CodecTest, NamespaceGetsKubernetesFinalizerAndActivePhase) {
  json hub = ToHub(CoreType("Namespace"), "v1", J(R"({"metadata":{"name":"ns1"}})"), clock_);
  EXPECT_EQ(hub, J(R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ns1"},
      "spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}})"));
}

// --- ToObject / FromObject --------------------------------------------------------------------

json FullClaim() {
  return J(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
      "metadata":{"name":"rc1","generateName":"rc-","namespace":"default","uid":"u-1",
                  "resourceVersion":"42","labels":{"app":"demo"},"annotations":{"a":"b"},
                  "finalizers":["example.com/x","example.com/y"],
                  "ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"pu"}]},
      "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"c",
              "allocationMode":"ExactCount","count":1}}]}},
      "status":{"reservedFor":[{"resource":"pods","name":"p","uid":"pu"}]}})");
}

absl::StatusOr<model::Object> ClaimObject(const json& hub) {
  return ToObject(Type("ResourceClaim"), hub);
}

TEST_F(CodecTest, ToObjectTypesMetadata) {
  absl::StatusOr<model::Object> obj = ClaimObject(FullClaim());
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_EQ(obj->resource, "resourceclaims.resource.k8s.io");
  EXPECT_EQ(obj->meta.name, "rc1");
  EXPECT_EQ(obj->meta.generate_name, "rc-");
  EXPECT_EQ(obj->meta.namespace_, "default");
  EXPECT_EQ(obj->meta.uid, "u-1");
  EXPECT_EQ(obj->meta.resource_version, 42);
  EXPECT_EQ(obj->meta.labels, (std::map<std::string, std::string>{{"app", "demo"}}));
  EXPECT_EQ(obj->meta.annotations, (std::map<std::string, std::string>{{"a", "b"}}));
  EXPECT_EQ(obj->meta.finalizers, (std::vector<std::string>{"example.com/x", "example.com/y"}));
  EXPECT_EQ(json::parse(obj->meta.owner_references),
            J(R"([{"apiVersion":"v1","kind":"Pod","name":"p","uid":"pu"}])"));
  EXPECT_EQ(obj->Key(), (model::ResourceKey{"resourceclaims.resource.k8s.io", "default", "rc1"}));
}

TEST_F(CodecTest, ToObjectBodyHasNoMetadataApiVersionOrKind) {
  absl::StatusOr<model::Object> obj = ClaimObject(FullClaim());
  ASSERT_TRUE(obj.ok()) << obj.status();
  json body = json::parse(obj->body);
  EXPECT_EQ(body, J(R"({
      "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"c",
              "allocationMode":"ExactCount","count":1}}]}},
      "status":{"reservedFor":[{"resource":"pods","name":"p","uid":"pu"}]}})"));
}

TEST_F(CodecTest, ToObjectDropsDuplicateFinalizersAndEmptyOwnerReferences) {
  json hub = FullClaim();
  hub["metadata"]["finalizers"] = J(R"(["a","b","a"])");
  hub["metadata"]["ownerReferences"] = json::array();
  absl::StatusOr<model::Object> obj = ClaimObject(hub);
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_EQ(obj->meta.finalizers, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(obj->meta.owner_references, "");
}

TEST_F(CodecTest, SpecDigestChangesOnlyWithSpec) {
  json base = FullClaim();
  absl::StatusOr<model::Object> a = ClaimObject(base);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->spec_digest.empty());

  json meta_and_status = base;
  meta_and_status["metadata"]["labels"]["app"] = "other";
  meta_and_status["metadata"]["resourceVersion"] = "43";
  meta_and_status["status"] = J(R"({"allocation":{}})");
  absl::StatusOr<model::Object> b = ClaimObject(meta_and_status);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->spec_digest, b->spec_digest);

  json spec = base;
  spec["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2;
  absl::StatusOr<model::Object> c = ClaimObject(spec);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(a->spec_digest, c->spec_digest);

  json no_spec = base;
  no_spec.erase("spec");
  absl::StatusOr<model::Object> d = ClaimObject(no_spec);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->spec_digest, "");
}

// The body is written member by member so that the spec's text is hashed as it is written; the
// text and the digest must be exactly what dump() and SpecDigestOf (which the stored decoders
// use on the same body) give, or an update of a stored object would bump its generation.
TEST_F(CodecTest, BodyTextAndSpecDigestAreThoseOfTheWholeBody) {
  json hub = FullClaim();
  hub["spec"]["devices"]["requests"][0]["name"] = "gp\u00fc \"quoted\"\n";
  hub["a key\twith \"escapes\""] = {{"z", 1}, {"a", nullptr}};
  hub["zz"] = json::array({1.5, "x", false});
  absl::StatusOr<model::Object> obj = ClaimObject(hub);
  ASSERT_TRUE(obj.ok()) << obj.status();
  json body = hub;
  for (const char* k : {"apiVersion", "kind", "metadata"}) body.erase(k);
  EXPECT_EQ(obj->body, body.dump());
  EXPECT_EQ(obj->spec_digest, model::json::SpecDigestOf(body));
  EXPECT_EQ(obj->spec_digest, model::SpecDigest(body["spec"].dump()));

  body["spec"] = nullptr;
  hub["spec"] = nullptr;
  absl::StatusOr<model::Object> null_spec = ClaimObject(hub);
  ASSERT_TRUE(null_spec.ok()) << null_spec.status();
  EXPECT_EQ(null_spec->body, body.dump());
  EXPECT_EQ(null_spec->spec_digest, "");
}

// A claim's only selectable fields are metadata.name and metadata.namespace, which selectors
// read from the metadata: its fields hold nothing.
TEST_F(CodecTest, ClaimFieldsAreEmpty) {
  absl::StatusOr<model::Object> obj = ClaimObject(FullClaim());
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_THAT(obj->fields, ::testing::IsEmpty());
}

TEST_F(CodecTest, SliceFieldsIncludeNodeDriverAndPool) {
  json slice = J(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice",
      "metadata":{"name":"s1"},
      "spec":{"driver":"gpu.example.com","nodeName":"node-a","pool":{"name":"pool-1"}}})");
  absl::StatusOr<model::Object> obj = ToObject(Type("ResourceSlice"), slice);
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_EQ(obj->resource, "resourceslices.resource.k8s.io");
  EXPECT_THAT(obj->fields, UnorderedElementsAre(Pair("spec.nodeName", "node-a"),
                                                Pair("spec.driver", "gpu.example.com"),
                                                Pair("spec.pool.name", "pool-1")));
}

// The tree the body's text was written from goes with the object (Object::parsed), and it is
// that text parsed: without metadata, apiVersion or kind.
TEST_F(CodecTest, ToObjectKeepsTheTreeOfItsBody) {
  json slice = J(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice",
      "metadata":{"name":"s1","labels":{"a":"b"}},
      "spec":{"driver":"gpu.example.com","nodeName":"node-a","pool":{"name":"pool-1"}},
      "x-unknown":[1,2.5,"three"]})");
  absl::StatusOr<model::Object> obj = ToObject(Type("ResourceSlice"), slice);
  ASSERT_TRUE(obj.ok()) << obj.status();
  const model::json::SharedDocument* kept = model::json::ParsedBody(*obj);
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ((*kept)->value(), json::parse(obj->body));
  EXPECT_FALSE((*kept)->value().contains("metadata"));
  EXPECT_FALSE((*kept)->value().contains("kind"));
  EXPECT_EQ((*kept)->Dump(), obj->body);
}

TEST_F(CodecTest, SliceFieldsOmitAbsentFields) {
  json slice = J(R"({"metadata":{"name":"s1"},"spec":{"driver":"d","allNodes":true}})");
  EXPECT_THAT(SelectableFields(Type("ResourceSlice"), slice),
              UnorderedElementsAre(Pair("spec.driver", "d")));
}

TEST_F(CodecTest, NodeFieldRendersBooleanAsText) {
  json node = J(R"({"metadata":{"name":"n1"},"spec":{"unschedulable":true}})");
  EXPECT_THAT(SelectableFields(CoreType("Node"), node),
              UnorderedElementsAre(Pair("spec.unschedulable", "true")));
}

TEST_F(CodecTest, FromObjectRebuildsTheHubObject) {
  json hub = FullClaim();
  absl::StatusOr<model::Object> obj = ClaimObject(hub);
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_EQ(FromObject(Type("ResourceClaim"), *obj), hub);
}

TEST_F(CodecTest, FromObjectEncodesServerSetMetadata) {
  model::Object obj;
  obj.resource = "resourceclaims.resource.k8s.io";
  obj.meta.name = "rc1";
  obj.meta.namespace_ = "default";
  obj.meta.resource_version = 7;
  obj.meta.generation = 3;
  obj.meta.creation_timestamp =
      std::chrono::system_clock::time_point(std::chrono::seconds(kNowSeconds));
  obj.meta.deletion_timestamp = obj.meta.creation_timestamp + std::chrono::seconds(60);
  obj.body = R"({"spec":{}})";
  EXPECT_EQ(FromObject(Type("ResourceClaim"), obj), J(R"({
      "apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","spec":{},
      "metadata":{"name":"rc1","namespace":"default","resourceVersion":"7","generation":3,
                  "creationTimestamp":"2026-11-22T02:06:17Z",
                  "deletionTimestamp":"2026-11-22T02:07:17Z",
                  "deletionGracePeriodSeconds":0}})"));
}

TEST_F(CodecTest, ToObjectRejectsBadMetadataTypes) {
  struct Case {
    const char* metadata;
    const char* message;
  };
  const Case cases[] = {
      {R"("rc1")", "metadata must be an object"},
      {R"({"name":5})", "metadata.name must be a string"},
      {R"({"name":"a","namespace":["x"]})", "metadata.namespace must be a string"},
      {R"({"name":"a","labels":["x"]})", "metadata.labels must be an object of strings"},
      {R"({"name":"a","labels":{"app":1}})", "metadata.labels.app must be a string"},
      {R"({"name":"a","annotations":{"x":true}})", "metadata.annotations.x must be a string"},
      {R"({"name":"a","finalizers":"x"})", "metadata.finalizers must be a list of strings"},
      {R"({"name":"a","finalizers":[1]})", "metadata.finalizers must be a list of strings"},
      {R"({"name":"a","ownerReferences":{}})", "metadata.ownerReferences must be a list"},
      {R"({"name":"a","resourceVersion":42})", "metadata.resourceVersion must be a string"},
  };
  for (const Case& c : cases) {
    json hub = FullClaim();
    hub["metadata"] = J(c.metadata);
    absl::StatusOr<model::Object> obj = ClaimObject(hub);
    ASSERT_FALSE(obj.ok()) << c.metadata;
    EXPECT_EQ(obj.status().code(), absl::StatusCode::kInvalidArgument) << c.metadata;
    EXPECT_EQ(std::string(obj.status().message()), c.message) << c.metadata;
  }
}

TEST_F(CodecTest, ToObjectRejectsNonObject) {
  absl::StatusOr<model::Object> obj = ClaimObject(J("[1]"));
  ASSERT_FALSE(obj.ok());
  EXPECT_EQ(obj.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CodecTest, ToObjectAcceptsNullOrMissingOptionalMetadata) {
  json hub = J(R"({"metadata":{"name":"a","labels":null,"finalizers":null,
                               "resourceVersion":null},"spec":{}})");
  absl::StatusOr<model::Object> obj = ClaimObject(hub);
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_EQ(obj->meta.name, "a");
  EXPECT_TRUE(obj->meta.labels.empty());
  EXPECT_EQ(obj->meta.resource_version, 0);

  obj = ClaimObject(J(R"({"spec":{}})"));
  ASSERT_TRUE(obj.ok()) << obj.status();
  EXPECT_EQ(obj->meta.name, "");
}

TEST_F(CodecTest, ResourceVersionParsesPositiveIntegersOnly) {
  auto parse = [](const std::string& rv) {
    json hub = FullClaim();
    hub["metadata"]["resourceVersion"] = rv;
    return ClaimObject(hub);
  };
  ASSERT_TRUE(parse("1").ok());
  EXPECT_EQ(parse("1")->meta.resource_version, 1);
  EXPECT_EQ(parse("9007199254740993")->meta.resource_version, 9007199254740993LL);
  EXPECT_EQ(parse("")->meta.resource_version, 0);  // empty means unset
  for (const char* bad : {"0", "-3", "abc", "12x", "1.5"}) {
    absl::StatusOr<model::Object> obj = parse(bad);
    ASSERT_FALSE(obj.ok()) << bad;
    EXPECT_EQ(obj.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(std::string(obj.status().message()),
              std::string("metadata.resourceVersion: Invalid value: \"") + bad +
                  "\": must be a positive integer");
  }
}

TEST_F(CodecTest, PodIsDefaultedAsByTheApiserver) {
  json hub = ToHub(CoreType("Pod"), "v1", J(R"({"apiVersion":"v1","kind":"Pod",
      "metadata":{"name":"p","namespace":"default"},
      "spec":{"containers":[
        {"name":"a","image":"registry.example/app:v1",
         "resources":{"limits":{"nvidia.com/gpu":1,"cpu":"2"},"requests":{"cpu":"1"}}},
        {"name":"b","image":"busybox"}],
        "initContainers":[{"name":"i","image":"x@sha256:abc"}]}})"),
                   clock_);
  EXPECT_EQ(hub["status"], J(R"({"phase":"Pending"})"));
  const json& spec = hub["spec"];
  EXPECT_EQ(spec["restartPolicy"], "Always");
  EXPECT_EQ(spec["schedulerName"], "default-scheduler");
  EXPECT_EQ(spec["dnsPolicy"], "ClusterFirst");
  EXPECT_EQ(spec["terminationGracePeriodSeconds"], 30);
  EXPECT_EQ(spec["priority"], 0);
  EXPECT_EQ(spec["containers"][0]["imagePullPolicy"], "IfNotPresent");
  EXPECT_EQ(spec["containers"][1]["imagePullPolicy"], "Always");
  EXPECT_EQ(spec["initContainers"][0]["imagePullPolicy"], "IfNotPresent");
  EXPECT_EQ(spec["containers"][0]["terminationMessagePath"], "/dev/termination-log");
  // Limits without requests request the limit; a given request is kept.
  EXPECT_EQ(spec["containers"][0]["resources"]["requests"], J(R"({"cpu":"1","nvidia.com/gpu":1})"));
  EXPECT_FALSE(spec["containers"][1].contains("resources"));
}

// DefaultTolerationSeconds admission: not-ready and unreachable NoExecute, 300 s, for a pod that
// lists no tolerations; one that lists some is left as it is (the scheduler applies the default
// to it); applying the defaults again adds nothing.
TEST_F(CodecTest, PodGetsTheDefaultNodeLifecycleTolerations) {
  json hub = ToHub(CoreType("Pod"), "v1", J(R"({"apiVersion":"v1","kind":"Pod",
      "metadata":{"name":"p","namespace":"default"},
      "spec":{"containers":[{"name":"a","image":"busybox"}]}})"),
                   clock_);
  EXPECT_EQ(hub["spec"]["tolerations"], J(R"([
      {"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute",
       "tolerationSeconds":300},
      {"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute",
       "tolerationSeconds":300}])"));
  EXPECT_EQ(ToHub(CoreType("Pod"), "v1", hub, clock_)["spec"]["tolerations"],
            hub["spec"]["tolerations"]);
  json own = ToHub(CoreType("Pod"), "v1", J(R"({"apiVersion":"v1","kind":"Pod",
      "metadata":{"name":"p","namespace":"default"},
      "spec":{"containers":[{"name":"a","image":"busybox"}],
        "tolerations":[{"key":"nvidia.com/gpu","operator":"Exists"}]}})"),
                   clock_);
  EXPECT_EQ(own["spec"]["tolerations"], J(R"([{"key":"nvidia.com/gpu","operator":"Exists"}])"));
  SetDefaultTolerationSeconds(7);
  json seven = ToHub(CoreType("Pod"), "v1", J(R"({"apiVersion":"v1","kind":"Pod",
      "metadata":{"name":"p","namespace":"default"},
      "spec":{"containers":[{"name":"a","image":"busybox"}]}})"),
                     clock_);
  SetDefaultTolerationSeconds(300);
  EXPECT_EQ(seven["spec"]["tolerations"][1]["tolerationSeconds"], 7);
}

TEST_F(CodecTest, PodDefaultsKeepWhatTheClientSet) {
  json hub = ToHub(CoreType("Pod"), "v1", J(R"({"metadata":{"name":"p"},
      "spec":{"restartPolicy":"Never","schedulerName":"qm","priorityClassName":"high",
              "containers":[{"name":"a","image":"x:latest","imagePullPolicy":"Never"}]},
      "status":{"phase":"Running"}})"),
                   clock_);
  EXPECT_EQ(hub["spec"]["restartPolicy"], "Never");
  EXPECT_EQ(hub["spec"]["schedulerName"], "qm");
  EXPECT_FALSE(hub["spec"].contains("priority"));
  EXPECT_EQ(hub["spec"]["containers"][0]["imagePullPolicy"], "Never");
  EXPECT_EQ(hub["status"]["phase"], "Running");
  // A mistyped spec is left for validation to report.
  json bad = ToHub(CoreType("Pod"), "v1", J(R"({"metadata":{"name":"p"},"spec":"nope"})"), clock_);
  EXPECT_EQ(bad["spec"], "nope");
}

TEST_F(CodecTest, PodAndEventSelectableFields) {
  json pod = ToHub(CoreType("Pod"), "v1", J(R"({"metadata":{"name":"p","namespace":"ns"},
      "spec":{"nodeName":"gpu-node-a","containers":[{"name":"a","image":"x"}]}})"),
                   clock_);
  std::map<std::string, std::string> fields = SelectableFields(CoreType("Pod"), pod);
  EXPECT_EQ(fields["spec.nodeName"], "gpu-node-a");
  EXPECT_EQ(fields["status.phase"], "Pending");
  EXPECT_FALSE(fields.contains("metadata.namespace"));
  json ev = J(R"({"metadata":{"name":"e","namespace":"ns"},
      "involvedObject":{"kind":"Pod","name":"p","namespace":"ns","uid":"u1"},
      "reason":"Scheduled","type":"Normal","source":{"component":"qm-scheduler"}})");
  EXPECT_THAT(
      SelectableFields(CoreType("Event"), ev),
      ::testing::IsSupersetOf({Pair("involvedObject.kind", "Pod"), Pair("involvedObject.name", "p"),
                               Pair("involvedObject.namespace", "ns"),
                               Pair("involvedObject.uid", "u1"), Pair("reason", "Scheduled"),
                               Pair("type", "Normal"), Pair("source", "qm-scheduler")}));
}

// EncodeMetaText is the text of EncodeMeta's tree, for every member EncodeMeta writes.
TEST(EncodeMetaTextTest, IsTheTextOfEncodeMeta) {
  model::ObjectMeta bare;
  EXPECT_EQ(EncodeMetaText(bare), model::json::Write(EncodeMeta(bare)));
  EXPECT_EQ(EncodeMetaText(bare), R"({"name":""})");

  model::ObjectMeta full;
  full.name = "train-\"x\"";
  full.generate_name = "train-";
  full.namespace_ = "team-a";
  full.uid = "3f1c9a4e-8b7d-4c2e-9f10-2a6b5d8e7c41";
  full.resource_version = 1234567;
  full.generation = 3;
  full.creation_timestamp = std::chrono::system_clock::time_point(std::chrono::seconds(1764694800));
  full.deletion_timestamp = full.creation_timestamp + std::chrono::seconds(30);
  full.deletion_grace_period_seconds = 30;
  full.labels = {{"app", "train"}, {"tier", "gr\u00fcn\n"}};
  full.annotations = {{"quartermaster.io/note", "a\\b"}};
  full.finalizers = {"quartermaster.io/devices-prepared", "x"};
  full.owner_references =
      R"([{"apiVersion":"v1","kind":"Pod","name":"p","uid":"u","controller":true}])";
  EXPECT_EQ(EncodeMetaText(full), model::json::Write(EncodeMeta(full)));
  EXPECT_EQ(
      EncodeMetaText(full),
      R"({"annotations":{"quartermaster.io/note":"a\\b"},)"
      R"("creationTimestamp":"2025-12-02T17:00:00Z","deletionGracePeriodSeconds":30,)"
      R"("deletionTimestamp":"2025-12-02T17:00:30Z",)"
      R"("finalizers":["quartermaster.io/devices-prepared","x"],"generateName":"train-",)"
      R"("generation":3,"labels":{"app":"train","tier":"grün\n"},)"
      R"("name":"train-\"x\"","namespace":"team-a",)"
      R"("ownerReferences":[{"apiVersion":"v1","controller":true,"kind":"Pod","name":"p",)"
      R"("uid":"u"}],"resourceVersion":"1234567","uid":"3f1c9a4e-8b7d-4c2e-9f10-2a6b5d8e7c41"})");
  EXPECT_EQ(EncodeMeta(full)["generation"], 3);
  EXPECT_EQ(EncodeMeta(full)["ownerReferences"][0]["kind"], "Pod");

  // Deleting without a recorded grace period, and references kept in PostgreSQL's spacing.
  full.deletion_grace_period_seconds.reset();
  full.owner_references = R"([{"uid": "u", "kind": "Pod"}])";
  EXPECT_EQ(EncodeMetaText(full), model::json::Write(EncodeMeta(full)));
  EXPECT_THAT(EncodeMetaText(full), HasSubstr(R"("deletionGracePeriodSeconds":0,)"));

  // References that are not JSON (no request could have stored them) are left out, so that the
  // rest stays readable.
  full.owner_references = "[{";
  EXPECT_THAT(EncodeMetaText(full), Not(HasSubstr("ownerReferences")));
  EXPECT_FALSE(EncodeMeta(full).is_discarded());
  EXPECT_EQ(EncodeMeta(full)["name"], full.name);
}

}  // namespace
}  // namespace qm::api
