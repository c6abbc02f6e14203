#include <cstddef>
#include <string>
#include <vector>

#include "api/rest/validator.h"
#include "model/field_error.h"
#include "model/resource_types.h"

// rbac.authorization.k8s.io (pkg/apis/rbac/validation): the checks and their order. A
// ServiceAccount has nothing beyond its metadata to check (ValidateServiceAccount); its secret
// references are not resolved.
namespace qm::api::validation {
namespace {

using model::FieldErrors;
using model::Quote;

// A []string as Go's %#v prints it in an Invalid value: []string{"/a", "/b"}.
std::string GoStringSlice(const std::vector<std::string>& values) {
  std::string out = "[]string{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ", ";
    out += Quote(values[i]);
  }
  return out + "}";
}

class RbacValidator : public Validator {
 public:
  using Validator::Validator;

  // ValidateRole and ValidateClusterRole (without aggregationRule).
  void PolicyRules(const json& role, bool namespaced) {
    const Path p("rules");
    const json* rules = OptArray(role, "rules", p);
    if (rules == nullptr) return;
    for (size_t i = 0; i < rules->size(); ++i) {
      const Path rp = p.Index(i);
      PolicyRule(Object(&(*rules)[i], rp), namespaced, rp);
    }
  }

  void PolicyRule(const json& rule, bool namespaced, const Path& p) {
    const std::vector<std::string> verbs = StringList(rule, "verbs", p.Child("verbs"));
    const std::vector<std::string> urls =
        StringList(rule, "nonResourceURLs", p.Child("nonResourceURLs"));
    const std::vector<std::string> groups = StringList(rule, "apiGroups", p.Child("apiGroups"));
    const std::vector<std::string> resources = StringList(rule, "resources", p.Child("resources"));
    const std::vector<std::string> names =
        StringList(rule, "resourceNames", p.Child("resourceNames"));
    if (verbs.empty()) {
      Add(model::Required(p.Child("verbs").str(), "verbs must contain at least one value"));
    }
    if (!urls.empty()) {
      const Path up = p.Child("nonResourceURLs");
      if (namespaced) {
        Add(model::Invalid(up.str(), GoStringSlice(urls),
                           "namespaced rules cannot apply to non-resource URLs"));
      }
      if (!groups.empty() || !resources.empty() || !names.empty()) {
        Add(model::Invalid(up.str(), GoStringSlice(urls),
                           "rules cannot apply to both regular resources and non-resource URLs"));
      }
      return;
    }
    if (groups.empty()) {
      Add(model::Required(p.Child("apiGroups").str(),
                          "resource rules must supply at least one api group"));
    }
    if (resources.empty()) {
      Add(model::Required(p.Child("resources").str(),
                          "resource rules must supply at least one resource"));
    }
  }

  // ClusterRole.aggregationRule: stored as sent once its selectors are valid.
  void AggregationRule(const json& role) {
    const Path p("aggregationRule");
    const json* rule = Get(role, "aggregationRule");
    if (rule == nullptr) return;
    const Path sp = p.Child("clusterRoleSelectors");
    const json* selectors = OptArray(Object(rule, p), "clusterRoleSelectors", sp);
    if (selectors == nullptr || selectors->empty()) {
      Add(model::Required(sp.str(),
                          "at least one clusterRoleSelector required if aggregationRule is "
                          "non-nil"));
      return;
    }
    for (size_t i = 0; i < selectors->size(); ++i) {
      LabelSelector(Object(&(*selectors)[i], sp.Index(i)), sp.Index(i));
    }
  }

  // apimachinery's ValidateLabelSelector.
  void LabelSelector(const json& selector, const Path& p) {
    const Path lp = p.Child("matchLabels");
    if (const json* labels = OptObject(selector, "matchLabels", lp)) {
      for (const auto& [key, value] : labels->items()) {
        LabelName(key, lp);
        if (auto v = ItemString(value, lp.Key(key))) LabelValue(*v, lp);
      }
    }
    const Path ep = p.Child("matchExpressions");
    const json* exprs = OptArray(selector, "matchExpressions", ep);
    if (exprs == nullptr) return;
    for (size_t i = 0; i < exprs->size(); ++i) {
      const Path rp = ep.Index(i);
      const json& req = Object(&(*exprs)[i], rp);
      const std::string op = String(req, "operator", rp.Child("operator"));
      const std::vector<std::string> values = StringList(req, "values", rp.Child("values"));
      if (op == "In" || op == "NotIn") {
        if (values.empty()) {
          Add(model::Required(rp.Child("values").str(),
                              "must be specified when `operator` is 'In' or 'NotIn'"));
        }
      } else if (op == "Exists" || op == "DoesNotExist") {
        if (!values.empty()) {
          Add(model::Forbidden(
              rp.Child("values").str(),
              "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"));
        }
      } else {
        Add(model::Invalid(rp.Child("operator").str(), Quote(op), "not a valid selector operator"));
      }
      LabelName(String(req, "key", rp.Child("key")), rp.Child("key"));
      for (size_t j = 0; j < values.size(); ++j) {
        LabelValue(values[j], rp.Child("values").Index(j));
      }
    }
  }

  // ValidateRoleBinding / ValidateClusterRoleBinding, and on update the immutable roleRef.
  void Binding(const json& binding, const json* old, bool namespaced) {
    const Path rp("roleRef");
    const json& ref = Object(Get(binding, "roleRef"), rp);
    const std::string group = String(ref, "apiGroup", rp.Child("apiGroup"));
    const std::string kind = String(ref, "kind", rp.Child("kind"));
    const std::string name = String(ref, "name", rp.Child("name"));
    if (group != model::kRbacGroup) {
      Add(model::NotSupported(rp.Child("apiGroup").str(), Quote(group), {model::kRbacGroup}));
    }
    const std::vector<std::string> kinds = namespaced
                                               ? std::vector<std::string>{"Role", "ClusterRole"}
                                               : std::vector<std::string>{"ClusterRole"};
    if (!IsOneOf(kind, kinds)) Add(model::NotSupported(rp.Child("kind").str(), Quote(kind), kinds));
    if (name.empty()) {
      Add(model::Required(rp.Child("name").str()));
    } else {
      for (const auto& msg : IsPathSegmentName(name)) {
        Add(model::Invalid(rp.Child("name").str(), Quote(name), msg));
      }
    }
    const Path sp("subjects");
    if (const json* subjects = OptArray(binding, "subjects", sp)) {
      for (size_t i = 0; i < subjects->size(); ++i) {
        Subject(Object(&(*subjects)[i], sp.Index(i)), namespaced, sp.Index(i));
      }
    }
    if (old != nullptr && !SameValue(Get(binding, "roleRef"), Get(*old, "roleRef"))) {
      Add(model::Invalid(rp.str(), RoleRefValue(group, kind, name), "cannot change roleRef"));
    }
  }

  // The roleRef as Go prints the struct in the "cannot change roleRef" error.
  static std::string RoleRefValue(const std::string& group, const std::string& kind,
                                  const std::string& name) {
    return "rbac.RoleRef{APIGroup:" + Quote(group) + ", Kind:" + Quote(kind) +
           ", Name:" + Quote(name) + "}";
  }

  // ValidateRoleBindingSubject.
  void Subject(const json& subject, bool namespaced, const Path& p) {
    const std::string kind = String(subject, "kind", p.Child("kind"));
    const std::string group = String(subject, "apiGroup", p.Child("apiGroup"));
    const std::string name = String(subject, "name", p.Child("name"));
    const std::string ns = String(subject, "namespace", p.Child("namespace"));
    if (name.empty()) Add(model::Required(p.Child("name").str()));
    if (kind == "ServiceAccount") {
      if (!name.empty()) DnsSubdomain(name, p.Child("name"));
      if (!group.empty()) Add(model::NotSupported(p.Child("apiGroup").str(), Quote(group), {""}));
      if (!namespaced && ns.empty()) Add(model::Required(p.Child("namespace").str()));
    } else if (kind == "User" || kind == "Group") {
      if (group != model::kRbacGroup) {
        Add(model::NotSupported(p.Child("apiGroup").str(), Quote(group), {model::kRbacGroup}));
      }
    } else {
      Add(model::NotSupported(p.Child("kind").str(), Quote(kind),
                              {"ServiceAccount", "User", "Group"}));
    }
  }
};

}  // namespace

void RoleRules(const ObjectInput& in, FieldErrors& errs) {
  RbacValidator(errs).PolicyRules(in.obj, in.type.namespaced);
}

void ClusterRoleRules(const ObjectInput& in, FieldErrors& errs) {
  RbacValidator v(errs);
  v.PolicyRules(in.obj, in.type.namespaced);
  v.AggregationRule(in.obj);
}

void BindingRules(const ObjectInput& in, FieldErrors& errs) {
  RbacValidator(errs).Binding(in.obj, in.old, in.type.namespaced);
}

}  // namespace qm::api::validation
