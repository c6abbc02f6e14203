#include "allocator/allocator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allocator/search.h"
#include "cel/dra_env.h"
#include "common/id_generator.h"
#include "common/status.h"

namespace qm::allocator {
namespace search_internal {
namespace {

AttrSet Intersection(const AttrSet& a, const AttrSet& b) {
  AttrSet out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

bool NodeMatches(const model::NodeInfo* node, const std::string& node_name, bool all_nodes,
                 const std::optional<model::NodeSelector>& selector) {
  if (!node_name.empty()) return node != nullptr && node->name == node_name;
  if (all_nodes) return true;
  if (selector.has_value()) return node != nullptr && model::NodeSelectorMatches(*selector, *node);
  return false;
}

bool NodeMatches(const model::NodeInfo* node, const model::DeviceBinding& device) {
  return NodeMatches(node, device.node_name, device.all_nodes, device.node_selector);
}

bool BlockingEffect(const std::string& effect) {
  return effect == "NoSchedule" || effect == "NoExecute";
}

// Rounds a requested amount by the capacity's request policy; nullopt when it violates it.
std::optional<Quantity> RoundByPolicy(const model::CapacityRequestPolicy& policy,
                                      const Quantity& requested) {
  if (!policy.valid_values.empty()) {
    for (const auto& v : policy.valid_values) {  // ascending
      if (v >= requested) return v;
    }
    return std::nullopt;
  }
  if (policy.valid_range.has_value()) {
    const auto& r = *policy.valid_range;
    Quantity value = requested < r.min ? r.min : requested;
    if (r.step.has_value() && r.step->Sign() > 0) {
      absl::int128 offset = (value - r.min).nanos();
      absl::int128 step = r.step->nanos();
      absl::int128 n = (offset + step - 1) / step;
      value = r.min + Quantity::FromNanos(n * step, r.min.format());
    }
    if (r.max.has_value() && value > *r.max) return std::nullopt;
    return value;
  }
  return requested;
}

// The running intersection of a matchAttribute constraint, rebuilt after an undo.
void RecomputeIntersection(ConstraintState& cs) {
  if (!cs.match) return;
  cs.intersection.clear();
  for (size_t j = 0; j < cs.taken.size(); ++j) {
    cs.intersection = j == 0 ? *cs.taken[0] : Intersection(cs.intersection, *cs.taken[j]);
  }
}

}  // namespace

bool Intersects(const AttrSet& a, const AttrSet& b) {
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] == b[j]) return true;
    if (a[i] < b[j]) {
      ++i;
    } else {
      ++j;
    }
  }
  return false;
}

const model::DeviceTaint* UntoleratedTaint(const std::vector<model::DeviceTaint>& taints,
                                           const std::vector<DeviceToleration>& tolerations) {
  for (const auto& t : taints) {
    if (!BlockingEffect(t.effect)) continue;
    bool tolerated =
        std::any_of(tolerations.begin(), tolerations.end(),
                    [&](const DeviceToleration& tol) { return model::Tolerates(tol, t); });
    if (!tolerated) return &t;
  }
  return nullptr;
}

bool Search::Expired() {
  if (--check_countdown_ != 0) return false;
  check_countdown_ = 64;
  if (options_.cancelled != nullptr && options_.cancelled->load(std::memory_order_relaxed)) {
    abort_ = absl::CancelledError("allocation cancelled");
    return true;
  }
  if ((options_.now ? options_.now() : std::chrono::steady_clock::now()) > options_.deadline) {
    abort_ = absl::DeadlineExceededError("allocation took longer than its time budget");
    return true;
  }
  return false;
}

void Search::GatherPools() {
  struct Seen {
    uint32_t pool;
    int64_t generation;
    std::vector<uint32_t> slices;
  };
  std::vector<Seen> seen;
  auto add = [&](uint32_t s) {
    const auto& se = inv_.slices()[s];
    const auto& group = inv_.groups()[se.group];
    for (auto& entry : seen) {
      if (entry.pool != group.pool) continue;
      if (se.slice->generation > entry.generation) {
        entry.generation = se.slice->generation;
        entry.slices = {s};
      } else if (se.slice->generation == entry.generation) {
        entry.slices.push_back(s);
      }
      return;
    }
    seen.push_back(Seen{group.pool, se.slice->generation, {s}});
  };
  if (node_ != nullptr) {
    for (uint32_t s : inv_.SlicesOnNode(node_->name)) add(s);
  }
  for (uint32_t s : inv_.SlicesNotOnOneNode()) {
    const auto& slice = *inv_.slices()[s].slice;
    bool relevant = false;
    if (slice.all_nodes || slice.node_selector.has_value()) {
      relevant = NodeMatches(node_, "", slice.all_nodes, slice.node_selector);
    } else if (slice.per_device_node_selection) {
      relevant = std::any_of(slice.devices.begin(), slice.devices.end(),
                             [&](const auto& d) { return NodeMatches(node_, d.Binding()); });
    }
    if (relevant) add(s);
  }
  std::sort(seen.begin(), seen.end(), [](const Seen& a, const Seen& b) { return a.pool < b.pool; });

  for (auto& entry : seen) {
    const auto& pool = inv_.pools()[entry.pool];
    uint32_t group_index = 0;
    for (uint32_t g : pool.groups) {
      if (inv_.groups()[g].generation == entry.generation) group_index = g;
    }
    const auto& group = inv_.groups()[group_index];
    std::sort(entry.slices.begin(), entry.slices.end());  // slice index order is name order
    PoolView view;
    view.group = group_index;
    view.slices = std::move(entry.slices);
    if (view.slices.size() != group.slice_count) {
      if (pool.max_generation > entry.generation) continue;  // obsolete for this node
      if (group.slices.size() != group.slice_count) view.incomplete = true;
    }
    view.invalid = group.invalid;
    if (view.incomplete) incomplete_pools_.push_back(absl::StrCat(pool.driver, "/", pool.name));
    if (!view.invalid.empty()) {
      invalid_pools_.push_back(absl::StrCat(pool.driver, "/", pool.name, ": ", view.invalid));
    }
    pools_.push_back(std::move(view));
  }
  std::stable_sort(pools_.begin(), pools_.end(), [&](const PoolView& a, const PoolView& b) {
    return !inv_.groups()[a.group].has_binding_conditions &&
           inv_.groups()[b.group].has_binding_conditions;
  });
  for (const auto& view : pools_) {
    if (view.incomplete || !view.invalid.empty()) continue;
    for (uint32_t s : view.slices) {
      const auto& se = inv_.slices()[s];
      for (uint32_t i = 0; i < se.slice->devices.size(); ++i) {
        const auto& d = se.slice->devices[i];
        if (se.slice->per_device_node_selection && !NodeMatches(node_, d.Binding())) {
          continue;
        }
        candidates_.push_back(Candidate{se.first_device + i, view.group});
      }
    }
  }
}

absl::Status Search::PrepareRequest(ClaimData& cd, int claim_index, const std::string& top,
                                    const std::string& name, const model::ExactDeviceRequest& spec,
                                    Req& out) {
  // Only built for error messages (this runs once per node and request).
  struct Where {
    const ClaimData& cd;
    const std::string& name;
    operator std::string() const {
      return absl::StrCat("claim ", cd.Display(), ", request ", name);
    }
  } where{cd, name};
  out.claim = claim_index;
  out.name = name;
  out.top = top;
  out.spec = &spec;
  if (spec.device_class_name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(where), ": missing device class name (unsupported request type?)"));
  }
  out.cls = inv_.FindClass(spec.device_class_name);
  if (out.cls == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(where), ": could not retrieve device class ", spec.device_class_name));
  }
  for (size_t i = 0; i < out.cls->selectors.size(); ++i) {
    if (out.cls->selectors[i]->ast == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("class ", spec.device_class_name, ": selector #", i,
                       ": CEL compile error: ", out.cls->selectors[i]->error));
    }
  }
  for (size_t i = 0; i < spec.selectors.size(); ++i) {
    if (spec.selectors[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(where), ": selector #", i,
                       ": CEL expression empty (unsupported selector type?)"));
    }
    auto program = inv_.Compile(spec.selectors[i]);
    if (program->ast == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(where), ": selector #", i,
                                                     ": CEL compile error: ", program->error));
    }
    out.selectors.push_back(std::move(program));
  }
  out.memo.assign(candidates_.size(), 0);
  if (spec.allocation_mode == model::kAllocationModeExactCount) {
    if (spec.count <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(where), ": count must be greater than zero, got ", spec.count));
    }
    out.num_devices = spec.count;
  } else if (spec.allocation_mode == model::kAllocationModeAll) {
    out.all = true;
    for (const auto& pool : pools_) {
      const auto& p = inv_.pools()[inv_.groups()[pool.group].pool];
      if (pool.incomplete) {
        return absl::InvalidArgumentError(
            absl::StrCat(std::string(where), ": asks for all devices, but resource pool ", p.driver,
                         "/", p.name, " is currently being updated"));
      }
      if (!pool.invalid.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(std::string(where), ": asks for all devices, but resource pool ", p.driver,
                         "/", p.name, " is currently invalid (", pool.invalid, ")"));
      }
    }
    for (size_t pos = 0; pos < candidates_.size(); ++pos) {
      int s = Selectable(out, pos);
      if (s < 0) return abort_;
      if (s == 0) continue;
      uint32_t device = candidates_[pos].device;
      if (inv_.devices()[device].device->allow_multiple_allocations && !out.spec->admin_access) {
        std::map<std::string, Quantity> consumed;
        if (!CapacityFits(out, device, consumed, /*count_in_flight=*/false)) continue;
      }
      out.all_devices.push_back(pos);
    }
    out.num_devices = static_cast<int64_t>(out.all_devices.size());
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(where), ": unsupported count mode ", spec.allocation_mode));
  }
  return absl::OkStatus();
}

absl::Status Search::Prepare(const std::vector<const model::ResourceClaim*>& claims) {
  claims_.resize(claims.size());
  for (size_t c = 0; c < claims.size(); ++c) {
    ClaimData& cd = claims_[c];
    cd.claim = claims[c];

    const auto& spec = cd.claim->spec;
    int64_t min_devices = 0;
    cd.requests.resize(spec.requests.size());
    for (size_t r = 0; r < spec.requests.size(); ++r) {
      const auto& request = spec.requests[r];
      TopRequest& top = cd.requests[r];
      if (request.exactly.has_value()) {
        top.alternatives.resize(1);
        QM_RETURN_IF_ERROR(PrepareRequest(cd, static_cast<int>(c), request.name, request.name,
                                          *request.exactly, top.alternatives[0]));
        min_devices += top.alternatives[0].num_devices;
      } else if (!request.first_available.empty()) {
        top.first_available = true;
        top.alternatives.resize(request.first_available.size());
        int64_t min_sub = INT64_MAX;
        for (size_t s = 0; s < request.first_available.size(); ++s) {
          const auto& sub = request.first_available[s];
          QM_RETURN_IF_ERROR(PrepareRequest(cd, static_cast<int>(c), request.name,
                                            absl::StrCat(request.name, "/", sub.name), sub.request,
                                            top.alternatives[s]));
          min_sub = std::min(min_sub, top.alternatives[s].num_devices);
        }
        min_devices += min_sub;
      } else {
        return absl::InvalidArgumentError(absl::StrCat("claim ", cd.Display(), ", request ",
                                                       request.name,
                                                       ": has neither exactly nor firstAvailable"));
      }
    }
    if (min_devices > MaxResultsPerClaim()) {
      return absl::InvalidArgumentError(
          absl::StrCat("claim ", cd.Display(), ": number of requested devices ", min_devices,
                       " exceeds the claim limit of ", MaxResultsPerClaim()));
    }
    for (const auto& constraint : spec.constraints) {
      ConstraintState cs;
      cs.spec = &constraint;
      if (!constraint.match_attribute.empty()) {
        cs.match = true;
        cs.attribute = constraint.match_attribute;
      } else if (!constraint.distinct_attribute.empty()) {
        cs.attribute = constraint.distinct_attribute;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "claim ", cd.Display(), ": empty constraint (unsupported constraint type?)"));
      }
      cs.sets = &inv_.AttributeSets(cs.attribute);
      cd.constraints.push_back(std::move(cs));
    }
  }
  return absl::OkStatus();
}

int Search::Selectable(Req& rq, size_t pos) {
  int8_t& memo = rq.memo[pos];
  if (memo != 0) return memo == 1 ? 1 : 0;
  const uint32_t device = candidates_[pos].device;
  std::string error;
  auto m = inv_.ClassMatches(*rq.cls, device, &error);
  if (m == Inventory::Match::kError) {
    abort_ = absl::InvalidArgumentError(error);
    return -1;
  }
  bool ok = m == Inventory::Match::kYes;
  const auto& entry = inv_.devices()[device];
  for (size_t i = 0; ok && i < rq.selectors.size(); ++i) {
    if (!entry.value.has_value()) {
      abort_ = absl::InvalidArgumentError(absl::StrCat("claim ", claims_[rq.claim].Display(),
                                                       ": selector #", i,
                                                       ": CEL runtime error: ", entry.value_error));
      return -1;
    }
    auto matched = cel::MatchesValue(*rq.selectors[i]->ast, *entry.value, kCelCostLimit,
                                     inv_.regex_cache(), rq.selectors[i]->constants.get());
    if (!matched.ok()) {
      abort_ = absl::InvalidArgumentError(
          absl::StrCat("claim ", claims_[rq.claim].Display(), ": selector #", i,
                       ": CEL runtime error: ", matched.status().message()));
      return -1;
    }
    ok = *matched;
  }
  // Requested capacities must exist on the device (and fit a dedicated device's capacity).
  if (ok) {
    for (const auto& [name, amount] : rq.spec->capacity_requests) {
      const auto& caps = entry.device->capacity;
      auto it = caps.find(name);
      if (it == caps.end()) {
        const auto& driver = inv_.slices()[entry.slice].slice->driver;
        auto slash = name.find('/');
        if (slash == driver.size() && name.compare(0, slash, driver) == 0) {
          it = caps.find(name.substr(slash + 1));
        }
      }
      if (it == caps.end() || it->second.value < amount) {
        ok = false;
        break;
      }
    }
  }
  memo = ok ? 1 : 2;
  return ok ? 1 : 0;
}

bool Search::SharedInUse(uint32_t device) const {
  if (state_.SharedConsumed(device) != nullptr) return true;
  return std::any_of(picked_.begin(), picked_.end(),
                     [&](const Picked& p) { return p.device == device && p.shared; });
}

bool Search::InUseByOthers(const Req& rq, uint32_t device) const {
  const auto& entry = inv_.devices()[device];
  if (rq.spec->admin_access) {
    return std::any_of(picked_.begin(), picked_.end(),
                       [&](const Picked& p) { return p.device == device && p.claim == rq.claim; });
  }
  if (state_.Exclusive(device)) return true;
  if (entry.device->allow_multiple_allocations) {
    // Shares are limited by capacity; a dedicated pick in this call still blocks it, and one
    // request takes a device at most once.
    return std::any_of(picked_.begin(), picked_.end(), [&](const Picked& p) {
      return p.device == device && (!p.shared || p.req == &rq);
    });
  }
  return std::any_of(picked_.begin(), picked_.end(),
                     [&](const Picked& p) { return p.device == device; });
}

bool Search::CapacityFits(const Req& rq, uint32_t device, std::map<std::string, Quantity>& consumed,
                          bool count_in_flight) const {
  const auto& entry = inv_.devices()[device];
  const auto& driver = inv_.slices()[entry.slice].slice->driver;
  const auto* in_use = state_.SharedConsumed(device);
  for (const auto& [name, cap] : entry.device->capacity) {
    const Quantity* requested = nullptr;
    auto it = rq.spec->capacity_requests.find(name);
    if (it == rq.spec->capacity_requests.end() && name.str().find('/') == std::string::npos) {
      it = rq.spec->capacity_requests.find(absl::StrCat(driver, "/", name.str()));
    }
    if (it != rq.spec->capacity_requests.end()) requested = &it->second;
    Quantity amount;
    if (requested != nullptr) {
      if (cap.request_policy != nullptr) {
        auto rounded = RoundByPolicy(*cap.request_policy, *requested);
        if (!rounded.has_value()) return false;
        amount = *rounded;
      } else {
        amount = *requested;
      }
    } else if (cap.request_policy != nullptr && cap.request_policy->default_value.has_value()) {
      amount = *cap.request_policy->default_value;
    } else {
      amount = cap.value;
    }
    Quantity total = amount;
    if (in_use != nullptr) {
      auto u = in_use->find(name);
      if (u != in_use->end()) total = total + u->second;
    }
    if (count_in_flight) {
      for (const auto& p : picked_) {
        if (p.device != device || !p.shared) continue;
        auto u = p.consumed.find(name);
        if (u != p.consumed.end()) total = total + u->second;
      }
    }
    if (total > cap.value) return false;
    consumed[name] = amount;
  }
  return true;
}

bool Search::CountersFit(uint32_t device, uint32_t group) const {
  const auto& d = *inv_.devices()[device].device;
  if (d.consumes_counters.empty()) return true;
  const auto& g = inv_.groups()[group];
  const auto* allocated = state_.CountersConsumed(group);
  for (const auto& consumption : d.consumes_counters) {
    auto set = g.counter_sets.find(consumption.counter_set);
    if (set == g.counter_sets.end()) return false;
    for (const auto& [counter, amount] : consumption.counters) {
      auto value = set->second.find(counter);
      if (value == set->second.end()) return false;
      Quantity used = amount;
      if (allocated != nullptr) {
        auto s = allocated->find(consumption.counter_set);
        if (s != allocated->end()) {
          auto c = s->second.find(counter);
          if (c != s->second.end()) used = used + c->second;
        }
      }
      for (const auto& p : picked_) {
        if (!p.counted_counters || inv_.devices()[p.device].group != group) continue;
        for (const auto& other : inv_.devices()[p.device].device->consumes_counters) {
          if (other.counter_set != consumption.counter_set) continue;
          auto c = other.counters.find(counter);
          if (c != other.counters.end()) used = used + c->second;
        }
      }
      if (used > value->second) return false;
    }
  }
  return true;
}

bool Search::ConstraintsAccept(ClaimData& cd, const Req& rq, uint32_t device, size_t& added) {
  for (size_t i = 0; i < cd.constraints.size(); ++i) {
    ConstraintState& cs = cd.constraints[i];
    const auto& names = cs.spec->requests;
    if (!names.empty() && std::find(names.begin(), names.end(), rq.top) == names.end() &&
        std::find(names.begin(), names.end(), rq.name) == names.end()) {
      continue;
    }
    const auto& set = (*cs.sets)[device];
    if (!set.has_value()) return false;
    if (cs.match) {
      if (!cs.taken.empty() && !Intersects(cs.intersection, *set)) return false;
      if (cs.taken.empty()) {
        cs.intersection = *set;
      } else if (set->size() > 1 || cs.intersection.size() > 1) {
        cs.intersection = Intersection(cs.intersection, *set);
      }
    } else {
      for (const AttrSet* other : cs.taken) {
        if (Intersects(*other, *set)) return false;
      }
    }
    cs.taken.push_back(&*set);
    constraint_log_.emplace_back(rq.claim, static_cast<int>(i));
    ++added;
  }
  return true;
}

void Search::Undo(size_t picked_size) {
  while (picked_.size() > picked_size) {
    size_t mark = picked_constraint_mark_.back();
    picked_constraint_mark_.pop_back();
    picked_.pop_back();
    while (constraint_log_.size() > mark) {
      auto [c, i] = constraint_log_.back();
      constraint_log_.pop_back();
      ConstraintState& cs = claims_[c].constraints[i];
      cs.taken.pop_back();
      RecomputeIntersection(cs);
    }
  }
}

bool Search::EnoughLeft(Req& rq, size_t from, int64_t needed) {
  if (static_cast<int64_t>(candidates_.size() - std::min(from, candidates_.size())) < needed) {
    return false;
  }
  ClaimData& cd = claims_[rq.claim];
  std::vector<const ConstraintState*> fixed;
  for (const auto& cs : cd.constraints) {
    if (!cs.match || cs.taken.empty()) continue;
    const auto& names = cs.spec->requests;
    if (!names.empty() && std::find(names.begin(), names.end(), rq.top) == names.end() &&
        std::find(names.begin(), names.end(), rq.name) == names.end()) {
      continue;
    }
    fixed.push_back(&cs);
  }
  if (fixed.empty()) return true;
  int64_t found = 0;
  for (size_t pos = from; pos < candidates_.size() && found < needed; ++pos) {
    const uint32_t device = candidates_[pos].device;
    if (InUseByOthers(rq, device)) continue;
    absl::Status saved = abort_;
    int sel = Selectable(rq, pos);
    abort_ = saved;
    if (sel == 0) continue;
    bool ok = true;
    for (const ConstraintState* cs : fixed) {
      const auto& set = (*cs->sets)[device];
      if (!set.has_value() || !Intersects(cs->intersection, *set)) {
        ok = false;
        break;
      }
    }
    if (ok) ++found;
  }
  return found >= needed;
}

bool Search::TryAdd(Req& rq, uint32_t device, uint32_t group, bool must) {
  const auto& entry = inv_.devices()[device];
  if (InUseByOthers(rq, device)) return false;
  if (UntoleratedTaint(entry.taints, rq.spec->tolerations) != nullptr) return false;
  const bool shared = entry.device->allow_multiple_allocations && !rq.spec->admin_access;
  std::map<std::string, Quantity> consumed;
  if (shared && !CapacityFits(rq, device, consumed, /*count_in_flight=*/true)) return false;
  const bool counts = !rq.spec->admin_access && !(shared && SharedInUse(device));
  if (counts && !CountersFit(device, group)) return false;

  const size_t log_mark = constraint_log_.size();
  size_t added = 0;
  ClaimData& cd = claims_[rq.claim];
  if (!ConstraintsAccept(cd, rq, device, added)) {
    // Roll back the constraints this device was added to before the one that refused it.
    while (constraint_log_.size() > log_mark) {
      auto [c, i] = constraint_log_.back();
      constraint_log_.pop_back();
      ConstraintState& cs = claims_[c].constraints[i];
      cs.taken.pop_back();
      RecomputeIntersection(cs);
    }
    if (must) {
      abort_ = absl::InvalidArgumentError(
          absl::StrCat("claim ", cd.Display(), ", request ", rq.name, ": cannot add device ",
                       inv_.DeviceId(entry), " because a claim constraint would not be satisfied"));
    }
    return false;
  }
  Picked p{rq.claim, &rq, device, shared, counts, std::move(consumed), ""};
  if (shared) p.share_id = options_.new_share_id ? options_.new_share_id() : qm::RandomUuid();
  picked_constraint_mark_.push_back(log_mark);
  picked_.push_back(std::move(p));
  return true;
}

Step Search::Allocate(size_t c, size_t r, int64_t k, size_t start, bool alt_chosen) {
  if (Expired()) return Step::kAbort;
  if (c == claims_.size()) return Step::kFound;
  ClaimData& cd = claims_[c];
  if (r == cd.requests.size()) {
    Step s = Allocate(c + 1, 0, 0, 0, false);
    return s == Step::kTooMany ? Step::kNotFound : s;
  }
  TopRequest& top = cd.requests[r];
  if (top.first_available && !alt_chosen) {
    size_t too_many = 0;
    for (size_t i = 0; i < top.alternatives.size(); ++i) {
      top.selected = static_cast<int>(i);
      Step s = Allocate(c, r, 0, 0, true);
      if (s == Step::kFound || s == Step::kAbort) return s;
      if (s == Step::kTooMany) ++too_many;
    }
    top.selected = 0;
    return too_many == top.alternatives.size() ? Step::kTooMany : Step::kNotFound;
  }
  Req& rq = top.alternatives[top.selected];
  if (rq.all && rq.all_devices.empty()) return Step::kNotFound;
  if (k >= rq.num_devices) return Allocate(c, r + 1, 0, 0, false);
  int64_t in_claim = 0;
  for (const auto& p : picked_) in_claim += p.claim == static_cast<int>(c) ? 1 : 0;
  if (in_claim + rq.num_devices - k > MaxResultsPerClaim()) return Step::kTooMany;

  const size_t mark = picked_.size();
  if (rq.all) {
    const Candidate& cand = candidates_[rq.all_devices[static_cast<size_t>(k)]];
    if (!TryAdd(rq, cand.device, cand.group, /*must=*/true)) {
      return abort_.ok() ? Step::kNotFound : Step::kAbort;
    }
    Step s = Allocate(c, r, k + 1, 0, true);
    if (s != Step::kFound) Undo(mark);
    return s;
  }
  for (size_t pos = start; pos < candidates_.size(); ++pos) {
    const Candidate& cand = candidates_[pos];
    if (InUseByOthers(rq, cand.device)) continue;
    int sel = Selectable(rq, pos);
    if (sel < 0) return Step::kAbort;
    if (sel == 0) continue;
    if (!TryAdd(rq, cand.device, cand.group, /*must=*/false)) continue;
    if (k + 1 < rq.num_devices && !EnoughLeft(rq, pos + 1, rq.num_devices - k - 1)) {
      Undo(mark);
      continue;
    }
    Step s = Allocate(c, r, k + 1, pos + 1, true);
    if (s == Step::kFound) return s;
    Undo(mark);
    if (s == Step::kAbort || s == Step::kTooMany) return s;
    if (Expired()) return Step::kAbort;
  }
  return Step::kNotFound;
}

Outcome Search::Run(const std::vector<const model::ResourceClaim*>& claims) {
  Outcome out;
  GatherPools();
  if (absl::Status s = Prepare(claims); !s.ok()) {
    out.kind = OutcomeKind::kInvalid;
    out.error = std::move(s);
    return out;
  }
  Step step = Allocate(0, 0, 0, 0, false);
  if (step == Step::kAbort) {
    const bool timeout = absl::IsDeadlineExceeded(abort_) || absl::IsCancelled(abort_);
    out.kind = timeout ? OutcomeKind::kTimeout : OutcomeKind::kInvalid;
    out.error = abort_;
    return out;
  }
  if (step == Step::kFound) {
    out.kind = OutcomeKind::kAllocated;
    BuildResults(out);
    BuildScore(out);
    return out;
  }
  out.kind = OutcomeKind::kUnschedulable;
  if (!invalid_pools_.empty()) {
    out.reason = absl::StrCat("invalid resource pools were encountered: ",
                              absl::StrJoin(invalid_pools_, "; "));
    return out;
  }
  out.reason = Explain();
  out.failed_class = failed_class_;
  return out;
}

}  // namespace search_internal

using search_internal::kCelCostLimit;
using search_internal::Search;

Outcome Allocate(const Inventory& inventory, const AllocatedState& allocated,
                 const std::vector<const model::ResourceClaim*>& claims,
                 const model::NodeInfo* node, const Options& options) {
  Search search(inventory, allocated, node, options);
  return search.Run(claims);
}

absl::StatusOr<MatchPreview> PreviewMatches(const Inventory& inventory,
                                            const std::string& class_name,
                                            const std::vector<std::string>& selectors) {
  const auto* cls = inventory.FindClass(class_name);
  if (cls == nullptr)
    return absl::NotFoundError(absl::StrCat("device class ", class_name, " not found"));
  for (size_t i = 0; i < cls->selectors.size(); ++i) {
    if (cls->selectors[i]->ast == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("class ", class_name, ": selector #", i,
                       ": CEL compile error: ", cls->selectors[i]->error));
    }
  }
  std::vector<std::shared_ptr<const cel::CompileResult>> programs;
  for (size_t i = 0; i < selectors.size(); ++i) {
    auto program = inventory.Compile(selectors[i]);
    if (program->ast == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("selector #", i, ": ", program->error));
    }
    programs.push_back(std::move(program));
  }
  MatchPreview out;
  for (uint32_t d = 0; d < inventory.devices().size(); ++d) {
    const auto& entry = inventory.devices()[d];
    std::string error;
    auto m = inventory.ClassMatches(*cls, d, &error);
    if (m == Inventory::Match::kError) {
      out.errors.push_back(absl::StrCat(inventory.DeviceId(entry), ": ", error));
      continue;
    }
    if (m != Inventory::Match::kYes) continue;
    bool ok = true;
    for (size_t i = 0; ok && i < programs.size(); ++i) {
      if (!entry.value.has_value()) {
        out.errors.push_back(absl::StrCat(inventory.DeviceId(entry), ": ", entry.value_error));
        ok = false;
        break;
      }
      auto matched = cel::MatchesValue(*programs[i]->ast, *entry.value, kCelCostLimit,
                                       inventory.regex_cache(), programs[i]->constants.get());
      if (!matched.ok()) {
        out.errors.push_back(absl::StrCat(inventory.DeviceId(entry), ": selector #", i, ": ",
                                          matched.status().message()));
        ok = false;
      } else {
        ok = *matched;
      }
    }
    if (ok) out.devices.push_back(inventory.DeviceId(entry));
  }
  return out;
}

}  // namespace qm::allocator
