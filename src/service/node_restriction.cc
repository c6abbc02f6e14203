#include "service/node_restriction.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "model/resource_types.h"

namespace qm::service {
namespace {

// Whether a claim's allocation is for `node`: its nodeSelector requires metadata.name (or the
// kubernetes.io/hostname label) to be exactly that node.
bool AllocatedTo(const model::NodeRelations& claim, const std::string& node) {
  const auto& nodes = claim.allocated_nodes;
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

absl::Status Denied(const std::string& node, const std::string& what) {
  return absl::PermissionDeniedError("node \"" + node + "\" " + what);
}

}  // namespace

std::optional<std::string> NodeNameOf(const auth::UserInfo& user) {
  const std::string prefix = auth::kNodeUserPrefix;
  if (!user.InGroup(auth::kGroupNodes) || user.name.rfind(prefix, 0) != 0 ||
      user.name.size() == prefix.size()) {
    return std::nullopt;
  }
  return user.name.substr(prefix.size());
}

absl::Status AdmitNodeWrite(const auth::UserInfo& user, const std::string& kind,
                            const std::string& subresource,
                            const std::optional<model::NodeRelations>& old_obj,
                            const std::optional<model::NodeRelations>& new_obj) {
  auto node = NodeNameOf(user);
  if (!node.has_value()) return absl::OkStatus();
  auto every = [&](auto pred) {
    return (!old_obj.has_value() || pred(*old_obj)) && (!new_obj.has_value() || pred(*new_obj));
  };
  if (kind == "ResourceSlice") {
    if (every([&](const model::NodeRelations& o) { return o.spec_node_name == *node; })) {
      return absl::OkStatus();
    }
    return Denied(*node,
                  "may only create, update or delete ResourceSlices whose spec.nodeName is \"" +
                      *node + "\"");
  }
  if (kind == "Node") {
    if (every([&](const model::NodeRelations& o) { return o.name == *node; })) {
      return absl::OkStatus();
    }
    return Denied(*node, "may only modify its own Node object");
  }
  if (kind == "Pod") {
    if (subresource == "status" && old_obj.has_value() && old_obj->spec_node_name == *node) {
      return absl::OkStatus();
    }
    return Denied(*node, "may only update the status of pods bound to it");
  }
  if (kind == "ResourceClaim") {
    if (subresource == "status" && old_obj.has_value() && AllocatedTo(*old_obj, *node) &&
        (!new_obj.has_value() || AllocatedTo(*new_obj, *node))) {
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

absl::Status AdmitNodeGet(const auth::UserInfo& user, const std::string& kind,
                          const model::NodeRelations& obj) {
  auto node = NodeNameOf(user);
  if (!node.has_value()) return absl::OkStatus();
  bool related = true;
  if (kind == "ResourceSlice" || kind == "Pod") {
    related = obj.spec_node_name == *node;
  } else if (kind == "ResourceClaim") {
    related = AllocatedTo(obj, *node);
  }
  if (related) return absl::OkStatus();
  return absl::PermissionDeniedError("no relationship found between node '" + *node +
                                     "' and this object");
}

}  // namespace qm::service
