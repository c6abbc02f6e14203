#include "api/rest/protobuf.h"

#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "common/utf8.h"

namespace qm::api {
namespace {

using nlohmann::json;

// How one field of a message maps to JSON.
enum class Type { kString, kInt64, kBool, kMessage, kStringMap, kRepeatedString, kRepeatedMessage };

struct Schema;
struct Field {
  const char* name;
  Type type;
  const Schema* message = nullptr;  // kMessage / kRepeatedMessage
};
struct Schema {
  std::map<int, Field> fields;
};

// The generated.proto field numbers of the messages decoded here.
const Schema kObjectMeta{{{1, {"name", Type::kString}},
                          {2, {"generateName", Type::kString}},
                          {3, {"namespace", Type::kString}},
                          {5, {"uid", Type::kString}},
                          {6, {"resourceVersion", Type::kString}},
                          {7, {"generation", Type::kInt64}},
                          {11, {"labels", Type::kStringMap}},
                          {12, {"annotations", Type::kStringMap}},
                          {14, {"finalizers", Type::kRepeatedString}}}};
const Schema kNamespaceSpec{{{1, {"finalizers", Type::kRepeatedString}}}};
const Schema kNamespace{{{1, {"metadata", Type::kMessage, &kObjectMeta}},
                         {2, {"spec", Type::kMessage, &kNamespaceSpec}}}};
const Schema kObjectReference{{{1, {"kind", Type::kString}},
                               {2, {"namespace", Type::kString}},
                               {3, {"name", Type::kString}},
                               {4, {"uid", Type::kString}},
                               {5, {"apiVersion", Type::kString}}}};
const Schema kLocalObjectReference{{{1, {"name", Type::kString}}}};
const Schema kServiceAccount{
    {{1, {"metadata", Type::kMessage, &kObjectMeta}},
     {2, {"secrets", Type::kRepeatedMessage, &kObjectReference}},
     {3, {"imagePullSecrets", Type::kRepeatedMessage, &kLocalObjectReference}},
     {4, {"automountServiceAccountToken", Type::kBool}}}};
const Schema kBoundObjectReference{{{1, {"kind", Type::kString}},
                                    {2, {"apiVersion", Type::kString}},
                                    {3, {"name", Type::kString}},
                                    {4, {"uid", Type::kString}}}};
const Schema kTokenRequestSpec{{{1, {"audiences", Type::kRepeatedString}},
                                {3, {"boundObjectRef", Type::kMessage, &kBoundObjectReference}},
                                {4, {"expirationSeconds", Type::kInt64}}}};
const Schema kTokenRequest{{{1, {"metadata", Type::kMessage, &kObjectMeta}},
                            {2, {"spec", Type::kMessage, &kTokenRequestSpec}}}};
const Schema kResourceAttributes{{{1, {"namespace", Type::kString}},
                                  {2, {"verb", Type::kString}},
                                  {3, {"group", Type::kString}},
                                  {4, {"version", Type::kString}},
                                  {5, {"resource", Type::kString}},
                                  {6, {"subresource", Type::kString}},
                                  {7, {"name", Type::kString}}}};
const Schema kNonResourceAttributes{{{1, {"path", Type::kString}}, {2, {"verb", Type::kString}}}};
const Schema kSelfSubjectAccessReviewSpec{
    {{1, {"resourceAttributes", Type::kMessage, &kResourceAttributes}},
     {2, {"nonResourceAttributes", Type::kMessage, &kNonResourceAttributes}}}};
const Schema kSubjectAccessReviewSpec{
    {{1, {"resourceAttributes", Type::kMessage, &kResourceAttributes}},
     {2, {"nonResourceAttributes", Type::kMessage, &kNonResourceAttributes}},
     {3, {"user", Type::kString}},
     {4, {"groups", Type::kRepeatedString}},
     {6, {"uid", Type::kString}}}};
const Schema kSelfSubjectAccessReview{
    {{1, {"metadata", Type::kMessage, &kObjectMeta}},
     {2, {"spec", Type::kMessage, &kSelfSubjectAccessReviewSpec}}}};
const Schema kSubjectAccessReview{{{1, {"metadata", Type::kMessage, &kObjectMeta}},
                                   {2, {"spec", Type::kMessage, &kSubjectAccessReviewSpec}}}};
const Schema kSelfSubjectRulesReviewSpec{{{1, {"namespace", Type::kString}}}};
const Schema kSelfSubjectRulesReview{{{1, {"metadata", Type::kMessage, &kObjectMeta}},
                                      {2, {"spec", Type::kMessage, &kSelfSubjectRulesReviewSpec}}}};
const Schema kSelfSubjectReview{{{1, {"metadata", Type::kMessage, &kObjectMeta}}}};

const Schema kPolicyRule{{{1, {"verbs", Type::kRepeatedString}},
                          {2, {"apiGroups", Type::kRepeatedString}},
                          {3, {"resources", Type::kRepeatedString}},
                          {4, {"resourceNames", Type::kRepeatedString}},
                          {5, {"nonResourceURLs", Type::kRepeatedString}}}};
const Schema kRole{{{1, {"metadata", Type::kMessage, &kObjectMeta}},
                    {2, {"rules", Type::kRepeatedMessage, &kPolicyRule}}}};
const Schema kRbacSubject{{{1, {"kind", Type::kString}},
                           {2, {"apiGroup", Type::kString}},
                           {3, {"name", Type::kString}},
                           {4, {"namespace", Type::kString}}}};
const Schema kRoleRef{
    {{1, {"apiGroup", Type::kString}}, {2, {"kind", Type::kString}}, {3, {"name", Type::kString}}}};
const Schema kRoleBinding{{{1, {"metadata", Type::kMessage, &kObjectMeta}},
                           {2, {"subjects", Type::kRepeatedMessage, &kRbacSubject}},
                           {3, {"roleRef", Type::kMessage, &kRoleRef}}}};

const Schema* SchemaFor(const std::string& api_version, const std::string& kind) {
  static const auto* kinds = new std::map<std::pair<std::string, std::string>, const Schema*>{
      {{"v1", "Namespace"}, &kNamespace},
      {{"v1", "ServiceAccount"}, &kServiceAccount},
      {{"rbac.authorization.k8s.io/v1", "Role"}, &kRole},
      {{"rbac.authorization.k8s.io/v1", "ClusterRole"}, &kRole},
      {{"rbac.authorization.k8s.io/v1", "RoleBinding"}, &kRoleBinding},
      {{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding"}, &kRoleBinding},
      {{"authentication.k8s.io/v1", "TokenRequest"}, &kTokenRequest},
      {{"authentication.k8s.io/v1", "SelfSubjectReview"}, &kSelfSubjectReview},
      {{"authorization.k8s.io/v1", "SelfSubjectAccessReview"}, &kSelfSubjectAccessReview},
      {{"authorization.k8s.io/v1", "SubjectAccessReview"}, &kSubjectAccessReview},
      {{"authorization.k8s.io/v1", "LocalSubjectAccessReview"}, &kSubjectAccessReview},
      {{"authorization.k8s.io/v1", "SelfSubjectRulesReview"}, &kSelfSubjectRulesReview},
  };
  auto it = kinds->find({api_version, kind});
  return it == kinds->end() ? nullptr : it->second;
}

constexpr int kMaxDepth = 16;

// A reader over protobuf wire format; every read is bounds-checked.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }

  bool Varint(uint64_t* out) {
    *out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      *out |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }

  bool Bytes(std::string_view* out) {
    uint64_t len;
    if (!Varint(&len) || len > data_.size() - pos_) return false;
    *out = data_.substr(pos_, len);
    pos_ += len;
    return true;
  }

  // Skips a field of `wire_type` this decoder does not map.
  bool Skip(int wire_type) {
    uint64_t v;
    std::string_view s;
    switch (wire_type) {
      case 0:
        return Varint(&v);
      case 1:
        return Advance(8);
      case 2:
        return Bytes(&s);
      case 5:
        return Advance(4);
      default:
        return false;
    }
  }

 private:
  bool Advance(size_t n) {
    if (n > data_.size() - pos_) return false;
    pos_ += n;
    return true;
  }
  std::string_view data_;
  size_t pos_ = 0;
};

absl::Status Malformed() {
  return absl::InvalidArgumentError("the request body is not a valid protobuf message");
}

// Protobuf strings are UTF-8 (Go's decoder checks it too); the JSON form could not hold others.
absl::Status NotUtf8(const Field& f) {
  return absl::InvalidArgumentError("the request body is not a valid protobuf message: field " +
                                    std::string(f.name) + " is not valid UTF-8");
}

absl::Status DecodeMessage(std::string_view data, const Schema& schema, int depth, json* out);

absl::Status DecodeField(Reader& r, int wire_type, const Field& f, int depth, json* out) {
  uint64_t v;
  std::string_view s;
  switch (f.type) {
    case Type::kString:
      if (wire_type != 2 || !r.Bytes(&s)) return Malformed();
      if (!IsValidUtf8(s)) return NotUtf8(f);
      if (!s.empty()) (*out)[f.name] = std::string(s);
      return absl::OkStatus();
    case Type::kInt64:
      if (wire_type != 0 || !r.Varint(&v)) return Malformed();
      if (v != 0) (*out)[f.name] = static_cast<int64_t>(v);
      return absl::OkStatus();
    case Type::kBool:
      if (wire_type != 0 || !r.Varint(&v)) return Malformed();
      (*out)[f.name] = v != 0;
      return absl::OkStatus();
    case Type::kRepeatedString:
      if (wire_type != 2 || !r.Bytes(&s)) return Malformed();
      if (!IsValidUtf8(s)) return NotUtf8(f);
      (*out)[f.name].push_back(std::string(s));
      return absl::OkStatus();
    case Type::kStringMap: {
      if (wire_type != 2 || !r.Bytes(&s)) return Malformed();
      Reader entry(s);
      std::string key, value;
      while (!entry.done()) {
        uint64_t tag;
        std::string_view part;
        if (!entry.Varint(&tag) || (tag & 7) != 2 || !entry.Bytes(&part)) return Malformed();
        if (!IsValidUtf8(part)) return NotUtf8(f);
        ((tag >> 3) == 1 ? key : value) = std::string(part);
      }
      (*out)[f.name][key] = value;
      return absl::OkStatus();
    }
    case Type::kMessage:
    case Type::kRepeatedMessage: {
      if (wire_type != 2 || !r.Bytes(&s)) return Malformed();
      json sub = json::object();
      if (auto st = DecodeMessage(s, *f.message, depth + 1, &sub); !st.ok()) return st;
      if (f.type == Type::kMessage) {
        if (!sub.empty()) (*out)[f.name] = std::move(sub);
      } else {
        (*out)[f.name].push_back(std::move(sub));
      }
      return absl::OkStatus();
    }
  }
  return Malformed();
}

absl::Status DecodeMessage(std::string_view data, const Schema& schema, int depth, json* out) {
  if (depth > kMaxDepth) return Malformed();
  Reader r(data);
  while (!r.done()) {
    uint64_t tag;
    if (!r.Varint(&tag) || (tag >> 3) == 0) return Malformed();
    int number = static_cast<int>(tag >> 3), wire_type = static_cast<int>(tag & 7);
    auto it = schema.fields.find(number);
    if (it == schema.fields.end()) {
      if (!r.Skip(wire_type)) return Malformed();
      continue;
    }
    if (auto st = DecodeField(r, wire_type, it->second, depth, out); !st.ok()) return st;
  }
  return absl::OkStatus();
}

const Schema kTypeMeta{{{1, {"apiVersion", Type::kString}}, {2, {"kind", Type::kString}}}};

}  // namespace

absl::StatusOr<json> DecodeKubernetesProtobuf(const std::string& body) {
  static constexpr std::string_view kMagic("k8s\0", 4);
  if (body.size() < kMagic.size() || std::string_view(body).substr(0, 4) != kMagic) {
    return Malformed();
  }
  Reader envelope(std::string_view(body).substr(4));
  json type_meta = json::object();
  std::string_view raw;
  bool has_raw = false;
  while (!envelope.done()) {
    uint64_t tag;
    std::string_view s;
    if (!envelope.Varint(&tag)) return Malformed();
    int number = static_cast<int>(tag >> 3), wire_type = static_cast<int>(tag & 7);
    if (number == 1 && wire_type == 2) {
      if (!envelope.Bytes(&s)) return Malformed();
      if (auto st = DecodeMessage(s, kTypeMeta, 0, &type_meta); !st.ok()) return st;
    } else if (number == 2 && wire_type == 2) {
      if (!envelope.Bytes(&raw)) return Malformed();
      has_raw = true;
    } else if (!envelope.Skip(wire_type)) {
      return Malformed();
    }
  }
  const std::string api_version = type_meta.value("apiVersion", "");
  const std::string kind = type_meta.value("kind", "");
  const Schema* schema = SchemaFor(api_version, kind);
  if (schema == nullptr || !has_raw) {
    return absl::UnimplementedError(
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml");
  }
  json out = {{"apiVersion", api_version}, {"kind", kind}};
  if (auto st = DecodeMessage(raw, *schema, 0, &out); !st.ok()) return st;
  return out;
}

}  // namespace qm::api
