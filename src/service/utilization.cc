#include "service/utilization.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <variant>

#include "absl/strings/str_cat.h"

namespace qm::service {
namespace {

using std::chrono::system_clock;

// The model a device is shown under, as the web UI names it (web/src/model.ts deviceModel).
std::string ModelOf(const model::Device& device, const std::string& driver) {
  for (const std::string& key : {std::string("productName"), driver + "/productName",
                                 std::string("model"), std::string("type")}) {
    auto it = device.attributes.find(key);
    if (it == device.attributes.end()) continue;
    if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
    if (const auto* i = std::get_if<int64_t>(&it->second)) return absl::StrCat(*i);
    if (const auto* v = std::get_if<model::Version>(&it->second)) return v->value;
  }
  return driver;
}

bool Unhealthy(const std::vector<model::DeviceTaint>& taints) {
  return std::any_of(taints.begin(), taints.end(),
                     [](const model::DeviceTaint& t) { return t.key == kUnhealthyTaintKey; });
}

std::string DeviceId(const store::AllocationRecord& r) {
  return absl::StrCat(r.driver, "/", r.pool, "/", r.device);
}

// The replay: how many ledger rows hold each unit (a device, or a device within a namespace),
// and per group how many units are held now.
class Replay {
 public:
  Replay(const InventorySnapshot& snapshot, UtilizationGroupBy group_by, size_t buckets)
      : group_by_(group_by), buckets_(buckets) {
    if (group_by_ == UtilizationGroupBy::kNamespace) return;
    const allocator::Inventory& inventory = *snapshot.inventory;
    if (group_by_ == UtilizationGroupBy::kNone) Group("");
    std::vector<const allocator::Inventory::ClassEntry*> classes;
    if (group_by_ == UtilizationGroupBy::kClass) {
      for (const auto& name : snapshot.class_names) {
        Group(name);  // every class, also those that match nothing
        classes.push_back(inventory.FindClass(name));
      }
    }
    for (uint32_t d = 0; d < inventory.devices().size(); ++d) {
      const auto& entry = inventory.devices()[d];
      const auto& group = inventory.groups()[entry.group];
      if (group.generation < inventory.pools()[group.pool].max_generation) continue;  // obsolete
      const model::ResourceSlice& slice = *inventory.slices()[entry.slice].slice;
      Unit unit;
      unit.unhealthy = Unhealthy(entry.taints);
      switch (group_by_) {
        case UtilizationGroupBy::kNone:
          unit.groups.push_back(0);
          break;
        case UtilizationGroupBy::kClass:
          for (size_t c = 0; c < classes.size(); ++c) {
            std::string error;
            if (classes[c] != nullptr && inventory.ClassMatches(*classes[c], d, &error) ==
                                             allocator::Inventory::Match::kYes) {
              unit.groups.push_back(Group(snapshot.class_names[c]));
            }
          }
          break;
        case UtilizationGroupBy::kModel:
          unit.groups.push_back(Group(ModelOf(*entry.device, slice.driver)));
          break;
        case UtilizationGroupBy::kNode:
          unit.groups.push_back(Group(slice.per_device_node_selection
                                          ? entry.device->Binding().node_name
                                          : slice.node_name));
          break;
        case UtilizationGroupBy::kNamespace:
          break;
      }
      for (size_t g : unit.groups) {
        ++series_[g].devices;
        if (!entry.taints.empty()) ++series_[g].tainted;
        if (unit.unhealthy) ++state_[g].unhealthy;
      }
      units_.emplace(inventory.DeviceId(entry), std::move(unit));
    }
  }

  // Adds `delta` rows for `row`; with `bucket` >= 0, raises that bucket's peaks.
  void Apply(const store::AllocationRecord& row, int delta, int64_t bucket) {
    if (row.admin_access) return;  // admin access holds nothing
    Unit* unit = nullptr;
    if (group_by_ == UtilizationGroupBy::kNamespace) {
      const std::string key = row.claim_namespace + '\0' + DeviceId(row);
      auto it = units_.find(key);
      if (it == units_.end()) {
        it = units_.emplace(key, Unit{{Group(row.claim_namespace)}, false}).first;
      }
      unit = &it->second;
    } else {
      auto it = units_.find(DeviceId(row));
      if (it == units_.end()) return;  // no longer in the inventory
      unit = &it->second;
    }
    const bool before = unit->rows > 0;
    unit->rows += delta;
    const bool after = unit->rows > 0;
    if (before == after) return;
    for (size_t g : unit->groups) {
      State& s = state_[g];
      s.allocated += after ? 1 : -1;
      if (unit->unhealthy) s.allocated_unhealthy += after ? 1 : -1;
      if (bucket >= 0) {
        auto& peak = series_[g].peak_allocated[bucket];
        peak = std::max(peak, s.allocated);
      }
    }
  }

  void StartBucket(int64_t b) {
    for (size_t g = 0; g < series_.size(); ++g) series_[g].peak_allocated[b] = state_[g].allocated;
  }

  void EndBucket(int64_t b) {
    for (size_t g = 0; g < series_.size(); ++g) {
      UtilizationSeries& s = series_[g];
      s.allocated[b] = state_[g].allocated;
      s.peak_allocated[b] = std::max(s.peak_allocated[b], s.allocated[b]);
      s.unhealthy[b] = state_[g].unhealthy - state_[g].allocated_unhealthy;
      s.free[b] = s.devices - s.allocated[b] - s.unhealthy[b];
    }
  }

  std::vector<UtilizationSeries> TakeGroups() {
    std::vector<UtilizationSeries> out;
    for (auto& s : series_) {
      if (group_by_ == UtilizationGroupBy::kNamespace) {
        // Namespaces have no devices of their own: only those that held some are listed.
        if (std::all_of(s.peak_allocated.begin(), s.peak_allocated.end(),
                        [](int64_t v) { return v == 0; })) {
          continue;
        }
        s.unhealthy.clear();
        s.free.clear();
      }
      out.push_back(std::move(s));
    }
    std::sort(out.begin(), out.end(), [](const UtilizationSeries& a, const UtilizationSeries& b) {
      return a.name < b.name;
    });
    return out;
  }

 private:
  struct Unit {
    std::vector<size_t> groups;
    bool unhealthy = false;
    int64_t rows = 0;
  };
  struct State {
    int64_t allocated = 0;
    int64_t allocated_unhealthy = 0;
    int64_t unhealthy = 0;
  };

  size_t Group(const std::string& name) {
    auto [it, inserted] = group_index_.emplace(name, series_.size());
    if (inserted) {
      UtilizationSeries s;
      s.name = name;
      s.allocated.assign(buckets_, 0);
      s.peak_allocated.assign(buckets_, 0);
      s.unhealthy.assign(buckets_, 0);
      s.free.assign(buckets_, 0);
      series_.push_back(std::move(s));
      state_.push_back(State{});
    }
    return it->second;
  }

  const UtilizationGroupBy group_by_;
  const size_t buckets_;
  std::map<std::string, size_t> group_index_;
  std::vector<UtilizationSeries> series_;
  std::vector<State> state_;
  std::unordered_map<std::string, Unit> units_;
};

}  // namespace

UtilizationResult ComputeUtilization(const InventorySnapshot& inventory,
                                     const store::AllocationHistory& history,
                                     const UtilizationRequest& request) {
  UtilizationResult out;
  const auto span = request.end - request.start;
  const auto step = std::chrono::duration_cast<system_clock::duration>(request.step);
  if (span <= system_clock::duration::zero() || step <= system_clock::duration::zero()) {
    return out;
  }
  const int64_t buckets = (span + step - system_clock::duration(1)) / step;
  for (int64_t b = 0; b < buckets; ++b) out.bucket_starts.push_back(request.start + b * step);

  Replay replay(inventory, request.group_by, static_cast<size_t>(buckets));
  // The ledger now, then every change after the start undone: the ledger at the start.
  for (const auto& row : history.current) replay.Apply(row, +1, -1);
  for (auto it = history.events.rbegin(); it != history.events.rend(); ++it) {
    if (it->time > request.start) replay.Apply(it->row, -it->delta, -1);
  }
  // Forward again, bucket by bucket.
  size_t next = 0;
  while (next < history.events.size() && history.events[next].time <= request.start) ++next;
  for (int64_t b = 0; b < buckets; ++b) {
    const auto bucket_end = request.start + (b + 1) * step;
    replay.StartBucket(b);
    for (; next < history.events.size() && history.events[next].time < bucket_end; ++next) {
      replay.Apply(history.events[next].row, history.events[next].delta, b);
    }
    replay.EndBucket(b);
  }
  out.groups = replay.TakeGroups();
  return out;
}

}  // namespace qm::service
