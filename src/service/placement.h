#pragma once

// Placement: the scheduler's decision for one pod over one snapshot. Filters every node (Ready,
// schedulable, nodeSelector, required node affinity, taints vs tolerations, nodes pinned by
// claims that are already allocated), runs the allocator for all of the pod's unallocated
// claims together on the nodes that pass, in parallel, and scores the feasible ones instead of
// taking the first fit. Pure: no store access, so it is unit-tested on its own and shared by
// the scheduler loop and the load benchmarks.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "allocator/allocator.h"
#include "model/core.h"
#include "model/dra.h"

namespace qm::service {

// Placement reads the typed core model (model/core.h).
using NodeTaint = model::Taint;
using PodToleration = model::Toleration;

struct NodeState {
  model::NodeInfo info;
  bool ready = true;
  bool unschedulable = false;  // cordoned
  std::vector<NodeTaint> taints;
};

struct PodPlacementSpec {
  std::map<std::string, std::string> node_selector;
  std::optional<model::NodeSelector> required_affinity;
  std::vector<PodToleration> tolerations;
  bool spread = false;  // annotation: prefer the node with the most free devices
};

// What one node said about one pod: feasible (with the allocation it would get) or why not.
struct NodeVerdict {
  bool feasible = false;
  std::string cause;  // for infeasible nodes
  allocator::Outcome outcome;
  bool evaluated = false;
  uint64_t version = 0;  // the node's version when it was evaluated
};

// Verdicts kept between pods that ask for the same thing (same claims' specs, same node
// constraints), so that the next such pod re-evaluates only the nodes whose devices changed
// since. The caller owns one memo per such signature and bumps a node's version whenever an
// allocation lands on it.
struct PlacementMemo {
  std::vector<NodeVerdict> verdicts;
  // Kept by Place: the node version each verdict is of (kUnseen: none yet), the feasible nodes
  // best first (score key, node name, index), and the nodes whose verdict is invalid input. So a
  // pod after the first costs the nodes that changed, not a pass over every node.
  static constexpr uint64_t kUnseen = ~uint64_t{0};
  std::vector<uint64_t> seen;
  std::set<std::tuple<int, std::string_view, size_t>> ranked;
  std::set<size_t> invalid;
  // With PlacementRequest::changed_nodes: whether every node was looked at once, and how many
  // entries of changed_nodes the verdicts include.
  bool scanned = false;
  size_t changes_seen = 0;
};

struct PlacementRequest {
  const allocator::Inventory* inventory = nullptr;
  const allocator::AllocatedState* allocated = nullptr;
  const std::vector<NodeState>* nodes = nullptr;
  PodPlacementSpec pod;
  // Claims of the pod that still need devices (allocated together, all or nothing).
  std::vector<const model::ResourceClaim*> to_allocate;
  // nodeSelectors of the pod's claims that are already allocated: the node must match each.
  std::vector<model::NodeSelector> pinned;
  allocator::Options options;
  int parallelism = 0;  // 0: one worker per hardware thread
  // Stop looking once this many feasible nodes were found (0: try every node). Nodes are tried
  // from `start` on, wrapping around, so successive pods start at different nodes. See
  // NodesToFind for kube-scheduler's percentageOfNodesToScore rule.
  size_t nodes_to_find = 0;
  size_t start = 0;
  // With a memo (and one version per node), every node is evaluated once and then only again
  // when its version changed; nodes_to_find and start are not used. A memo serves requests for
  // one node list (the nodes' names are referenced, not copied).
  PlacementMemo* memo = nullptr;
  const std::vector<uint64_t>* node_versions = nullptr;
  // Optional, with a memo: the index of every node whose version was bumped, in order, appended
  // to (repeats allowed) and never reset while the memo lives. A pod after the first then looks
  // at the nodes listed since the memo's last use instead of comparing every node's version
  // (50,000 comparisons a pod on a large fleet).
  const std::vector<uint32_t>* changed_nodes = nullptr;
};

// kube-scheduler's adaptive percentageOfNodesToScore: every node up to 100 nodes, otherwise
// max(5, 50 - nodes/125) percent of them, but at least 100.
size_t NodesToFind(size_t nodes);

struct Placement {
  enum class Kind { kPlaced, kUnschedulable, kInvalid };
  Kind kind = Kind::kUnschedulable;
  std::string node;
  std::vector<model::AllocationResult> allocations;  // one per to_allocate claim
  // kUnschedulable: "0/3 nodes are available: 2 insufficient devices of class gpu, 1 had
  // untolerated taint {nvidia.com/gpu: present}." kInvalid: the allocator's error.
  std::string message;
};

Placement Place(const PlacementRequest& request);

// True when `toleration` tolerates a node taint (core/v1 semantics).
bool ToleratesNodeTaint(const PodToleration& toleration, const NodeTaint& taint);

// Why a pod with `tolerations` must leave a node with `taints` at `now`, as Kubernetes' taint
// eviction controller decides: a NoExecute taint it does not tolerate, or tolerates only for a
// tolerationSeconds (the smallest of the matching ones) counted from the taint's timeAdded that
// has passed. Empty: it may stay.
std::string NodeEvictionReason(const std::vector<PodToleration>& tolerations,
                               const std::vector<NodeTaint>& taints,
                               std::chrono::system_clock::time_point now);

}  // namespace qm::service
