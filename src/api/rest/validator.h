#pragma once

// Internal to api/rest's validation (validation.h is the public API). The Validator core every
// kind's rules build on, and the per-kind rules that validation.cc dispatches to:
//
//   validator.cc              the error list, typed access to JSON fields, shared helpers
//   validation_meta.cc        object metadata, labels, annotations, names, node selectors,
//                             conditions
//   validation_dra.cc         DRA names and structures several kinds share (validation_dra.h),
//                             DeviceClass, DeviceTaintRule
//   validation_dra_slice.cc   ResourceSlice: devices, attributes, capacity, counters
//   validation_dra_claim.cc   ResourceClaim (spec, status, allocation), ResourceClaimTemplate
//   validation_core.cc        Node, Pod, Event, ResourceQuota
//   validation_rbac.cc        Role, ClusterRole (rules, aggregation), bindings and subjects
//
// Checks mirror Kubernetes' validation code, including the order in which errors are reported
// and their wording; each function names the Kubernetes function it follows where it helps.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/quantity.h"
#include "model/field_error.h"
#include "model/resource_types.h"

namespace qm::api::validation {

using json = nlohmann::json;

// A field path as Kubernetes prints it: "spec.devices[0].attributes[example.com/model]".
//
// Validation makes a path for every field it visits and prints one only for an error, so a path
// is built in a buffer of its own (no allocation up to kInline characters; a longer one, rare,
// goes to the heap) and becomes a string only when str() is asked for.
class Path {
 public:
  Path() = default;
  explicit Path(std::string_view s) { Set("", s, "", ""); }
  Path(const Path& other) { Set(other.view(), "", "", ""); }
  Path& operator=(const Path& other) {
    if (this != &other) Set(other.view(), "", "", "");
    return *this;
  }

  Path Child(std::string_view name) const {
    return size_ == 0 ? Path(name) : Joined(".", name, "");
  }
  Path Index(size_t i) const {
    char digits[24];
    const int n = std::snprintf(digits, sizeof(digits), "%zu", i);
    return Joined("[", std::string_view(digits, static_cast<size_t>(n)), "]");
  }
  Path Key(std::string_view key) const { return Joined("[", key, "]"); }
  std::string str() const { return std::string(view()); }
  std::string_view view() const {
    return long_.empty() ? std::string_view(inline_, size_) : std::string_view(long_);
  }

 private:
  static constexpr size_t kInline = 120;

  Path Joined(std::string_view open, std::string_view part, std::string_view close) const {
    Path out;
    out.Set(view(), open, part, close);
    return out;
  }
  // This path becomes a + b + c + d.
  void Set(std::string_view a, std::string_view b, std::string_view c, std::string_view d) {
    const size_t n = a.size() + b.size() + c.size() + d.size();
    if (n <= kInline) {
      char* out = inline_;
      for (std::string_view part : {a, b, c, d}) {
        if (!part.empty()) std::memcpy(out, part.data(), part.size());
        out += part.size();
      }
      size_ = n;
      long_.clear();
      return;
    }
    std::string s;
    s.reserve(n);
    s.append(a).append(b).append(c).append(d);
    long_ = std::move(s);
    size_ = n;
  }

  char inline_[kInline];
  size_t size_ = 0;
  std::string long_;  // the path when longer than kInline
};

// ---- helpers that read JSON without reporting anything -------------------------------------

// An empty JSON object, standing in for a missing or mistyped one.
const json& EmptyObject();

// obj[key] when obj is an object holding a non-null value there (a Go pointer that is set).
const json* Get(const json& obj, std::string_view key);

// Stored values were validated when written: read them without reporting anything.
const json& ObjectOrEmpty(const json* value);

// Whether `v` is an integer that fits in int64 (what a Go int64 field takes).
bool IsInt64(const json& v);

// A string used as a list key; mistyped values are reported where the item is validated.
std::string KeyString(const json& obj, std::string_view key);

// Compares two optional sub-objects treating "absent" and "null" alike, as Go compares a nil
// pointer or an empty struct.
bool SameValue(const json* a, const json* b);

// The way Kubernetes prints a bad value: strings quoted, numbers and booleans bare, nil as
// "null", anything else in JSON form.
std::string Render(const json& v);

// `s` split at every `sep` ("a//b" gives "a", "", "b").
std::vector<std::string> Split(const std::string& s, char sep);

// Map keys in paths are shortened in the middle beyond maxLen, as Kubernetes does.
std::string TruncateKey(const std::string& key, size_t max_len);

bool IsOneOf(const std::string& v, const std::vector<std::string>& allowed);

// ValidateRBACName: roles and bindings may be named anything that fits in one URL path segment
// ("system:node" included), as apimachinery's IsValidPathSegmentName says. Returns the problems.
std::vector<std::string> IsPathSegmentName(const std::string& name);

// ---- the core ------------------------------------------------------------------------------

// Collects the errors of one validation into a list owned by the caller, and offers what every
// kind's rules need: typed access to fields (a mistyped value is reported and read as absent or
// empty), the object metadata, name formats and the structures several kinds share. The rules
// of a kind live in a class derived from it in that kind's file, over the same error list, so
// errors are reported in the order the checks run.
class Validator {
 public:
  // `errs` must outlive the Validator.
  explicit Validator(model::FieldErrors& errs) : errs_(errs) {}

  void Add(model::FieldError e) { errs_.push_back(std::move(e)); }
  // How many errors have been reported so far.
  size_t ErrorCount() const { return errs_.size(); }

  // ---- typed access (validator.cc) ---------------------------------------------------------

  void TypeError(const json& value, const Path& p, const char* type);
  // `value` as an object; anything else is reported and read as an empty object.
  const json& Object(const json* value, const Path& p);
  std::optional<std::string> OptString(const json& obj, std::string_view key, const Path& p);
  std::string String(const json& obj, std::string_view key, const Path& p);
  std::optional<std::string> ItemString(const json& v, const Path& p);
  std::vector<std::string> StringItems(const json* list, const Path& p);
  std::vector<std::string> StringList(const json& obj, std::string_view key, const Path& p);
  std::optional<int64_t> OptInt(const json& obj, std::string_view key, const Path& p);
  std::optional<bool> OptBool(const json& obj, std::string_view key, const Path& p);
  const json* OptArray(const json& obj, std::string_view key, const Path& p);
  const json* OptObject(const json& obj, std::string_view key, const Path& p);
  // The array at obj[key]. Over `max` items it records one TooMany and returns nullptr: like
  // Kubernetes, the items of an oversized list are not looked at (DoS protection).
  const json* List(const json& obj, std::string_view key, const Path& p, size_t max);
  // Reports every repeated key (nullopt keys are skipped) as Kubernetes' validateSet does.
  void Unique(const std::vector<std::optional<std::string>>& keys, const Path& p,
              bool quote = true);
  // A quantity given as a JSON string or number; parse errors are reported at `p`.
  std::optional<Quantity> QuantityAt(const json* value, const Path& p);

  // ---- metadata (validation_meta.cc) -------------------------------------------------------

  // The name format for the kind, label and annotation syntax, finalizers; on update (`old`
  // set) the immutable name and namespace.
  void ObjectMeta(const json& obj, const model::ResourceType& type, const json* old);
  // Name and namespace of an object never change.
  void ObjectMetaUpdate(const json& meta, const json& old);
  // The embedded metadata of a template may only carry labels and annotations.
  void TemplateObjectMeta(const json& meta, const Path& p);

  // ---- name formats and shared structures (validation_meta.cc) -----------------------------

  void DnsLabel(const std::string& value, const Path& p);
  void DnsSubdomain(const std::string& value, const Path& p);
  void LabelName(const std::string& value, const Path& p);
  void LabelValue(const std::string& value, const Path& p);
  void NodeName(const std::string& name, const Path& p);
  // core's NodeSelector: at least one term, each requirement well formed.
  void NodeSelector(const json& selector, const Path& p);
  // metav1.Condition lists (apimachinery's ValidateConditions).
  void Conditions(const json* conditions, const Path& p);

 private:
  void Labels(const json& meta, const Path& p);
  void Annotations(const json& meta, const Path& p);
  void NodeSelectorRequirement(const json& req, const Path& p);
  void NodeFieldSelectorRequirement(const json& req, const Path& p);

  model::FieldErrors& errs_;
};

// ---- the rules of each kind ----------------------------------------------------------------

// An object being created or updated, after its metadata was checked.
struct ObjectInput {
  const model::ResourceType& type;
  const json& obj;
  const json* old;       // the stored object on update, nullptr on create
  const json& spec;      // obj.spec, or an empty object (a mistyped spec was reported)
  const json* old_spec;  // the stored spec on update, nullptr on create
};

// A write through the /status subresource, after the metadata was checked.
struct StatusInput {
  const json& obj;
  const json& old;     // the stored object
  const json& status;  // obj.status, or an empty object (a mistyped status was reported)
};

// Each reports the problems of the kind's own fields (beyond the metadata) into `errs`.
using ObjectRules = void (*)(const ObjectInput& in, model::FieldErrors& errs);
using StatusRules = void (*)(const StatusInput& in, model::FieldErrors& errs);

// validation_dra.cc
void DeviceClassRules(const ObjectInput& in, model::FieldErrors& errs);
void DeviceTaintRuleRules(const ObjectInput& in, model::FieldErrors& errs);
void DeviceTaintRuleStatusRules(const StatusInput& in, model::FieldErrors& errs);
// validation_dra_slice.cc
void ResourceSliceRules(const ObjectInput& in, model::FieldErrors& errs);
// validation_dra_claim.cc
void ResourceClaimRules(const ObjectInput& in, model::FieldErrors& errs);
void ResourceClaimStatusRules(const StatusInput& in, model::FieldErrors& errs);
void ResourceClaimTemplateRules(const ObjectInput& in, model::FieldErrors& errs);
// validation_core.cc
void NodeRules(const ObjectInput& in, model::FieldErrors& errs);
void PodRules(const ObjectInput& in, model::FieldErrors& errs);
void PodStatusRules(const StatusInput& in, model::FieldErrors& errs);
void EventRules(const ObjectInput& in, model::FieldErrors& errs);
void ResourceQuotaRules(const ObjectInput& in, model::FieldErrors& errs);
void ResourceQuotaStatusRules(const StatusInput& in, model::FieldErrors& errs);
// validation_rbac.cc
void RoleRules(const ObjectInput& in, model::FieldErrors& errs);
void ClusterRoleRules(const ObjectInput& in, model::FieldErrors& errs);
void BindingRules(const ObjectInput& in, model::FieldErrors& errs);

}  // namespace qm::api::validation
