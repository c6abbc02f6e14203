#include "model/json/edits.h"

#include "model/json/access.h"
#include "model/json/dra_json.h"
#include "model/json/fields.h"
#include "model/json/read.h"
#include "model/json/stored.h"
#include "model/json/write.h"
#include "model/resource_types.h"

namespace qm::model::json {
namespace {

using nlohmann::json;

// Member `key` of `j` as an object, made one when it is anything else.
json& ObjectAt(json& j, const char* key) {
  json& member = j[key];
  if (!member.is_object()) member = json::object();
  return member;
}

json EncodeConsumer(const ResourceClaimConsumerReference& consumer) {
  json out = json::object();
  if (!consumer.api_group.empty()) out["apiGroup"] = consumer.api_group;
  out["resource"] = consumer.resource;
  out["name"] = consumer.name;
  out["uid"] = consumer.uid;
  return out;
}

std::map<std::string, std::string> StringMap(const json& j) {
  std::map<std::string, std::string> out;
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

}  // namespace

Document::Document(nlohmann::json value) : value_(std::move(value)) {
  if (!value_.is_object()) value_ = json::object();
}

Document Document::Parse(std::string_view text) { return Document(Read(text)); }

namespace {

size_t TextHash(const std::string& text) { return std::hash<std::string>{}(text); }

}  // namespace

void KeepParsed(Object& obj, SharedDocument doc) {
  obj.parsed_hash = TextHash(obj.body);
  obj.parsed = std::move(doc);
}

const SharedDocument* ParsedBody(const Object& obj) {
  if (obj.parsed == nullptr || obj.parsed_hash != TextHash(obj.body)) return nullptr;
  return &obj.parsed;
}

SharedDocument BodyOf(const Object& obj) {
  if (const SharedDocument* kept = ParsedBody(obj)) return *kept;
  return std::make_shared<const Document>(Document::Parse(obj.body));
}

Object WithBody(const Object& obj, const Document& body) {
  Object out = WithStatus(obj, body);
  out.spec_digest = SpecDigestOf(body.value());
  return out;
}

Object WithStatus(const Object& obj, const Document& body) {
  Object out = obj;
  out.body = body.Dump();
  out.parsed.reset();
  static const ResourceType kUnknown;
  const ResourceType* type = FindResourceTypeByKey(out.resource);
  out.fields = SelectableFields(type != nullptr ? *type : kUnknown, body.value());
  return out;
}

Object WithBody(const Object& obj, SharedDocument body) {
  Object out = WithBody(obj, *body);
  KeepParsed(out, std::move(body));
  return out;
}

Object WithStatus(const Object& obj, SharedDocument body) {
  Object out = WithStatus(obj, *body);
  KeepParsed(out, std::move(body));
  return out;
}

std::vector<std::string> OwnerUids(const Object& obj) {
  std::vector<std::string> out;
  if (obj.meta.owner_references.empty()) return out;
  const json refs = Read(obj.meta.owner_references);
  if (!refs.is_array()) return out;
  for (const auto& r : refs) {
    if (const std::string uid = Str(r, "uid"); !uid.empty()) out.push_back(uid);
  }
  return out;
}

std::string PodControllerReference(const Object& owner) {
  return Write(json::array({{{"apiVersion", "v1"},
                             {"kind", "Pod"},
                             {"name", owner.meta.name},
                             {"uid", owner.meta.uid},
                             {"controller", true},
                             {"blockOwnerDeletion", true}}}));
}

Pod DecodePod(const Document& body) { return DecodePod(body.value()); }

void DecodePodStatus(const Document& body, Pod& pod) { DecodePodStatus(body.value(), pod); }

ResourceClaimStatus DecodeResourceClaimStatus(const Document& body) {
  return DecodeResourceClaimStatus(body.value());
}

StoredAllocation StoredAllocationOf(const Document& body) {
  return StoredAllocationOf(body.value());
}

NodeRelations NodeRelationsOf(const Document& body) { return NodeRelationsOf(body.value()); }

absl::StatusOr<ResourceClaim> DecodeResourceClaim(const Object& obj, const Document& body) {
  json whole = body.value();
  whole["metadata"] = {
      {"name", obj.meta.name}, {"namespace", obj.meta.namespace_}, {"uid", obj.meta.uid}};
  return DecodeResourceClaim(whole);
}

std::string AllocationText(const Document& claim) {
  const json& allocation = At(At(claim.value(), "status"), "allocation");
  return allocation.is_null() ? std::string() : Write(allocation);
}

bool SetCondition(Document& body, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message, const std::string& now) {
  json& conditions = ObjectAt(body.value(), "status")["conditions"];
  if (!conditions.is_array()) conditions = json::array();
  for (auto& c : conditions) {
    if (Str(c, "type") != type) continue;
    if (Str(c, "status") == status && Str(c, "reason") == reason && Str(c, "message") == message) {
      return false;
    }
    if (Str(c, "status") != status) c["lastTransitionTime"] = now;
    c["status"] = status;
    c["reason"] = reason;
    c["message"] = message;
    c["lastProbeTime"] = nullptr;
    return true;
  }
  json c = {
      {"type", type}, {"status", status}, {"lastProbeTime", nullptr}, {"lastTransitionTime", now}};
  if (!reason.empty()) c["reason"] = reason;
  if (!message.empty()) c["message"] = message;
  conditions.push_back(std::move(c));
  return true;
}

void SetNodeName(Document& pod, const std::string& node) {
  ObjectAt(pod.value(), "spec")["nodeName"] = node;
}

std::optional<Document> WithPodClaimStatuses(
    const Document& pod, const std::optional<std::vector<PodResourceClaimStatus>>& statuses,
    const std::optional<ExtendedResourceClaimStatus>& extended) {
  const json& status = At(pod.value(), "status");
  std::optional<json> claims;
  if (statuses.has_value()) {
    json list = json::array();
    for (const auto& s : *statuses) {
      list.push_back({{"name", s.name}, {"resourceClaimName", s.resource_claim_name}});
    }
    if (At(status, "resourceClaimStatuses") != list) claims = std::move(list);
  }
  std::optional<json> ext;
  if (extended.has_value()) {
    json mappings = json::array();
    for (const auto& m : extended->request_mappings) {
      mappings.push_back({{"containerName", m.container_name},
                          {"resourceName", m.resource_name},
                          {"requestName", m.request_name}});
    }
    json e = {{"resourceClaimName", extended->resource_claim_name},
              {"requestMappings", std::move(mappings)}};
    if (At(status, "extendedResourceClaimStatus") != e) ext = std::move(e);
  }
  if (!claims.has_value() && !ext.has_value()) return std::nullopt;
  Document out = pod;
  json& s = ObjectAt(out.value(), "status");
  if (claims.has_value()) s["resourceClaimStatuses"] = *std::move(claims);
  if (ext.has_value()) s["extendedResourceClaimStatus"] = *std::move(ext);
  return out;
}

void SetAllocation(Document& claim, const AllocationResult& allocation,
                   const ResourceClaimConsumerReference& consumer) {
  json& status = ObjectAt(claim.value(), "status");
  status["allocation"] = EncodeAllocationResult(allocation);
  status["reservedFor"] = json::array({EncodeConsumer(consumer)});
}

void ReserveFor(Document& claim, const ResourceClaimConsumerReference& consumer) {
  json& reserved = ObjectAt(claim.value(), "status")["reservedFor"];
  if (!reserved.is_array()) reserved = json::array();
  for (const auto& r : reserved) {
    if (r.is_object() && Str(r, "uid") == consumer.uid) return;
  }
  reserved.push_back(EncodeConsumer(consumer));
}

void KeepConsumers(Document& claim, const std::vector<size_t>& keep) {
  json& status = ObjectAt(claim.value(), "status");
  if (keep.empty()) {
    status.erase("reservedFor");
    return;
  }
  const json& reserved = At(status, "reservedFor");
  json kept = json::array();
  for (size_t i : keep) {
    if (reserved.is_array() && i < reserved.size()) kept.push_back(reserved[i]);
  }
  status["reservedFor"] = std::move(kept);
}

void Deallocate(Document& claim) {
  json& status = ObjectAt(claim.value(), "status");
  status.erase("allocation");
  status.erase("devices");
}

ClaimFromTemplate ClaimBodyFromTemplate(const Document& template_body) {
  const json& spec = At(template_body.value(), "spec");
  const json& meta = At(spec, "metadata");
  const json& claim_spec = At(spec, "spec");
  ClaimFromTemplate out;
  out.body = Document(json{{"spec", claim_spec.is_object() ? claim_spec : json::object()}});
  out.labels = StringMap(At(meta, "labels"));
  out.annotations = StringMap(At(meta, "annotations"));
  return out;
}

Document ClaimBodyWithRequests(const std::vector<ExactCountRequest>& requests) {
  json list = json::array();
  for (const auto& r : requests) {
    list.push_back({{"name", r.name},
                    {"exactly",
                     {{"deviceClassName", r.device_class_name},
                      {"allocationMode", "ExactCount"},
                      {"count", r.count}}}});
  }
  return Document(json{{"spec", {{"devices", {{"requests", std::move(list)}}}}}});
}

}  // namespace qm::model::json
