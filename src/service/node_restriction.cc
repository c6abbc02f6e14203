#include "service/node_restriction.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "model/resource_types.h"

namespace qm::service {
namespace {

using nlohmann::json;

std::string StringAt(const json* obj, std::initializer_list<const char*> path) {
  const json* cur = obj;
  for (const char* key : path) {
    if (cur == nullptr || !cur->is_object()) return "";
    auto it = cur->find(key);
    if (it == cur->end()) return "";
    cur = &*it;
  }
  return cur != nullptr && cur->is_string() ? cur->get<std::string>() : "";
}

// The nodes a claim's allocation names: each nodeSelector term's requirement that
// metadata.name (or the kubernetes.io/hostname label) is exactly one node.
std::vector<std::string> NodesNamed(const json* claim) {
  std::vector<std::string> out;
  if (claim == nullptr || !claim->is_object()) return out;
  const json* sel = claim;
  for (const char* key : {"status", "allocation", "nodeSelector", "nodeSelectorTerms"}) {
    if (!sel->is_object() || !sel->contains(key)) return out;
    sel = &(*sel)[key];
  }
  if (!sel->is_array()) return out;
  for (const auto& term : *sel) {
    for (const char* list : {"matchFields", "matchExpressions"}) {
      if (!term.is_object() || !term.contains(list) || !term[list].is_array()) continue;
      for (const auto& req : term[list]) {
        if (!req.is_object()) continue;
        std::string key = req.value("key", "");
        if (key != "metadata.name" && key != "kubernetes.io/hostname") continue;
        if (req.value("operator", "") != "In") continue;
        const json values = req.value("values", json::array());
        if (values.is_array() && values.size() == 1 && values[0].is_string()) {
          out.push_back(values[0].get<std::string>());
        }
      }
    }
  }
  return out;
}

// Whether a claim's allocation is for `node`: its nodeSelector requires metadata.name (or the
// kubernetes.io/hostname label) to be exactly that node.
bool AllocatedTo(const json* claim, const std::string& node) {
  for (const auto& n : NodesNamed(claim)) {
    if (n == node) return true;
  }
  return false;
}

absl::Status Denied(const std::string& node, const std::string& what) {
  return absl::PermissionDeniedError("node \"" + node + "\" " + what);
}

}  // namespace

std::optional<std::string> AllocatedNodeOf(const json& claim) {
  auto nodes = NodesNamed(&claim);
  if (nodes.empty()) return std::nullopt;
  for (const auto& n : nodes) {
    if (n != nodes.front()) return std::nullopt;
  }
  return nodes.front();
}

std::optional<std::string> NodeNameOf(const auth::UserInfo& user) {
  const std::string prefix = auth::kNodeUserPrefix;
  if (!user.InGroup(auth::kGroupNodes) || user.name.rfind(prefix, 0) != 0 ||
      user.name.size() == prefix.size()) {
    return std::nullopt;
  }
  return user.name.substr(prefix.size());
}

absl::Status AdmitNodeWrite(const auth::UserInfo& user, const std::string& kind,
                            const std::string& subresource, const json* old_obj,
                            const json* new_obj) {
  auto node = NodeNameOf(user);
  if (!node.has_value()) return absl::OkStatus();
  auto every = [&](auto pred) {
    return (old_obj == nullptr || pred(old_obj)) && (new_obj == nullptr || pred(new_obj));
  };
  if (kind == "ResourceSlice") {
    if (every([&](const json* o) { return StringAt(o, {"spec", "nodeName"}) == *node; })) {
      return absl::OkStatus();
    }
    return Denied(*node,
                  "may only create, update or delete ResourceSlices whose spec.nodeName is \"" +
                      *node + "\"");
  }
  if (kind == "Node") {
    if (every([&](const json* o) { return StringAt(o, {"metadata", "name"}) == *node; })) {
      return absl::OkStatus();
    }
    return Denied(*node, "may only modify its own Node object");
  }
  if (kind == "Pod") {
    if (subresource == "status" && old_obj != nullptr &&
        StringAt(old_obj, {"spec", "nodeName"}) == *node) {
      return absl::OkStatus();
    }
    return Denied(*node, "may only update the status of pods bound to it");
  }
  if (kind == "ResourceClaim") {
    if (subresource == "status" && old_obj != nullptr && AllocatedTo(old_obj, *node) &&
        (new_obj == nullptr || AllocatedTo(new_obj, *node))) {
      return absl::OkStatus();
    }
    return Denied(*node, "may only update the status of ResourceClaims allocated to it");
  }
  if (kind == "Event") return absl::OkStatus();
  return Denied(*node, "may not modify " + kind + " objects");
}

absl::Status AdmitNodeCollectionRead(const auth::UserInfo& user, const std::string& group,
                                     const std::string& resource, const std::string& verb,
                                     const std::string& field_selector) {
  auto node = NodeNameOf(user);
  if (!node.has_value()) return absl::OkStatus();
  if (verb != "list" && verb != "watch" && verb != "deletecollection") return absl::OkStatus();
  const bool dra = group == model::kResourceGroup;
  if (dra && resource == "resourceclaims") {
    return Denied(*node, "may not " + verb + " resourceclaims; it reads those of its pods");
  }
  if (!(dra && resource == "resourceslices") && !(group.empty() && resource == "pods")) {
    return absl::OkStatus();
  }
  for (absl::string_view term : absl::StrSplit(field_selector, ',')) {
    term = absl::StripAsciiWhitespace(term);
    for (const char* op : {"==", "="}) {
      const std::string want = std::string("spec.nodeName") + op + *node;
      if (term == want) return absl::OkStatus();
    }
  }
  return Denied(*node, "can only list, watch or delete-collection " + resource +
                           " with the field selector spec.nodeName=" + *node);
}

absl::Status AdmitNodeGet(const auth::UserInfo& user, const std::string& kind, const json& obj) {
  auto node = NodeNameOf(user);
  if (!node.has_value()) return absl::OkStatus();
  bool related = true;
  if (kind == "ResourceSlice" || kind == "Pod") {
    related = StringAt(&obj, {"spec", "nodeName"}) == *node;
  } else if (kind == "ResourceClaim") {
    related = AllocatedTo(&obj, *node);
  }
  if (related) return absl::OkStatus();
  return absl::PermissionDeniedError("no relationship found between node '" + *node +
                                     "' and this object");
}

}  // namespace qm::service
