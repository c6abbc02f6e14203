#include "allocator/inventory.h"

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>
#include <type_traits>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "cel/dra_env.h"

namespace qm::allocator {
namespace {

cel::AttributeValue ToCel(const model::AttributeValue& v) {
  struct Visitor {
    cel::AttributeValue operator()(std::monostate) const { return std::monostate(); }
    cel::AttributeValue operator()(int64_t x) const { return x; }
    cel::AttributeValue operator()(bool x) const { return x; }
    cel::AttributeValue operator()(const std::string& x) const { return x; }
    cel::AttributeValue operator()(const model::Version& x) const {
      return cel::VersionString{x.value};
    }
    cel::AttributeValue operator()(const std::vector<int64_t>& x) const { return x; }
    cel::AttributeValue operator()(const std::vector<bool>& x) const { return x; }
    cel::AttributeValue operator()(const std::vector<std::string>& x) const { return x; }
    cel::AttributeValue operator()(const std::vector<model::Version>& x) const {
      std::vector<cel::VersionString> out;
      out.reserve(x.size());
      for (const auto& v : x) out.push_back(cel::VersionString{v.value});
      return out;
    }
  };
  return std::visit(Visitor{}, v);
}

cel::DeviceInput ToDeviceInput(const std::string& driver, const model::Device& d) {
  cel::DeviceInput in;
  in.driver = driver;
  for (const auto& [name, value] : d.attributes) in.attributes.emplace(name, ToCel(value));
  for (const auto& [name, cap] : d.capacity) in.capacity.emplace(name, cap.value);
  in.allow_multiple_allocations = d.allow_multiple_allocations;
  return in;
}

// A hash of what a slice's device values are built from: the driver and, per device, the
// attributes, capacity and allowMultipleAllocations (not the name).
uint64_t ValueShape(const model::ResourceSlice& slice) {
  uint64_t h = std::hash<std::string_view>{}(slice.driver);
  auto mix = [&h](uint64_t x) { h = (h ^ x) * 0x100000001b3ULL + (h >> 29); };
  auto text = [&mix](std::string_view t) { mix(std::hash<std::string_view>{}(t)); };
  for (const model::Device& d : slice.devices) {
    mix(d.allow_multiple_allocations ? 0x9e37 : 0x79b9);
    for (const auto& [name, value] : d.attributes) {
      text(name);
      mix(value.index());
      std::visit(
          [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, bool>) {
              mix(static_cast<uint64_t>(v));
            } else if constexpr (std::is_same_v<T, std::string>) {
              text(v);
            } else if constexpr (std::is_same_v<T, model::Version>) {
              text(v.value);
            } else if constexpr (!std::is_same_v<T, std::monostate>) {
              mix(v.size());
            }
          },
          value);
    }
    for (const auto& [name, cap] : d.capacity) {
      text(name);
      mix(absl::Int128Low64(cap.value.nanos()));
    }
  }
  return h;
}

// Whether two slices' devices have the same values, in order (what ValueShape hashes).
bool SameValues(const model::ResourceSlice& a, const model::ResourceSlice& b) {
  if (a.driver != b.driver || a.devices.size() != b.devices.size()) return false;
  for (size_t i = 0; i < a.devices.size(); ++i) {
    const model::Device& x = a.devices[i];
    const model::Device& y = b.devices[i];
    if (x.allow_multiple_allocations != y.allow_multiple_allocations ||
        x.attributes != y.attributes || x.capacity.size() != y.capacity.size()) {
      return false;
    }
    for (auto ix = x.capacity.begin(), iy = y.capacity.begin(); ix != x.capacity.end();
         ++ix, ++iy) {
      if (ix->first != iy->first || !(ix->second.value == iy->second.value) ||
          ix->second.value.format() != iy->second.value.format()) {
        return false;
      }
    }
  }
  return true;
}

bool RuleMatches(const model::DeviceTaintRule& rule, const std::string& driver,
                 const std::string& pool, const std::string& device) {
  return (rule.driver.empty() || rule.driver == driver) &&
         (rule.pool.empty() || rule.pool == pool) && (rule.device.empty() || rule.device == device);
}

// An attribute's typed values (kind letter i/b/s/v and text), sorted and unique. Scalars give
// one.
using TypedValues = std::vector<std::pair<char, std::string>>;

std::optional<TypedValues> AttributeValues(const model::AttributeValue& v) {
  TypedValues out;
  struct Visitor {
    TypedValues& out;
    bool operator()(std::monostate) const { return false; }
    bool operator()(int64_t x) const { return out.emplace_back('i', std::to_string(x)), true; }
    bool operator()(bool x) const { return out.emplace_back('b', x ? "true" : "false"), true; }
    bool operator()(const std::string& x) const { return out.emplace_back('s', x), true; }
    bool operator()(const model::Version& x) const { return out.emplace_back('v', x.value), true; }
    bool operator()(const std::vector<int64_t>& x) const {
      for (auto i : x) out.emplace_back('i', std::to_string(i));
      return !x.empty();
    }
    bool operator()(const std::vector<bool>& x) const {
      for (bool b : x) out.emplace_back('b', b ? "true" : "false");
      return !x.empty();
    }
    bool operator()(const std::vector<std::string>& x) const {
      for (const auto& s : x) out.emplace_back('s', s);
      return !x.empty();
    }
    bool operator()(const std::vector<model::Version>& x) const {
      for (const auto& s : x) out.emplace_back('v', s.value);
      return !x.empty();
    }
  };
  if (!std::visit(Visitor{out}, v)) return std::nullopt;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// lookupAttribute: the fully qualified name, or the bare id when the domain is the driver's.
const model::AttributeValue* LookupAttribute(const model::Device& device, const std::string& driver,
                                             const std::string& qualified) {
  auto it = device.attributes.find(qualified);
  if (it != device.attributes.end()) return &it->second;
  auto slash = qualified.find('/');
  if (slash != std::string::npos && qualified.compare(0, slash, driver) == 0 &&
      slash == driver.size()) {
    it = device.attributes.find(qualified.substr(slash + 1));
    if (it != device.attributes.end()) return &it->second;
  }
  return nullptr;
}

// Why a group of slices cannot be used, or "" (GatherPools' buildPool checks).
std::string ValidateGroup(const Inventory::Group& group,
                          const std::vector<Inventory::SliceEntry>& slices) {
  std::set<std::string> device_names;
  std::set<std::string> set_names;
  for (uint32_t s : group.slices) {
    for (const auto& set : slices[s].slice->shared_counters) {
      if (!set_names.insert(set.name).second) {
        return absl::StrCat("duplicate counter set name ", set.name);
      }
    }
  }
  for (uint32_t s : group.slices) {
    for (const auto& d : slices[s].slice->devices) {
      if (!device_names.insert(d.name).second) {
        return absl::StrCat("duplicate device name ", d.name);
      }
      for (const auto& consumption : d.consumes_counters) {
        auto set = group.counter_sets.find(consumption.counter_set);
        if (set == group.counter_sets.end()) {
          return absl::StrCat("device ", d.name, " consumes counters of unknown counter set ",
                              consumption.counter_set);
        }
        for (const auto& [counter, _] : consumption.counters) {
          if (!set->second.contains(counter)) {
            return absl::StrCat("device ", d.name, " consumes unknown counter ", counter,
                                " of counter set ", consumption.counter_set);
          }
        }
      }
    }
  }
  return "";
}

}  // namespace

const std::map<std::string, Quantity>* AllocatedState::SharedConsumed(uint32_t device) const {
  auto it = shared_.find(device);
  return it == shared_.end() ? nullptr : &it->second.consumed;
}

const std::map<std::string, std::map<std::string, Quantity>>* AllocatedState::CountersConsumed(
    uint32_t group) const {
  auto it = counters_.find(group);
  return it == counters_.end() ? nullptr : &it->second;
}

std::shared_ptr<const Inventory> Inventory::Build(InventoryInput input, cel::ProgramCache* programs,
                                                  const Inventory* previous) {
  std::shared_ptr<Inventory> inv(new Inventory());
  if (programs == nullptr) {
    inv->own_programs_ = std::make_unique<cel::ProgramCache>(1024);
    programs = inv->own_programs_.get();
  }
  inv->programs_ = programs;

  // Slices sorted by (driver, pool, generation, name): pools, groups and the slice order within
  // a group all fall out of one pass.
  std::sort(input.slices.begin(), input.slices.end(), [](const auto& a, const auto& b) {
    return std::tie(a->driver, a->pool, a->generation, a->name) <
           std::tie(b->driver, b->pool, b->generation, b->name);
  });
  inv->slices_.reserve(input.slices.size());
  for (auto& ref : input.slices) {
    const model::ResourceSlice& slice = *ref;
    const bool new_pool = inv->pools_.empty() || inv->pools_.back().driver != slice.driver ||
                          inv->pools_.back().name != slice.pool;
    if (new_pool) inv->pools_.push_back(Pool{slice.driver, slice.pool, {}, slice.generation});
    Pool& pool = inv->pools_.back();
    const uint32_t pool_index = static_cast<uint32_t>(inv->pools_.size() - 1);
    if (new_pool || inv->groups_[pool.groups.back()].generation != slice.generation) {
      Group g;
      g.pool = pool_index;
      g.generation = slice.generation;
      inv->groups_.push_back(std::move(g));
      pool.groups.push_back(static_cast<uint32_t>(inv->groups_.size() - 1));
    }
    pool.max_generation = std::max(pool.max_generation, slice.generation);
    const uint32_t group_index = pool.groups.back();
    Group& group = inv->groups_[group_index];
    const uint32_t slice_index = static_cast<uint32_t>(inv->slices_.size());
    group.slices.push_back(slice_index);
    group.slice_count = static_cast<size_t>(std::max<int64_t>(slice.resource_slice_count, 0));
    for (const auto& set : slice.shared_counters) {
      auto& counters = group.counter_sets[set.name];
      for (const auto& [name, q] : set.counters) counters[name] = q;
    }
    if (!slice.node_name.empty()) {
      inv->slices_by_node_[slice.node_name].push_back(slice_index);
    } else {
      inv->other_slices_.push_back(slice_index);
    }
    inv->slices_.push_back(SliceEntry{ref.shared(), group_index, 0});
  }

  size_t device_count = 0;
  for (const auto& s : inv->slices_) device_count += s.slice->devices.size();
  inv->devices_.reserve(device_count);
  cel::DeviceValueBuilder values;  // shares equal attribute values and maps between devices
  std::shared_ptr<const ShapeCache> shapes =
      previous != nullptr ? previous->shapes_ : std::shared_ptr<const ShapeCache>();
  std::shared_ptr<ShapeCache> grown;  // a copy of `shapes` with new shapes, once one is added
  // The first device of each slice `previous` holds, by the slice's address.
  std::unordered_map<const model::ResourceSlice*, uint32_t> built_before;
  if (previous != nullptr) {
    built_before.reserve(previous->slices_.size());
    for (const auto& ps : previous->slices_) built_before.emplace(ps.slice.get(), ps.first_device);
  }
  for (uint32_t si = 0; si < inv->slices_.size(); ++si) {
    SliceEntry& se = inv->slices_[si];
    se.first_device = static_cast<uint32_t>(inv->devices_.size());
    const auto& slice = *se.slice;
    auto before = built_before.find(se.slice.get());
    const DeviceEntry* reuse =
        before == built_before.end() ? nullptr : previous->devices_.data() + before->second;
    // A new slice shaped like one seen before takes that one's values.
    const std::vector<cel::Value>* same_shape = nullptr;
    uint64_t shape = 0;
    if (reuse == nullptr && !slice.devices.empty()) {
      shape = ValueShape(slice);
      const ShapeCache* cache = grown != nullptr ? grown.get() : shapes.get();
      if (cache != nullptr) {
        auto [first, last] = cache->equal_range(shape);
        for (auto it = first; it != last; ++it) {
          if (SameValues(*it->second.slice, slice)) {
            same_shape = &it->second.values;
            break;
          }
        }
      }
    }
    const uint32_t slice_first = static_cast<uint32_t>(inv->devices_.size());
    size_t device_index = 0;
    for (const auto& d : slice.devices) {
      DeviceEntry e;
      e.device = &d;
      e.slice = si;
      e.group = se.group;
      e.taints = d.taints;
      for (const auto& rule : input.taint_rules) {
        if (RuleMatches(rule, slice.driver, slice.pool, d.name)) e.taints.push_back(rule.taint);
      }
      if (!d.Binding().binding_conditions.empty()) {
        inv->groups_[se.group].has_binding_conditions = true;
      }
      if (reuse != nullptr) {
        e.value = reuse->value;
        e.value_error = reuse->value_error;
        ++reuse;
      } else if (same_shape != nullptr) {
        e.value = (*same_shape)[device_index];
      } else if (auto value = values.Build(ToDeviceInput(slice.driver, d)); value.ok()) {
        e.value = std::move(*value);
      } else {
        e.value_error = std::string(value.status().message());
      }
      inv->devices_.push_back(std::move(e));
      ++device_index;
    }
    const size_t cached = grown != nullptr ? grown->size() : (shapes ? shapes->size() : 0);
    if (reuse == nullptr && same_shape == nullptr && !slice.devices.empty() &&
        cached < kMaxShapes) {
      ShapeEntry entry{se.slice, {}};
      entry.values.reserve(slice.devices.size());
      for (uint32_t i = slice_first; i < inv->devices_.size(); ++i) {
        if (!inv->devices_[i].value.has_value()) break;  // no shape for values that failed
        entry.values.push_back(*inv->devices_[i].value);
      }
      if (entry.values.size() == slice.devices.size()) {
        if (grown == nullptr) {
          grown = shapes != nullptr ? std::make_shared<ShapeCache>(*shapes)
                                    : std::make_shared<ShapeCache>();
        }
        grown->emplace(shape, std::move(entry));
      }
    }
  }
  inv->shapes_ =
      grown != nullptr ? std::shared_ptr<const ShapeCache>(std::move(grown)) : std::move(shapes);
  for (auto& g : inv->groups_) g.invalid = ValidateGroup(g, inv->slices_);

  for (auto& c : input.classes) {
    ClassEntry entry;
    for (const auto& expression : c.selectors) entry.selectors.push_back(programs->Get(expression));
    entry.device_class = std::move(c);
    auto [it, _] = inv->classes_.emplace(entry.device_class.name, std::move(entry));
    auto memo = std::make_unique<std::atomic<uint8_t>[]>(inv->devices_.size());
    for (size_t i = 0; i < inv->devices_.size(); ++i) memo[i].store(0, std::memory_order_relaxed);
    inv->class_memo_.emplace(&it->second, std::move(memo));
  }
  return inv;
}

const Inventory::ClassEntry* Inventory::FindClass(const std::string& name) const {
  auto it = classes_.find(name);
  return it == classes_.end() ? nullptr : &it->second;
}

const std::vector<uint32_t>& Inventory::SlicesOnNode(const std::string& node) const {
  static const std::vector<uint32_t>* const empty = new std::vector<uint32_t>();
  auto it = slices_by_node_.find(node);
  return it == slices_by_node_.end() ? *empty : it->second;
}

std::vector<uint32_t> Inventory::FindDevice(std::string_view driver, std::string_view pool,
                                            std::string_view device) const {
  std::vector<uint32_t> out;
  auto it = std::lower_bound(
      pools_.begin(), pools_.end(), std::make_pair(driver, pool),
      [](const Pool& p, const std::pair<std::string_view, std::string_view>& key) {
        return std::make_pair(std::string_view(p.driver), std::string_view(p.name)) < key;
      });
  if (it == pools_.end() || it->driver != driver || it->name != pool) return out;
  for (uint32_t g : it->groups) {
    for (uint32_t s : groups_[g].slices) {
      const SliceEntry& se = slices_[s];
      const auto& devices = se.slice->devices;
      for (size_t k = 0; k < devices.size(); ++k) {
        if (devices[k].name == device) out.push_back(se.first_device + static_cast<uint32_t>(k));
      }
    }
  }
  return out;
}

std::string Inventory::DeviceId(const DeviceEntry& entry) const {
  const model::ResourceSlice& slice = *slices_[entry.slice].slice;
  return absl::StrCat(slice.driver, "/", slice.pool, "/", entry.device->name);
}

std::shared_ptr<const cel::CompileResult> Inventory::Compile(const std::string& expression) const {
  return programs_->Get(expression);
}

Inventory::Match Inventory::ClassMatches(const ClassEntry& cls, uint32_t device,
                                         std::string* error) const {
  auto& slot = class_memo_.at(&cls)[device];
  auto cached = static_cast<Match>(slot.load(std::memory_order_acquire));
  if (cached == Match::kError && error != nullptr) {
    qm::MutexLock lock(&errors_mu_);
    *error = class_errors_[{&cls, device}];
  }
  if (cached != Match::kUnknown) return cached;

  const DeviceEntry& d = devices_[device];
  Match result = Match::kYes;
  std::string message;
  for (size_t i = 0; i < cls.selectors.size() && result == Match::kYes; ++i) {
    const auto& program = *cls.selectors[i];
    if (program.ast == nullptr) {
      result = Match::kError;
      message = absl::StrCat("class ", cls.device_class.name, ": selector #", i,
                             ": CEL compile error: ", program.error);
      break;
    }
    if (!d.value.has_value()) {
      result = Match::kError;
      message = absl::StrCat("class ", cls.device_class.name, ": selector #", i,
                             ": CEL runtime error: ", d.value_error);
      break;
    }
    auto matched =
        cel::MatchesValue(*program.ast, *d.value, 1'000'000, &regexes_, program.constants.get());
    if (!matched.ok()) {
      result = Match::kError;
      message = absl::StrCat("class ", cls.device_class.name, ": selector #", i,
                             ": CEL runtime error: ", matched.status().message());
    } else if (!*matched) {
      result = Match::kNo;
    }
  }
  if (result == Match::kError) {
    qm::MutexLock lock(&errors_mu_);
    class_errors_[{&cls, device}] = message;
    if (error != nullptr) *error = message;
  }
  slot.store(static_cast<uint8_t>(result), std::memory_order_release);
  return result;
}

const std::vector<std::optional<AttrSet>>& Inventory::AttributeSets(
    const std::string& qualified) const {
  qm::MutexLock lock(&attr_mu_);
  auto& sets = attr_sets_[qualified];
  if (sets == nullptr) {
    sets = std::make_unique<std::vector<std::optional<AttrSet>>>();
    sets->reserve(devices_.size());
    std::map<std::pair<char, std::string>, uint32_t> ids;  // typed value -> id
    for (const auto& d : devices_) {
      const auto* attr = LookupAttribute(*d.device, slices_[d.slice].slice->driver, qualified);
      std::optional<TypedValues> values =
          attr != nullptr ? AttributeValues(*attr) : std::optional<TypedValues>();
      if (!values.has_value()) {
        sets->push_back(std::nullopt);
        continue;
      }
      AttrSet set;
      set.reserve(values->size());
      for (auto& v : *values) {
        set.push_back(
            ids.try_emplace(std::move(v), static_cast<uint32_t>(ids.size())).first->second);
      }
      std::sort(set.begin(), set.end());
      sets->push_back(std::move(set));
    }
  }
  return *sets;
}

AllocatedState Inventory::ResolveAllocated(const std::vector<AllocatedDevice>& allocated) const {
  AllocatedState state;
  state.exclusive_.assign(devices_.size(), 0);
  AddAllocated(state, allocated);
  return state;
}

void Inventory::AddAllocated(AllocatedState& state,
                             const std::vector<AllocatedDevice>& allocated) const {
  if (state.exclusive_.size() != devices_.size()) state.exclusive_.resize(devices_.size(), 0);
  for (const auto& a : allocated) {
    if (a.admin_access) continue;
    const std::vector<uint32_t> indices = FindDevice(a.driver, a.pool, a.device);
    if (indices.empty()) continue;
    ++state.allocated_count_;
    for (uint32_t i : indices) {
      const DeviceEntry& d = devices_[i];
      bool first_share = false;
      if (a.share_id.empty()) {
        if (state.exclusive_[i] < std::numeric_limits<uint16_t>::max()) ++state.exclusive_[i];
      } else {
        AllocatedState::Shares& shares = state.shared_[i];
        first_share = shares.count++ == 0;
        for (const auto& [name, q] : a.consumed_capacity) {
          auto& sum = shares.consumed[name];
          sum = sum + q;
        }
      }
      // A shared device consumes its counters once, however many shares it has.
      if (a.share_id.empty() || first_share) {
        for (const auto& consumption : d.device->consumes_counters) {
          auto& sets = state.counters_[d.group][consumption.counter_set];
          for (const auto& [name, q] : consumption.counters) {
            auto& sum = sets[name];
            sum = sum + q;
          }
        }
      }
    }
  }
}

void Inventory::RemoveAllocated(AllocatedState& state,
                                const std::vector<AllocatedDevice>& allocated) const {
  for (const auto& a : allocated) {
    if (a.admin_access) continue;
    const std::vector<uint32_t> indices = FindDevice(a.driver, a.pool, a.device);
    if (indices.empty()) continue;
    if (state.allocated_count_ > 0) --state.allocated_count_;
    for (uint32_t i : indices) {
      const DeviceEntry& d = devices_[i];
      bool last_share = false;
      if (a.share_id.empty()) {
        if (i < state.exclusive_.size() && state.exclusive_[i] > 0) --state.exclusive_[i];
      } else {
        auto it = state.shared_.find(i);
        if (it == state.shared_.end()) continue;  // never added: nothing to undo
        for (const auto& [name, q] : a.consumed_capacity) {
          auto& sum = it->second.consumed[name];
          sum = sum - q;
        }
        if (--it->second.count == 0) {
          state.shared_.erase(it);
          last_share = true;
        }
      }
      if (a.share_id.empty() || last_share) {
        auto group = state.counters_.find(d.group);
        if (group == state.counters_.end()) continue;
        for (const auto& consumption : d.device->consumes_counters) {
          auto set = group->second.find(consumption.counter_set);
          if (set == group->second.end()) continue;
          for (const auto& [name, q] : consumption.counters) {
            auto& sum = set->second[name];
            sum = sum - q;
          }
        }
      }
    }
  }
}

}  // namespace qm::allocator
