#include "service/placement.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/mutex.h"
#include "spdlog/spdlog.h"

namespace qm::service {
namespace {

bool MatchesNodeSelector(const std::map<std::string, std::string>& selector,
                         const model::NodeInfo& node) {
  for (const auto& [k, v] : selector) {
    auto it = node.labels.find(k);
    if (it == node.labels.end() || it->second != v) return false;
  }
  return true;
}

NodeVerdict Evaluate(const PlacementRequest& request, const NodeState& node) {
  NodeVerdict v;
  if (!node.ready) {
    v.cause = "node(s) were not ready";
    return v;
  }
  if (node.unschedulable) {
    v.cause = "node(s) were unschedulable";
    return v;
  }
  if (!MatchesNodeSelector(request.pod.node_selector, node.info) ||
      (request.pod.required_affinity.has_value() &&
       !model::NodeSelectorMatches(*request.pod.required_affinity, node.info))) {
    v.cause = "node(s) didn't match Pod's node affinity/selector";
    return v;
  }
  for (const auto& taint : node.taints) {
    if (taint.effect != "NoSchedule" && taint.effect != "NoExecute") continue;
    bool tolerated =
        std::any_of(request.pod.tolerations.begin(), request.pod.tolerations.end(),
                    [&](const PodToleration& t) { return ToleratesNodeTaint(t, taint); });
    if (!tolerated) {
      v.cause = absl::StrCat("node(s) had untolerated taint {", taint.key, ": ", taint.value, "}");
      return v;
    }
  }
  for (const auto& pin : request.pinned) {
    if (!model::NodeSelectorMatches(pin, node.info)) {
      v.cause = "node(s) cannot use the devices already allocated to the pod's claims";
      return v;
    }
  }
  if (request.to_allocate.empty()) {
    v.feasible = true;
    return v;
  }
  v.outcome = allocator::Allocate(*request.inventory, *request.allocated, request.to_allocate,
                                  &node.info, request.options);
  switch (v.outcome.kind) {
    case allocator::OutcomeKind::kAllocated:
      v.feasible = true;
      break;
    case allocator::OutcomeKind::kUnschedulable:
      v.cause = v.outcome.failed_class.empty()
                    ? (v.outcome.reason.rfind("invalid resource pools", 0) == 0
                           ? "node(s) had invalid resource pools"
                           : "node(s) cannot satisfy the claims' requests together")
                    : absl::StrCat("insufficient devices of class ", v.outcome.failed_class);
      break;
    case allocator::OutcomeKind::kTimeout:
      v.cause = "node(s) took too long to allocate devices";
      break;
    case allocator::OutcomeKind::kInvalid:
      break;
  }
  return v;
}

}  // namespace

bool ToleratesNodeTaint(const PodToleration& toleration, const NodeTaint& taint) {
  if (!toleration.effect.empty() && toleration.effect != taint.effect) return false;
  if (toleration.key.empty()) return toleration.op == "Exists";
  if (toleration.key != taint.key) return false;
  if (toleration.op == "Exists") return true;
  return toleration.value == taint.value;
}

std::string NodeEvictionReason(const std::vector<PodToleration>& tolerations,
                               const std::vector<NodeTaint>& taints,
                               std::chrono::system_clock::time_point now) {
  for (const auto& taint : taints) {
    if (taint.effect != "NoExecute") continue;
    bool tolerated = false;
    std::optional<int64_t> seconds;  // the smallest matching tolerationSeconds
    for (const auto& t : tolerations) {
      if (!ToleratesNodeTaint(t, taint)) continue;
      if (!tolerated) {
        seconds = t.toleration_seconds;
      } else if (!t.toleration_seconds.has_value()) {
        // Kubernetes takes the minimum over those that set one; a toleration without it does not
        // lift another's limit.
      } else if (!seconds.has_value() || *t.toleration_seconds < *seconds) {
        seconds = t.toleration_seconds;
      }
      tolerated = true;
    }
    const std::string what =
        absl::StrCat(taint.key, taint.value.empty() ? "" : "=", taint.value, ":NoExecute");
    if (!tolerated) return absl::StrCat("the node has the untolerated taint ", what);
    if (!seconds.has_value()) continue;
    const auto added = taint.time_added.value_or(now);
    if (now >= added + std::chrono::seconds(std::max<int64_t>(*seconds, 0))) {
      return absl::StrCat("the node has had the taint ", what, " for ", *seconds,
                          "s, longer than the pod tolerates");
    }
  }
  return "";
}

size_t NodesToFind(size_t nodes) {
  if (nodes <= 100) return nodes;
  const int64_t percent = std::max<int64_t>(5, 50 - static_cast<int64_t>(nodes) / 125);
  return std::max<size_t>(100, nodes * static_cast<size_t>(percent) / 100);
}

namespace {

// Runs `work` on `workers` threads (this one included) and rethrows the first exception any of
// them threw. Out of threads, the ones started (or this one alone) do the work.
void RunParallel(int workers, const std::function<void()>& work) {
  if (workers <= 1) {
    work();
    return;
  }
  qm::Mutex failure_mu;
  std::exception_ptr failure;
  // An exception must not escape a helper thread (that ends the process): it is handed to this
  // thread.
  auto guarded = [&] {
    try {
      work();
    } catch (...) {
      qm::MutexLock lock(&failure_mu);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  try {
    threads.reserve(static_cast<size_t>(workers));
    for (int w = 1; w < workers; ++w) threads.emplace_back(guarded);
  } catch (const std::exception& e) {  // std::system_error, or std::bad_alloc
    spdlog::warn("placement: cannot start more threads ({}); using {}", e.what(),
                 threads.size() + 1);
  }
  guarded();
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

// The processors this process may use: std::thread::hardware_concurrency reads
// /sys/devices/system/cpu/online on every call (an open, a read and a close for every pod
// placed), so it is asked once.
int Processors() {
  static const int processors = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return processors;
}

int Workers(const PlacementRequest& request, size_t to_evaluate) {
  const int workers = request.parallelism > 0 ? request.parallelism : Processors();
  return std::min<int>(workers, static_cast<int>(std::max<size_t>(to_evaluate / 16, 1)));
}

// Whether a verdict is the allocator refusing the request itself (the same on every node).
bool InvalidInput(const NodeVerdict& v) {
  return v.outcome.kind == allocator::OutcomeKind::kInvalid && !v.feasible && v.cause.empty();
}

// Pack (fewest free devices left in the pools touched) unless the pod asks to spread: lower
// keys are better.
int ScoreKey(const PlacementRequest& request, const NodeVerdict& v) {
  const int free_after = v.outcome.score.free_after;
  return request.pod.spread ? -free_after : free_after;
}

// "0/3 nodes are available: 2 insufficient devices of class gpu, 1 had untolerated taint ...".
std::string UnavailableMessage(size_t nodes, const std::vector<NodeVerdict>& verdicts) {
  std::map<std::string, int> causes;
  for (const auto& v : verdicts) ++causes[v.cause];
  std::vector<std::pair<std::string, int>> sorted(causes.begin(), causes.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::vector<std::string> parts;
  for (const auto& [cause, count] : sorted) parts.push_back(absl::StrCat(count, " ", cause));
  return absl::StrCat("0/", nodes, " nodes are available", parts.empty() ? "" : ": ",
                      absl::StrJoin(parts, ", "), ".");
}

// Place with a memo: evaluates the nodes whose version moved since their verdict, keeps the
// ranking of the feasible ones up to date, and takes the best.
Placement PlaceWithMemo(const PlacementRequest& request) {
  const auto& nodes = *request.nodes;
  const auto& versions = *request.node_versions;
  PlacementMemo& m = *request.memo;
  if (m.verdicts.size() != nodes.size() || m.seen.size() != nodes.size()) {
    m = PlacementMemo{};
    m.verdicts.assign(nodes.size(), NodeVerdict{});
    m.seen.assign(nodes.size(), PlacementMemo::kUnseen);
  }
  std::vector<size_t> stale;
  const auto* changed = request.changed_nodes;
  if (changed != nullptr && m.scanned && m.changes_seen <= changed->size()) {
    for (size_t k = m.changes_seen; k < changed->size(); ++k) {
      const size_t i = (*changed)[k];
      if (i < nodes.size() && m.seen[i] != versions[i]) stale.push_back(i);
    }
    std::sort(stale.begin(), stale.end());
    stale.erase(std::unique(stale.begin(), stale.end()), stale.end());
  } else {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (m.seen[i] != versions[i]) stale.push_back(i);
    }
  }
  m.scanned = true;
  m.changes_seen = changed != nullptr ? changed->size() : 0;
  for (size_t i : stale) {
    if (m.seen[i] == PlacementMemo::kUnseen) continue;
    const NodeVerdict& old = m.verdicts[i];
    if (old.feasible) m.ranked.erase({ScoreKey(request, old), nodes[i].info.name, i});
    m.invalid.erase(i);
  }
  std::atomic<size_t> next{0};
  RunParallel(Workers(request, stale.size()), [&] {
    for (size_t k = next++; k < stale.size(); k = next++) {
      const size_t i = stale[k];
      m.verdicts[i] = Evaluate(request, nodes[i]);
    }
  });
  for (size_t i : stale) {
    m.seen[i] = versions[i];
    const NodeVerdict& v = m.verdicts[i];
    if (v.feasible) m.ranked.insert({ScoreKey(request, v), nodes[i].info.name, i});
    if (InvalidInput(v)) m.invalid.insert(i);
  }

  Placement out;
  // Invalid input is the same on every node: report the first.
  if (!m.invalid.empty()) {
    out.kind = Placement::Kind::kInvalid;
    out.message = std::string(m.verdicts[*m.invalid.begin()].outcome.error.message());
    return out;
  }
  if (!m.ranked.empty()) {
    const size_t best = std::get<2>(*m.ranked.begin());
    out.kind = Placement::Kind::kPlaced;
    out.node = nodes[best].info.name;
    out.allocations = m.verdicts[best].outcome.allocations;
    return out;
  }
  out.message = UnavailableMessage(nodes.size(), m.verdicts);
  return out;
}

}  // namespace

Placement Place(const PlacementRequest& request) {
  const auto& nodes = *request.nodes;
  if (request.memo != nullptr && request.node_versions != nullptr &&
      request.node_versions->size() == nodes.size()) {
    return PlaceWithMemo(request);
  }
  std::vector<NodeVerdict> verdicts(nodes.size());
  std::vector<char> tried(nodes.size(), 0);
  const size_t want = request.nodes_to_find == 0 ? nodes.size() : request.nodes_to_find;
  std::atomic<size_t> feasible{0};
  std::atomic<size_t> next{0};
  RunParallel(Workers(request, nodes.size()), [&] {
    for (size_t k = next++; k < nodes.size() && feasible.load() < want; k = next++) {
      const size_t i = (request.start + k) % nodes.size();
      tried[i] = 1;
      verdicts[i] = Evaluate(request, nodes[i]);
      if (verdicts[i].feasible) ++feasible;
    }
  });

  Placement out;
  // Invalid input is the same on every node: report the first.
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (tried[i] && InvalidInput(verdicts[i])) {
      out.kind = Placement::Kind::kInvalid;
      out.message = std::string(verdicts[i].outcome.error.message());
      return out;
    }
  }
  // The best score; ties go to the node that sorts first.
  const NodeVerdict* best = nullptr;
  const NodeState* best_node = nullptr;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeVerdict& v = verdicts[i];
    if (!tried[i] || !v.feasible) continue;
    if (best == nullptr) {
      best = &v;
      best_node = &nodes[i];
      continue;
    }
    const int a = ScoreKey(request, v);
    const int b = ScoreKey(request, *best);
    if (a < b || (a == b && nodes[i].info.name < best_node->info.name)) {
      best = &v;
      best_node = &nodes[i];
    }
  }
  if (best != nullptr) {
    out.kind = Placement::Kind::kPlaced;
    out.node = best_node->info.name;
    out.allocations = best->outcome.allocations;
    return out;
  }
  out.message = UnavailableMessage(nodes.size(), verdicts);
  return out;
}

}  // namespace qm::service
