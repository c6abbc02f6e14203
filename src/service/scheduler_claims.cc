// The claim controllers of a scheduler pass (scheduler.h, phases 1, 2 and 4).

#include "service/scheduler_pass.h"

namespace qm::service {

namespace {

// The claim requests and pod-status request mappings behind a pod's extended resources
// (`limits: {nvidia.com/gpu: 2}`) that DRA classes serve (`classes`: resource name -> class):
// one ExactCount request per container and resource, named as Kubernetes names them.
struct ExtendedResources {
  std::vector<model::json::ExactCountRequest> requests;
  std::vector<model::ContainerRequestMapping> mappings;
};
ExtendedResources ExtendedResourceRequests(const model::Pod& pod,
                                           const std::map<std::string, std::string>& classes) {
  ExtendedResources out;
  for (size_t ci = 0; ci < pod.containers.size(); ++ci) {
    const model::ContainerResources& container = pod.containers[ci];
    int ri = 0;
    for (const auto& [resource, amount] : container.amounts) {
      auto cls = classes.find(resource);
      if (cls == classes.end()) continue;
      auto q = ParseQuantity(amount);
      if (!q.ok() || q->HasFraction() || q->Value() <= 0) continue;
      std::string request = absl::StrCat("container-", ci, "-request-", ri++);
      out.requests.push_back({request, cls->second, q->Value()});
      out.mappings.push_back({container.name, resource, std::move(request)});
    }
  }
  return out;
}

}  // namespace

void Scheduler::PassRun::ReleaseClaims() {
  // The claims of pods that wait for their agent to unprepare keep their devices until the
  // pod goes, even once the node is unreachable.
  for (const auto& uid : st_.deleting) {
    auto it = pods_.find(uid);
    if (it == pods_.end()) continue;
    const PodView& pod = it->second;
    if (!pod.deleting || !HasFinalizer(pod.obj.meta, kDevicesPreparedFinalizer)) continue;
    for (auto& key : State::ClaimsOf(pod.obj, pod.pod)) terminating_claims_.insert(key);
  }
  std::set<model::ResourceKey> keys = std::move(st_.held_claims);
  st_.held_claims.clear();
  if (!dirty_.all) keys.insert(dirty_.claims.begin(), dirty_.claims.end());
  for (auto* entry : Selected(claims_, dirty_.all, keys)) {
    ReleaseClaim(entry->first, entry->second);
  }
  // Not waited for: placement goes on while the releases commit (each takes its devices out of
  // the devices in use when it has), and a pod that does not fit waits for them first
  // (SchedulePod).
  if (relevant_change_) ++st_.generation;
}

void Scheduler::PassRun::ReleaseClaim(const model::ResourceKey& key, ClaimView& c) {
  const auto& reserved = c.status.reserved_for;
  std::vector<size_t> keep;  // positions in reservedFor of the consumers that stay
  for (size_t i = 0; i < reserved.size(); ++i) {
    auto it = pods_.find(reserved[i].uid);
    if (reserved[i].resource == "pods" && it != pods_.end() && !it->second.terminal &&
        !it->second.deleting) {
      keep.push_back(i);
    }
  }
  bool owner_alive = false;
  if (c.generated) {
    for (const auto& uid : c.owners) owner_alive = owner_alive || pods_.contains(uid);
  }
  bool drop = c.generated && !owner_alive && keep.empty();
  // As Kubernetes' claim controller: the scheduler's own allocations (marked by the
  // delete-protection finalizer) are undone once nothing uses them; an allocation written by
  // someone else stays.
  bool release =
      c.allocation->has_value() && keep.empty() && HasFinalizer(c.obj, kDeleteProtection);
  // No device goes to a new workload while an agent still has it prepared for this one: the
  // release waits for the agent's unprepare, unless its node is unreachable and no pod waits
  // for the claim any more (a terminating pod there goes after its grace period).
  if ((release || drop) && c.allocation->has_value() && c.status.prepared) {
    const std::string node =
        model::AllocatedNode(model::json::NodeRelationsOf(*c.Tree())).value_or("");
    if (Reachable(node) || terminating_claims_.contains(key)) {
      release = false;
      drop = false;
      st_.held_claims.insert(key);
    }
  }
  if (keep.size() == reserved.size() && !release && !drop) return;

  store::Transaction txn;
  model::Object next = c.obj;
  auto& finalizers = next.meta.finalizers;
  if (release) {
    finalizers.erase(std::remove(finalizers.begin(), finalizers.end(), kDeleteProtection),
                     finalizers.end());
  }
  auto body = std::make_shared<Document>(*c.Tree());
  const bool remove = drop || (next.meta.deletion_timestamp.has_value() && finalizers.empty());
  // A claim that goes takes its ledger rows with it (the store releases them with the delete),
  // an allocation that does not decode included; one that stays gives them back here.
  if (release && !remove) txn.release_claims.push_back(c.obj.meta.uid);
  if (remove) {
    txn.writes.push_back({store::Write::Kind::kDelete, {}, key, c.obj.meta.resource_version});
  } else {
    model::json::KeepConsumers(*body, keep);
    // The drivers' device statuses go with the allocation they described (they must name
    // allocated devices).
    if (release) model::json::Deallocate(*body);
    txn.writes.push_back({store::Write::Kind::kUpdate,
                          WithStatus(next, Body(body)),
                          {},
                          c.obj.meta.resource_version});
  }
  const bool frees = release || (remove && c.Holds());
  if (frees) {
    relevant_change_ = true;
    ++releases_in_flight_;
  }
  // Pods of this pass that name the claim decide on the next pass, on its new revision.
  busy_.insert(&c);
  commits_.Submit(
      std::move(txn), [this, remove, release, frees, body, c = &c](CommitResult committed) {
        if (frees) --releases_in_flight_;
        if (!committed.ok()) {
          ++stats_.conflicts;
          return;
        }
        ++stats_.claims_released;
        if (release || c->Holds()) st_.UncountAllocated(c->obj.Key());
        if (remove) {
          c->removed = true;
          gone_.push_back(c->obj.Key());
          return;
        }
        c->obj = committed->front();
        c->SetBody(body);
        if (release) {
          c->allocation = std::make_shared<const std::optional<model::AllocationResult>>();
        }
        c->Settle();
      });
}

void Scheduler::PassRun::CreateClaims() {
  auto pods = Selected(pods_, dirty_.all, dirty_.pods);
  if (!dirty_.all) {
    // Pods that backed off and are due again (the others are in dirty_.pods), in uid order.
    const size_t dirty_count = pods.size();
    for (const auto& [uid, backoff] : st_.backoff) {
      auto entry = pods_.find(uid);
      if (entry == pods_.end()) continue;
      const PodView& p = entry->second;
      if (p.Unbound() && !dirty_.pods.contains(uid) && !BackingOff(uid, p)) {
        pods.push_back(&*entry);
      }
    }
    std::sort(pods.begin() + static_cast<std::ptrdiff_t>(dirty_count), pods.end(),
              [](const auto* a, const auto* b) { return a->first < b->first; });
  }
  for (auto* entry : pods) {
    if (!entry->second.deleting && !entry->second.terminal) {
      CreateClaimsFor(entry->first, entry->second);
    }
  }
}

void Scheduler::PassRun::CreateClaimsFor(const std::string& uid, PodView& pod) {
  std::vector<model::PodResourceClaimStatus> statuses;
  bool statuses_known = true;
  for (const auto& rc : pod.pod.resource_claims) {
    const std::string& name = rc.name;
    const std::string& tmpl = rc.resource_claim_template_name;
    if (tmpl.empty()) continue;
    std::string found;
    for (const ClaimView* c : OwnedBy(uid)) {
      auto a = c->obj.meta.annotations.find(kPodClaimNameAnnotation);
      if (a != c->obj.meta.annotations.end() && a->second == name) found = c->obj.meta.name;
    }
    if (found.empty()) {
      auto t = st_.templates.find({pod.obj.meta.namespace_, tmpl});
      if (t == st_.templates.end()) {
        statuses_known = false;
        continue;
      }
      model::json::ClaimFromTemplate generated = model::json::ClaimBodyFromTemplate(*t->second);
      generated.annotations[kPodClaimNameAnnotation] = name;
      ClaimView* c = GenerateClaim(pod, absl::StrCat("-", name, "-"), generated.labels,
                                   std::move(generated.annotations), std::move(generated.body));
      if (c == nullptr) {
        statuses_known = false;
        continue;
      }
      found = c->obj.meta.name;
    }
    statuses.push_back({name, found});
  }

  // Extended resources served by DRA classes: one generated claim per pod.
  ExtendedResources extended = ExtendedResourceRequests(pod.pod, st_.extended_classes);
  std::optional<model::ExtendedResourceClaimStatus> extended_status;
  if (!extended.requests.empty()) {
    std::string found;
    for (const ClaimView* c : OwnedBy(uid)) {
      if (c->obj.meta.annotations.contains(kExtendedClaimAnnotation)) found = c->obj.meta.name;
    }
    if (found.empty()) {
      ClaimView* c =
          GenerateClaim(pod, "-extended-resources-", {}, {{kExtendedClaimAnnotation, "true"}},
                        model::json::ClaimBodyWithRequests(extended.requests));
      if (c != nullptr) found = c->obj.meta.name;
    }
    if (!found.empty()) {
      extended_status = model::ExtendedResourceClaimStatus{found, std::move(extended.mappings)};
    }
  }

  // Record the generated claims in the pod's status, in the transaction that creates them.
  std::optional<std::vector<model::PodResourceClaimStatus>> record_claims;
  if (statuses_known && !statuses.empty()) record_claims = std::move(statuses);
  // What the pod's status already records, decoded, spares parsing a settled pod's body on
  // every sweep (Kubernetes' controller compares the typed status the same way).
  const bool recorded =
      (!record_claims.has_value() || *record_claims == pod.pod.resource_claim_statuses) &&
      (!extended_status.has_value() ||
       (extended_status->resource_claim_name == pod.pod.extended_resource_claim_name &&
        extended_status->request_mappings == pod.pod.extended_resource_request_mappings));
  if (!recorded) {
    if (auto body =
            model::json::WithPodClaimStatuses(*pod.Tree(), record_claims, extended_status)) {
      pod.SetStatusBody(std::make_shared<Document>(*std::move(body)));
    }
  }
  // A pod that will not be scheduled this pass gets its claims now.
  if (!pod.node_name.empty() && (!pod.new_claims.empty() || pod.status_body != nullptr)) {
    CommitPodWork(pod, {}, {}, pod.status_body, nullptr, pod.status_pod);
  }
}

void Scheduler::PassRun::UpdateQuotaStatus() {
  if (st_.Others(kQuotas).empty() ||
      !(dirty_.all || dirty_.relevant || !dirty_.pods.empty() || !dirty_.claims.empty() ||
        stats_.claims_created > 0 || stats_.claims_released > 0)) {
    return;
  }
  quota_used_.clear();
  for (const auto& [key, quota] : st_.Others(kQuotas)) {
    const std::string body = QuotaStatusBody(quota, UsedIn(key.namespace_));
    if (body.empty()) continue;
    commits_.Submit(store::Transaction{{{store::Write::Kind::kUpdate,
                                         WithBody(quota, Document::Parse(body)),
                                         {},
                                         quota.meta.resource_version}},
                                       {},
                                       {}},
                    [this, key = key](CommitResult committed) {
                      if (!committed.ok()) {
                        ++stats_.conflicts;
                        return;
                      }
                      st_.others[kQuotas][key] = committed->front();  // its own change
                    });
  }
  commits_.Drain();
}

std::vector<ClaimView*> Scheduler::PassRun::OwnedBy(const std::string& uid) {
  std::vector<ClaimView*> out;
  auto it = st_.owned.find(uid);
  if (it == st_.owned.end()) return out;
  for (const auto& key : it->second) {
    auto c = claims_.find(key);
    if (c != claims_.end() && !c->second.removed) out.push_back(&c->second);
  }
  return out;
}

model::Object Scheduler::PassRun::NewObject(const char* resource, const std::string& ns,
                                            std::string name) {
  model::Object o;
  o.resource = resource;
  o.meta.namespace_ = ns;
  o.meta.name = std::move(name);
  o.meta.uid = ids_.NewUid();
  o.meta.generation = 1;
  o.meta.creation_timestamp = now_tp_;
  return o;
}

std::vector<model::ObjectPtr> Scheduler::PassRun::QuotasIn(const std::string& ns) {
  std::vector<model::ObjectPtr> out;
  for (const auto& [key, q] : st_.Others(kQuotas)) {
    if (key.namespace_ == ns) out.push_back(model::Share(q));
  }
  return out;
}

QuotaAmounts& Scheduler::PassRun::UsedIn(const std::string& ns) {
  auto [it, added] = quota_used_.try_emplace(ns);
  if (!added) return it->second;
  for (const auto& [uid, p] : pods_) {
    if (p.obj.meta.namespace_ != ns) continue;
    for (const auto& [k, n] : QuotaUsage(p.obj)) it->second[k] += n;
  }
  for (const auto& [key, c] : claims_) {
    if (key.namespace_ != ns || c.removed) continue;
    for (const auto& [k, n] : QuotaUsage(c.obj)) it->second[k] += n;
  }
  return it->second;
}

ClaimView* Scheduler::PassRun::GenerateClaim(PodView& pod, const std::string& infix,
                                             const std::map<std::string, std::string>& labels,
                                             std::map<std::string, std::string> annotations,
                                             Document body) {
  model::Object claim = NewObject(kClaims, pod.obj.meta.namespace_,
                                  absl::StrCat(pod.obj.meta.name, infix, ids_.NameSuffix(5)));
  claim.meta.owner_references = model::json::PodControllerReference(pod.obj);
  claim.meta.labels = labels;
  claim.meta.annotations = std::move(annotations);
  auto shared = std::make_shared<const Document>(std::move(body));
  claim = WithBody(claim, shared);
  // Quota admission, as the API server applies it to the claims Kubernetes' controller creates.
  std::vector<store::QuotaCheck> checks;
  if (const auto quotas = QuotasIn(claim.meta.namespace_); !quotas.empty()) {
    QuotaAmounts& used = UsedIn(claim.meta.namespace_);
    // Named by its generateName prefix, so that the refusal reads the same on every attempt.
    model::Object named = claim;
    named.meta.name = absl::StrCat(pod.obj.meta.name, infix);
    if (auto admitted = CheckQuota(named, quotas, used); !admitted.ok()) {
      claim_problems_[pod.obj.meta.uid] = std::string(admitted.message());
      return nullptr;
    }
    for (const auto& [k, n] : QuotaUsage(claim)) used[k] += n;
    checks = QuotaChecks(claim, quotas);
  }
  ClaimView view;
  view.obj = std::move(claim);
  view.SetBody(std::move(shared));
  view.allocation = std::make_shared<const std::optional<model::AllocationResult>>();
  view.generated = true;
  view.uncommitted = true;
  view.owners = {pod.obj.meta.uid};
  auto [it, inserted] = claims_.emplace(view.obj.Key(), std::move(view));
  if (!inserted) return nullptr;  // a name clash with an existing claim: next pass
  st_.Own(it->second);
  pod.new_claims.push_back(&it->second);
  for (auto& check : checks) pod.quota_checks.push_back(std::move(check));
  return &it->second;
}

}  // namespace qm::service
