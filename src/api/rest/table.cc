#include "api/rest/table.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/quantity.h"

namespace qm::api {
namespace {

using nlohmann::json;

json Column(const char* name, const char* description, const char* format = "", int priority = 0,
            const char* type = "string") {
  return json{{"name", name},
              {"type", type},
              {"format", format},
              {"description", description},
              {"priority", priority}};
}

std::string Str(const json& obj, std::initializer_list<const char*> path) {
  const json* cur = &obj;
  for (const char* p : path) {
    if (!cur->is_object() || !cur->contains(p)) return "";
    cur = &(*cur)[p];
  }
  if (cur->is_string()) return cur->get<std::string>();
  if (cur->is_boolean()) return cur->get<bool>() ? "true" : "false";
  if (cur->is_number()) return cur->dump();
  return "";
}

std::string Age(const json& obj, std::chrono::system_clock::time_point now) {
  std::chrono::system_clock::time_point created;
  if (!ParseRfc3339(Str(obj, {"metadata", "creationTimestamp"}), &created)) return "<unknown>";
  return ShortHumanDuration(now - created);
}

std::string ClaimState(const json& obj) {
  std::vector<std::string> parts;
  if (!Str(obj, {"metadata", "deletionTimestamp"}).empty()) parts.push_back("deleted");
  const json* status = obj.contains("status") ? &obj["status"] : nullptr;
  bool allocated = status && status->is_object() && status->contains("allocation") &&
                   !(*status)["allocation"].is_null();
  parts.push_back(allocated ? "allocated" : "pending");
  if (status && status->is_object() && status->contains("reservedFor") &&
      (*status)["reservedFor"].is_array() && !(*status)["reservedFor"].empty()) {
    parts.push_back("reserved");
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "," : "") + parts[i];
  return out;
}

std::string NodeStatus(const json& obj) {
  std::string ready = "Unknown";
  if (obj.contains("status") && obj["status"].is_object() && obj["status"].contains("conditions") &&
      obj["status"]["conditions"].is_array()) {
    for (const auto& c : obj["status"]["conditions"]) {
      if (c.is_object() && Str(c, {"type"}) == "Ready") {
        ready = Str(c, {"status"}) == "True" ? "Ready" : "NotReady";
      }
    }
  }
  if (Str(obj, {"spec", "unschedulable"}) == "true") ready += ",SchedulingDisabled";
  return ready;
}

std::string NodeRoles(const json& obj) {
  std::string roles;
  if (obj.contains("metadata") && obj["metadata"].contains("labels") &&
      obj["metadata"]["labels"].is_object()) {
    const std::string prefix = "node-role.kubernetes.io/";
    for (auto& [k, v] : obj["metadata"]["labels"].items()) {
      if (k.rfind(prefix, 0) == 0) roles += (roles.empty() ? "" : ",") + k.substr(prefix.size());
    }
  }
  return roles.empty() ? "<none>" : roles;
}

// obj[path...] when every step exists, else nullptr.
const json* At(const json& obj, std::initializer_list<const char*> path) {
  const json* cur = &obj;
  for (const char* p : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(p);
    if (it == cur->end() || it->is_null()) return nullptr;
    cur = &*it;
  }
  return cur;
}

// The items of the array at `path`, or an empty array.
const json& Items(const json& obj, std::initializer_list<const char*> path) {
  static const json* empty = new json(json::array());
  const json* list = At(obj, path);
  return list != nullptr && list->is_array() ? *list : *empty;
}

int64_t Int(const json& obj, std::initializer_list<const char*> path) {
  const json* v = At(obj, path);
  return v != nullptr && v->is_number_integer() ? v->get<int64_t>() : 0;
}

// translateTimestampSince of the apiserver's printers: "<unknown>" for a missing time.
std::string Since(const std::string& timestamp, std::chrono::system_clock::time_point now) {
  std::chrono::system_clock::time_point t;
  if (timestamp.empty() || !ParseRfc3339(timestamp, &t)) return "<unknown>";
  return ShortHumanDuration(now - t);
}

std::string OrNone(std::string s) { return s.empty() ? "<none>" : s; }

// Kubernetes' printPod (pkg/printers/internalversion): READY counts ready containers (and
// started sidecars), STATUS is the phase refined by init and container states, RESTARTS sums
// the restart counts with the time of the last restart.
struct PodSummary {
  int ready = 0;
  int total = 0;
  std::string reason;
  std::string restarts;
};

PodSummary SummarizePod(const json& pod, std::chrono::system_clock::time_point now) {
  PodSummary out;
  const std::string phase = Str(pod, {"status", "phase"});
  out.reason = phase;
  if (!Str(pod, {"status", "reason"}).empty()) out.reason = Str(pod, {"status", "reason"});
  const json& conditions = Items(pod, {"status", "conditions"});
  for (const auto& c : conditions) {
    if (Str(c, {"type"}) == "PodScheduled" && Str(c, {"reason"}) == "SchedulingGated") {
      out.reason = "SchedulingGated";
    }
  }
  out.total = static_cast<int>(Items(pod, {"spec", "containers"}).size());
  const json& init_specs = Items(pod, {"spec", "initContainers"});
  auto restartable = [&](const std::string& name) {
    for (const auto& c : init_specs) {
      if (Str(c, {"name"}) == name) return Str(c, {"restartPolicy"}) == "Always";
    }
    return false;
  };
  for (const auto& c : init_specs) {
    if (Str(c, {"restartPolicy"}) == "Always") ++out.total;
  }
  int restarts = 0;
  std::string last_restart;  // RFC 3339 text sorts by time
  auto note_restart = [&](const json& status) {
    std::string finished = Str(status, {"lastState", "terminated", "finishedAt"});
    if (finished > last_restart) last_restart = finished;
  };

  bool initializing = false;
  const json& init_statuses = Items(pod, {"status", "initContainerStatuses"});
  for (size_t i = 0; i < init_statuses.size(); ++i) {
    const json& c = init_statuses[i];
    restarts += static_cast<int>(Int(c, {"restartCount"}));
    note_restart(c);
    const json* terminated = At(c, {"state", "terminated"});
    const std::string waiting = Str(c, {"state", "waiting", "reason"});
    if (terminated != nullptr && Int(*terminated, {"exitCode"}) == 0) continue;
    if (restartable(Str(c, {"name"})) && Str(c, {"started"}) == "true") {
      if (Str(c, {"ready"}) == "true") ++out.ready;
      continue;
    }
    if (terminated != nullptr) {
      const std::string r = Str(*terminated, {"reason"});
      if (!r.empty()) {
        out.reason = "Init:" + r;
      } else if (Int(*terminated, {"signal"}) != 0) {
        out.reason = "Init:Signal:" + std::to_string(Int(*terminated, {"signal"}));
      } else {
        out.reason = "Init:ExitCode:" + std::to_string(Int(*terminated, {"exitCode"}));
      }
    } else if (!waiting.empty() && waiting != "PodInitializing") {
      out.reason = "Init:" + waiting;
    } else {
      out.reason = "Init:" + std::to_string(i) + "/" + std::to_string(init_specs.size());
    }
    initializing = true;
    break;
  }
  bool initialized = false;
  bool pod_ready = false;
  for (const auto& c : conditions) {
    if (Str(c, {"type"}) == "Initialized" && Str(c, {"status"}) == "True") initialized = true;
    if (Str(c, {"type"}) == "Ready" && Str(c, {"status"}) == "True") pod_ready = true;
  }
  if (!initializing || initialized) {
    bool has_running = false;
    const json& statuses = Items(pod, {"status", "containerStatuses"});
    for (auto it = statuses.rbegin(); it != statuses.rend(); ++it) {
      const json& c = *it;
      restarts += static_cast<int>(Int(c, {"restartCount"}));
      note_restart(c);
      const json* terminated = At(c, {"state", "terminated"});
      const std::string waiting = Str(c, {"state", "waiting", "reason"});
      if (!waiting.empty()) {
        out.reason = waiting;
      } else if (terminated != nullptr && !Str(*terminated, {"reason"}).empty()) {
        out.reason = Str(*terminated, {"reason"});
      } else if (terminated != nullptr) {
        out.reason = Int(*terminated, {"signal"}) != 0
                         ? "Signal:" + std::to_string(Int(*terminated, {"signal"}))
                         : "ExitCode:" + std::to_string(Int(*terminated, {"exitCode"}));
      } else if (Str(c, {"ready"}) == "true" && At(c, {"state", "running"}) != nullptr) {
        has_running = true;
        ++out.ready;
      }
    }
    if (out.reason == "Completed" && has_running) out.reason = pod_ready ? "Running" : "NotReady";
  }
  const bool deleting = !Str(pod, {"metadata", "deletionTimestamp"}).empty();
  if (deleting && Str(pod, {"status", "reason"}) == "NodeLost") {
    out.reason = "Unknown";
  } else if (deleting && phase != "Succeeded" && phase != "Failed") {
    out.reason = "Terminating";
  }
  out.restarts = std::to_string(restarts);
  if (restarts != 0 && !last_restart.empty()) {
    out.restarts += " (" + Since(last_restart, now) + " ago)";
  }
  return out;
}

json PodColumns() {
  return json::array(
      {Column("Name",
              "Name must be unique within a namespace. Is required when creating resources.",
              "name"),
       Column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
       Column("Status", "The aggregate status of the containers in this pod."),
       Column("Restarts",
              "The number of times the containers in this pod have been restarted and when the "
              "last container in this pod has restarted."),
       Column("Age", "Time since the object was created."),
       Column("IP", "IP address allocated to the pod.", "", 1),
       Column("Node", "The node the pod is bound to.", "", 1),
       Column("Nominated Node", "The node the pod is expected to run on after preemption.", "", 1),
       Column("Readiness Gates", "Readiness gates that are True, of all the pod's gates.", "", 1)});
}

json PodCells(const json& pod, std::chrono::system_clock::time_point now) {
  PodSummary sum = SummarizePod(pod, now);
  std::string ip;
  const json& ips = Items(pod, {"status", "podIPs"});
  if (!ips.empty()) ip = Str(ips[0], {"ip"});
  std::string gates = "<none>";
  const json& readiness_gates = Items(pod, {"spec", "readinessGates"});
  if (!readiness_gates.empty()) {
    int true_conditions = 0;
    for (const auto& gate : readiness_gates) {
      for (const auto& c : Items(pod, {"status", "conditions"})) {
        if (Str(c, {"type"}) != Str(gate, {"conditionType"})) continue;
        if (Str(c, {"status"}) == "True") ++true_conditions;
        break;
      }
    }
    gates = std::to_string(true_conditions) + "/" + std::to_string(readiness_gates.size());
  }
  return json::array({Str(pod, {"metadata", "name"}),
                      std::to_string(sum.ready) + "/" + std::to_string(sum.total), sum.reason,
                      sum.restarts, Since(Str(pod, {"metadata", "creationTimestamp"}), now),
                      OrNone(ip), OrNone(Str(pod, {"spec", "nodeName"})),
                      OrNone(Str(pod, {"status", "nominatedNodeName"})), gates});
}

// Succeeded and Failed pods carry the Completed row condition, as the apiserver marks them.
json PodRowConditions(const json& pod) {
  const std::string phase = Str(pod, {"status", "phase"});
  if (phase != "Succeeded" && phase != "Failed") return json();
  return json::array({{{"type", "Completed"},
                       {"status", "True"},
                       {"reason", phase},
                       {"message", phase == "Succeeded" ? "The pod has completed successfully."
                                                        : "The pod failed."}}});
}

json EventColumns() {
  return json::array(
      {Column("Last Seen",
              "The time at which the most recent occurrence of this event was "
              "recorded."),
       Column("Type",
              "Type of this event (Normal, Warning), new types could be added in the "
              "future"),
       Column("Reason",
              "This should be a short, machine understandable string that gives the "
              "reason for the transition into the object's current status."),
       Column("Object", "The object that this event is about."),
       Column("Subobject", "The part of the object the event is about (fieldPath).", "", 1),
       Column("Source", "The component reporting this event.", "", 1),
       Column("Message", "A human-readable description of the status of this operation."),
       Column("First Seen", "The time at which the event was first recorded.", "", 1),
       Column("Count", "The number of times this event has occurred.", "", 1),
       Column("Name",
              "Name must be unique within a namespace. Is required when creating resources.",
              "name", 1)});
}

std::string TrimSpace(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Kubernetes' printEvent: the last-seen time falls back to the first one (or eventTime), the
// series carries the count of new-style events, and OBJECT is "<kind>/<name>" in lower case.
json EventCells(const json& ev, std::chrono::system_clock::time_point now) {
  std::string first = Str(ev, {"firstTimestamp"}).empty() ? Since(Str(ev, {"eventTime"}), now)
                                                          : Since(Str(ev, {"firstTimestamp"}), now);
  std::string last =
      Str(ev, {"lastTimestamp"}).empty() ? first : Since(Str(ev, {"lastTimestamp"}), now);
  int64_t count = Int(ev, {"count"});
  if (At(ev, {"series"}) != nullptr) {
    last = Since(Str(ev, {"series", "lastObservedTime"}), now);
    count = Int(ev, {"series", "count"});
  } else if (count == 0) {
    count = 1;
  }
  std::string kind = Str(ev, {"involvedObject", "kind"});
  std::transform(kind.begin(), kind.end(), kind.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string name = Str(ev, {"involvedObject", "name"});
  const std::string target = name.empty() ? kind : kind + "/" + name;
  std::string component = Str(ev, {"source", "component"});
  if (component.empty()) component = Str(ev, {"reportingComponent"});
  std::string host = Str(ev, {"source", "host"});
  if (host.empty()) host = Str(ev, {"reportingInstance"});
  const std::string source = host.empty() ? component : component + ", " + host;
  return json::array({last, Str(ev, {"type"}), Str(ev, {"reason"}), target,
                      Str(ev, {"involvedObject", "fieldPath"}), source,
                      TrimSpace(Str(ev, {"message"})), first, count,
                      Str(ev, {"metadata", "name"})});
}

json QuotaColumns() {
  return json::array(
      {Column("Name",
              "Name must be unique within a namespace. Is required when creating resources.",
              "name"),
       Column("Age", "Time since the object was created."),
       Column("Request",
              "Request represents a minimum amount of cpu/memory that a container may consume."),
       Column("Limit",
              "Limits control the maximum amount of cpu/memory that a container may use "
              "independent of contention on the node.")});
}

std::string CanonicalQuantity(const json* v) {
  if (v == nullptr) return "0";
  std::string text = v->is_string() ? v->get<std::string>() : v->dump();
  auto q = ParseQuantity(text);
  return q.ok() ? q->String() : text;
}

// Kubernetes' printResourceQuota: "<resource>: <used>/<hard>" for every resource of
// status.hard in name order; "limits.*" resources go to LIMIT, the rest to REQUEST.
json QuotaCells(const json& quota, std::chrono::system_clock::time_point now) {
  std::string request, limit;
  const json* hard = At(quota, {"status", "hard"});
  const json* used = At(quota, {"status", "used"});
  if (hard != nullptr && hard->is_object()) {
    for (const auto& [resource, value] : hard->items()) {
      const json* u = nullptr;
      if (used != nullptr && used->is_object() && used->contains(resource)) u = &(*used)[resource];
      std::string& column = resource.rfind("limits.", 0) == 0 ? limit : request;
      if (!column.empty()) column += ", ";
      column += resource + ": " + CanonicalQuantity(u) + "/" + CanonicalQuantity(&value);
    }
  }
  return json::array({Str(quota, {"metadata", "name"}),
                      Since(Str(quota, {"metadata", "creationTimestamp"}), now), request, limit});
}

// Kubernetes' role printers: the name and the creation time (RFC 3339, type "date").
json RoleColumns() {
  return json::array(
      {Column("Name",
              "Name must be unique within a namespace. Is required when creating resources.",
              "name"),
       Column("Created At", "The time the object was created.", "", 0, "date")});
}

json RoleCells(const json& role) {
  return json::array(
      {Str(role, {"metadata", "name"}), Str(role, {"metadata", "creationTimestamp"})});
}

// Kubernetes' binding printers: ROLE is "<kind>/<name>"; the wide columns list the subjects by
// kind, service accounts as "<namespace>/<name>".
json BindingColumns() {
  return json::array(
      {Column("Name",
              "Name must be unique within a namespace. Is required when creating resources.",
              "name"),
       Column("Role", "RoleRef can reference a Role in the current namespace or a ClusterRole."),
       Column("Age", "Time since the object was created."),
       Column("Users", "Users in the roleBinding", "", 1),
       Column("Groups", "Groups in the roleBinding", "", 1),
       Column("ServiceAccounts", "ServiceAccounts in the roleBinding", "", 1)});
}

json BindingCells(const json& binding, std::chrono::system_clock::time_point now) {
  std::vector<std::string> users, groups, service_accounts;
  if (const json* subjects = At(binding, {"subjects"}); subjects && subjects->is_array()) {
    for (const json& subject : *subjects) {
      const std::string kind = Str(subject, {"kind"});
      const std::string name = Str(subject, {"name"});
      if (kind == "User") {
        users.push_back(name);
      } else if (kind == "Group") {
        groups.push_back(name);
      } else if (kind == "ServiceAccount") {
        const std::string ns = Str(subject, {"namespace"});
        service_accounts.push_back(ns.empty() ? name : ns + "/" + name);
      }
    }
  }
  auto join = [](const std::vector<std::string>& items) {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
    return out;
  };
  return json::array({Str(binding, {"metadata", "name"}),
                      Str(binding, {"roleRef", "kind"}) + "/" + Str(binding, {"roleRef", "name"}),
                      Since(Str(binding, {"metadata", "creationTimestamp"}), now), join(users),
                      join(groups), join(service_accounts)});
}

// Kubernetes' printServiceAccount: the number of secrets.
json ServiceAccountColumns() {
  return json::array(
      {Column("Name",
              "Name must be unique within a namespace. Is required when creating resources.",
              "name"),
       Column("Secrets",
              "Secrets is a list of the secrets in the same namespace that pods running using "
              "this ServiceAccount are allowed to use."),
       Column("Age", "Time since the object was created.")});
}

json ServiceAccountCells(const json& sa, std::chrono::system_clock::time_point now) {
  const json* secrets = At(sa, {"secrets"});
  const int64_t count =
      secrets != nullptr && secrets->is_array() ? static_cast<int64_t>(secrets->size()) : 0;
  return json::array({Str(sa, {"metadata", "name"}), count,
                      Since(Str(sa, {"metadata", "creationTimestamp"}), now)});
}

bool IsRole(const model::ResourceType& type) {
  return type.group == model::kRbacGroup && (type.kind == "Role" || type.kind == "ClusterRole");
}

bool IsBinding(const model::ResourceType& type) {
  return type.group == model::kRbacGroup &&
         (type.kind == "RoleBinding" || type.kind == "ClusterRoleBinding");
}

bool IsServiceAccount(const model::ResourceType& type) {
  return type.group.empty() && type.kind == "ServiceAccount";
}

// Name, the kind-specific columns, Age (and a Node's version) for the remaining kinds.
json GenericCells(const model::ResourceType& type, const json& obj,
                  std::chrono::system_clock::time_point now) {
  json cells = json::array();
  cells.push_back(Str(obj, {"metadata", "name"}));
  if (type.kind == "ResourceClaim") {
    cells.push_back(ClaimState(obj));
  } else if (type.kind == "ResourceSlice") {
    std::string node = Str(obj, {"spec", "nodeName"});
    if (node.empty()) node = Str(obj, {"spec", "basic", "nodeName"});
    cells.push_back(node);
    cells.push_back(Str(obj, {"spec", "driver"}));
    cells.push_back(Str(obj, {"spec", "pool", "name"}));
  } else if (type.kind == "Namespace") {
    cells.push_back(Str(obj, {"status", "phase"}));
  } else if (type.kind == "Node") {
    cells.push_back(NodeStatus(obj));
    cells.push_back(NodeRoles(obj));
  }
  cells.push_back(Age(obj, now));
  if (type.kind == "Node") cells.push_back(Str(obj, {"status", "nodeInfo", "kubeletVersion"}));
  return cells;
}

}  // namespace

json TableColumns(const model::ResourceType& type) {
  if (type.group.empty() && type.kind == "Pod") return PodColumns();
  if (type.group.empty() && type.kind == "Event") return EventColumns();
  if (type.group.empty() && type.kind == "ResourceQuota") return QuotaColumns();
  if (IsRole(type)) return RoleColumns();
  if (IsBinding(type)) return BindingColumns();
  if (IsServiceAccount(type)) return ServiceAccountColumns();
  json cols = json::array();
  cols.push_back(Column("Name",
                        "Name must be unique within a namespace. Is required when creating "
                        "resources.",
                        "name"));
  if (type.kind == "ResourceClaim") {
    cols.push_back(Column("State",
                          "A summary of the claim's lifecycle: pending, allocated, "
                          "reserved, deleted."));
  } else if (type.kind == "ResourceSlice") {
    cols.push_back(Column("Node", "The node that provides the devices of this slice."));
    cols.push_back(Column("Driver", "The driver that publishes this slice."));
    cols.push_back(Column("Pool", "The pool this slice belongs to."));
  } else if (type.kind == "Namespace") {
    cols.push_back(Column("Status", "The phase of the namespace."));
  } else if (type.kind == "Node") {
    cols.push_back(Column("Status", "Readiness and schedulability of the node."));
    cols.push_back(Column("Roles", "The roles of the node."));
  }
  cols.push_back(Column("Age", "Time since the object was created."));
  if (type.kind == "Node") {
    cols.push_back(Column("Version", "The kubelet version the node reports."));
  }
  return cols;
}

json TableRow(const model::ResourceType& type, const json& obj,
              std::chrono::system_clock::time_point now) {
  json cells = json::array();
  json conditions;
  if (type.group.empty() && type.kind == "Pod") {
    cells = PodCells(obj, now);
    conditions = PodRowConditions(obj);
  } else if (type.group.empty() && type.kind == "Event") {
    cells = EventCells(obj, now);
  } else if (type.group.empty() && type.kind == "ResourceQuota") {
    cells = QuotaCells(obj, now);
  } else if (IsRole(type)) {
    cells = RoleCells(obj);
  } else if (IsBinding(type)) {
    cells = BindingCells(obj, now);
  } else if (IsServiceAccount(type)) {
    cells = ServiceAccountCells(obj, now);
  } else {
    cells = GenericCells(type, obj, now);
  }
  json meta = obj.contains("metadata") ? obj["metadata"] : json::object();
  json row = {
      {"cells", std::move(cells)},
      {"object",
       {{"kind", "PartialObjectMetadata"}, {"apiVersion", "meta.k8s.io/v1"}, {"metadata", meta}}}};
  if (!conditions.is_null()) row["conditions"] = std::move(conditions);
  return row;
}

json MakeTable(const model::ResourceType& type, json rows, const std::string& resource_version,
               const std::string& continue_token, bool with_columns) {
  json meta = {{"resourceVersion", resource_version}};
  if (!continue_token.empty()) meta["continue"] = continue_token;
  json t = {{"kind", "Table"}, {"apiVersion", "meta.k8s.io/v1"}, {"metadata", meta}};
  if (with_columns) t["columnDefinitions"] = TableColumns(type);
  t["rows"] = std::move(rows);
  return t;
}

}  // namespace qm::api
