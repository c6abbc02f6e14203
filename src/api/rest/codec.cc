#include "api/rest/codec.h"

#include <algorithm>
#include <atomic>
#include <memory>

#include "model/json/document.h"
#include "model/json/read.h"
#include "model/json/write.h"

namespace qm::api {
namespace {

using nlohmann::json;

// Fields of a v1beta1 DeviceRequest that v1 moves under "exactly".
constexpr const char* kExactFields[] = {"deviceClassName", "selectors",   "allocationMode", "count",
                                        "adminAccess",     "tolerations", "capacity"};

// Fields of a v1beta1 BasicDevice that v1 puts directly on the Device.
constexpr const char* kBasicFields[] = {"attributes",
                                        "capacity",
                                        "consumesCounters",
                                        "nodeName",
                                        "nodeSelector",
                                        "allNodes",
                                        "taints",
                                        "bindsToNode",
                                        "bindingConditions",
                                        "bindingFailureConditions",
                                        "allowMultipleAllocations",
                                        "nodeAllocatableResources"};

json* Find(json& obj, std::initializer_list<const char*> path) {
  json* cur = &obj;
  for (const char* p : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(p);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

void DefaultExact(json& req) {
  if (!req.is_object()) return;
  if (!req.contains("allocationMode") || req["allocationMode"] == "") {
    req["allocationMode"] = "ExactCount";
  }
  if (req["allocationMode"] == "ExactCount" &&
      (!req.contains("count") || req["count"] == 0 || req["count"].is_null())) {
    req["count"] = 1;
  }
}

void DefaultTolerations(json& req) {
  json* tols = Find(req, {"tolerations"});
  if (tols == nullptr || !tols->is_array()) return;
  for (auto& t : *tols) {
    if (t.is_object() && (!t.contains("operator") || t["operator"] == "")) t["operator"] = "Equal";
  }
}

void DefaultTaint(json& taint, const Clock& clock) {
  if (taint.is_object() && !taint.contains("timeAdded")) {
    taint["timeAdded"] = FormatRfc3339(clock.Now());
  }
}

json* ClaimSpecOf(const model::ResourceType& type, json& obj) {
  if (type.kind == "ResourceClaim") return Find(obj, {"spec"});
  if (type.kind == "ResourceClaimTemplate") return Find(obj, {"spec", "spec"});
  return nullptr;
}

// v1 / v1beta2 defaulting of a claim spec.
void DefaultClaimSpecV1(json& spec) {
  json* reqs = Find(spec, {"devices", "requests"});
  if (reqs == nullptr || !reqs->is_array()) return;
  for (auto& r : *reqs) {
    if (json* exact = Find(r, {"exactly"})) {
      DefaultExact(*exact);
      DefaultTolerations(*exact);
    }
    if (json* subs = Find(r, {"firstAvailable"}); subs && subs->is_array()) {
      for (auto& s : *subs) {
        DefaultExact(s);
        DefaultTolerations(s);
      }
    }
  }
}

// v1beta1 defaulting: flat requests are defaulted only when they name a class.
void DefaultClaimSpecV1beta1(json& spec) {
  json* reqs = Find(spec, {"devices", "requests"});
  if (reqs == nullptr || !reqs->is_array()) return;
  for (auto& r : *reqs) {
    if (!r.is_object()) continue;
    if (r.contains("deviceClassName") && r["deviceClassName"].is_string() &&
        r["deviceClassName"] != "") {
      DefaultExact(r);
    }
    DefaultTolerations(r);
    if (json* subs = Find(r, {"firstAvailable"}); subs && subs->is_array()) {
      for (auto& s : *subs) {
        DefaultExact(s);
        DefaultTolerations(s);
      }
    }
  }
}

void ClaimSpecBeta1ToV1(json& spec) {
  json* reqs = Find(spec, {"devices", "requests"});
  if (reqs == nullptr || !reqs->is_array()) return;
  for (auto& r : *reqs) {
    if (!r.is_object()) continue;
    json exact = json::object();
    for (const char* f : kExactFields) {
      auto it = r.find(f);
      if (it == r.end()) continue;
      bool set = !it->is_null();
      if (std::string(f) == "deviceClassName" || std::string(f) == "allocationMode") {
        set = it->is_string() && *it != "";
      }
      if (std::string(f) == "count") set = !(it->is_number() && *it == 0) && !it->is_null();
      if (set) exact[f] = *it;
      r.erase(it);
    }
    if (!exact.empty()) r["exactly"] = std::move(exact);
  }
}

void ClaimSpecV1ToBeta1(json& spec) {
  json* reqs = Find(spec, {"devices", "requests"});
  if (reqs == nullptr || !reqs->is_array()) return;
  for (auto& r : *reqs) {
    if (!r.is_object() || !r.contains("exactly")) continue;
    json exact = std::move(r["exactly"]);
    r.erase("exactly");
    if (exact.is_object()) {
      for (auto& [k, v] : exact.items()) r[k] = v;
    }
  }
}

void SliceBeta1ToV1(json& obj) {
  json* spec = Find(obj, {"spec"});
  if (spec == nullptr || !spec->is_object()) return;
  if (spec->contains("nodeName") && (*spec)["nodeName"] == "") spec->erase("nodeName");
  if (spec->contains("allNodes") && (*spec)["allNodes"] == false) spec->erase("allNodes");
  json* devices = Find(*spec, {"devices"});
  if (devices == nullptr || !devices->is_array()) return;
  for (auto& d : *devices) {
    if (!d.is_object() || !d.contains("basic")) continue;
    json basic = std::move(d["basic"]);
    d.erase("basic");
    if (!basic.is_object()) continue;
    for (auto& [k, v] : basic.items()) {
      if (k == "allNodes" && v == false) continue;
      if (k == "nodeName" && v == "") continue;
      d[k] = v;
    }
  }
}

void SliceV1ToBeta1(json& obj) {
  json* devices = Find(obj, {"spec", "devices"});
  if (devices == nullptr || !devices->is_array()) return;
  for (auto& d : *devices) {
    if (!d.is_object()) continue;
    json basic = json::object();
    for (const char* f : kBasicFields) {
      if (d.contains(f)) {
        basic[f] = std::move(d[f]);
        d.erase(f);
      }
    }
    d["basic"] = std::move(basic);
  }
}

void DefaultSliceTaints(json& obj, const Clock& clock) {
  json* devices = Find(obj, {"spec", "devices"});
  if (devices == nullptr || !devices->is_array()) return;
  for (auto& d : *devices) {
    json* taints = Find(d, {"taints"});
    if (taints == nullptr || !taints->is_array()) continue;
    for (auto& t : *taints) DefaultTaint(t, clock);
  }
}

// The image's tag decides the pull policy, as in Kubernetes: ":latest" or no tag pulls always.
std::string DefaultPullPolicy(const std::string& image) {
  if (image.find('@') != std::string::npos) return "IfNotPresent";
  const size_t slash = image.rfind('/');
  const size_t colon = image.rfind(':');
  const bool has_tag = colon != std::string::npos && (slash == std::string::npos || colon > slash);
  if (!has_tag || image.substr(colon + 1) == "latest") return "Always";
  return "IfNotPresent";
}

void DefaultContainers(json* containers) {
  if (containers == nullptr || !containers->is_array()) return;
  for (auto& c : *containers) {
    if (!c.is_object()) continue;
    if (!c.contains("imagePullPolicy") && c.contains("image") && c["image"].is_string()) {
      c["imagePullPolicy"] = DefaultPullPolicy(c["image"].get<std::string>());
    }
    if (!c.contains("terminationMessagePath")) {
      c["terminationMessagePath"] = "/dev/termination-log";
    }
    if (!c.contains("terminationMessagePolicy")) c["terminationMessagePolicy"] = "File";
    // Limits without requests request the limit.
    json* limits = Find(c, {"resources", "limits"});
    if (limits != nullptr && limits->is_object() && !limits->empty()) {
      json& resources = c["resources"];
      if (!resources.contains("requests") || resources["requests"].is_null()) {
        resources["requests"] = json::object();
      }
      if (resources["requests"].is_object()) {
        for (const auto& [name, value] : limits->items()) {
          if (!resources["requests"].contains(name)) resources["requests"][name] = value;
        }
      }
    }
  }
}

std::atomic<int64_t> default_toleration_seconds{300};

// DefaultTolerationSeconds admission: a pod that lists no tolerations gets the
// node.kubernetes.io/not-ready and unreachable NoExecute tolerations with tolerationSeconds, so
// that its node's lifecycle taints evict it only after that long. A pod that lists tolerations
// is left as it is (Kubernetes would append to its list): `kubectl apply` of it then stays
// idempotent, and the scheduler gives it the same grace when its list does not mention those
// taints (Scheduler's default_toleration_seconds). Idempotent.
void DefaultPodTolerations(json& spec) {
  json* tolerations = Find(spec, {"tolerations"});
  if (tolerations != nullptr && !tolerations->is_null() &&
      (!tolerations->is_array() || !tolerations->empty())) {
    return;
  }
  json added = json::array();
  for (const char* key : {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}) {
    added.push_back({{"key", key},
                     {"operator", "Exists"},
                     {"effect", "NoExecute"},
                     {"tolerationSeconds", default_toleration_seconds.load()}});
  }
  spec["tolerations"] = std::move(added);
}

// The defaults the apiserver applies to a pod (pkg/apis/core/v1/defaults.go and priority
// admission) that clients and the scheduler read: policies, scheduler name, grace period,
// priority and the Pending phase.
void DefaultPod(json& obj) {
  // A mistyped spec or status is left for validation to report.
  if (!obj.contains("spec") || obj["spec"].is_null()) obj["spec"] = json::object();
  if (!obj.contains("status") || obj["status"].is_null()) obj["status"] = json::object();
  if (!obj["spec"].is_object() || !obj["status"].is_object()) return;
  json& spec = obj["spec"];
  auto set_default = [&](const char* key, json value) {
    if (!spec.contains(key) || spec[key].is_null() || spec[key] == "") spec[key] = std::move(value);
  };
  set_default("restartPolicy", "Always");
  set_default("dnsPolicy", "ClusterFirst");
  set_default("schedulerName", "default-scheduler");
  set_default("terminationGracePeriodSeconds", 30);
  set_default("enableServiceLinks", true);
  set_default("securityContext", json::object());
  if (spec.contains("serviceAccountName") && !spec.contains("serviceAccount")) {
    spec["serviceAccount"] = spec["serviceAccountName"];
  }
  DefaultContainers(Find(spec, {"containers"}));
  DefaultContainers(Find(spec, {"initContainers"}));
  DefaultPodTolerations(spec);
  // Priority admission resolves priorityClassName; without a class the priority is 0.
  if (!spec.contains("priority") && !spec.contains("priorityClassName")) spec["priority"] = 0;
  json& status = obj["status"];
  if (!status.contains("phase") || status["phase"] == "") status["phase"] = "Pending";
}

void DefaultCore(const model::ResourceType& type, json& obj) {
  if (type.kind == "Pod") DefaultPod(obj);
  if (type.kind == "Namespace") {
    if (!obj.contains("spec") || !obj["spec"].is_object()) obj["spec"] = json::object();
    if (!obj["spec"].contains("finalizers")) obj["spec"]["finalizers"] = {"kubernetes"};
    if (!obj.contains("status") || !obj["status"].is_object()) obj["status"] = json::object();
    if (!obj["status"].contains("phase")) obj["status"]["phase"] = "Active";
  }
  if (type.kind == "Node") {
    if (!obj.contains("spec") || !obj["spec"].is_object()) obj["spec"] = json::object();
  }
}

// rbac/v1 defaults: roleRef.apiGroup, and each subject's apiGroup by kind (SetDefaults_Subject).
void DefaultRbac(const model::ResourceType& type, json& obj) {
  if (type.kind != "RoleBinding" && type.kind != "ClusterRoleBinding") return;
  if (json* ref = Find(obj, {"roleRef"}); ref != nullptr && ref->is_object()) {
    if (!ref->contains("apiGroup") || (*ref)["apiGroup"].is_null() || (*ref)["apiGroup"] == "") {
      (*ref)["apiGroup"] = model::kRbacGroup;
    }
  }
  json* subjects = Find(obj, {"subjects"});
  if (subjects == nullptr || !subjects->is_array()) return;
  for (json& subject : *subjects) {
    if (!subject.is_object()) continue;
    if (subject.contains("apiGroup") && !subject["apiGroup"].is_null() &&
        subject["apiGroup"] != "") {
      continue;
    }
    const json kind = subject.value("kind", json());
    if (kind == "User" || kind == "Group") {
      subject["apiGroup"] = model::kRbacGroup;
    } else if (kind == "ServiceAccount") {
      subject["apiGroup"] = "";
    }
  }
}

absl::Status MetaTypeError(const std::string& field, const std::string& want) {
  return absl::InvalidArgumentError("metadata." + field + " must be " + want);
}

absl::Status DecodeStringMap(const json& meta, const char* field,
                             std::map<std::string, std::string>* out) {
  auto it = meta.find(field);
  if (it == meta.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return MetaTypeError(field, "an object of strings");
  for (auto& [k, v] : it->items()) {
    if (!v.is_string()) {
      return absl::InvalidArgumentError("metadata." + std::string(field) + "." + k +
                                        " must be a string");
    }
    (*out)[k] = v.get<std::string>();
  }
  return absl::OkStatus();
}

}  // namespace

void SetDefaultTolerationSeconds(int64_t seconds) { default_toleration_seconds.store(seconds); }

json ToHub(const model::ResourceType& type, const std::string& version, json obj,
           const Clock& clock) {
  if (!obj.is_object()) return obj;
  DefaultCore(type, obj);
  if (type.group == model::kRbacGroup) DefaultRbac(type, obj);
  if (type.group == model::kResourceGroup) {
    json* claim_spec = ClaimSpecOf(type, obj);
    if (version == "v1beta1") {
      if (claim_spec != nullptr) {
        DefaultClaimSpecV1beta1(*claim_spec);
        ClaimSpecBeta1ToV1(*claim_spec);
      }
      if (type.kind == "ResourceSlice") SliceBeta1ToV1(obj);
    } else if (claim_spec != nullptr) {
      DefaultClaimSpecV1(*claim_spec);
    }
    if (type.kind == "ResourceSlice") DefaultSliceTaints(obj, clock);
    if (type.kind == "DeviceTaintRule") {
      if (json* taint = Find(obj, {"spec", "taint"})) DefaultTaint(*taint, clock);
    }
  }
  obj["apiVersion"] = type.ApiVersion("v1");
  obj["kind"] = type.kind;
  return obj;
}

json FromHub(const model::ResourceType& type, const std::string& version, json obj) {
  if (version == "v1beta1" && type.group == model::kResourceGroup) {
    if (json* claim_spec = ClaimSpecOf(type, obj)) ClaimSpecV1ToBeta1(*claim_spec);
    if (type.kind == "ResourceSlice") SliceV1ToBeta1(obj);
  }
  obj["apiVersion"] = type.ApiVersion(version);
  obj["kind"] = type.kind;
  return obj;
}

absl::StatusOr<model::Object> ToObject(const model::ResourceType& type, json body) {
  if (!body.is_object()) return absl::InvalidArgumentError("the object must be a JSON object");
  model::Object obj;
  obj.resource = type.GroupResource();
  obj.fields = SelectableFields(type, body);
  body.erase("apiVersion");
  body.erase("kind");
  json meta = json::object();
  if (auto it = body.find("metadata"); it != body.end()) {
    if (!it->is_null() && !it->is_object()) {
      return absl::InvalidArgumentError("metadata must be an object");
    }
    if (it->is_object()) meta = std::move(*it);
    body.erase("metadata");
  }
  auto str = [&](const char* f, std::string* out) -> absl::Status {
    auto it = meta.find(f);
    if (it == meta.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_string()) return MetaTypeError(f, "a string");
    *out = it->get<std::string>();
    return absl::OkStatus();
  };
  if (auto st = str("name", &obj.meta.name); !st.ok()) return st;
  if (auto st = str("generateName", &obj.meta.generate_name); !st.ok()) return st;
  if (auto st = str("namespace", &obj.meta.namespace_); !st.ok()) return st;
  if (auto st = str("uid", &obj.meta.uid); !st.ok()) return st;
  std::string rv;
  if (auto st = str("resourceVersion", &rv); !st.ok()) return st;
  if (!rv.empty()) {
    char* end = nullptr;
    long long v = std::strtoll(rv.c_str(), &end, 10);
    if (*end != '\0' || v <= 0) {
      return absl::InvalidArgumentError("metadata.resourceVersion: Invalid value: \"" + rv +
                                        "\": must be a positive integer");
    }
    obj.meta.resource_version = v;
  }
  if (auto st = DecodeStringMap(meta, "labels", &obj.meta.labels); !st.ok()) return st;
  if (auto st = DecodeStringMap(meta, "annotations", &obj.meta.annotations); !st.ok()) return st;
  if (auto it = meta.find("finalizers"); it != meta.end() && !it->is_null()) {
    if (!it->is_array()) return MetaTypeError("finalizers", "a list of strings");
    for (const auto& f : *it) {
      if (!f.is_string()) return MetaTypeError("finalizers", "a list of strings");
      if (std::find(obj.meta.finalizers.begin(), obj.meta.finalizers.end(), f) ==
          obj.meta.finalizers.end()) {
        obj.meta.finalizers.push_back(f.get<std::string>());
      }
    }
  }
  if (auto it = meta.find("ownerReferences"); it != meta.end() && !it->is_null()) {
    if (!it->is_array()) return MetaTypeError("ownerReferences", "a list");
    if (!it->empty()) obj.meta.owner_references = model::json::Write(*it);
  }
  // The body's text as dump() writes it (members in key order; model/json/write.h), member by
  // member, so that the spec's text is written once and hashed for the digest as it is.
  std::string& text = obj.body;
  text.push_back('{');
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it != body.begin()) text.push_back(',');
    model::json::AppendJson(it.key(), &text);
    text.push_back(':');
    if (it.key() == "spec" && !it->is_null()) {
      const size_t start = text.size();
      model::json::AppendJson(*it, &text);
      obj.spec_digest = model::SpecDigest(std::string_view(text).substr(start));
    } else {
      model::json::AppendJson(*it, &text);
    }
  }
  text.push_back('}');
  // The tree the text was written from travels with the object, so that the controllers that
  // hear of the change (the scheduler, the inventory) need not parse the text again.
  model::json::KeepParsed(obj, std::make_shared<const model::json::Document>(std::move(body)));
  return obj;
}

json EncodeMeta(const model::ObjectMeta& meta) {
  // One description of the shape: the tree is what EncodeMetaText writes.
  return model::json::Read(EncodeMetaText(meta));
}

namespace {

bool HubShaped(const model::ResourceType& type, const std::string& version) {
  if (version != "v1beta1" || type.group != model::kResourceGroup) return true;
  return type.kind != "ResourceClaim" && type.kind != "ResourceClaimTemplate" &&
         type.kind != "ResourceSlice";
}

}  // namespace

std::string EncodeMetaText(const model::ObjectMeta& meta) {
  // EncodeMeta's members, in the order its object keeps them (by key).
  std::string out = "{";
  auto key = [&](std::string_view name) {
    if (out.size() > 1) out.push_back(',');
    out.push_back('"');
    out.append(name);
    out.append("\":");
  };
  auto string_member = [&](std::string_view name, std::string_view value) {
    key(name);
    model::json::AppendJsonString(value, &out);
  };
  if (!meta.annotations.empty()) {
    key("annotations");
    out += model::json::WriteStringMap(meta.annotations);
  }
  if (meta.creation_timestamp.time_since_epoch().count() != 0) {
    string_member("creationTimestamp", FormatRfc3339(meta.creation_timestamp));
  }
  if (meta.deletion_timestamp) {
    key("deletionGracePeriodSeconds");
    out += std::to_string(meta.deletion_grace_period_seconds.value_or(0));
    string_member("deletionTimestamp", FormatRfc3339(*meta.deletion_timestamp));
  }
  if (!meta.finalizers.empty()) {
    key("finalizers");
    out.push_back('[');
    for (size_t i = 0; i < meta.finalizers.size(); ++i) {
      if (i > 0) out.push_back(',');
      model::json::AppendJsonString(meta.finalizers[i], &out);
    }
    out.push_back(']');
  }
  if (!meta.generate_name.empty()) string_member("generateName", meta.generate_name);
  if (meta.generation != 0) {
    key("generation");
    out += std::to_string(meta.generation);
  }
  if (!meta.labels.empty()) {
    key("labels");
    out += model::json::WriteStringMap(meta.labels);
  }
  string_member("name", meta.name);
  if (!meta.namespace_.empty()) string_member("namespace", meta.namespace_);
  if (!meta.owner_references.empty()) {
    // Kept as the request's text, which was valid JSON; text that is not would make the whole
    // metadata unreadable, so it is left out.
    if (const json refs = model::json::Read(meta.owner_references); !refs.is_discarded()) {
      key("ownerReferences");
      model::json::AppendJson(refs, &out);
    }
  }
  if (meta.resource_version != 0) {
    string_member("resourceVersion", std::to_string(meta.resource_version));
  }
  if (!meta.uid.empty()) string_member("uid", meta.uid);
  out.push_back('}');
  return out;
}

std::string EncodeObjectText(const model::ResourceType& type, const std::string& version,
                             const model::Object& obj) {
  const std::string& body = obj.body;
  if (!HubShaped(type, version) || body.size() < 2 || body.front() != '{') {
    return model::json::Write(FromHub(type, version, FromObject(type, obj)));
  }
  std::string out = R"({"apiVersion":)" + model::json::Write(type.ApiVersion(version)) +
                    R"(,"kind":)" + model::json::Write(type.kind) + R"(,"metadata":)" +
                    EncodeMetaText(obj.meta);
  size_t first = body.find_first_not_of(" \t\r\n", 1);
  if (first == std::string::npos || body[first] == '}') return out + "}";
  out += ',';
  out.append(body, 1, std::string::npos);
  return out;
}

json FromObject(const model::ResourceType& type, const model::Object& obj) {
  json out = model::json::Read(obj.body);
  if (!out.is_object()) out = json::object();
  out["apiVersion"] = type.ApiVersion("v1");
  out["kind"] = type.kind;
  out["metadata"] = EncodeMeta(obj.meta);
  return out;
}

}  // namespace qm::api
