// The claim controllers of a scheduler pass (scheduler.h, phases 1, 2 and 4).

#include "service/scheduler_pass.h"

namespace qm::service {

namespace {

std::string OwnerReference(const model::Object& pod) {
  return json::array({{{"apiVersion", "v1"},
                       {"kind", "Pod"},
                       {"name", pod.meta.name},
                       {"uid", pod.meta.uid},
                       {"controller", true},
                       {"blockOwnerDeletion", true}}})
      .dump();
}

// The claim requests and pod-status request mappings behind a pod's extended resources
// (`limits: {nvidia.com/gpu: 2}`) that DRA classes serve (`classes`: resource name -> class):
// one ExactCount request per container and resource, named as Kubernetes names them.
std::pair<json, json> ExtendedResourceRequests(const json& spec,
                                               const std::map<std::string, std::string>& classes) {
  json requests = json::array();
  json mappings = json::array();
  const json& containers = At(spec, "containers");
  for (size_t ci = 0; containers.is_array() && ci < containers.size(); ++ci) {
    const json& resources = At(containers[ci], "resources");
    json amounts = At(resources, "limits").is_object() ? At(resources, "limits") : json::object();
    for (const auto& [k, v] : At(resources, "requests").items()) {
      if (!amounts.contains(k)) amounts[k] = v;
    }
    int ri = 0;
    for (const auto& [resource, amount] : amounts.items()) {
      auto cls = classes.find(resource);
      if (cls == classes.end()) continue;
      int64_t count = 0;
      if (amount.is_number_integer()) {
        count = amount.get<int64_t>();
      } else if (amount.is_string()) {
        auto q = ParseQuantity(amount.get<std::string>());
        if (q.ok() && !q->HasFraction()) count = q->Value();
      }
      if (count <= 0) continue;
      const std::string request = absl::StrCat("container-", ci, "-request-", ri++);
      requests.push_back({{"name", request},
                          {"exactly",
                           {{"deviceClassName", cls->second},
                            {"allocationMode", "ExactCount"},
                            {"count", count}}}});
      mappings.push_back({{"containerName", Str(containers[ci], "name")},
                          {"resourceName", resource},
                          {"requestName", request}});
    }
  }
  return {std::move(requests), std::move(mappings)};
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
        model::AllocatedNode(model::json::NodeRelationsOf(*c.body)).value_or("");
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
  auto body = std::make_shared<json>(*c.body);
  const bool remove = drop || (next.meta.deletion_timestamp.has_value() && finalizers.empty());
  // A claim that goes takes its ledger rows with it (the store releases them with the delete),
  // an allocation that does not decode included; one that stays gives them back here.
  if (release && !remove) txn.release_claims.push_back(c.obj.meta.uid);
  if (remove) {
    txn.writes.push_back({store::Write::Kind::kDelete, {}, key, c.obj.meta.resource_version});
  } else {
    json& s = (*body)["status"];
    if (keep.empty()) {
      s.erase("reservedFor");
    } else {
      json kept = json::array();
      for (size_t i : keep) kept.push_back(s["reservedFor"][i]);
      s["reservedFor"] = std::move(kept);
    }
    if (release) {
      // The drivers' device statuses go with the allocation they described (they must name
      // allocated devices).
      s.erase("allocation");
      s.erase("devices");
    }
    txn.writes.push_back(
        {store::Write::Kind::kUpdate, WithStatus(next, *body), {}, c.obj.meta.resource_version});
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
  const json& spec = At(*pod.body, "spec");
  json statuses = json::array();
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
      const json& tspec = At(*t->second, "spec");
      const json& tmeta = At(tspec, "metadata");
      std::map<std::string, std::string> labels;
      std::map<std::string, std::string> annotations;
      for (const auto& [k, v] : At(tmeta, "labels").items()) {
        if (v.is_string()) labels[k] = v.get<std::string>();
      }
      for (const auto& [k, v] : At(tmeta, "annotations").items()) {
        if (v.is_string()) annotations[k] = v.get<std::string>();
      }
      annotations[kPodClaimNameAnnotation] = name;
      const json& claim_spec = At(tspec, "spec");
      ClaimView* c =
          GenerateClaim(pod, absl::StrCat("-", name, "-"), labels, std::move(annotations),
                        json{{"spec", claim_spec.is_object() ? claim_spec : json::object()}});
      if (c == nullptr) {
        statuses_known = false;
        continue;
      }
      found = c->obj.meta.name;
    }
    statuses.push_back({{"name", name}, {"resourceClaimName", found}});
  }

  // Extended resources served by DRA classes: one generated claim per pod.
  auto [requests, mappings] = ExtendedResourceRequests(spec, st_.extended_classes);
  json extended_status;
  if (!requests.empty()) {
    std::string found;
    for (const ClaimView* c : OwnedBy(uid)) {
      if (c->obj.meta.annotations.contains(kExtendedClaimAnnotation)) found = c->obj.meta.name;
    }
    if (found.empty()) {
      ClaimView* c =
          GenerateClaim(pod, "-extended-resources-", {}, {{kExtendedClaimAnnotation, "true"}},
                        json{{"spec", {{"devices", {{"requests", requests}}}}}});
      if (c != nullptr) found = c->obj.meta.name;
    }
    if (!found.empty()) {
      extended_status = {{"resourceClaimName", found}, {"requestMappings", mappings}};
    }
  }

  // Record the generated claims in the pod's status, in the transaction that creates them.
  const json& pstatus = At(*pod.body, "status");
  const bool record_claims =
      statuses_known && !statuses.empty() && At(pstatus, "resourceClaimStatuses") != statuses;
  const bool record_extended =
      !extended_status.is_null() && At(pstatus, "extendedResourceClaimStatus") != extended_status;
  if (record_claims || record_extended) {
    auto body = std::make_shared<json>(*pod.body);
    json& s = (*body)["status"];
    if (!s.is_object()) s = json::object();
    if (record_claims) s["resourceClaimStatuses"] = statuses;
    if (record_extended) s["extendedResourceClaimStatus"] = extended_status;
    pod.SetStatusBody(std::move(body));
  }
  // A pod that will not be scheduled this pass gets its claims now.
  if (!pod.node_name.empty() && (!pod.new_claims.empty() || pod.status_body != nullptr)) {
    CommitPodWork(pod, {}, {}, pod.status_body, nullptr);
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
                                         WithBody(quota, Parse(body)),
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

std::vector<model::Object> Scheduler::PassRun::QuotasIn(const std::string& ns) {
  std::vector<model::Object> out;
  for (const auto& [key, q] : st_.Others(kQuotas)) {
    if (key.namespace_ == ns) out.push_back(q);
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
                                             json body) {
  model::Object claim = NewObject(kClaims, pod.obj.meta.namespace_,
                                  absl::StrCat(pod.obj.meta.name, infix, ids_.NameSuffix(5)));
  claim.meta.owner_references = OwnerReference(pod.obj);
  claim.meta.labels = labels;
  claim.meta.annotations = std::move(annotations);
  claim = WithBody(claim, body);
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
  view.SetBody(std::make_shared<const json>(std::move(body)));
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
