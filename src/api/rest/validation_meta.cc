#include "api/rest/validator.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "model/field_error.h"
#include "model/names.h"
#include "model/resource_types.h"

// Object metadata, the name formats of apimachinery and the structures of core and metav1 that
// several kinds embed (node selectors, conditions).
namespace qm::api::validation {
namespace {

using model::Quote;

constexpr size_t kTotalAnnotationSizeLimit = 256 * 1024;
constexpr size_t kConditionReasonMaxLength = 1024;
constexpr size_t kConditionMessageMaxLength = 32 * 1024;

// Generated names get a suffix appended, so a trailing dash is fine there.
std::string MaskTrailingDash(const std::string& name) {
  if (name.size() > 1 && name.back() == '-') return name.substr(0, name.size() - 2) + "a";
  return name;
}

bool IsConditionReason(const std::string& reason) {
  if (reason.empty() || !absl::ascii_isalpha(static_cast<unsigned char>(reason[0]))) return false;
  for (char c : reason) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ',' && c != ':') {
      return false;
    }
  }
  const char last = reason.back();
  return absl::ascii_isalnum(static_cast<unsigned char>(last)) || last == '_';
}

}  // namespace

std::vector<std::string> IsPathSegmentName(const std::string& name) {
  for (const char* illegal : {".", ".."}) {
    if (name == illegal) return {std::string("may not be '") + illegal + "'"};
  }
  std::vector<std::string> errors;
  for (const char* illegal : {"/", "%"}) {
    if (absl::StrContains(name, illegal)) {
      errors.push_back(std::string("may not contain '") + illegal + "'");
    }
  }
  return errors;
}

void Validator::ObjectMeta(const json& obj, const model::ResourceType& type, const json* old) {
  const Path p("metadata");
  const json& meta = Object(Get(obj, "metadata"), p);
  auto name_check = [&](const std::string& name) {
    if (type.group == model::kRbacGroup) return IsPathSegmentName(name);
    return type.kind == "Namespace" ? model::IsDns1123Label(name) : model::IsDns1123Subdomain(name);
  };
  const std::string generate_name = String(meta, "generateName", p.Child("generateName"));
  const std::string name = String(meta, "name", p.Child("name"));
  if (!generate_name.empty()) {
    for (const auto& msg : name_check(MaskTrailingDash(generate_name))) {
      Add(model::Invalid(p.Child("generateName").str(), Quote(generate_name), msg));
    }
  }
  if (name.empty()) {
    if (generate_name.empty()) {
      Add(model::Required(p.Child("name").str(), "name or generateName is required"));
    }
  } else {
    for (const auto& msg : name_check(name)) {
      Add(model::Invalid(p.Child("name").str(), Quote(name), msg));
    }
  }
  // Cluster-scoped objects have their namespace cleared before validation, as in Kubernetes.
  if (type.namespaced) {
    const std::string ns = String(meta, "namespace", p.Child("namespace"));
    if (ns.empty()) {
      Add(model::Required(p.Child("namespace").str()));
    } else {
      for (const auto& msg : model::IsDns1123Label(ns)) {
        Add(model::Invalid(p.Child("namespace").str(), Quote(ns), msg));
      }
    }
  }
  if (auto generation = OptInt(meta, "generation", p.Child("generation"));
      generation.has_value() && *generation < 0) {
    Add(model::Invalid(p.Child("generation").str(), std::to_string(*generation),
                       "must be greater than or equal to 0"));
  }
  Labels(meta, p.Child("labels"));
  Annotations(meta, p.Child("annotations"));
  if (const json* finalizers = OptArray(meta, "finalizers", p.Child("finalizers"))) {
    for (size_t i = 0; i < finalizers->size(); ++i) {
      auto finalizer = ItemString((*finalizers)[i], p.Child("finalizers").Index(i));
      if (!finalizer.has_value()) continue;
      for (const auto& msg : model::IsQualifiedName(*finalizer)) {
        Add(model::Invalid(p.Child("finalizers").str(), Quote(*finalizer), msg));
      }
    }
  }
  if (old != nullptr) ObjectMetaUpdate(meta, *old);
}

void Validator::ObjectMetaUpdate(const json& meta, const json& old) {
  const json* old_meta = Get(old, "metadata");
  if (old_meta == nullptr) return;
  for (const char* key : {"name", "namespace"}) {
    if (!SameValue(Get(meta, key), Get(*old_meta, key))) {
      Add(model::Immutable(Path("metadata").Child(key).str()));
    }
  }
}

void Validator::Labels(const json& meta, const Path& p) {
  const json* labels = OptObject(meta, "labels", p);
  if (labels == nullptr) return;
  for (const auto& [key, value] : labels->items()) {
    for (const auto& msg : model::IsQualifiedName(key)) {
      Add(model::Invalid(p.str(), Quote(key), msg));
    }
    if (!value.is_string()) {
      TypeError(value, p.Key(key), "string");
      continue;
    }
    for (const auto& msg : model::IsLabelValue(value.get<std::string>())) {
      Add(model::Invalid(p.str(), Quote(value.get<std::string>()), msg));
    }
  }
}

void Validator::Annotations(const json& meta, const Path& p) {
  const json* annotations = OptObject(meta, "annotations", p);
  if (annotations == nullptr) return;
  size_t total = 0;
  for (const auto& [key, value] : annotations->items()) {
    // Annotation keys are qualified names except that case does not matter.
    for (const auto& msg : model::IsQualifiedName(absl::AsciiStrToLower(key))) {
      Add(model::Invalid(p.str(), Quote(key), msg));
    }
    total += key.size();
    if (value.is_string()) {
      total += value.get<std::string>().size();
    } else {
      TypeError(value, p.Key(key), "string");
    }
  }
  if (total > kTotalAnnotationSizeLimit) Add(model::TooLong(p.str(), kTotalAnnotationSizeLimit));
}

void Validator::TemplateObjectMeta(const json& meta, const Path& p) {
  Annotations(meta, p.Child("annotations"));
  Labels(meta, p.Child("labels"));
  // In ObjectMeta field order; Kubernetes names the field by its lower-cased Go name.
  static constexpr std::pair<const char*, const char*> kForbidden[] = {
      {"name", "name"},
      {"generateName", "generateName"},
      {"namespace", "namespace"},
      {"selfLink", "selfLink"},
      {"uid", "uID"},
      {"resourceVersion", "resourceVersion"},
      {"generation", "generation"},
      {"creationTimestamp", "creationTimestamp"},
      {"deletionTimestamp", "deletionTimestamp"},
      {"deletionGracePeriodSeconds", "deletionGracePeriodSeconds"},
      {"ownerReferences", "ownerReferences"},
      {"finalizers", "finalizers"},
      {"managedFields", "managedFields"},
  };
  for (const auto& [key, go_name] : kForbidden) {
    const json* v = Get(meta, key);
    if (v == nullptr) continue;
    const bool zero = (v->is_string() && v->get<std::string>().empty()) ||
                      (v->is_number() && *v == 0) ||
                      ((v->is_array() || v->is_object()) && v->empty());
    if (!zero) Add(model::Forbidden(p.Child(go_name).str(), "cannot be set"));
  }
}

void Validator::DnsLabel(const std::string& value, const Path& p) {
  for (const auto& msg : model::IsDns1123Label(value)) {
    Add(model::Invalid(p.str(), Quote(value), msg));
  }
}

void Validator::DnsSubdomain(const std::string& value, const Path& p) {
  for (const auto& msg : model::IsDns1123Subdomain(value)) {
    Add(model::Invalid(p.str(), Quote(value), msg));
  }
}

void Validator::LabelName(const std::string& value, const Path& p) {
  for (const auto& msg : model::IsQualifiedName(value)) {
    Add(model::Invalid(p.str(), Quote(value), msg));
  }
}

void Validator::LabelValue(const std::string& value, const Path& p) {
  for (const auto& msg : model::IsLabelValue(value)) {
    Add(model::Invalid(p.str(), Quote(value), msg));
  }
}

void Validator::NodeName(const std::string& name, const Path& p) { DnsSubdomain(name, p); }

void Validator::NodeSelector(const json& selector, const Path& p) {
  const Path terms_path = p.Child("nodeSelectorTerms");
  const json* terms = OptArray(selector, "nodeSelectorTerms", terms_path);
  if (terms == nullptr || terms->empty()) {
    Add(model::Required(terms_path.str(), "must have at least one node selector term"));
    return;
  }
  for (size_t i = 0; i < terms->size(); ++i) {
    const Path tp = terms_path.Index(i);
    const json& term = Object(&(*terms)[i], tp);
    if (const json* exprs = OptArray(term, "matchExpressions", tp.Child("matchExpressions"))) {
      for (size_t j = 0; j < exprs->size(); ++j) {
        const Path rp = tp.Child("matchExpressions").Index(j);
        NodeSelectorRequirement(Object(&(*exprs)[j], rp), rp);
      }
    }
    if (const json* fields = OptArray(term, "matchFields", tp.Child("matchFields"))) {
      for (size_t j = 0; j < fields->size(); ++j) {
        const Path rp = tp.Child("matchFields").Index(j);
        NodeFieldSelectorRequirement(Object(&(*fields)[j], rp), rp);
      }
    }
  }
}

void Validator::NodeSelectorRequirement(const json& req, const Path& p) {
  const std::string op = String(req, "operator", p.Child("operator"));
  std::vector<std::string> values = StringList(req, "values", p.Child("values"));
  if (op == "In" || op == "NotIn") {
    if (values.empty()) {
      Add(model::Required(p.Child("values").str(),
                          "must be specified when `operator` is 'In' or 'NotIn'"));
    }
  } else if (op == "Exists" || op == "DoesNotExist") {
    if (!values.empty()) {
      Add(model::Forbidden(p.Child("values").str(),
                           "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"));
    }
  } else if (op == "Gt" || op == "Lt") {
    if (values.size() != 1) {
      Add(model::Required(p.Child("values").str(),
                          "must be specified single value when `operator` is 'Lt' or 'Gt'"));
    }
  } else {
    Add(model::Invalid(p.Child("operator").str(), Quote(op), "not a valid selector operator"));
  }
  LabelName(String(req, "key", p.Child("key")), p.Child("key"));
  for (size_t i = 0; i < values.size(); ++i) {
    LabelValue(values[i], p.Child("values").Index(i));
  }
}

void Validator::NodeFieldSelectorRequirement(const json& req, const Path& p) {
  const std::string op = String(req, "operator", p.Child("operator"));
  std::vector<std::string> values = StringList(req, "values", p.Child("values"));
  if (op == "In" || op == "NotIn") {
    if (values.size() != 1) {
      Add(model::Required(
          p.Child("values").str(),
          "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"));
    }
  } else {
    Add(model::Invalid(p.Child("operator").str(), Quote(op), "not a valid selector operator"));
  }
  const std::string key = String(req, "key", p.Child("key"));
  if (key != "metadata.name") {
    Add(model::Invalid(p.Child("key").str(), Quote(key), "not a valid field selector key"));
    return;
  }
  for (size_t i = 0; i < values.size(); ++i) NodeName(values[i], p.Child("values").Index(i));
}

void Validator::Conditions(const json* conditions, const Path& p) {
  if (conditions == nullptr) return;
  std::set<std::string> types;
  for (size_t i = 0; i < conditions->size(); ++i) {
    const Path cp = p.Index(i);
    const json& c = Object(&(*conditions)[i], cp);
    const std::string type = String(c, "type", cp.Child("type"));
    if (!types.insert(type).second) Add(model::Duplicate(cp.Child("type").str(), Quote(type)));
    LabelName(type, cp.Child("type"));
    const std::string status = String(c, "status", cp.Child("status"));
    if (status != "True" && status != "False" && status != "Unknown") {
      Add(model::NotSupported(cp.Child("status").str(), Quote(status),
                              {"False", "True", "Unknown"}));
    }
    if (auto gen = OptInt(c, "observedGeneration", cp.Child("observedGeneration"));
        gen.has_value() && *gen < 0) {
      Add(model::Invalid(cp.Child("observedGeneration").str(), std::to_string(*gen),
                         "must be greater than or equal to zero"));
    }
    if (String(c, "lastTransitionTime", cp.Child("lastTransitionTime")).empty()) {
      Add(model::Required(cp.Child("lastTransitionTime").str(), "must be set"));
    }
    const std::string reason = String(c, "reason", cp.Child("reason"));
    if (reason.empty()) {
      Add(model::Required(cp.Child("reason").str(), "must be set"));
    } else {
      if (!IsConditionReason(reason)) {
        Add(model::Invalid(
            cp.Child("reason").str(), Quote(reason),
            "a condition reason must start with alphabetic character, optionally followed by a "
            "string of alphanumeric characters or '_,:', and must end with an alphanumeric "
            "character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or "
            "'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is "
            "'[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')"));
      }
      if (reason.size() > kConditionReasonMaxLength) {
        Add(model::TooLong(cp.Child("reason").str(), kConditionReasonMaxLength));
      }
    }
    if (String(c, "message", cp.Child("message")).size() > kConditionMessageMaxLength) {
      Add(model::TooLong(cp.Child("message").str(), kConditionMessageMaxLength));
    }
  }
}

}  // namespace qm::api::validation
