#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "api/rest/validator.h"
#include "common/quantity.h"
#include "model/field_error.h"
#include "model/names.h"

// The core/v1 kinds a DRA scheduling service keeps: Node, Pod, Event and ResourceQuota
// (pkg/apis/core/validation).
namespace qm::api::validation {
namespace {

using model::FieldError;
using model::FieldErrors;
using model::Quote;

class CoreValidator : public Validator {
 public:
  using Validator::Validator;

  // ---- core Node ---------------------------------------------------------------------------

  void NodeSpec(const json& spec, const Path& p) {
    const Path tp = p.Child("taints");
    const json* taints = OptArray(spec, "taints", tp);
    if (taints == nullptr) return;
    std::map<std::string, std::set<std::string>> keys_by_effect;
    for (size_t i = 0; i < taints->size(); ++i) {
      const Path ip = tp.Index(i);
      const json& taint = Object(&(*taints)[i], ip);
      const std::string key = String(taint, "key", ip.Child("key"));
      LabelName(key, ip.Child("key"));
      const std::string value = String(taint, "value", ip.Child("value"));
      if (auto msgs = model::IsLabelValue(value); !msgs.empty()) {
        Add(model::Invalid(ip.Child("value").str(), Quote(value), absl::StrJoin(msgs, ";")));
      }
      const std::string effect = String(taint, "effect", ip.Child("effect"));
      if (effect.empty()) {
        Add(model::Required(ip.Child("effect").str()));
      } else if (effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute") {
        Add(model::NotSupported(ip.Child("effect").str(), Quote(effect),
                                {"NoSchedule", "PreferNoSchedule", "NoExecute"}));
      }
      if (!keys_by_effect[effect].insert(key).second) {
        FieldError dup = model::Duplicate(ip.str(), taint.dump());
        dup.detail = "taints must be unique by key and effect pair";
        Add(std::move(dup));
      }
    }
  }

  // ---- core Pod ----------------------------------------------------------------------------
  // pkg/apis/core/validation: ValidatePodSpec (the parts a scheduling service can check),
  // ValidatePodUpdate and ValidatePodStatusUpdate.

  void PodSpec(const json& spec, const json& meta, const Path& p) {
    std::set<std::string> claim_names = PodResourceClaims(spec, meta, p.Child("resourceClaims"));
    std::set<std::string> all_names;
    const Path cp = p.Child("containers");
    const json* containers = OptArray(spec, "containers", cp);
    if (containers == nullptr || containers->empty()) {
      Add(model::Required(cp.str(), ""));
    } else {
      for (size_t i = 0; i < containers->size(); ++i) {
        const Path ip = cp.Index(i);
        const json& c = Object(&(*containers)[i], ip);
        const std::string name = Container(c, claim_names, ip);
        if (!all_names.insert(name).second)
          Add(model::Duplicate(ip.Child("name").str(), Quote(name)));
      }
    }
    const Path icp = p.Child("initContainers");
    if (const json* inits = OptArray(spec, "initContainers", icp)) {
      for (size_t i = 0; i < inits->size(); ++i) {
        const Path ip = icp.Index(i);
        const json& c = Object(&(*inits)[i], ip);
        const std::string name = Container(c, claim_names, ip);
        if (all_names.count(name) > 0) {
          Add(model::Duplicate(ip.Child("name").str(), Quote(name)));
        } else if (!name.empty()) {
          all_names.insert(name);
        }
      }
    }
    const Path rp = p.Child("restartPolicy");
    const std::string restart = String(spec, "restartPolicy", rp);
    if (restart.empty()) {
      Add(model::Required(rp.str(), ""));
    } else if (!IsOneOf(restart, {"Always", "OnFailure", "Never"})) {
      Add(model::NotSupported(rp.str(), Quote(restart), {"Always", "OnFailure", "Never"}));
    }
    const Path np = p.Child("nodeSelector");
    if (const json* selector = OptObject(spec, "nodeSelector", np)) {
      for (const auto& [key, value] : selector->items()) {
        for (const auto& msg : model::IsQualifiedName(key))
          Add(model::Invalid(np.str(), Quote(key), msg));
        if (auto v = ItemString(value, np.Key(key))) {
          for (const auto& msg : model::IsLabelValue(*v))
            Add(model::Invalid(np.str(), Quote(*v), msg));
        }
      }
    }
    if (auto account = OptString(spec, "serviceAccountName", p.Child("serviceAccountName"));
        account.has_value() && !account->empty()) {
      DnsSubdomain(*account, p.Child("serviceAccountName"));
    }
    if (auto node = OptString(spec, "nodeName", p.Child("nodeName")); node && !node->empty()) {
      NodeName(*node, p.Child("nodeName"));
    }
    const Path ap = p.Child("activeDeadlineSeconds");
    if (auto deadline = OptInt(spec, "activeDeadlineSeconds", ap);
        deadline.has_value() &&
        (*deadline < 1 || *deadline > std::numeric_limits<int32_t>::max())) {
      Add(model::Invalid(ap.str(), std::to_string(*deadline),
                         "must be between 1 and 2147483647, inclusive"));
    }
    for (const char* key : {"hostname", "subdomain"}) {
      if (auto v = OptString(spec, key, p.Child(key)); v && !v->empty()) DnsLabel(*v, p.Child(key));
    }
    PodTolerations(spec, p.Child("tolerations"));
    if (auto pc = OptString(spec, "priorityClassName", p.Child("priorityClassName"));
        pc && !pc->empty()) {
      DnsSubdomain(*pc, p.Child("priorityClassName"));
    }
    OptInt(spec, "priority", p.Child("priority"));
    const Path gp = p.Child("readinessGates");
    if (const json* gates = OptArray(spec, "readinessGates", gp)) {
      for (size_t i = 0; i < gates->size(); ++i) {
        const Path ip = gp.Index(i);
        LabelName(String(Object(&(*gates)[i], ip), "conditionType", ip.Child("conditionType")),
                  ip.Child("conditionType"));
      }
    }
  }

  // validatePodResourceClaims; returns the entry names containers may refer to.
  std::set<std::string> PodResourceClaims(const json& spec, const json& meta, const Path& p) {
    std::set<std::string> names;
    const json* claims = OptArray(spec, "resourceClaims", p);
    if (claims == nullptr) return names;
    const std::string pod_name = KeyString(meta, "name");
    for (size_t i = 0; i < claims->size(); ++i) {
      const Path ip = p.Index(i);
      const json& claim = Object(&(*claims)[i], ip);
      const std::string name = String(claim, "name", ip.Child("name"));
      auto claim_name = OptString(claim, "resourceClaimName", ip.Child("resourceClaimName"));
      auto template_name =
          OptString(claim, "resourceClaimTemplateName", ip.Child("resourceClaimTemplateName"));
      if (name.empty()) {
        Add(model::Required(ip.Child("name").str(), ""));
      } else if (names.count(name) > 0) {
        Add(model::Duplicate(ip.Child("name").str(), Quote(name)));
      } else {
        const size_t before = ErrorCount();
        DnsLabel(name, ip.Child("name"));
        if (ErrorCount() == before && template_name.has_value() && !pod_name.empty()) {
          const std::string generated = pod_name + "-" + name;
          for (const auto& msg : model::IsDns1123Subdomain(generated)) {
            Add(model::Invalid(ip.Child("name").str(), Quote(generated),
                               "final ResourceClaim name: " + msg));
          }
        }
        names.insert(name);
      }
      if (claim_name.has_value() && template_name.has_value()) {
        Add(model::Invalid(ip.str(), claim.dump(),
                           "at most one of `resourceClaimName` or `resourceClaimTemplateName` may "
                           "be specified"));
      }
      if (!claim_name.has_value() && !template_name.has_value()) {
        Add(model::Invalid(
            ip.str(), claim.dump(),
            "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"));
      }
      if (claim_name.has_value()) DnsSubdomain(*claim_name, ip.Child("resourceClaimName"));
      if (template_name.has_value()) {
        DnsSubdomain(*template_name, ip.Child("resourceClaimTemplateName"));
      }
    }
    return names;
  }

  // validateContainerCommon, the parts that do not need volumes or node information. Returns
  // the container's name.
  std::string Container(const json& c, const std::set<std::string>& claim_names, const Path& p) {
    const std::string name = String(c, "name", p.Child("name"));
    if (name.empty()) {
      Add(model::Required(p.Child("name").str(), ""));
    } else {
      DnsLabel(name, p.Child("name"));
    }
    if (String(c, "image", p.Child("image")).empty())
      Add(model::Required(p.Child("image").str(), ""));
    StringList(c, "command", p.Child("command"));
    StringList(c, "args", p.Child("args"));
    const Path pp = p.Child("imagePullPolicy");
    if (auto policy = OptString(c, "imagePullPolicy", pp);
        policy && !IsOneOf(*policy, {"Always", "IfNotPresent", "Never"})) {
      Add(model::NotSupported(pp.str(), Quote(*policy), {"Always", "IfNotPresent", "Never"}));
    }
    const Path rp = p.Child("resources");
    ResourceRequirements(Object(Get(c, "resources"), rp), claim_names, rp);
    return name;
  }

  // Extended resources ("example.com/gpu") and hugepages cannot be overcommitted; everything
  // else native can.
  static bool IsNativeResource(const std::string& name) {
    const size_t slash = name.find('/');
    return slash == std::string::npos || absl::EndsWith(name.substr(0, slash), "kubernetes.io");
  }
  static bool OvercommitAllowed(const std::string& name) {
    return IsNativeResource(name) && !absl::StartsWith(name, "hugepages-");
  }

  void ResourceRequirements(const json& res, const std::set<std::string>& claim_names,
                            const Path& p) {
    const Path lp = p.Child("limits");
    const Path rp = p.Child("requests");
    std::map<std::string, Quantity> limits;
    if (const json* lim = OptObject(res, "limits", lp)) {
      for (const auto& [name, value] : lim->items()) {
        ContainerResourceName(name, lp.Key(name));
        if (auto q = ResourceQuantity(name, &value, lp.Key(name))) limits[name] = *q;
      }
    }
    if (const json* req = OptObject(res, "requests", rp)) {
      for (const auto& [name, value] : req->items()) {
        ContainerResourceName(name, rp.Key(name));
        auto q = ResourceQuantity(name, &value, rp.Key(name));
        if (!q.has_value()) continue;
        auto limit = limits.find(name);
        if (limit != limits.end()) {
          if (*q != limit->second && !OvercommitAllowed(name)) {
            Add(model::Invalid(rp.str(), Quote(q->String()),
                               "must be equal to " + name + " limit of " + limit->second.String()));
          } else if (*q > limit->second) {
            Add(model::Invalid(
                rp.str(), Quote(q->String()),
                "must be less than or equal to " + name + " limit of " + limit->second.String()));
          }
        } else if (!OvercommitAllowed(name)) {
          Add(model::Required(lp.str(), "Limit must be set for non overcommitable resources"));
        }
      }
    }
    // validateResourceClaimNames.
    const Path cp = p.Child("claims");
    const json* claims = OptArray(res, "claims", cp);
    if (claims == nullptr) return;
    std::set<std::string> seen;
    for (size_t i = 0; i < claims->size(); ++i) {
      const Path ip = cp.Index(i);
      const json& claim = Object(&(*claims)[i], ip);
      const std::string name = String(claim, "name", ip.Child("name"));
      if (name.empty()) {
        Add(model::Required(ip.str(), ""));
        continue;
      }
      std::string key = name;
      if (auto request = OptString(claim, "request", ip.Child("request"));
          request && !request->empty()) {
        DnsLabel(*request, ip.Child("request"));
        key += "/" + *request;
      }
      if (!seen.insert(key).second) Add(model::Duplicate(ip.str(), Quote(name)));
      if (claim_names.count(name) == 0) {
        std::string detail = "must be one of the names in pod.spec.resourceClaims";
        if (claim_names.empty()) {
          detail += " which is empty";
        } else {
          detail += ": " + absl::StrJoin(claim_names, ", ");
        }
        Add(model::NotFound(ip.str(), Quote(name), detail));
      }
    }
  }

  void ContainerResourceName(const std::string& name, const Path& p) {
    for (const auto& msg : model::IsQualifiedName(name))
      Add(model::Invalid(p.str(), Quote(name), msg));
    if (name.find('/') == std::string::npos) {
      if (!IsOneOf(name, {"cpu", "memory", "ephemeral-storage"}) &&
          !absl::StartsWith(name, "hugepages-")) {
        Add(model::Invalid(p.str(), Quote(name), "must be a standard resource for containers"));
      }
    } else if (!IsNativeResource(name) && absl::StartsWith(name, "requests.")) {
      Add(model::Invalid(p.str(), Quote(name), "doesn't follow extended resource name standard"));
    }
  }

  // ValidateResourceQuantityValue: never negative, whole numbers for countable resources.
  std::optional<Quantity> ResourceQuantity(const std::string& name, const json* value,
                                           const Path& p) {
    auto q = QuantityAt(value, p);
    if (!q.has_value()) return std::nullopt;
    if (q->Sign() < 0) {
      Add(model::Invalid(p.str(), Quote(q->String()), "must be greater than or equal to 0"));
    }
    if (IsIntegerResource(name) && q->HasFraction()) {
      Add(model::Invalid(p.str(), Quote(q->String()), "must be an integer"));
    }
    return q;
  }

  // helper.IsIntegerResourceName: object counts, extended resources and device counts.
  static bool IsIntegerResource(const std::string& name) {
    static const auto* counted = new std::set<std::string>{"pods",
                                                           "services",
                                                           "replicationcontrollers",
                                                           "resourcequotas",
                                                           "secrets",
                                                           "configmaps",
                                                           "persistentvolumeclaims",
                                                           "services.nodeports",
                                                           "services.loadbalancers"};
    if (counted->count(name) > 0 || absl::StartsWith(name, "count/")) return true;
    std::string n = name;
    if (absl::StartsWith(n, "requests.")) n = n.substr(std::string("requests.").size());
    return !IsNativeResource(n);
  }

  // ValidateTolerations.
  void PodTolerations(const json& spec, const Path& p) {
    const json* tolerations = OptArray(spec, "tolerations", p);
    if (tolerations == nullptr) return;
    const std::vector<std::string> effects = {"NoSchedule", "PreferNoSchedule", "NoExecute"};
    for (size_t i = 0; i < tolerations->size(); ++i) {
      const Path ip = p.Index(i);
      const json& t = Object(&(*tolerations)[i], ip);
      const std::string key = String(t, "key", ip.Child("key"));
      const std::string op = String(t, "operator", ip.Child("operator"));
      const std::string value = String(t, "value", ip.Child("value"));
      const std::string effect = String(t, "effect", ip.Child("effect"));
      if (!key.empty()) LabelName(key, ip.Child("key"));
      if (key.empty() && op != "Exists") {
        Add(model::Invalid(ip.Child("operator").str(), Quote(op),
                           "operator must be Exists when `key` is empty, which means \"match all "
                           "values and all keys\""));
      }
      if (OptInt(t, "tolerationSeconds", ip.Child("tolerationSeconds")).has_value() &&
          effect != "NoExecute") {
        Add(model::Invalid(ip.Child("effect").str(), Quote(effect),
                           "effect must be 'NoExecute' when `tolerationSeconds` is set"));
      }
      if (op.empty() || op == "Equal") {
        if (auto msgs = model::IsLabelValue(value); !msgs.empty()) {
          Add(model::Invalid(ip.Child("operator").str(), Quote(value), absl::StrJoin(msgs, ";")));
        }
      } else if (op == "Exists") {
        if (!value.empty()) {
          Add(model::Invalid(ip.Child("operator").str(), t.dump(),
                             "value must be empty when `operator` is 'Exists'"));
        }
      } else {
        Add(model::NotSupported(ip.Child("operator").str(), Quote(op), {"Equal", "Exists"}));
      }
      if (!effect.empty() && !IsOneOf(effect, effects)) {
        Add(model::NotSupported(ip.Child("effect").str(), Quote(effect), effects));
      }
    }
  }

  // ValidatePodUpdate: only container images, activeDeadlineSeconds, additions to tolerations
  // and (here, standing in for the binding subresource) an unset nodeName may change.
  void PodSpecUpdate(const json& spec, const json& old_spec, const Path& p) {
    for (const char* key : {"containers", "initContainers"}) {
      const json* now = Get(spec, key);
      const json* before = Get(old_spec, key);
      const size_t n = now != nullptr && now->is_array() ? now->size() : 0;
      const size_t o = before != nullptr && before->is_array() ? before->size() : 0;
      if (n != o) {
        Add(model::Forbidden(
            p.Child(key).str(),
            std::string("pod updates may not add or remove ") +
                (std::string(key) == "containers" ? "containers" : "init containers")));
        return;
      }
      for (size_t i = 0; i < n; ++i) {
        const json* image = Get((*now)[i], "image");
        const Path ip = p.Child(key).Index(i).Child("image");
        if (image == nullptr || !image->is_string() || image->get<std::string>().empty()) {
          Add(model::Required(ip.str(), ""));
          continue;
        }
        const std::string text = image->get<std::string>();
        if (absl::StripAsciiWhitespace(text).size() != text.size()) {
          Add(model::Invalid(ip.str(), Quote(text),
                             "must not have leading or trailing whitespace"));
        }
      }
    }
    const Path ap = p.Child("activeDeadlineSeconds");
    const json* deadline = Get(spec, "activeDeadlineSeconds");
    const json* old_deadline = Get(old_spec, "activeDeadlineSeconds");
    if (deadline != nullptr && deadline->is_number_integer()) {
      if (old_deadline != nullptr && old_deadline->is_number_integer() &&
          old_deadline->get<int64_t>() < deadline->get<int64_t>()) {
        Add(model::Invalid(ap.str(), deadline->dump(),
                           "must be less than or equal to previous value"));
        return;
      }
    } else if (deadline == nullptr && old_deadline != nullptr) {
      Add(model::Invalid(ap.str(), "null", "must not update from a positive integer to nil value"));
    }
    // validateOnlyAddedTolerations: every old toleration is still there (its
    // tolerationSeconds may change).
    auto without_seconds = [](const json& t) {
      json out = json::object();
      for (const char* key : {"key", "operator", "value", "effect"}) {
        const json* v = Get(t, key);
        out[key] = v != nullptr && v->is_string() ? *v : json("");
      }
      return out;
    };
    const json* tolerations = Get(spec, "tolerations");
    if (const json* old_tolerations = Get(old_spec, "tolerations");
        old_tolerations != nullptr && old_tolerations->is_array()) {
      for (const json& old_t : *old_tolerations) {
        bool found = false;
        if (tolerations != nullptr && tolerations->is_array()) {
          for (const json& t : *tolerations) {
            if (without_seconds(t) == without_seconds(old_t)) found = true;
          }
        }
        if (!found) {
          Add(model::Forbidden(p.Child("tolerations").str(),
                               "existing toleration can not be modified except its "
                               "tolerationSeconds"));
          return;
        }
      }
    }
    // Everything else is compared with the updatable fields taken from the old spec.
    json munged = spec;
    for (const char* key : {"containers", "initContainers"}) {
      const json* before = Get(old_spec, key);
      if (before == nullptr || !before->is_array() || !munged.contains(key) ||
          !munged[key].is_array()) {
        continue;
      }
      for (size_t i = 0; i < munged[key].size() && i < before->size(); ++i) {
        // A container that is not an object was reported by PodSpec; it stays as sent, so the
        // comparison below reports the change instead of indexing into it.
        json& container = munged[key][i];
        if (!container.is_object()) continue;
        if (const json* image = Get((*before)[i], "image")) {
          container["image"] = *image;
        } else {
          container.erase("image");
        }
      }
    }
    for (const char* key : {"activeDeadlineSeconds", "tolerations", "schedulingGates"}) {
      if (const json* before = Get(old_spec, key)) {
        munged[key] = *before;
      } else {
        munged.erase(key);
      }
    }
    if (KeyString(old_spec, "nodeName").empty()) {
      if (const json* before = Get(old_spec, "nodeName")) {
        munged["nodeName"] = *before;
      } else {
        munged.erase("nodeName");
      }
    }
    if (munged == old_spec) return;
    std::string diff;
    std::set<std::string> keys;
    for (const auto& [k, v] : munged.items()) keys.insert(k);
    for (const auto& [k, v] : old_spec.items()) keys.insert(k);
    for (const std::string& k : keys) {
      const json* a = Get(old_spec, k);
      const json* b = Get(munged, k);
      if (SameValue(a, b)) continue;
      diff += "\n  spec." + k + ": " + (a ? a->dump() : "null") + " -> " + (b ? b->dump() : "null");
    }
    Add(model::Forbidden(
        p.str(),
        "pod updates may not change fields other than `spec.containers[*].image`,"
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
        "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
        "set to 1 if it was previously negative)" +
            diff));
  }

  void PodStatus(const json& status, const json& spec, const Path& p) {
    const Path php = p.Child("phase");
    const std::vector<std::string> phases = {"Pending", "Running", "Succeeded", "Failed",
                                             "Unknown"};
    if (auto phase = OptString(status, "phase", php); phase && !IsOneOf(*phase, phases)) {
      Add(model::NotSupported(php.str(), Quote(*phase), phases));
    }
    const Path cp = p.Child("conditions");
    if (const json* conditions = OptArray(status, "conditions", cp)) {
      for (size_t i = 0; i < conditions->size(); ++i) {
        const Path ip = cp.Index(i);
        const json& c = Object(&(*conditions)[i], ip);
        const std::string type = String(c, "type", ip.Child("type"));
        if (type.empty()) {
          Add(model::Required(ip.Child("type").str(), ""));
        } else {
          LabelName(type, ip.Child("type"));
        }
        const std::string st = String(c, "status", ip.Child("status"));
        if (!IsOneOf(st, {"True", "False", "Unknown"})) {
          Add(model::NotSupported(ip.Child("status").str(), Quote(st),
                                  {"True", "False", "Unknown"}));
        }
      }
    }
    if (auto nominated = OptString(status, "nominatedNodeName", p.Child("nominatedNodeName"));
        nominated && !nominated->empty()) {
      NodeName(*nominated, p.Child("nominatedNodeName"));
    }
    // validatePodResourceClaimStatuses.
    std::set<std::string> pod_claims;
    if (const json* claims = Get(spec, "resourceClaims"); claims && claims->is_array()) {
      for (const json& c : *claims) pod_claims.insert(KeyString(c, "name"));
    }
    const Path sp = p.Child("resourceClaimStatuses");
    const json* statuses = OptArray(status, "resourceClaimStatuses", sp);
    if (statuses == nullptr) return;
    std::set<std::string> seen;
    for (size_t i = 0; i < statuses->size(); ++i) {
      const Path ip = sp.Index(i);
      const json& s = Object(&(*statuses)[i], ip);
      const std::string name = String(s, "name", ip.Child("name"));
      if (pod_claims.count(name) == 0) {
        Add(model::Invalid(ip.Child("name").str(), Quote(name),
                           "must match the name of an entry in `spec.resourceClaims`"));
      }
      if (!seen.insert(name).second) Add(model::Duplicate(ip.Child("name").str(), Quote(name)));
      if (auto claim = OptString(s, "resourceClaimName", ip.Child("resourceClaimName"))) {
        for (const auto& msg : model::IsDns1123Subdomain(*claim)) {
          Add(model::Invalid(ip.Child("name").str(), Quote(*claim), msg));
        }
      }
    }
  }

  // ---- core Event --------------------------------------------------------------------------

  // legacyValidateEvent (core/v1 events).
  void Event(const json& ev) {
    const std::string ns = KeyString(ObjectOrEmpty(Get(ev, "metadata")), "namespace");
    const Path op("involvedObject");
    const json& involved = Object(Get(ev, "involvedObject"), op);
    const std::string involved_ns = String(involved, "namespace", op.Child("namespace"));
    for (const char* key : {"kind", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"}) {
      OptString(involved, key, op.Child(key));
    }
    for (const char* key :
         {"reason", "message", "type", "action", "reportingComponent", "reportingInstance"}) {
      OptString(ev, key, Path(key));
    }
    OptInt(ev, "count", Path("count"));
    const std::string event_time = String(ev, "eventTime", Path("eventTime"));
    if (event_time.empty()) {
      if (involved_ns.empty() ? (!ns.empty() && ns != "default") : ns != involved_ns) {
        Add(model::Invalid(op.Child("namespace").str(), Quote(involved_ns),
                           "does not match event.namespace"));
      }
    } else {
      if (involved_ns.empty() && ns != "default" && ns != "kube-system") {
        Add(model::Invalid(op.Child("namespace").str(), Quote(involved_ns),
                           "does not match event.namespace"));
      }
      const std::string controller = KeyString(ev, "reportingComponent");
      if (controller.empty()) {
        Add(model::Required("reportingComponent", ""));
      }
      for (const auto& msg : model::IsQualifiedName(controller)) {
        Add(model::Invalid("reportingComponent", Quote(controller), msg));
      }
      if (KeyString(ev, "reportingInstance").empty()) Add(model::Required("reportingInstance", ""));
      if (KeyString(ev, "action").empty()) Add(model::Required("action", ""));
      if (KeyString(ev, "reason").empty()) Add(model::Required("reason", ""));
    }
  }

  // ---- core ResourceQuota ------------------------------------------------------------------

  void ResourceQuotaSpec(const json& spec, const json* old_spec, const Path& p) {
    QuotaResources(spec, "hard", p.Child("hard"));
    const Path sp = p.Child("scopes");
    const std::vector<std::string> scopes = StringList(spec, "scopes", sp);
    for (const std::string& scope : scopes) {
      if (!IsOneOf(scope,
                   {"Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
                    "CrossNamespacePodAffinity", "VolumeAttributesClass"})) {
        Add(model::Invalid(sp.str(), Quote(scope), "unsupported scope"));
      }
    }
    if (old_spec != nullptr && !SameValue(Get(spec, "scopes"), Get(*old_spec, "scopes"))) {
      Add(model::Immutable(sp.str()));
    }
  }

  void QuotaResources(const json& holder, std::string_view key, const Path& p) {
    const json* resources = OptObject(holder, key, p);
    if (resources == nullptr) return;
    for (const auto& [name, value] : resources->items()) {
      const Path rp = p.Key(name);
      for (const auto& msg : model::IsQualifiedName(name)) {
        Add(model::Invalid(rp.str(), Quote(name), msg));
      }
      if (name.find('/') == std::string::npos && !IsStandardQuotaResource(name)) {
        Add(model::Invalid(rp.str(), Quote(name), "must be a standard resource for quota"));
      }
      ResourceQuantity(name, &value, rp);
    }
  }

  static bool IsStandardQuotaResource(const std::string& name) {
    static const auto* standard = new std::set<std::string>{"pods",
                                                            "services",
                                                            "replicationcontrollers",
                                                            "resourcequotas",
                                                            "secrets",
                                                            "configmaps",
                                                            "persistentvolumeclaims",
                                                            "services.nodeports",
                                                            "services.loadbalancers",
                                                            "cpu",
                                                            "memory",
                                                            "ephemeral-storage",
                                                            "requests.cpu",
                                                            "requests.memory",
                                                            "requests.storage",
                                                            "requests.ephemeral-storage",
                                                            "limits.cpu",
                                                            "limits.memory",
                                                            "limits.ephemeral-storage"};
    return standard->count(name) > 0 || absl::StartsWith(name, "hugepages-") ||
           absl::StartsWith(name, "requests.hugepages-");
  }

  void ResourceQuotaStatus(const json& status, const Path& p) {
    QuotaResources(status, "hard", p.Child("hard"));
    QuotaResources(status, "used", p.Child("used"));
  }
};

}  // namespace

void NodeRules(const ObjectInput& in, FieldErrors& errs) {
  CoreValidator(errs).NodeSpec(in.spec, Path("spec"));
}

void PodRules(const ObjectInput& in, FieldErrors& errs) {
  CoreValidator v(errs);
  const Path spec_path("spec");
  v.PodSpec(in.spec, ObjectOrEmpty(Get(in.obj, "metadata")), spec_path);
  if (in.old_spec != nullptr) {
    v.PodSpecUpdate(in.spec, *in.old_spec, spec_path);
  } else if (const json* status = Get(in.obj, "status")) {
    // Status is written through /status; a status sent on create gets the same checks.
    v.PodStatus(v.Object(status, Path("status")), in.spec, Path("status"));
  }
}

void PodStatusRules(const StatusInput& in, FieldErrors& errs) {
  CoreValidator(errs).PodStatus(in.status, ObjectOrEmpty(Get(in.old, "spec")), Path("status"));
}

void EventRules(const ObjectInput& in, FieldErrors& errs) { CoreValidator(errs).Event(in.obj); }

void ResourceQuotaRules(const ObjectInput& in, FieldErrors& errs) {
  CoreValidator(errs).ResourceQuotaSpec(in.spec, in.old_spec, Path("spec"));
}

void ResourceQuotaStatusRules(const StatusInput& in, FieldErrors& errs) {
  CoreValidator(errs).ResourceQuotaStatus(in.status, Path("status"));
}

}  // namespace qm::api::validation
