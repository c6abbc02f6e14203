#pragma once

// The allocator's search (allocator.cc) and how it reports what it found or why nothing fits
// (allocator_explain.cc). Included by those two files only.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "allocator/allocator.h"
#include "cel/compiler.h"

namespace qm::allocator::search_internal {

using model::DeviceToleration;

constexpr uint64_t kCelCostLimit = 1'000'000;

// Whether two sorted attribute sets share a value.
bool Intersects(const AttrSet& a, const AttrSet& b);

// The first taint of `taints` that no toleration tolerates, or nullptr.
const model::DeviceTaint* UntoleratedTaint(const std::vector<model::DeviceTaint>& taints,
                                           const std::vector<DeviceToleration>& tolerations);

struct Req {
  int claim = 0;
  std::string name;  // "req" or "req/sub"
  std::string top;   // "req"
  const model::ExactDeviceRequest* spec = nullptr;
  const Inventory::ClassEntry* cls = nullptr;
  std::vector<std::shared_ptr<const cel::CompileResult>> selectors;
  bool all = false;
  int64_t num_devices = 0;
  std::vector<size_t> all_devices;  // candidate positions
  std::vector<int8_t> memo;         // per candidate: 0 unknown, 1 selectable, 2 not
};

struct TopRequest {
  std::vector<Req> alternatives;
  bool first_available = false;
  int selected = 0;
};

struct ConstraintState {
  const model::DeviceConstraint* spec = nullptr;
  bool match = false;  // matchAttribute, else distinctAttribute
  std::string attribute;
  const std::vector<std::optional<AttrSet>>* sets = nullptr;  // per device, from the inventory
  std::vector<const AttrSet*> taken;                          // one per device added
  AttrSet intersection;  // matchAttribute: running intersection (recomputed on undo)
};

struct ClaimData {
  const model::ResourceClaim* claim = nullptr;
  // namespace/name, for messages.
  std::string Display() const {
    return claim->namespace_.empty() ? claim->name
                                     : absl::StrCat(claim->namespace_, "/", claim->name);
  }
  std::vector<TopRequest> requests;
  std::vector<ConstraintState> constraints;
};

struct Candidate {
  uint32_t device;
  uint32_t group;
};

struct PoolView {
  uint32_t group;
  std::vector<uint32_t> slices;  // targeting this node, sorted by name
  bool incomplete = false;
  std::string invalid;
};

struct Picked {
  int claim;
  const Req* req;
  uint32_t device;
  bool shared;  // a consumable-capacity share
  bool counted_counters;
  std::map<std::string, Quantity> consumed;
  std::string share_id;
};

enum class Step { kFound, kNotFound, kTooMany, kAbort };

class Search {
 public:
  Search(const Inventory& inv, const AllocatedState& state, const model::NodeInfo* node,
         const Options& options)
      : inv_(inv), state_(state), node_(node), options_(options) {}

  Outcome Run(const std::vector<const model::ResourceClaim*>& claims);

 private:
  void GatherPools();
  absl::Status Prepare(const std::vector<const model::ResourceClaim*>& claims);
  absl::Status PrepareRequest(ClaimData& cd, int claim_index, const std::string& top,
                              const std::string& name, const model::ExactDeviceRequest& spec,
                              Req& out);
  Step Allocate(size_t c, size_t r, int64_t k, size_t start, bool alt_chosen);
  // 1: selectable, 0: not, -1: error (abort_ set).
  int Selectable(Req& rq, size_t pos);
  bool InUseByOthers(const Req& rq, uint32_t device) const;
  bool TryAdd(Req& rq, uint32_t device, uint32_t group, bool must);
  bool CapacityFits(const Req& rq, uint32_t device, std::map<std::string, Quantity>& consumed,
                    bool count_in_flight) const;
  bool CountersFit(uint32_t device, uint32_t group) const;
  bool SharedInUse(uint32_t device) const;
  bool ConstraintsAccept(ClaimData& cd, const Req& rq, uint32_t device, size_t& added);
  void Undo(size_t picked_size);
  // Pruning: whether candidates from `from` on could still supply `needed` more devices to `rq`
  // (free, selectable, and agreeing with the values its matchAttribute constraints have fixed).
  // Never wrong in the pessimistic direction: unknown evaluations count as possible.
  bool EnoughLeft(Req& rq, size_t from, int64_t needed);
  bool Expired();
  void BuildResults(Outcome& out);
  void BuildScore(Outcome& out);
  std::string Explain();

  // options_.max_results_per_claim, or no limit.
  int64_t MaxResultsPerClaim() const {
    return options_.max_results_per_claim > 0 ? options_.max_results_per_claim : INT64_MAX;
  }

  const Inventory& inv_;
  const AllocatedState& state_;
  const model::NodeInfo* node_;
  const Options& options_;

  std::vector<PoolView> pools_;
  std::vector<Candidate> candidates_;
  std::vector<ClaimData> claims_;
  std::vector<Picked> picked_;
  // Constraint undo log: (claim, constraint) of every ConstraintState::taken push.
  std::vector<std::pair<int, int>> constraint_log_;
  std::vector<size_t> picked_constraint_mark_;
  absl::Status abort_;
  uint32_t check_countdown_ = 1;
  std::vector<std::string> invalid_pools_;
  std::vector<std::string> incomplete_pools_;
  std::string failed_class_;
};

}  // namespace qm::allocator::search_internal
