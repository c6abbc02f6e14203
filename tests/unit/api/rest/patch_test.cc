#include "api/rest/patch.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"

namespace qm::api {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json J(const char* text) { return json::parse(text); }

json MustSmp(const json& target, const json& patch) {
  absl::StatusOr<json> out = ApplyStrategicMergePatch(target, patch);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : json();
}

json MustJsonPatch(const json& target, const json& patch) {
  absl::StatusOr<json> out = ApplyJsonPatch(target, patch);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : json();
}

// --- Content types ----------------------------------------------------------------------------

TEST(PatchTypeTest, MapsTheFourPatchContentTypes) {
  EXPECT_EQ(*PatchTypeFromContentType("application/json-patch+json"), PatchType::kJsonPatch);
  EXPECT_EQ(*PatchTypeFromContentType("application/merge-patch+json"), PatchType::kMergePatch);
  EXPECT_EQ(*PatchTypeFromContentType("application/strategic-merge-patch+json"),
            PatchType::kStrategicMergePatch);
  EXPECT_EQ(*PatchTypeFromContentType("application/apply-patch+yaml"), PatchType::kApply);
}

TEST(PatchTypeTest, IgnoresMediaTypeParameters) {
  EXPECT_EQ(*PatchTypeFromContentType("application/json-patch+json; charset=utf-8"),
            PatchType::kJsonPatch);
  EXPECT_EQ(*PatchTypeFromContentType("application/merge-patch+json;charset=UTF-8"),
            PatchType::kMergePatch);
  EXPECT_EQ(*PatchTypeFromContentType("application/strategic-merge-patch+json; charset=utf-8"),
            PatchType::kStrategicMergePatch);
  EXPECT_EQ(*PatchTypeFromContentType("application/apply-patch+yaml; charset=utf-8"),
            PatchType::kApply);
}

TEST(PatchTypeTest, UnknownTypeIs415ListingAcceptedTypes) {
  for (const char* ct : {"application/json", "text/plain", "", "application/yaml"}) {
    absl::StatusOr<PatchType> t = PatchTypeFromContentType(ct);
    ASSERT_FALSE(t.ok()) << ct;
    // kUnimplemented is the one status code the REST layer maps to 415 UnsupportedMediaType.
    EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented) << ct;
    EXPECT_EQ(std::string(t.status().message()),
              "the body of the request was in an unknown format - accepted media types include: "
              "application/json-patch+json, application/merge-patch+json, "
              "application/strategic-merge-patch+json, application/apply-patch+yaml")
        << ct;
  }
}

// --- JSON merge patch (RFC 7386) --------------------------------------------------------------

TEST(MergePatchTest, NullDeletesKeys) {
  json out = ApplyMergePatch(J(R"({"metadata":{"labels":{"app":"demo","tier":"x"}}})"),
                             J(R"({"metadata":{"labels":{"app":null}}})"));
  EXPECT_EQ(out, J(R"({"metadata":{"labels":{"tier":"x"}}})"));
}

TEST(MergePatchTest, MergesNestedObjects) {
  json out =
      ApplyMergePatch(J(R"({"metadata":{"name":"rc1","annotations":{"a":"1"}},"spec":{"x":1}})"),
                      J(R"({"metadata":{"annotations":{"b":"2"},"labels":{"l":"v"}}})"));
  EXPECT_EQ(out, J(R"({"metadata":{"name":"rc1","annotations":{"a":"1","b":"2"},
                       "labels":{"l":"v"}},"spec":{"x":1}})"));
}

TEST(MergePatchTest, ArraysAndScalarsReplace) {
  json out =
      ApplyMergePatch(J(R"({"metadata":{"finalizers":["a","b"]},"spec":{"devices":{"requests":[
             {"name":"gpu","exactly":{"deviceClassName":"c","count":1}},{"name":"nic"}]}}})"),
                      J(R"({"metadata":{"finalizers":["c"]},"spec":{"devices":{"requests":[
             {"name":"gpu","exactly":{"count":2}}]}}})"));
  EXPECT_EQ(out, J(R"({"metadata":{"finalizers":["c"]},"spec":{"devices":{"requests":[
                       {"name":"gpu","exactly":{"count":2}}]}}})"));
}

TEST(MergePatchTest, KubectlApplyBodyUpdatesAnnotationLabelsAndSpec) {
  json target = J(R"({"metadata":{"name":"rc1","labels":{"app":"demo"},
      "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"old"}},
      "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"count":1,
      "deviceClassName":"gpu.example.com"}}]}}})");
  json patch = J(R"({"metadata":{"annotations":{
      "kubectl.kubernetes.io/last-applied-configuration":"new"},"labels":{"app":null,"tier":"x"}},
      "spec":{"devices":{"requests":[{"exactly":{"count":2,"deviceClassName":"gpu.example.com"},
      "name":"gpu"}]}}})");
  EXPECT_EQ(ApplyMergePatch(target, patch), J(R"({"metadata":{"name":"rc1","labels":{"tier":"x"},
      "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"new"}},
      "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"count":2,
      "deviceClassName":"gpu.example.com"}}]}}})"));
}

TEST(MergePatchTest, NonObjectPatchReplacesTarget) {
  EXPECT_EQ(ApplyMergePatch(J(R"({"a":1})"), J("[1,2]")), J("[1,2]"));
}

// --- JSON patch (RFC 6902) --------------------------------------------------------------------

TEST(JsonPatchTest, AppliesAddRemoveReplace) {
  json out = MustJsonPatch(J(R"({"metadata":{"labels":{"a":"1","b":"2"},"finalizers":["x"]}})"),
                           J(R"([{"op":"add","path":"/metadata/labels/c","value":"3"},
            {"op":"remove","path":"/metadata/labels/a"},
            {"op":"replace","path":"/metadata/labels/b","value":"20"},
            {"op":"add","path":"/metadata/finalizers/-","value":"y"}])"));
  EXPECT_EQ(out, J(R"({"metadata":{"labels":{"b":"20","c":"3"},"finalizers":["x","y"]}})"));
}

TEST(JsonPatchTest, SucceedingTestAppliesFollowingOperations) {
  json out =
      MustJsonPatch(J(R"({"metadata":{"resourceVersion":"5","managedFields":[{"manager":"m"}]}})"),
                    J(R"([{"op":"test","path":"/metadata/resourceVersion","value":"5"},
            {"op":"replace","path":"/metadata/managedFields","value":[]}])"));
  EXPECT_EQ(out, J(R"({"metadata":{"resourceVersion":"5","managedFields":[]}})"));
}

TEST(JsonPatchTest, FailingTestIsInvalidArgument) {
  absl::StatusOr<json> out =
      ApplyJsonPatch(J(R"({"metadata":{"resourceVersion":"6"}})"),
                     J(R"([{"op":"test","path":"/metadata/resourceVersion","value":"5"},
                           {"op":"remove","path":"/metadata"}])"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("the json patch could not be applied"));
}

TEST(JsonPatchTest, MissingPathIsInvalidArgument) {
  absl::StatusOr<json> out = ApplyJsonPatch(J(R"({"a":1})"), J(R"([{"op":"remove","path":"/b"}])"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(JsonPatchTest, MalformedOperationIsInvalidArgument) {
  absl::StatusOr<json> out = ApplyJsonPatch(J(R"({"a":1})"), J(R"([{"op":"frobnicate"}])"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(JsonPatchTest, NonArrayPatchIsInvalidArgument) {
  absl::StatusOr<json> out = ApplyJsonPatch(J(R"({"a":1})"), J(R"({"op":"remove","path":"/a"})"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(out.status().message()), "json patch must be an array of operations");
}

TEST(JsonPatchTest, AddUnderAScalarOrAMissingParentIsInvalidArgument) {
  // RFC 6902 §4.1: the parent must exist and be a container (the fuzzer found that nlohmann
  // asserts on a scalar parent).
  for (const char* path : {"/metadata/name/x", "/metadata/labels/x/y", "/spec/0/x"}) {
    absl::StatusOr<json> out =
        ApplyJsonPatch(J(R"({"metadata":{"name":"a"},"spec":[1]})"),
                       json::array({{{"op", "add"}, {"path", path}, {"value", "v"}}}));
    ASSERT_FALSE(out.ok()) << path;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << path;
  }
  absl::StatusOr<json> copy =
      ApplyJsonPatch(J(R"({"a":"s","b":1})"), J(R"([{"op":"copy","from":"/b","path":"/a/x"}])"));
  ASSERT_FALSE(copy.ok());
  EXPECT_THAT(std::string(copy.status().message()), HasSubstr("is not an object or an array"));
  absl::StatusOr<json> missing = ApplyJsonPatch(
      J(R"({"metadata":{}})"), J(R"([{"op":"add","path":"/metadata/labels/x","value":"1"}])"));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr(R"(doc is missing path: "/metadata/labels/x")"));
}

TEST(JsonPatchTest, MalformedPointerIsInvalidArgument) {
  absl::StatusOr<json> out =
      ApplyJsonPatch(J(R"({"a":1})"), J(R"([{"op":"add","path":"a~2","value":1}])"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

// --- Strategic merge patch --------------------------------------------------------------------

TEST(StrategicMergePatchTest, KubectlFinalizerChangeReplacesAOnlyWithB) {
  // kubectl-compat.md §4.4: finalizers changed from [a] to [b] by `kubectl apply`.
  json target = J(R"({"metadata":{"name":"rc1","finalizers":["example.com/a"],
      "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"old"}},
      "spec":{"devices":{"requests":[]}}})");
  json patch = J(R"({"metadata":{"$deleteFromPrimitiveList/finalizers":["example.com/a"],
      "$setElementOrder/finalizers":["example.com/b"],"finalizers":["example.com/b"],
      "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"new"}}})");
  EXPECT_EQ(MustSmp(target, patch), J(R"({"metadata":{"name":"rc1",
      "finalizers":["example.com/b"],
      "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"new"}},
      "spec":{"devices":{"requests":[]}}})"));
}

TEST(StrategicMergePatchTest, FinalizersAreUnionedWithExistingOnes) {
  json out = MustSmp(J(R"({"metadata":{"finalizers":["a","c"]}})"),
                     J(R"({"metadata":{"finalizers":["b","a"]}})"));
  EXPECT_EQ(out, J(R"({"metadata":{"finalizers":["a","c","b"]}})"));
}

TEST(StrategicMergePatchTest, DeleteFromPrimitiveListAloneRemovesValues) {
  json out = MustSmp(J(R"({"metadata":{"finalizers":["a","b","c"]}})"),
                     J(R"({"metadata":{"$deleteFromPrimitiveList/finalizers":["a","c","zz"]}})"));
  EXPECT_EQ(out, J(R"({"metadata":{"finalizers":["b"]}})"));
}

TEST(StrategicMergePatchTest, OwnerReferencesMergeByUid) {
  json out = MustSmp(J(R"({"metadata":{"ownerReferences":[
          {"uid":"u1","kind":"Pod","name":"a"},{"uid":"u2","kind":"Pod","name":"b"}]}})"),
                     J(R"({"metadata":{"ownerReferences":[
          {"uid":"u2","name":"b2"},{"uid":"u3","kind":"Pod","name":"c"}]}})"));
  EXPECT_EQ(out, J(R"({"metadata":{"ownerReferences":[
      {"uid":"u1","kind":"Pod","name":"a"},{"uid":"u2","kind":"Pod","name":"b2"},
      {"uid":"u3","kind":"Pod","name":"c"}]}})"));
}

TEST(StrategicMergePatchTest, PatchDeleteElementRemovesItByMergeKey) {
  json out = MustSmp(
      J(R"({"metadata":{"ownerReferences":[{"uid":"u1","name":"a"},{"uid":"u2","name":"b"}]}})"),
      J(R"({"metadata":{"ownerReferences":[{"uid":"u1","$patch":"delete"},
                                           {"uid":"u9","$patch":"delete"}]}})"));
  EXPECT_EQ(out, J(R"({"metadata":{"ownerReferences":[{"uid":"u2","name":"b"}]}})"));
}

TEST(StrategicMergePatchTest, ReservedForMergesByUid) {
  json out =
      MustSmp(J(R"({"status":{"reservedFor":[{"resource":"pods","name":"p1","uid":"u1"}]}})"),
              J(R"({"status":{"reservedFor":[{"resource":"pods","name":"p2","uid":"u2"}]}})"));
  EXPECT_EQ(out, J(R"({"status":{"reservedFor":[{"resource":"pods","name":"p1","uid":"u1"},
                                                {"resource":"pods","name":"p2","uid":"u2"}]}})"));
}

TEST(StrategicMergePatchTest, ContainersMergeByNameRecursively) {
  json out = MustSmp(J(R"({"spec":{"containers":[
          {"name":"app","image":"app:v1","env":[{"name":"A","value":"1"}]},
          {"name":"side","image":"side:v1"}]}})"),
                     J(R"({"spec":{"containers":[
          {"name":"app","image":"app:v2","env":[{"name":"B","value":"2"}]}]}})"));
  EXPECT_EQ(out, J(R"({"spec":{"containers":[
      {"name":"app","image":"app:v2","env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]},
      {"name":"side","image":"side:v1"}]}})"));
}

TEST(StrategicMergePatchTest, MergeKeyedElementWithoutKeyIsInvalidArgument) {
  absl::StatusOr<json> out =
      ApplyStrategicMergePatch(J(R"({"spec":{"containers":[{"name":"app"}]}})"),
                               J(R"({"spec":{"containers":[{"image":"x"}]}})"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("does not contain declared merge key: name"));
}

TEST(StrategicMergePatchTest, PatchReplaceElementReplacesWholeList) {
  json out = MustSmp(
      J(R"({"spec":{"containers":[{"name":"app","image":"a"},{"name":"side","image":"s"}]}})"),
      J(R"({"spec":{"containers":[{"$patch":"replace"},{"name":"only","image":"o"}]}})"));
  EXPECT_EQ(out, J(R"({"spec":{"containers":[{"name":"only","image":"o"}]}})"));
}

TEST(StrategicMergePatchTest, PatchReplaceInMapReplacesWholeMap) {
  json out = MustSmp(J(R"({"metadata":{"name":"x","labels":{"a":"1","b":"2"}}})"),
                     J(R"({"metadata":{"labels":{"$patch":"replace","c":"3"}}})"));
  EXPECT_EQ(out, J(R"({"metadata":{"name":"x","labels":{"c":"3"}}})"));
}

TEST(StrategicMergePatchTest, PatchDeleteInMapRemovesTheMap) {
  json out = MustSmp(J(R"({"metadata":{"name":"x","annotations":{"a":"1"}}})"),
                     J(R"({"metadata":{"annotations":{"$patch":"delete"}}})"));
  EXPECT_EQ(out, J(R"({"metadata":{"name":"x"}})"));
}

TEST(StrategicMergePatchTest, PatchDeleteOnWholeObjectIsInvalidArgument) {
  absl::StatusOr<json> out = ApplyStrategicMergePatch(J(R"({"a":1})"), J(R"({"$patch":"delete"})"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StrategicMergePatchTest, AtomicDraListsAreReplaced) {
  json target = J(R"({"spec":{"devices":{
      "requests":[{"name":"gpu","exactly":{"deviceClassName":"c","count":1}},{"name":"nic",
                   "exactly":{"deviceClassName":"n"}}],
      "constraints":[{"requests":["gpu","nic"],"matchAttribute":"example.com/numa"}]}}})");
  json patch = J(R"({"spec":{"devices":{
      "requests":[{"name":"gpu","exactly":{"count":2}}],
      "constraints":[{"requests":["gpu"]}]}}})");
  EXPECT_EQ(MustSmp(target, patch), J(R"({"spec":{"devices":{
      "requests":[{"name":"gpu","exactly":{"count":2}}],
      "constraints":[{"requests":["gpu"]}]}}})"));
}

TEST(StrategicMergePatchTest, NullDeletesAndObjectsMerge) {
  json out = MustSmp(J(R"({"metadata":{"labels":{"app":"demo","tier":"x"},"name":"n"},
                           "spec":{"a":1,"b":{"c":2}}})"),
                     J(R"({"metadata":{"labels":{"app":null}},"spec":{"a":null,"b":{"d":3}}})"));
  EXPECT_EQ(out,
            J(R"({"metadata":{"labels":{"tier":"x"},"name":"n"},"spec":{"b":{"c":2,"d":3}}})"));
}

TEST(StrategicMergePatchTest, DirectivesNeverReachTheResult) {
  json out = MustSmp(J(R"({"metadata":{"labels":{"a":"1"}}})"),
                     J(R"({"$retainKeys":["metadata"],"metadata":{"$patch":"merge",
                           "$setElementOrder/finalizers":["x"],"labels":{"b":"2"}}})"));
  EXPECT_EQ(out, J(R"({"metadata":{"labels":{"a":"1","b":"2"}}})"));
}

TEST(StrategicMergePatchTest, NonObjectPatchIsInvalidArgument) {
  absl::StatusOr<json> out = ApplyStrategicMergePatch(J(R"({"a":1})"), J("[1]"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StrategicMergePatchTest, NonStringPatchDirectiveIsInvalidArgumentNotException) {
  absl::StatusOr<json> out = ApplyStrategicMergePatch(J(R"({"metadata":{"labels":{}}})"),
                                                      J(R"({"metadata":{"$patch":5}})"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);

  out =
      ApplyStrategicMergePatch(J(R"({"metadata":{"ownerReferences":[{"uid":"u1"}]}})"),
                               J(R"({"metadata":{"ownerReferences":[{"uid":"u1","$patch":1}]}})"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

// The patches kubectl's client-side apply sends for a pod (core v1 is compiled into kubectl, so
// they are always strategic).
TEST(StrategicMergePatchTest, PodListsMergeByTheirKeys) {
  json pod = J(R"({"spec":{
      "containers":[{"name":"ctr0","image":"a:1","resources":{"claims":[{"name":"gpu"}]}},
                    {"name":"ctr1","image":"b:1"}],
      "initContainers":[{"name":"init","image":"i:1"}],
      "resourceClaims":[{"name":"gpu","resourceClaimName":"c"},{"name":"nic","resourceClaimName":"n"}],
      "tolerations":[{"key":"a","operator":"Exists"}]},
    "status":{"conditions":[{"type":"PodScheduled","status":"False"},{"type":"Ready","status":"False"}],
      "resourceClaimStatuses":[{"name":"gpu","resourceClaimName":"p-gpu"}]}})");
  json out = MustSmp(pod, J(R"({"spec":{
      "$setElementOrder/containers":[{"name":"ctr0"},{"name":"ctr1"}],
      "containers":[{"name":"ctr1","image":"b:2"}],
      "initContainers":[{"name":"init","image":"i:2"}],
      "resourceClaims":[{"name":"nic","$patch":"delete"}],
      "tolerations":[{"key":"b","operator":"Exists"}]},
    "status":{"conditions":[{"type":"PodScheduled","status":"True"}],
      "resourceClaimStatuses":[{"name":"gpu","resourceClaimName":"p-gpu-2"}]}})"));
  EXPECT_EQ(out["spec"]["containers"],
            J(R"([{"name":"ctr0","image":"a:1","resources":{"claims":[{"name":"gpu"}]}},
                  {"name":"ctr1","image":"b:2"}])"));
  EXPECT_EQ(out["spec"]["initContainers"], J(R"([{"name":"init","image":"i:2"}])"));
  EXPECT_EQ(out["spec"]["resourceClaims"], J(R"([{"name":"gpu","resourceClaimName":"c"}])"));
  // Tolerations have no merge key: the list is replaced.
  EXPECT_EQ(out["spec"]["tolerations"], J(R"([{"key":"b","operator":"Exists"}])"));
  EXPECT_EQ(out["status"]["conditions"],
            J(R"([{"type":"PodScheduled","status":"True"},{"type":"Ready","status":"False"}])"));
  EXPECT_EQ(out["status"]["resourceClaimStatuses"],
            J(R"([{"name":"gpu","resourceClaimName":"p-gpu-2"}])"));
}

TEST(StrategicMergePatchTest, RetainKeysClearsFieldsNotListed) {
  json pod = J(R"({"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"c"}]}})");
  json out = MustSmp(pod, J(R"({"spec":{"resourceClaims":[
      {"$retainKeys":["name","resourceClaimTemplateName"],"name":"gpu",
       "resourceClaimName":null,"resourceClaimTemplateName":"t"}]}})"));
  EXPECT_EQ(out["spec"]["resourceClaims"],
            J(R"([{"name":"gpu","resourceClaimTemplateName":"t"}])"));
  out = MustSmp(pod, J(R"({"spec":{"resourceClaims":[
      {"$retainKeys":["name","resourceClaimTemplateName"],"name":"gpu",
       "resourceClaimTemplateName":"t"}]}})"));
  EXPECT_EQ(out["spec"]["resourceClaims"],
            J(R"([{"name":"gpu","resourceClaimTemplateName":"t"}])"));
}

}  // namespace
}  // namespace qm::api
