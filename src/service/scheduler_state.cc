// The scheduler's views and the helpers its files share (scheduler_pass.h).

#include "service/decoded_slices.h"
#include "service/scheduler_pass.h"

namespace qm::service::scheduling {

bool HasFinalizer(const model::Object& obj, const char* finalizer) {
  return std::find(obj.meta.finalizers.begin(), obj.meta.finalizers.end(), finalizer) !=
         obj.meta.finalizers.end();
}

// The devices of allocation results, as the allocator counts them.
void AppendAllocated(const model::AllocationResult& allocation,
                     std::vector<allocator::AllocatedDevice>& out) {
  for (const auto& r : allocation.results) {
    out.push_back({r.driver, r.pool, r.device, r.share_id, r.consumed_capacity, r.admin_access});
  }
}

// What placement needs of a pod's spec: node selector, required node affinity, tolerations, and
// whether it asked to be spread.
PodPlacementSpec PlacementSpecOf(const model::Pod& pod, const model::ObjectMeta& meta) {
  PodPlacementSpec out;
  out.node_selector = pod.node_selector;
  out.required_affinity = pod.required_affinity;
  out.tolerations = pod.tolerations;
  out.spread = meta.annotations.contains(kSpreadAnnotation);
  return out;
}

}  // namespace qm::service::scheduling

namespace qm::service {
std::vector<model::ResourceKey> Scheduler::State::ClaimsOf(const model::Object& obj,
                                                           const model::Pod& pod) {
  std::vector<model::ResourceKey> out;
  auto add = [&](const std::string& name) {
    if (!name.empty()) out.push_back({kClaims, obj.meta.namespace_, name});
  };
  for (const auto& rc : pod.resource_claims) add(rc.resource_claim_name);
  for (const auto& s : pod.resource_claim_statuses) add(s.resource_claim_name);
  add(pod.extended_resource_claim_name);
  return out;
}

PodView Scheduler::State::MakePod(model::Object o, PodView* previous) {
  PodView p;
  if (previous != nullptr && previous->obj.meta.uid == o.meta.uid && !o.spec_digest.empty() &&
      previous->obj.spec_digest == o.spec_digest) {
    // A change of its status or metadata (an agent's DevicesPrepared condition, a deletion):
    // the spec decoded before stands.
    Body body = model::json::BodyOf(o);
    model::Pod pod = std::move(previous->pod);
    model::json::DecodePodStatus(*body, pod);
    p.SetBody(std::move(body), std::move(pod));
  } else {
    p.SetBody(model::json::BodyOf(o));
  }
  p.terminal = p.pod.Terminal();
  p.deleting = o.meta.deletion_timestamp.has_value();
  p.node_name = p.pod.node_name;
  p.priority = p.pod.priority;
  p.obj = std::move(o);
  return p;
}

ClaimView Scheduler::State::MakeClaim(model::Object o, const ClaimView* previous) {
  ClaimView c;
  c.SetBody(model::json::BodyOf(o));
  if (previous != nullptr && previous->obj.meta.uid == o.meta.uid &&
      previous->allocation_text == c.allocation_text) {
    // The same allocation (an agent's report, a consumer added or gone): decoded before.
    c.allocation_error = previous->allocation_error;
    c.allocation = previous->allocation;
  } else {
    model::StoredAllocation stored = model::json::StoredAllocationOf(*c.body);
    c.allocation_error = std::move(stored.error);
    c.allocation =
        std::make_shared<const std::optional<model::AllocationResult>>(std::move(stored.decoded));
  }
  c.generated = o.meta.annotations.contains(kPodClaimNameAnnotation) ||
                o.meta.annotations.contains(kExtendedClaimAnnotation);
  c.owners = model::json::OwnerUids(o);
  c.obj = std::move(o);
  return c;
}

namespace {

// Applies a change the views do not show yet (State::Known) to a map of decoded views by key,
// each with the rv and uid of its object (`decode` makes the view of a created or updated one).
// False when it deletes an object the map does not hold (or one of another uid): nothing changed.
template <typename Map, typename Decode>
bool ApplyDecoded(Map& map, const model::WatchEvent& ev, bool deleted, Decode decode) {
  const model::ResourceKey key = ev.object.Key();
  auto it = map.find(key);
  if (deleted) {
    if (it == map.end() || it->second.uid != ev.object.meta.uid) return false;
    map.erase(it);
  } else {
    map.insert_or_assign(key, decode());
  }
  return true;
}

}  // namespace

std::vector<allocator::AllocatedDevice> Scheduler::State::DevicesHeld(const ClaimView& c) const {
  std::vector<allocator::AllocatedDevice> devices;
  if (c.allocation->has_value()) AppendAllocated(**c.allocation, devices);
  // Devices an allocation that does not decode may hold are never free.
  if (!c.allocation_error.empty() && inventory != nullptr) {
    devices = DevicesPossiblyHeld(c.obj.body, *inventory);
  }
  return devices;
}

std::string Scheduler::State::NodeOf(const std::vector<allocator::AllocatedDevice>& devices) const {
  std::string node;
  for (const auto& d : devices) {
    const auto found = inventory->FindDevice(d.driver, d.pool, d.device);
    if (found.empty()) return "";
    for (uint32_t i : found) {
      const auto& slice = *inventory->slices()[inventory->devices()[i].slice].slice;
      if (slice.node_name.empty() || (!node.empty() && slice.node_name != node)) return "";
      node = slice.node_name;
    }
  }
  return node;
}

void Scheduler::State::ResolveAllocated() {
  counted.clear();
  ForgetVerdicts();
  std::vector<allocator::AllocatedDevice> in_use;
  for (const auto& [key, c] : claims) {
    if (c.removed || !c.Holds()) continue;
    std::vector<allocator::AllocatedDevice> devices = DevicesHeld(c);
    in_use.insert(in_use.end(), devices.begin(), devices.end());
    std::string node = NodeOf(devices);
    counted.emplace(key, Counted{std::move(devices), std::move(node)});
  }
  allocated = inventory->ResolveAllocated(in_use);
}

void Scheduler::State::CountAllocated(const model::ResourceKey& key,
                                      std::vector<allocator::AllocatedDevice> devices) {
  UncountAllocated(key);
  if (!allocated.has_value() || devices.empty()) return;
  inventory->AddAllocated(*allocated, devices);
  std::string node = NodeOf(devices);
  Touch(node);
  counted.emplace(key, Counted{std::move(devices), std::move(node)});
}

void Scheduler::State::UncountAllocated(const model::ResourceKey& key) {
  auto it = counted.find(key);
  if (it == counted.end()) return;
  if (allocated.has_value()) inventory->RemoveAllocated(*allocated, it->second.devices);
  Touch(it->second.node);
  counted.erase(it);
}

void Scheduler::State::Touch(const std::string& node) {
  if (memos.empty()) return;
  auto it = node.empty() ? node_index.end() : node_index.find(node);
  if (node.empty() || node_versions.size() != nodes.size() ||
      touched_nodes.size() >= kMaxTouchedNodes) {
    ForgetVerdicts();
    return;
  }
  if (it == node_index.end()) return;  // no verdict is of a node placement does not know
  ++node_versions[it->second];
  touched_nodes.push_back(static_cast<uint32_t>(it->second));
}

bool Scheduler::State::Known(const model::WatchEvent& ev) const {
  const model::Object& o = ev.object;
  const std::string& resource = o.resource;
  const int64_t rv = o.meta.resource_version;
  if (resource == kPods) {
    auto it = pods.find(o.meta.uid);
    return it != pods.end() && it->second.obj.meta.resource_version >= rv;
  }
  if (resource == kClaims) {
    auto it = claims.find(o.Key());
    return it != claims.end() && it->second.obj.meta.uid == o.meta.uid &&
           it->second.obj.meta.resource_version >= rv;
  }
  if (resource == kEvents) return true;
  if (resource == kSlices) {
    auto it = slices.find(o.Key());
    return it != slices.end() && it->second.rv >= rv;
  }
  if (resource == kNodes) {
    auto it = node_states.find(o.Key());
    return it != node_states.end() && it->second.rv >= rv;
  }
  auto r = others.find(resource);
  if (r == others.end()) return false;
  auto it = r->second.find(o.Key());
  return it != r->second.end() && it->second.meta.resource_version >= rv;
}

void Scheduler::State::ApplyNew(model::WatchEvent ev, Dirty& d) {
  const std::string resource = ev.object.resource;  // ev.object is moved below
  const int64_t rv = ev.object.meta.resource_version;
  const bool deleted = ev.type == model::EventType::kDeleted;
  if (resource == kPods) {
    auto it = pods.find(ev.object.meta.uid);
    if (it != pods.end()) {
      // Its claims may lose a consumer.
      for (auto& key : ClaimsOf(it->second.obj, it->second.pod)) d.claims.insert(key);
    }
    if (deleted) {
      if (it != pods.end()) pods.erase(it);
      backoff.erase(ev.object.meta.uid);
      unbound.erase(ev.object.meta.uid);
      deleting.erase(ev.object.meta.uid);
      return;
    }
    PodView view = MakePod(std::move(ev.object), it != pods.end() ? &it->second : nullptr);
    for (auto& key : ClaimsOf(view.obj, view.pod)) d.claims.insert(key);
    d.pods.insert(view.obj.meta.uid);
    const std::string uid = view.obj.meta.uid;
    if (view.Unbound()) {
      unbound.insert(uid);
    } else {
      unbound.erase(uid);
      backoff.erase(uid);
    }
    if (view.deleting) {
      deleting.insert(uid);
    } else {
      deleting.erase(uid);
    }
    pods.insert_or_assign(uid, std::move(view));
    return;
  }
  if (resource == kClaims) {
    const model::ResourceKey key = ev.object.Key();
    auto it = claims.find(key);
    const bool same = it != claims.end() && it->second.obj.meta.uid == ev.object.meta.uid;
    if (it != claims.end()) Disown(it->second);
    if (deleted) {
      if (!same) return;
      if (it->second.Holds()) {
        d.relevant = true;  // devices freed
        UncountAllocated(key);
      }
      for (const auto& owner : it->second.owners) d.pods.insert(owner);
      claims.erase(it);
      return;
    }
    ClaimView view = MakeClaim(std::move(ev.object), same ? &it->second : nullptr);
    if (!view.allocation_error.empty()) undecodable.emplace_back(view.obj, view.allocation_error);
    if (!same || (it->second.Holds() && !view.Holds())) {
      d.relevant = true;  // a new claim, or devices freed
    }
    // Devices in use changed by someone else (this replica's bindings are already counted).
    if (it == claims.end() ? view.Holds() : it->second.allocation_text != view.allocation_text) {
      CountAllocated(view.obj.Key(), DevicesHeld(view));
    }
    for (const auto& owner : view.owners) d.pods.insert(owner);
    d.claims.insert(key);
    Own(view);
    claims.insert_or_assign(key, std::move(view));
    return;
  }
  if (resource == kSlices) {
    auto decode = [&] {
      Slice next{rv, ev.object.meta.uid, nullptr};
      auto decoded = DecodedSlices::Shared().Get(
          ev.object, [&] { return model::json::DecodeResourceSlice(ev.object); });
      if (decoded.ok()) {
        next.decoded = *std::move(decoded);
      } else {
        undecodable.emplace_back(ev.object, std::string(decoded.status().message()));
      }
      return next;
    };
    if (!ApplyDecoded(slices, ev, deleted, decode)) return;
    d.relevant = true;
    inventory_dirty = true;
    d.all = true;  // extended-resource classes may have changed
    return;
  }
  if (resource == kNodes) {
    auto decode = [&] { return Node{rv, ev.object.meta.uid, MakeNode(ev.object)}; };
    if (!ApplyDecoded(node_states, ev, deleted, decode)) return;
    d.relevant = true;
    nodes_dirty = true;
    return;
  }
  auto& objects = others[resource];
  const model::ResourceKey key = ev.object.Key();
  auto it = objects.find(key);
  if (deleted) {
    if (it == objects.end() || it->second.meta.uid != ev.object.meta.uid) return;
    objects.erase(it);
  } else {
    ev.object.parsed.reset();  // kept as text: these are decoded when the views are rebuilt
    objects.insert_or_assign(key, std::move(ev.object));
  }
  d.relevant = true;
  if (resource == kClasses || resource == kTaintRules) {
    inventory_dirty = true;
    d.all = true;  // extended-resource classes may have changed
  } else if (resource == kTemplates) {
    const auto& o = objects.find(key);
    if (o == objects.end()) {
      templates.erase({key.namespace_, key.name});
    } else {
      templates[{key.namespace_, key.name}] = model::json::BodyOf(o->second);
    }
    d.all = true;  // pods may have been waiting for it
  }
}

bool Scheduler::State::AnyPending() const {
  for (const auto& [uid, p] : pods) {
    if (p.node_name.empty() && !p.deleting && !p.terminal) return true;
  }
  return false;
}

NodeState Scheduler::State::MakeNode(const model::Object& o) {
  model::Node node = model::json::DecodeNode(o);
  NodeState n;
  n.info = model::NodeInfo{std::move(node.name), std::move(node.labels)};
  n.ready = node.ready;
  n.unschedulable = node.unschedulable;
  n.taints = std::move(node.taints);
  return n;
}

bool Scheduler::State::RefreshSnapshot(cel::ProgramCache* programs) {
  const bool rebuild = inventory_dirty || nodes_dirty;
  if (inventory_dirty) {
    allocator::InventoryInput input;
    extended_classes.clear();
    for (const auto& [key, o] : Others(kClasses)) {
      auto cls = model::json::DecodeDeviceClass(o);
      if (!cls.ok()) {
        undecodable.emplace_back(o, std::string(cls.status().message()));
        continue;
      }
      extended_classes[std::string(kImplicitExtendedPrefix) + cls->name] = cls->name;
      input.classes.push_back(std::move(*cls));
    }
    // An explicit extendedResourceName wins over the implicit one; on a tie the class whose name
    // sorts first wins (classes are kept in name order).
    std::map<std::string, std::string> explicit_names;
    for (const auto& cls : input.classes) {
      if (!cls.extended_resource_name.empty() &&
          !explicit_names.contains(cls.extended_resource_name)) {
        explicit_names[cls.extended_resource_name] = cls.name;
      }
    }
    for (const auto& [name, cls] : explicit_names) extended_classes[name] = cls;
    input.slices.reserve(slices.size());
    for (const auto& [key, slice] : slices) {
      if (slice.decoded != nullptr) input.slices.emplace_back(slice.decoded);
    }
    for (const auto& [key, o] : Others(kTaintRules)) {
      auto rule = model::json::DecodeDeviceTaintRule(o);
      if (rule.ok()) {
        input.taint_rules.push_back(std::move(*rule));
      } else {
        undecodable.emplace_back(o, std::string(rule.status().message()));
        input.taint_rules.push_back(FailSafeTaintRule(o));
      }
    }
    inventory = allocator::Inventory::Build(std::move(input), programs, inventory.get());
    ForgetAllocated();
    any_no_execute = false;
    for (const auto& d : inventory->devices()) {
      for (const auto& t : d.taints) any_no_execute |= t.effect == "NoExecute";
    }
    inventory_dirty = false;
  }
  if (nodes_dirty) {
    nodes.clear();
    any_node_no_execute = false;
    nodes.reserve(node_states.size());
    for (const auto& [key, node] : node_states) {
      for (const auto& t : node.state.taints) any_node_no_execute |= t.effect == "NoExecute";
      nodes.push_back(node.state);
    }
    node_index.clear();
    node_index.reserve(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) node_index.emplace(nodes[i].info.name, i);
    nodes_dirty = false;
    ForgetVerdicts();
  }
  return rebuild;
}

}  // namespace qm::service
