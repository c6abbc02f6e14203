#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qm::model {

namespace json {
class Document;  // model/json/document.h: a parsed body
}  // namespace json

// Identifies one stored object. `resource` is the group-qualified plural
// ("resourceclaims.resource.k8s.io", or "nodes" for the core group).
struct ResourceKey {
  std::string resource;
  std::string namespace_;  // empty for cluster-scoped resources
  std::string name;

  bool operator==(const ResourceKey&) const = default;
  auto operator<=>(const ResourceKey&) const = default;
};

// The metadata every object carries, in the form the service layer reasons about.
struct ObjectMeta {
  std::string name;
  std::string generate_name;
  std::string namespace_;
  std::string uid;
  int64_t resource_version = 0;  // 0 means "unset" on input
  int64_t generation = 0;
  std::chrono::system_clock::time_point creation_timestamp{};
  std::optional<std::chrono::system_clock::time_point> deletion_timestamp;
  // metadata.deletionGracePeriodSeconds: set with deletion_timestamp by a graceful deletion
  // (which then lies this many seconds after the request); nullopt otherwise.
  std::optional<int64_t> deletion_grace_period_seconds;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> finalizers;
  // metadata.ownerReferences as JSON text ("" when absent); kept verbatim.
  std::string owner_references;

  bool operator==(const ObjectMeta&) const = default;
};

// One API object in the storage (hub) version.
//
// `body` is the JSON text of the object without its "metadata" member; the codecs in api/rest
// own its shape. `spec_digest` identifies the fields whose change bumps metadata.generation (the
// SHA-256 of their canonical text, SpecDigest below; "" without a spec), and `fields` holds the
// values field selectors and indexes use
// ("spec.nodeName" -> "gpu-node-a"); both are computed by the codec from `body`.
struct Object {
  std::string resource;
  ObjectMeta meta;
  std::string body;
  std::string spec_digest;
  std::map<std::string, std::string> fields;
  // `body` parsed, where the codec that wrote `body` kept the tree it wrote it from (the REST
  // codec on every create and update), so that the controllers the change travels to (the
  // scheduler, the inventory) do not parse the text again. Shared and immutable, and kept only
  // while the change travels: the object cache drops it. Valid only for the text it was written
  // as: model::json::ParsedBody checks that, so code that replaces `body` need not reset it.
  std::shared_ptr<const json::Document> parsed;
  size_t parsed_hash = 0;  // of that text

  ResourceKey Key() const { return ResourceKey{resource, meta.namespace_, meta.name}; }
};

// An object no one changes any more, shared by whoever holds it: the watch cache's entries and
// the items of a list are these, so that a list hands out pointers instead of copies.
using ObjectPtr = std::shared_ptr<const Object>;

// `obj` as an ObjectPtr. Allocated apart from its reference count (not make_shared): an Object
// is just under one of the allocator's size classes, and the count on top of it would take the
// next one.
ObjectPtr Share(Object obj);

// The spec digest of a spec whose canonical JSON text (keys sorted, no spaces) is
// `canonical_spec`: "sha256:" and 64 hex digits, so that an object keeps (and the store writes)
// 71 bytes instead of a second copy of its spec.
std::string SpecDigest(std::string_view canonical_spec);

// Whether two spec digests name the same spec. Rows written before digests were hashed hold the
// canonical text itself; such a digest is hashed before comparing, so an upgrade bumps no
// generation by itself.
bool SameSpec(const std::string& a, const std::string& b);

enum class EventType { kAdded, kModified, kDeleted };

const char* EventTypeName(EventType t);

// One entry of the change log: the object as it was right after the change (for kDeleted, the
// last state with the deletion's resourceVersion).
struct WatchEvent {
  EventType type = EventType::kAdded;
  Object object;
  // For kModified: the object as it was before this change, where the watch cache knew it and
  // some watcher asked for it (Watcher::WantsPrevious); null otherwise (changes replayed from
  // the store's log carry none). A watch with a selector needs it to turn a change that makes
  // an object stop (or start) matching into DELETED (ADDED), as Kubernetes' watch cache does.
  ObjectPtr previous;
};

}  // namespace qm::model
