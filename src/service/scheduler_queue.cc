// The scheduling queue of a pass: order, backoff, and what an unschedulable pod records.

#include "service/scheduler_pass.h"

namespace qm::service {

void Scheduler::PassRun::Schedule() {
  std::vector<PodView*> pending;
  for (auto u = st_.unbound.begin(); u != st_.unbound.end();) {
    const std::string& uid = *u;
    auto it = pods_.find(uid);
    if (it == pods_.end() || !it->second.Unbound()) {
      st_.backoff.erase(uid);
      u = st_.unbound.erase(u);
      continue;
    }
    ++u;
    PodView& p = it->second;
    if (BackingOff(uid, p)) {
      ++stats_.backing_off;
      // Its claims are still created (and recorded) now.
      if (!p.new_claims.empty() || p.status_body != nullptr) {
        CommitPodWork(p, {}, {}, p.status_body, nullptr, p.status_pod);
      }
      continue;
    }
    pending.push_back(&p);
  }
  std::erase_if(st_.backoff, [&](const auto& e) { return !pods_.contains(e.first); });
  pending_ = pending.size();
  SchedulePods(std::move(pending));
}

void Scheduler::PassRun::SchedulePods(std::vector<PodView*> pending) {
  if (pending.empty()) return;
  std::sort(pending.begin(), pending.end(), [](const PodView* a, const PodView* b) {
    if (a->priority != b->priority) return a->priority > b->priority;
    if (a->obj.meta.creation_timestamp != b->obj.meta.creation_timestamp) {
      return a->obj.meta.creation_timestamp < b->obj.meta.creation_timestamp;
    }
    return a->obj.Key() < b->obj.Key();
  });
  if (!st_.allocated.has_value()) st_.ResolveAllocated();
  if (st_.node_versions.size() != nodes_.size()) st_.ForgetVerdicts();
  for (PodView* pod : pending) SchedulePod(*pod);
}

bool Scheduler::PassRun::ClaimsKnown(const PodView& pod) const {
  const std::string& ns = pod.obj.meta.namespace_;
  for (const auto& rc : pod.pod.resource_claims) {
    if (!rc.resource_claim_name.empty()) {
      auto it = claims_.find(model::ResourceKey{kClaims, ns, rc.resource_claim_name});
      if (it == claims_.end() || it->second.removed ||
          it->second.obj.meta.deletion_timestamp.has_value()) {
        return false;
      }
    } else if (!st_.templates.contains({ns, rc.resource_claim_template_name})) {
      return false;
    }
  }
  return true;
}

void Scheduler::PassRun::Unschedulable(PodView& pod, const std::string& message) {
  ++stats_.unschedulable;
  auto body = std::make_shared<Document>(*pod.Current());
  const bool condition_changed =
      SetCondition(*body, "PodScheduled", "False", "Unschedulable", message, now_);
  std::vector<store::Write> extra;
  if (condition_changed) {
    model::Event event;
    event.involved = {"Pod", pod.obj.meta.namespace_, pod.obj.meta.name, pod.obj.meta.uid, "v1",
                      ""};
    event.reason = "FailedScheduling";
    event.message = message;
    event.type = "Warning";
    event.component = options_.component;
    event.timestamp = now_;
    model::Object base = NewObject(kEvents, pod.obj.meta.namespace_,
                                   absl::StrCat(pod.obj.meta.name, ".", ids_.NameSuffix(10)));
    extra.push_back(
        {store::Write::Kind::kCreate, model::json::EncodeEvent(event, std::move(base)), {}, 0});
  }
  Body pod_body = condition_changed ? Body(body) : pod.status_body;
  auto backoff_after = [this, p = &pod](std::vector<model::Object>* committed) {
    State::Backoff& b = st_.backoff[p->obj.meta.uid];
    if (b.attempts == 0) b.since = now_tp_;
    ++b.attempts;
    auto delay = options_.initial_backoff;
    for (int i = 1; i < b.attempts && delay < options_.max_backoff; ++i) delay *= 2;
    b.not_before = now_tp_ + std::min(delay, options_.max_backoff);
    b.generation = st_.generation;
    // A failed write is retried at once.
    b.rv = committed != nullptr ? p->obj.meta.resource_version : 0;
  };
  CommitPodWork(pod, std::move(extra), {}, std::move(pod_body), std::move(backoff_after));
}

bool Scheduler::PassRun::BackingOff(const std::string& uid, const PodView& p) const {
  auto b = st_.backoff.find(uid);
  if (b == st_.backoff.end()) return false;
  const bool changed =
      b->second.generation != st_.generation || b->second.rv != p.obj.meta.resource_version;
  const bool due = now_tp_ >= b->second.not_before;
  return !(changed && due) && now_tp_ - b->second.since < kUnschedulableFlush;
}

}  // namespace qm::service
