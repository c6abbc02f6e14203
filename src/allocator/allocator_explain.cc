// What a search reports: the allocation results and their score when devices were found, and
// otherwise why the claims do not fit on the node, in the words users see.

#include "absl/strings/str_join.h"
#include "allocator/search.h"

namespace qm::allocator::search_internal {
namespace {

std::string Plural(int64_t n, const char* word) {
  return absl::StrCat(n, " ", word, n == 1 ? "" : "s");
}

}  // namespace

void Search::BuildResults(Outcome& out) {
  out.allocations.resize(claims_.size());
  // Where each claim's devices can be used: on this node only, on the nodes of the merged
  // slice/device selectors, or (neither) everywhere.
  std::vector<bool> node_local(claims_.size(), false);
  std::vector<std::optional<model::NodeSelectorTerm>> merged(claims_.size());
  for (const auto& p : picked_) {
    const auto& entry = inv_.devices()[p.device];
    const auto& slice = *inv_.slices()[entry.slice].slice;
    model::DeviceRequestAllocationResult r;
    r.request = p.req->name;
    r.driver = slice.driver;
    r.pool = slice.pool;
    r.device = entry.device->name;
    r.admin_access = p.req->spec->admin_access;
    r.tolerations = p.req->spec->tolerations;
    const model::DeviceBinding& binding = entry.device->Binding();
    r.binding_conditions = binding.binding_conditions;
    r.binding_failure_conditions = binding.binding_failure_conditions;
    r.share_id = p.share_id;
    if (p.shared) r.consumed_capacity = p.consumed;
    r.skip_node_operations = slice.skip_node_operations;
    out.allocations[p.claim].results.push_back(std::move(r));

    const bool device_level = slice.per_device_node_selection;
    const std::string& node_name = device_level ? binding.node_name : slice.node_name;
    const auto& selector = device_level ? binding.node_selector : slice.node_selector;
    if (!node_name.empty() || binding.binds_to_node) {
      node_local[p.claim] = true;
    } else if (selector.has_value() && !selector->terms.empty()) {
      auto& term = merged[p.claim];
      if (!term.has_value()) term.emplace();
      auto add = [](std::vector<model::NodeSelectorRequirement>& to,
                    const std::vector<model::NodeSelectorRequirement>& from) {
        for (const auto& req : from) {
          if (std::find(to.begin(), to.end(), req) == to.end()) to.push_back(req);
        }
      };
      add(term->match_expressions, selector->terms.front().match_expressions);
      add(term->match_fields, selector->terms.front().match_fields);
    }
  }
  for (size_t c = 0; c < claims_.size(); ++c) {
    auto& alloc = out.allocations[c];
    if (node_local[c] && node_ != nullptr) {
      model::NodeSelectorTerm term;
      term.match_fields.push_back(
          model::NodeSelectorRequirement{"metadata.name", "In", {node_->name}});
      alloc.node_selector = model::NodeSelector{{std::move(term)}};
    } else if (merged[c].has_value()) {
      alloc.node_selector = model::NodeSelector{{std::move(*merged[c])}};
    }

    // Config: class configs (once per class, naming the requests that used it), then the claim's.
    const ClaimData& cd = claims_[c];
    std::vector<std::string> class_order;
    std::map<std::string, std::vector<std::string>> class_requests;
    for (const auto& top : cd.requests) {
      const Req& rq = top.alternatives[top.selected];
      const std::string& cls = rq.cls->device_class.name;
      if (rq.cls->device_class.config.empty()) continue;
      if (!class_requests.contains(cls)) class_order.push_back(cls);
      class_requests[cls].push_back(rq.name);
    }
    std::vector<std::string> chosen;  // request names as chosen: "req" or "req/sub"
    for (const auto& top : cd.requests) chosen.push_back(top.alternatives[top.selected].name);
    auto covers_all = [&](const std::vector<std::string>& names) {
      for (size_t i = 0; i < cd.requests.size(); ++i) {
        const Req& rq = cd.requests[i].alternatives[cd.requests[i].selected];
        if (std::find(names.begin(), names.end(), rq.top) == names.end() &&
            std::find(names.begin(), names.end(), rq.name) == names.end()) {
          return false;
        }
      }
      return true;
    };
    for (const auto& cls : class_order) {
      const auto* entry = inv_.FindClass(cls);
      for (const auto& config : entry->device_class.config) {
        model::DeviceAllocationConfiguration ac;
        ac.source = "FromClass";
        ac.requests = class_requests[cls];
        if (covers_all(ac.requests)) ac.requests.clear();
        ac.opaque = config;
        alloc.config.push_back(std::move(ac));
      }
    }
    for (const auto& config : cd.claim->spec.config) {
      bool include = config.requests.empty();
      for (const auto& name : config.requests) {
        if (include) break;
        for (size_t i = 0; i < cd.requests.size() && !include; ++i) {
          const Req& rq = cd.requests[i].alternatives[cd.requests[i].selected];
          if (name == rq.name || (!cd.requests[i].first_available && name == rq.top)) {
            include = true;
          }
        }
      }
      if (!include) continue;
      model::DeviceAllocationConfiguration ac;
      ac.source = "FromClaim";
      ac.requests = config.requests;
      if (!ac.requests.empty() && covers_all(ac.requests)) ac.requests.clear();
      ac.opaque = config.opaque;
      alloc.config.push_back(std::move(ac));
    }
  }
}

void Search::BuildScore(Outcome& out) {
  std::map<uint32_t, PoolUsage> usage;
  for (const auto& p : picked_) {
    uint32_t group = inv_.devices()[p.device].group;
    if (usage.contains(group)) continue;
    const auto& pool = inv_.pools()[inv_.groups()[group].pool];
    usage[group] = PoolUsage{pool.driver, pool.name, 0, 0};
  }
  for (const auto& cand : candidates_) {
    auto it = usage.find(cand.group);
    if (it == usage.end()) continue;
    ++it->second.total;
    bool busy = state_.Exclusive(cand.device);
    for (const auto& p : picked_) {
      if (p.device == cand.device && !p.shared && !p.req->spec->admin_access) busy = true;
    }
    if (!busy) ++it->second.free_after;
  }
  for (auto& [_, u] : usage) {
    out.score.free_after += u.free_after;
    out.score.pools.push_back(std::move(u));
  }
  for (const auto& cd : claims_) {
    for (const auto& cs : cd.constraints) {
      if (!cs.match) continue;
      int free = 0;
      for (const auto& cand : candidates_) {
        if (state_.Exclusive(cand.device)) continue;
        bool picked = std::any_of(picked_.begin(), picked_.end(),
                                  [&](const Picked& p) { return p.device == cand.device; });
        if (picked) continue;
        const auto& set = (*cs.sets)[cand.device];
        if (set.has_value() && Intersects(*set, cs.intersection)) ++free;
      }
      out.score.match_group_free_after.push_back(free);
    }
  }
}

std::string Search::Explain() {
  // Without a node, only devices that are not local to one (network-attached) are candidates.
  const std::string node = node_ != nullptr ? absl::StrCat("node ", node_->name)
                                            : std::string("the devices not local to a node");
  const char* has = node_ != nullptr ? " has " : " have ";
  std::vector<std::string> parts;
  for (auto& cd : claims_) {
    for (auto& top : cd.requests) {
      std::vector<std::string> alt_reasons;
      bool fits = false;
      for (auto& rq : top.alternatives) {
        int64_t matching = 0, allocated = 0, tainted = 0, counters = 0, capacity = 0, free = 0;
        std::string taint_effect;
        for (size_t pos = 0; pos < candidates_.size(); ++pos) {
          absl::Status saved = abort_;
          int s = Selectable(rq, pos);
          abort_ = saved;
          if (s <= 0) continue;
          ++matching;
          const auto& cand = candidates_[pos];
          const auto& entry = inv_.devices()[cand.device];
          const bool shared = entry.device->allow_multiple_allocations && !rq.spec->admin_access;
          std::map<std::string, Quantity> consumed;
          if (!rq.spec->admin_access && state_.Exclusive(cand.device)) {
            ++allocated;
          } else if (const auto* t = UntoleratedTaint(entry.taints, rq.spec->tolerations)) {
            ++tainted;
            if (taint_effect.empty()) taint_effect = t->effect;
          } else if (shared && !CapacityFits(rq, cand.device, consumed, false)) {
            ++capacity;
          } else if (!rq.spec->admin_access && !(shared && state_.SharedConsumed(cand.device)) &&
                     !CountersFit(cand.device, cand.group)) {
            ++counters;
          } else {
            ++free;
          }
        }
        const int64_t needed = rq.all ? std::max<int64_t>(rq.num_devices, 1) : rq.num_devices;
        bool ok = rq.all ? (matching > 0 && free == matching) : free >= needed;
        if (ok) {
          fits = true;
          break;
        }
        std::vector<std::string> why;
        if (allocated > 0) why.push_back(absl::StrCat(allocated, " allocated"));
        if (tainted > 0) why.push_back(absl::StrCat(tainted, " tainted ", taint_effect));
        if (capacity > 0) why.push_back(absl::StrCat(capacity, " without enough capacity"));
        if (counters > 0) why.push_back(absl::StrCat(counters, " without enough shared counters"));
        std::string detail = why.empty() ? "" : absl::StrCat(" (", absl::StrJoin(why, ", "), ")");
        std::string need = rq.all ? absl::StrCat("all devices of class ", rq.cls->device_class.name)
                                  : absl::StrCat(Plural(needed, "device"), " of class ",
                                                 rq.cls->device_class.name);
        if (rq.all && matching == 0) {
          alt_reasons.push_back(absl::StrCat("request ", rq.name, ": needs ", need, " and ", node,
                                             has, "none matching"));
        } else {
          alt_reasons.push_back(absl::StrCat("request ", rq.name, ": needs ", need, ", ", node, has,
                                             free, " matching free", detail));
        }
      }
      if (fits) continue;
      std::string prefix = claims_.size() > 1 ? absl::StrCat("claim ", cd.Display(), ", ") : "";
      if (top.first_available) {
        if (failed_class_.empty()) failed_class_ = top.alternatives[0].cls->device_class.name;
        parts.push_back(absl::StrCat(prefix, "request ", top.alternatives[0].top,
                                     ": no subrequest fits: ", absl::StrJoin(alt_reasons, "; ")));
      } else {
        if (failed_class_.empty()) failed_class_ = top.alternatives[0].cls->device_class.name;
        parts.push_back(absl::StrCat(prefix, alt_reasons.front()));
      }
    }
  }
  if (parts.empty()) {
    bool constraints = std::any_of(claims_.begin(), claims_.end(),
                                   [](const ClaimData& cd) { return !cd.constraints.empty(); });
    parts.push_back(constraints ? absl::StrCat("every request has matching free devices on ", node,
                                               ", but no combination of them satisfies the claim "
                                               "constraints")
                                : absl::StrCat("every request has matching free devices on ", node,
                                               ", but not enough for all requests together"));
  }
  std::string reason = absl::StrJoin(parts, "; ");
  if (!incomplete_pools_.empty()) {
    absl::StrAppend(&reason,
                    " (skipped incomplete resource pools: ", absl::StrJoin(incomplete_pools_, ", "),
                    ")");
  }
  return reason;
}

}  // namespace qm::allocator::search_internal
