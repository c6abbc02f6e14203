// Eviction and graceful deletion in a scheduler pass (scheduler.h, phases 1b and 2b).

#include "service/scheduler_pass.h"

namespace qm::service {

namespace {

// Why the pods using `allocation` must go: a device of it has a NoExecute taint (on the device
// or from a DeviceTaintRule) that the allocation does not tolerate, or tolerates for a
// tolerationSeconds counted from the taint's timeAdded that has passed. Empty: they may stay.
std::string EvictionReason(const model::AllocationResult& allocation,
                           const allocator::Inventory& inventory,
                           std::chrono::system_clock::time_point now) {
  for (const auto& r : allocation.results) {
    const std::vector<uint32_t> ids = inventory.FindDevice(r.driver, r.pool, r.device);
    if (ids.empty()) continue;
    for (const auto& taint : inventory.devices()[ids.back()].taints) {
      if (taint.effect != "NoExecute") continue;
      const model::DeviceToleration* match = nullptr;
      for (const auto& tol : r.tolerations) {
        if (model::Tolerates(tol, taint)) match = &tol;
      }
      bool expired = match == nullptr;
      if (match != nullptr && match->toleration_seconds.has_value()) {
        std::chrono::system_clock::time_point added = now;
        if (!taint.time_added.empty()) ParseRfc3339(taint.time_added, &added);
        expired = now >= added + std::chrono::seconds(*match->toleration_seconds);
      }
      if (expired) {
        return absl::StrCat("device ", r.pool, "/", r.device, " has the NoExecute taint ",
                            taint.key, taint.value.empty() ? "" : "=", taint.value);
      }
    }
  }
  return "";
}

}  // namespace

void Scheduler::PassRun::Evict() {
  EvictFromNodes();
  if (!st_.any_no_execute) return;
  for (auto& [key, c] : claims_) {
    if (!c.allocation->has_value()) continue;
    if (c.status.reserved_for.empty()) continue;
    const std::string reason = EvictionReason(**c.allocation, inventory_, now_tp_);
    if (reason.empty()) continue;
    for (const auto& consumer : c.status.reserved_for) {
      auto it = pods_.find(consumer.uid);
      if (it == pods_.end() || it->second.deleting) continue;
      EvictPod(it->second, reason);
    }
  }
}

void Scheduler::PassRun::EvictFromNodes() {
  if (!st_.any_node_no_execute) return;
  std::map<std::string, const NodeState*> tainted;
  for (const auto& n : nodes_) {
    for (const auto& t : n.taints) {
      if (t.effect == "NoExecute") tainted[n.info.name] = &n;
    }
  }
  for (auto& [uid, pod] : pods_) {
    if (pod.node_name.empty() || pod.deleting || pod.terminal) continue;
    auto it = tainted.find(pod.node_name);
    if (it == tainted.end()) continue;
    PodPlacementSpec spec = PlacementSpecOf(pod.pod, pod.obj.meta);
    for (const char* key : {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}) {
      const NodeTaint probe{key, "", "NoExecute", std::nullopt};
      const bool mentioned =
          std::any_of(spec.tolerations.begin(), spec.tolerations.end(),
                      [&](const PodToleration& t) { return ToleratesNodeTaint(t, probe); });
      if (!mentioned) {
        spec.tolerations.push_back(
            {key, "Exists", "", "NoExecute", options_.default_toleration_seconds});
      }
    }
    std::string reason = NodeEvictionReason(spec.tolerations, it->second->taints, now_tp_);
    if (reason.empty()) continue;
    EvictPod(pod, absl::StrCat("node ", pod.node_name, ": ", reason));
  }
}

void Scheduler::PassRun::EvictPod(PodView& pod, std::string reason) {
  pod.deleting = true;
  st_.deleting.insert(pod.obj.meta.uid);
  commits_.Submit(store::Transaction{{DeletePodWrite(pod)}, {}, {}},
                  [this, p = &pod, reason = std::move(reason)](CommitResult deleted) {
                    if (!deleted.ok()) {
                      ++stats_.conflicts;
                      return;
                    }
                    spdlog::info("evicted pod {}/{}: {}", p->obj.meta.namespace_, p->obj.meta.name,
                                 reason);
                    ++stats_.evicted;
                  });
}

store::Write Scheduler::PassRun::DeletePodWrite(const PodView& pod) const {
  if (pod.obj.meta.finalizers.empty()) {
    return {store::Write::Kind::kDelete, {}, pod.obj.Key(), pod.obj.meta.resource_version};
  }
  model::Object marked = pod.obj;
  MarkForDeletion(marked.meta, now_tp_, DefaultGracePeriodSeconds(pod.obj));
  return {store::Write::Kind::kUpdate, std::move(marked), {}, pod.obj.meta.resource_version};
}

bool Scheduler::PassRun::Reachable(const std::string& name) {
  if (node_by_name_.empty()) {
    for (const auto& n : nodes_) node_by_name_[n.info.name] = &n;
  }
  auto it = node_by_name_.find(name);
  if (it == node_by_name_.end() || !it->second->ready) return false;
  return std::none_of(it->second->taints.begin(), it->second->taints.end(),
                      [](const NodeTaint& t) { return t.key == kUnreachableTaint; });
}

void Scheduler::PassRun::FinishTerminatingPods() {
  bool submitted = false;
  for (const auto& uid : st_.deleting) {
    auto entry = pods_.find(uid);
    if (entry == pods_.end()) continue;
    PodView& pod = entry->second;
    if (!pod.deleting || !HasFinalizer(pod.obj.meta, kDevicesPreparedFinalizer)) continue;
    std::string why;
    if (!Reachable(pod.node_name)) {
      if (now_tp_ < pod.obj.meta.deletion_timestamp.value_or(now_tp_)) continue;
      why = "its node is unreachable and its grace period is over";
    } else {
      bool waiting = false;
      for (const auto& key : State::ClaimsOf(pod.obj, pod.pod)) {
        auto it = claims_.find(key);
        if (it == claims_.end() || it->second.removed || !it->second.status.prepared) continue;
        bool in_use = false;
        for (const auto& consumer : it->second.status.reserved_for) {
          auto other = pods_.find(consumer.uid);
          in_use |= other != pods_.end() && !other->second.deleting && !other->second.terminal;
        }
        waiting |= !in_use;
      }
      if (waiting) continue;
      why = "its devices are unprepared";
    }
    model::Object next = pod.obj;
    RemoveFinalizer(next.meta, kDevicesPreparedFinalizer);
    store::Write w{store::Write::Kind::kUpdate, next, {}, pod.obj.meta.resource_version};
    if (next.meta.finalizers.empty()) {
      w = {store::Write::Kind::kDelete, {}, pod.obj.Key(), pod.obj.meta.resource_version};
    }
    const bool deletes = w.kind == store::Write::Kind::kDelete;
    submitted = true;
    commits_.Submit(store::Transaction{{std::move(w)}, {}, {}},
                    [this, p = &pod, why, deletes](CommitResult committed) {
                      if (!committed.ok()) {
                        ++stats_.conflicts;
                        return;
                      }
                      spdlog::info("pod {}/{} finished terminating: {}", p->obj.meta.namespace_,
                                   p->obj.meta.name, why);
                      if (deletes) {
                        RemoveFinalizer(p->obj.meta, kDevicesPreparedFinalizer);
                      } else {
                        p->obj = committed->front();
                      }
                    });
  }
  if (submitted) commits_.Drain();
}

}  // namespace qm::service
