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

// The sources of an unhealthy taint a device has now, counted as the health history counts
// them (store::HealthEvent): its own taints count once, each DeviceTaintRule's once.
int UnhealthySources(const allocator::Inventory::DeviceEntry& entry) {
  const size_t own = entry.device->taints.size();  // `taints` lists the device's own first
  bool own_unhealthy = false;
  int rules = 0;
  for (size_t i = 0; i < entry.taints.size(); ++i) {
    if (entry.taints[i].key != model::kUnhealthyTaintKey) continue;
    if (i < own) {
      own_unhealthy = true;
    } else {
      ++rules;
    }
  }
  return (own_unhealthy ? 1 : 0) + rules;
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
      unit.health = UnhealthySources(entry);
      unit.source = {slice.driver, slice.pool, entry.device->name};
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
        if (unit.health > 0) ++state_[g].unhealthy;
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
        Unit unit;
        unit.groups.push_back(Group(row.claim_namespace));
        it = units_.emplace(key, std::move(unit)).first;
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
      if (unit->health > 0) s.allocated_unhealthy += after ? 1 : -1;
      if (bucket >= 0) {
        auto& peak = series_[g].peak_allocated[bucket];
        peak = std::max(peak, s.allocated);
      }
    }
  }

  // Adds `delta` to the unhealthy sources of the devices `event` covers (a rule's open fields
  // cover every device there). Namespaces count no health.
  void ApplyHealth(const store::HealthEvent& event, int delta) {
    if (group_by_ == UtilizationGroupBy::kNamespace) return;
    auto change = [&](Unit& unit) {
      const bool before = unit.health > 0;
      unit.health += delta;
      const bool after = unit.health > 0;
      if (before == after) return;
      for (size_t g : unit.groups) {
        State& s = state_[g];
        s.unhealthy += after ? 1 : -1;
        if (unit.rows > 0) s.allocated_unhealthy += after ? 1 : -1;
      }
    };
    if (!event.driver.empty() && !event.pool.empty() && !event.device.empty()) {
      auto it = units_.find(absl::StrCat(event.driver, "/", event.pool, "/", event.device));
      if (it != units_.end()) change(it->second);
      return;
    }
    auto open_or = [](const std::string& want, const std::string& have) {
      return want.empty() || want == have;
    };
    for (auto& [id, unit] : units_) {
      if (open_or(event.driver, unit.source.driver) && open_or(event.pool, unit.source.pool) &&
          open_or(event.device, unit.source.device)) {
        change(unit);
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
    model::UnhealthySource source;  // the device (empty for namespaces)
    int health = 0;                 // sources of an unhealthy taint covering it (> 0: unhealthy)
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
  // The same for the devices' health: the slices and rules now, then the changes undone.
  for (auto it = history.health.rbegin(); it != history.health.rend(); ++it) {
    if (it->time > request.start) replay.ApplyHealth(*it, -it->delta);
  }
  // Forward again, bucket by bucket (a bucket's health counts at its end only, so the order of
  // the two kinds within a bucket does not matter).
  size_t next = 0;
  while (next < history.events.size() && history.events[next].time <= request.start) ++next;
  size_t next_health = 0;
  while (next_health < history.health.size() && history.health[next_health].time <= request.start) {
    ++next_health;
  }
  for (int64_t b = 0; b < buckets; ++b) {
    const auto bucket_end = request.start + (b + 1) * step;
    replay.StartBucket(b);
    for (; next < history.events.size() && history.events[next].time < bucket_end; ++next) {
      replay.Apply(history.events[next].row, history.events[next].delta, b);
    }
    for (; next_health < history.health.size() && history.health[next_health].time < bucket_end;
         ++next_health) {
      replay.ApplyHealth(history.health[next_health], history.health[next_health].delta);
    }
    replay.EndBucket(b);
  }
  out.groups = replay.TakeGroups();
  return out;
}

}  // namespace qm::service
