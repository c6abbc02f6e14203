// Placing one pod and committing its binding (scheduler.h, phase 3).

#include "service/scheduler_pass.h"

#include <utility>

namespace qm::service {

void Scheduler::PassRun::SchedulePod(PodView& pod) {
  const model::Pod& current_pod = pod.CurrentPod();
  std::string problem;
  std::vector<ClaimView*> pod_claims;
  auto add_claim = [&](const std::string& name) {
    auto it = claims_.find(model::ResourceKey{kClaims, pod.obj.meta.namespace_, name});
    if (it == claims_.end() || it->second.removed ||
        it->second.obj.meta.deletion_timestamp.has_value()) {
      problem = absl::StrCat("resourceclaim \"", name, "\" not found");
      return;
    }
    if (std::find(pod_claims.begin(), pod_claims.end(), &it->second) == pod_claims.end()) {
      pod_claims.push_back(&it->second);
    }
  };
  for (const auto& rc : current_pod.resource_claims) {
    if (!rc.resource_claim_name.empty()) {
      add_claim(rc.resource_claim_name);
      continue;
    }
    std::string generated;
    for (const auto& s : current_pod.resource_claim_statuses) {
      if (s.name == rc.name) generated = s.resource_claim_name;
    }
    if (generated.empty()) {
      problem = absl::StrCat("waiting for the claim of resourceClaimTemplate \"",
                             rc.resource_claim_template_name, "\"");
    } else {
      add_claim(generated);
    }
  }
  if (!current_pod.extended_resource_claim_name.empty()) {
    add_claim(current_pod.extended_resource_claim_name);
  }
  if (auto p = claim_problems_.find(pod.obj.meta.uid); p != claim_problems_.end()) {
    problem = p->second;  // why its claim does not exist
  }

  // A claim another commit of this pass is still writing: decide on the next pass, when its
  // new revision is known.
  if (std::any_of(pod_claims.begin(), pod_claims.end(),
                  [&](const ClaimView* c) { return busy_.contains(c); })) {
    ++stats_.conflicts;
    CommitPodWork(pod, {}, {}, pod.status_body, nullptr, pod.status_pod);
    return;
  }
  PlacementRequest request;
  request.inventory = &inventory_;
  request.allocated = &*st_.allocated;
  request.nodes = &nodes_;
  request.pod = PlacementSpecOf(current_pod, pod.obj.meta);
  request.options.deadline = clock_.Monotonic() + options_.allocation_budget;
  request.options.now = [this] { return clock_.Monotonic(); };
  request.options.new_share_id = [this] { return ids_.NewUid(); };
  request.options.max_results_per_claim = options_.max_results_per_claim;
  request.nodes_to_find = NodesToFind(nodes_.size());
  request.start = st_.next_start++;
  std::vector<model::ResourceClaim> typed;
  std::vector<ClaimView*> to_allocate;
  typed.reserve(pod_claims.size());
  for (ClaimView* c : pod_claims) {
    if (!c->allocation_error.empty()) {
      problem = absl::StrCat("resourceclaim \"", c->obj.meta.name,
                             "\": status.allocation cannot be decoded: ", c->allocation_error);
      continue;
    }
    if (c->allocation->has_value()) {
      if (c->status.reserved_for.size() >= kMaxReservedFor) {
        problem = absl::StrCat("resourceclaim \"", c->obj.meta.name, "\" has ", kMaxReservedFor,
                               " consumers already");
      }
      const auto& selector = (*c->allocation)->node_selector;
      if (selector.has_value()) request.pinned.push_back(*selector);
      continue;
    }
    auto claim = model::json::DecodeResourceClaim(c->obj, *c->Tree());
    if (!claim.ok()) {
      problem =
          absl::StrCat("resourceclaim \"", c->obj.meta.name, "\": ", claim.status().message());
      if (!c->uncommitted) Report(c->obj, std::string(claim.status().message()));
      continue;
    }
    typed.push_back(std::move(*claim));
    to_allocate.push_back(c);
  }
  for (const auto& t : typed) request.to_allocate.push_back(&t);

  // Pods that ask for the same thing share verdicts (a binding dirties only its node, or all
  // nodes when it took devices that are not node-local): the signature of what this one asks.
  // Claims are told apart by their spec digests (model::SpecDigest), or by their whole body
  // where no codec computed one (an object written straight to the store).
  std::string key = absl::StrCat(current_pod.placement_signature, "|spread=", request.pod.spread);
  for (const auto& pin : request.pinned) {
    absl::StrAppend(&key, "|pinned=", model::json::EncodeNodeSelector(pin).dump());
  }
  for (const ClaimView* c : to_allocate) {
    const std::string& spec = c->obj.spec_digest.empty() ? c->obj.body : c->obj.spec_digest;
    absl::StrAppend(&key, "|claim=", spec.size(), ":", spec);
  }
  if (st_.memos.size() >= kMaxMemos && !st_.memos.contains(key)) st_.ForgetVerdicts();
  request.memo = &st_.memos[key];
  request.node_versions = &st_.node_versions;
  request.changed_nodes = &st_.touched_nodes;
  Placement placement;
  if (problem.empty()) {
    const auto place_start = clock_.Monotonic();
    placement = Place(request);
    if (placement.kind == Placement::Kind::kUnschedulable && releases_in_flight_ > 0) {
      // Devices this pass releases may make it fit: wait for those commits (each takes its
      // devices out of the devices in use, and their nodes' verdicts with them), then try again.
      commits_.Drain();
      request.memo = &st_.memos[key];
      placement = Place(request);
    }
    placement_ms_ += MsSince(place_start);
    if (placement.kind == Placement::Kind::kInvalid) problem = placement.message;
  }
  if (!problem.empty() || placement.kind != Placement::Kind::kPlaced) {
    if (late_) {
      // A late arrival sees the views without the changes left for the next pass (a release,
      // a new slice): it is not found unschedulable here, but tried again then, from scratch,
      // so that its new claims are created with its binding in one transaction.
      ++stats_.deferred;
      DropPodWork(pod);
      return;
    }
    Unschedulable(pod, problem.empty() ? placement.message : problem);
    return;
  }
  Bind(pod, pod_claims, to_allocate, placement);
}

void Scheduler::PassRun::Bind(PodView& pod, const std::vector<ClaimView*>& pod_claims,
                              const std::vector<ClaimView*>& to_allocate,
                              const Placement& placement) {
  std::vector<store::Write> claim_writes;
  std::vector<store::DeviceClaim> rows;
  const model::ResourceClaimConsumerReference consumer{"", "pods", pod.obj.meta.name,
                                                       pod.obj.meta.uid};
  struct ClaimUpdate {
    ClaimView* claim;
    Body body;
    Allocation allocation;
  };
  std::vector<ClaimUpdate> updates;  // existing claims, in write order
  for (size_t i = 0; i < to_allocate.size(); ++i) {
    ClaimView* c = to_allocate[i];
    auto body = std::make_shared<Document>(*c->Tree());
    model::json::SetAllocation(*body, placement.allocations[i], consumer);
    model::Object next = WithStatus(c->obj, Body(body));
    if (!HasFinalizer(next, kDeleteProtection)) next.meta.finalizers.push_back(kDeleteProtection);
    for (auto& row :
         LedgerRows(placement.allocations[i], c->obj.meta.uid, InventoryDevices(inventory_))) {
      rows.push_back(std::move(row));
    }
    auto allocation =
        std::make_shared<const std::optional<model::AllocationResult>>(placement.allocations[i]);
    if (c->uncommitted) {
      // Created by this transaction, allocated from the start.
      c->obj = std::move(next);
      c->SetBody(std::move(body));
      c->allocation = std::move(allocation);
    } else {
      claim_writes.push_back(
          {store::Write::Kind::kUpdate, std::move(next), {}, c->obj.meta.resource_version});
      updates.push_back({c, std::move(body), std::move(allocation)});
    }
  }
  for (ClaimView* c : pod_claims) {
    if (std::find(to_allocate.begin(), to_allocate.end(), c) != to_allocate.end()) continue;
    auto body = std::make_shared<Document>(*c->Tree());
    model::json::ReserveFor(*body, consumer);
    claim_writes.push_back({store::Write::Kind::kUpdate,
                            WithStatus(c->obj, Body(body)),
                            {},
                            c->obj.meta.resource_version});
    updates.push_back({c, std::move(body), c->allocation});
  }
  std::shared_ptr<Document> pbody = pod.TakeCurrent();
  model::json::SetNodeName(*pbody, placement.node);
  SetCondition(*pbody, "PodScheduled", "True", "", "", now_);
  // The binding decoded: the pod as it is now on its node (model::Pod keeps no conditions).
  model::Pod bound_pod = pod.CurrentPod();
  bound_pod.node_name = placement.node;
  // The next pods are placed against the devices this one takes while its commit runs (and the
  // verdicts of the node they are on, or of every node, are stale now).
  for (size_t i = 0; i < to_allocate.size(); ++i) {
    std::vector<allocator::AllocatedDevice> devices;
    AppendAllocated(placement.allocations[i], devices);
    st_.CountAllocated(to_allocate[i]->obj.Key(), std::move(devices));
  }
  for (ClaimView* c : pod_claims) busy_.insert(c);
  const size_t created = pod.new_claims.size();
  auto bound = [this, p = &pod, updates = std::move(updates), created,
                node = placement.node](std::vector<model::Object>* committed) {
    if (committed == nullptr) {
      // Its devices were counted as taken; resolved anew after this pass (the state is still
      // in use by the pods placed after it).
      reset_allocated_ = true;
      return;
    }
    ++stats_.bound;
    p->node_name = node;
    st_.backoff.erase(p->obj.meta.uid);
    for (size_t i = 0; i < updates.size(); ++i) {
      ClaimView* c = updates[i].claim;
      c->obj = std::move((*committed)[created + i]);
      c->SetBody(updates[i].body);
      c->allocation = updates[i].allocation;
      c->Settle();
    }
  };
  CommitPodWork(pod, std::move(claim_writes), std::move(rows), std::move(pbody), std::move(bound),
                std::move(bound_pod));
}

void Scheduler::PassRun::DropPodWork(PodView& pod) {
  for (ClaimView* c : pod.new_claims) {
    c->removed = true;
    gone_.push_back(c->obj.Key());
  }
  pod.new_claims.clear();
  pod.quota_checks.clear();
  pod.SetStatusBody(nullptr);
}

void Scheduler::PassRun::CommitPodWork(PodView& pod, std::vector<store::Write> extra,
                                       std::vector<store::DeviceClaim> rows, Body pod_body,
                                       Then then, std::optional<model::Pod> decoded) {
  store::Transaction txn;
  std::vector<ClaimView*> created = pod.new_claims;
  for (ClaimView* c : created) {
    txn.writes.push_back({store::Write::Kind::kCreate, c->obj, {}, 0});
  }
  for (auto& w : extra) txn.writes.push_back(std::move(w));
  const bool writes_pod = pod_body != nullptr;
  if (writes_pod) {
    txn.writes.push_back({store::Write::Kind::kUpdate,
                          WithBody(pod.obj, pod_body),
                          {},
                          pod.obj.meta.resource_version});
  }
  txn.claim_devices = std::move(rows);
  txn.quota_checks = std::move(pod.quota_checks);
  pod.quota_checks.clear();
  pod.new_claims.clear();
  pod.SetStatusBody(nullptr);
  if (txn.writes.empty()) {
    std::vector<model::Object> none;
    if (then) then(&none);
    return;
  }
  auto done = [this, created, writes_pod, pod_body, p = &pod, then = std::move(then),
               decoded = std::move(decoded)](CommitResult committed) mutable {
    if (!committed.ok()) {
      ++stats_.conflicts;
      spdlog::info("writing pod {}/{} lost a race: {}", p->obj.meta.namespace_, p->obj.meta.name,
                   committed.status().ToString());
      for (ClaimView* c : created) {
        c->removed = true;
        gone_.push_back(c->obj.Key());
      }
      if (then) then(nullptr);
      return;
    }
    for (size_t i = 0; i < created.size(); ++i) {
      ClaimView* c = created[i];
      c->obj = std::move((*committed)[i]);
      c->uncommitted = false;
      ++stats_.claims_created;
    }
    if (writes_pod) {
      p->obj = std::move(committed->back());
      p->SetBody(pod_body, std::exchange(decoded, std::nullopt));
    }
    if (then) then(&*committed);
    p->Settle();
    for (ClaimView* c : created) c->Settle();
  };
  commits_.Submit(std::move(txn), std::move(done));
}

}  // namespace qm::service
