#include "api/rest/table.h"

#include "common/clock.h"

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

}  // namespace

json TableColumns(const model::ResourceType& type) {
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
  json meta = obj.contains("metadata") ? obj["metadata"] : json::object();
  return json{
      {"cells", cells},
      {"object",
       {{"kind", "PartialObjectMetadata"}, {"apiVersion", "meta.k8s.io/v1"}, {"metadata", meta}}}};
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
