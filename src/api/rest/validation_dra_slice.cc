#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "api/rest/validation_dra.h"
#include "api/rest/validation_limits.h"
#include "api/rest/validator.h"
#include "common/quantity.h"
#include "model/field_error.h"
#include "model/names.h"

// ResourceSlice (pkg/apis/resource/validation's ValidateResourceSlice): the pool, node
// selection, devices with their attributes, capacity and request policies, taints and counters.
namespace qm::api::validation {
namespace {

using model::FieldErrors;
using model::Quote;

constexpr size_t kMaxAttributesAndCapacities = 32;
constexpr size_t kMaxAttributeValues = 48;
constexpr size_t kAttributeMaxValueLength = 64;
constexpr size_t kMaxCounterSets = 8;
constexpr size_t kMaxCountersPerSet = 32;
constexpr size_t kMaxCounterConsumptions = 2;
constexpr size_t kMaxCountersPerConsumption = 32;
constexpr size_t kMaxDeviceTaints = 16;
constexpr size_t kMaxValidValues = 10;

constexpr char kNodeSelectionMsg[] =
    "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
constexpr char kPerDeviceNodeSelectionMsg[] =
    "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
    "`perDeviceNodeSelection` is set to true in the ResourceSlice spec";

bool NonEmptyList(const json& obj, std::string_view key) {
  const json* v = Get(obj, key);
  return v != nullptr && v->is_array() && !v->empty();
}

bool HasListAttributes(const json& device) {
  const json* attributes = Get(device, "attributes");
  if (attributes == nullptr || !attributes->is_object()) return false;
  for (const auto& [name, attribute] : attributes->items()) {
    for (const char* key : {"bools", "ints", "strings", "versions"}) {
      if (Get(attribute, key) != nullptr) return true;
    }
  }
  return false;
}

class ResourceSliceValidator : public DraValidator {
 public:
  using DraValidator::DraValidator;

  void ResourceSliceSpec(const json& spec, const json* old_spec, const Path& p) {
    DriverName(String(spec, "driver", p.Child("driver")), p.Child("driver"));
    const Path pool_path = p.Child("pool");
    const json& pool = Object(Get(spec, "pool"), pool_path);
    PoolName(String(pool, "name", pool_path.Child("name")), pool_path.Child("name"));
    const int64_t slice_count =
        OptInt(pool, "resourceSliceCount", pool_path.Child("resourceSliceCount")).value_or(0);
    if (slice_count <= 0) {
      Add(model::Invalid(pool_path.Child("resourceSliceCount").str(), std::to_string(slice_count),
                         "must be greater than zero"));
    }
    const int64_t generation =
        OptInt(pool, "generation", pool_path.Child("generation")).value_or(0);
    if (generation < 0) {
      Add(model::Invalid(pool_path.Child("generation").str(), std::to_string(generation),
                         "must be greater than or equal to zero"));
    }
    if (old_spec != nullptr) {
      const json* old_pool = Get(*old_spec, "pool");
      if (!SameValue(Get(pool, "name"), old_pool ? Get(*old_pool, "name") : nullptr)) {
        Add(model::Immutable(pool_path.Child("name").str()));
      }
      if (!SameValue(Get(spec, "driver"), Get(*old_spec, "driver"))) {
        Add(model::Immutable(p.Child("driver").str()));
      }
      if (!SameValue(Get(spec, "nodeName"), Get(*old_spec, "nodeName"))) {
        Add(model::Immutable(p.Child("nodeName").str()));
      }
    }

    std::vector<std::string> set_fields;
    if (auto node_name = OptString(spec, "nodeName", p.Child("nodeName"))) {
      if (!node_name->empty()) {
        set_fields.push_back("`nodeName`");
        NodeName(*node_name, p.Child("nodeName"));
      } else {
        Add(model::Invalid(p.Child("nodeName").str(), Quote(""),
                           "must be either unset or set to a non-empty string"));
      }
    }
    if (const json* selector = OptObject(spec, "nodeSelector", p.Child("nodeSelector"))) {
      set_fields.push_back("`nodeSelector`");
      const Path sp = p.Child("nodeSelector");
      NodeSelector(*selector, sp);
      const json* terms = Get(*selector, "nodeSelectorTerms");
      if (terms == nullptr || !terms->is_array() || terms->size() != 1) {
        // Merging selectors of devices from several slices relies on a single term.
        Add(model::Invalid(sp.Child("nodeSelectorTerms").str(),
                           terms ? Render(*terms) : Quote("null"),
                           "must have exactly one node selector term"));
      }
    }
    for (const char* flag : {"allNodes", "perDeviceNodeSelection"}) {
      if (auto value = OptBool(spec, flag, p.Child(flag))) {
        if (*value) {
          set_fields.push_back(std::string("`") + flag + "`");
        } else {
          Add(model::Invalid(p.Child(flag).str(), "false", "must be either unset or set to true"));
        }
      }
    }
    if (set_fields.empty()) {
      Add(model::Required(p.str(), kNodeSelectionMsg));
    } else if (set_fields.size() > 1) {
      Add(model::Invalid(p.str(), Quote("{" + absl::StrJoin(set_fields, ", ") + "}"),
                         std::string(kNodeSelectionMsg) + ", but multiple fields are set"));
    }

    if (Get(spec, "sharedCounters") != nullptr && Get(spec, "devices") != nullptr) {
      Add(model::Invalid(p.str(), Quote(""),
                         "only one of `sharedCounters` or `devices` is allowed"));
    }

    const json* per_device = Get(spec, "perDeviceNodeSelection");
    const bool per_device_node_selection =
        per_device != nullptr && per_device->is_boolean() && per_device->get<bool>();
    const json* devices = OptArray(spec, "devices", p.Child("devices"));
    // Kubernetes' 128, or 64 when a device uses taints, counters or list attributes, unless
    // the server raised them (validation_limits.h).
    size_t max_devices = CurrentValidationLimits().max_devices_per_slice;
    if (devices != nullptr) {
      for (const json& device : *devices) {
        if (NonEmptyList(device, "taints") || NonEmptyList(device, "consumesCounters") ||
            HasListAttributes(device)) {
          max_devices /= 2;
          break;
        }
      }
    }
    if (devices != nullptr && devices->size() > max_devices) {
      Add(model::TooMany(p.Child("devices").str(), devices->size(), max_devices));
    } else if (devices != nullptr) {
      std::vector<std::optional<std::string>> names;
      for (size_t i = 0; i < devices->size(); ++i) {
        const Path dp = p.Child("devices").Index(i);
        const json& device = Object(&(*devices)[i], dp);
        names.push_back(KeyString(device, "name"));
        Device(device, LookupDevice(old_spec, *names.back()), dp, per_device_node_selection);
      }
      Unique(names, p.Child("devices"));
    }
    if (const json* sets =
            List(spec, "sharedCounters", p.Child("sharedCounters"), kMaxCounterSets)) {
      std::vector<std::optional<std::string>> names;
      for (size_t i = 0; i < sets->size(); ++i) {
        const Path sp = p.Child("sharedCounters").Index(i);
        const json& set = Object(&(*sets)[i], sp);
        names.push_back(KeyString(set, "name"));
        CounterSet(set, sp);
      }
      Unique(names, p.Child("sharedCounters"));
    }
  }

  static const json* LookupDevice(const json* spec, const std::string& name) {
    if (spec == nullptr) return nullptr;
    const json* devices = Get(*spec, "devices");
    if (devices == nullptr || !devices->is_array()) return nullptr;
    for (const json& device : *devices) {
      const json* n = Get(device, "name");
      if (n != nullptr && n->is_string() && n->get<std::string>() == name) return &device;
    }
    return nullptr;
  }

  void Device(const json& device, const json* old_device, const Path& p,
              bool per_device_node_selection) {
    const bool allow_multiple =
        OptBool(device, "allowMultipleAllocations", p.Child("allowMultipleAllocations"))
            .value_or(false);
    DnsLabel(String(device, "name", p.Child("name")), p.Child("name"));

    const json* attributes = OptObject(device, "attributes", p.Child("attributes"));
    const json* capacity = OptObject(device, "capacity", p.Child("capacity"));
    // Reported once here: if one kind alone is too large, so is the sum.
    const size_t entries =
        (attributes ? attributes->size() : 0) + (capacity ? capacity->size() : 0);
    if (entries > kMaxAttributesAndCapacities) {
      Add(model::Invalid(p.str(), std::to_string(entries),
                         "the total number of attributes and capacities must not exceed " +
                             std::to_string(kMaxAttributesAndCapacities)));
    }
    size_t values = 0;
    if (attributes != nullptr) {
      for (const auto& [name, attribute] : attributes->items()) {
        size_t items = 0;
        if (attribute.is_object()) {
          // One pass over the attribute's members rather than a lookup of each list kind.
          for (auto it = attribute.begin(); it != attribute.end(); ++it) {
            const std::string& key = it.key();
            if (it->is_array() &&
                (key == "bools" || key == "ints" || key == "strings" || key == "versions")) {
              items += it->size();
            }
          }
        }
        values += items == 0 ? 1 : items;
      }
    }
    if (values > kMaxAttributeValues) {
      Add(model::Invalid(p.str(), std::to_string(values),
                         "the total number of attribute values must not exceed " +
                             std::to_string(kMaxAttributeValues)));
    }
    if (attributes != nullptr) {
      const Path ap = p.Child("attributes");
      for (const auto& [name, attribute] : attributes->items()) {
        DraQualifiedName(name, ap);
        DeviceAttribute(attribute, ap.Key(TruncateKey(name, kAttributeKeyMaxLength)));
      }
    }
    // Unchanged capacity and taints were valid when stored; Kubernetes skips them.
    const json* old_capacity = old_device ? Get(*old_device, "capacity") : nullptr;
    if (capacity != nullptr && (old_device == nullptr || !SameValue(capacity, old_capacity))) {
      const Path cp = p.Child("capacity");
      for (const auto& [name, cap] : capacity->items()) {
        DraQualifiedName(name, cp);
        DeviceCapacity(cap, cp.Key(TruncateKey(name, kAttributeKeyMaxLength)), allow_multiple);
      }
    }
    if (old_device == nullptr || !SameValue(Get(device, "taints"), Get(*old_device, "taints"))) {
      if (const json* taints = List(device, "taints", p.Child("taints"), kMaxDeviceTaints)) {
        for (size_t i = 0; i < taints->size(); ++i) {
          const Path tp = p.Child("taints").Index(i);
          DeviceTaint(Object(&(*taints)[i], tp), nullptr, tp);
        }
      }
    }
    if (const json* consumption = List(device, "consumesCounters", p.Child("consumesCounters"),
                                       kMaxCounterConsumptions)) {
      std::vector<std::optional<std::string>> sets;
      for (size_t i = 0; i < consumption->size(); ++i) {
        const Path cp = p.Child("consumesCounters").Index(i);
        const json& entry = Object(&(*consumption)[i], cp);
        sets.push_back(KeyString(entry, "counterSet"));
        CounterConsumption(entry, cp);
      }
      Unique(sets, p.Child("consumesCounters"));
    }

    const std::optional<std::string> node_name = OptString(device, "nodeName", p.Child("nodeName"));
    const json* node_selector = OptObject(device, "nodeSelector", p.Child("nodeSelector"));
    const std::optional<bool> all_nodes = OptBool(device, "allNodes", p.Child("allNodes"));
    if (per_device_node_selection) {
      std::vector<std::string> set_fields;
      if (node_name.has_value()) {
        if (!node_name->empty()) {
          set_fields.push_back("`nodeName`");
          NodeName(*node_name, p.Child("nodeName"));
        } else {
          Add(model::Invalid(p.Child("nodeName").str(), Quote(""), "must not be empty"));
        }
      }
      if (node_selector != nullptr) {
        set_fields.push_back("`nodeSelector`");
        NodeSelector(*node_selector, p.Child("nodeSelector"));
      }
      if (all_nodes.has_value()) {
        if (*all_nodes) {
          set_fields.push_back("`allNodes`");
        } else {
          Add(model::Invalid(p.Child("allNodes").str(), "false",
                             "must be either unset or set to true"));
        }
      }
      if (set_fields.empty()) {
        Add(model::Required(p.str(), kPerDeviceNodeSelectionMsg));
      } else if (set_fields.size() > 1) {
        Add(model::Invalid(p.str(), Quote("{" + absl::StrJoin(set_fields, ", ") + "}"),
                           kPerDeviceNodeSelectionMsg));
      }
    } else if (node_name.has_value() || node_selector != nullptr || all_nodes.has_value()) {
      Add(model::Invalid(p.str(), Quote("null"),
                         "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                         "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"));
    }
    BindingParameters(device, p);
  }

  void DeviceAttribute(const json& attribute, const Path& p) {
    if (OneValidScalar(attribute)) return;
    const json& attr = Object(&attribute, p);
    int fields = 0;
    if (Get(attr, "bool") != nullptr) {
      ++fields;
      OptBool(attr, "bool", p.Child("bool"));
    }
    if (Get(attr, "int") != nullptr) {
      ++fields;
      OptInt(attr, "int", p.Child("int"));
    }
    if (auto value = OptString(attr, "string", p.Child("string"))) {
      ++fields;
      AttributeString(*value, p.Child("string"));
    }
    if (auto value = OptString(attr, "version", p.Child("version"))) {
      ++fields;
      AttributeVersion(*value, p.Child("version"));
    }
    struct ListKind {
      const char* key;
      const char* go_type;
    };
    for (const ListKind& kind :
         {ListKind{"bools", "[]bool{}"}, ListKind{"ints", "[]int64{}"},
          ListKind{"strings", "[]string{}"}, ListKind{"versions", "[]string{}"}}) {
      const Path lp = p.Child(kind.key);
      const json* list = OptArray(attr, kind.key, lp);
      if (list == nullptr) continue;
      ++fields;
      if (list->empty()) {
        Add(model::Invalid(lp.str(), kind.go_type, "must not be empty if specified"));
      }
      const std::string key = kind.key;
      for (size_t i = 0; i < list->size(); ++i) {
        const json& item = (*list)[i];
        if (key == "bools" && !item.is_boolean()) TypeError(item, lp.Index(i), "boolean");
        if (key == "ints" && !item.is_number_integer()) TypeError(item, lp.Index(i), "integer");
        if (key == "strings" || key == "versions") {
          auto s = ItemString(item, lp.Index(i));
          if (!s.has_value()) continue;
          if (key == "strings") {
            AttributeString(*s, lp.Index(i));
          } else {
            AttributeVersion(*s, lp.Index(i));
          }
        }
      }
    }
    if (fields == 0) {
      Add(model::Invalid(p.str(), Quote(""), "exactly one value must be specified"));
    } else if (fields > 1) {
      Add(model::Invalid(p.str(), Render(attr), "exactly one value must be specified"));
    }
  }

  // Whether `attribute` holds one scalar value (what nearly every device attribute is) that has
  // its kind's type and passes its kind's checks, so that DeviceAttribute has nothing to report
  // and need not look up each kind.
  static bool OneValidScalar(const json& attribute) {
    if (!attribute.is_object() || attribute.size() != 1) return false;
    const auto it = attribute.begin();
    const std::string& key = it.key();
    const json& value = *it;
    if (key == "bool") return value.is_boolean();
    if (key == "int") return IsInt64(value);
    if (key == "string") {
      return value.is_string() &&
             value.get_ref<const std::string&>().size() <= kAttributeMaxValueLength;
    }
    if (key == "version") {
      if (!value.is_string()) return false;
      const std::string& v = value.get_ref<const std::string&>();
      return v.size() <= kAttributeMaxValueLength && model::IsSemver(v);
    }
    return false;
  }

  void AttributeString(const std::string& value, const Path& p) {
    if (value.size() > kAttributeMaxValueLength) {
      Add(model::TooLong(p.str(), kAttributeMaxValueLength));
    }
  }

  void AttributeVersion(const std::string& value, const Path& p) {
    if (!model::IsSemver(value)) {
      Add(model::Invalid(p.str(), Quote(value),
                         "must be a string compatible with semver.org spec 2.0.0"));
    }
    AttributeString(value, p);
  }

  void DeviceCapacity(const json& capacity, const Path& p, bool allow_multiple) {
    const json& cap = Object(&capacity, p);
    const Quantity value = QuantityAt(Get(cap, "value"), p.Child("value")).value_or(Quantity());
    const json* policy = OptObject(cap, "requestPolicy", p.Child("requestPolicy"));
    if (policy == nullptr) return;
    if (!allow_multiple) {
      Add(model::Forbidden(p.Child("requestPolicy").str(),
                           "allowMultipleAllocations must be true"));
      return;
    }
    RequestPolicy(value, *policy, p.Child("requestPolicy"));
  }

  void RequestPolicy(const Quantity& capacity, const json& policy, const Path& p) {
    const size_t errors_before = ErrorCount();
    const std::optional<Quantity> default_value =
        QuantityAt(Get(policy, "default"), p.Child("default"));
    std::vector<Quantity> valid_values;
    if (const json* values = OptArray(policy, "validValues", p.Child("validValues"))) {
      for (size_t i = 0; i < values->size(); ++i) {
        if (auto q = QuantityAt(&(*values)[i], p.Child("validValues").Index(i))) {
          valid_values.push_back(*q);
        }
      }
    }
    const json* range = OptObject(policy, "validRange", p.Child("validRange"));
    std::optional<Quantity> min, max, step;
    if (range != nullptr) {
      const Path rp = p.Child("validRange");
      min = QuantityAt(Get(*range, "min"), rp.Child("min"));
      max = QuantityAt(Get(*range, "max"), rp.Child("max"));
      step = QuantityAt(Get(*range, "step"), rp.Child("step"));
    }
    // Relations between values that did not parse would only repeat the parse errors.
    if (ErrorCount() != errors_before) return;

    if (!valid_values.empty() && range != nullptr) {
      Add(model::Forbidden(p.str(),
                           "exactly one policy can be specified, cannot specify \"validValues\" "
                           "and \"validRange\" at the same time"));
    } else if (!valid_values.empty()) {
      if (!default_value.has_value()) {
        Add(model::Required(p.Child("default").str(), "required when validValues is defined"));
      } else {
        ValidValues(*default_value, capacity, valid_values, p.Child("validValues"));
      }
    } else if (range != nullptr) {
      if (!default_value.has_value()) {
        Add(model::Required(p.Child("default").str(), "required when validRange is defined"));
      } else {
        ValidRange(*default_value, capacity, min, max, step, p.Child("validRange"));
      }
    }
  }

  void ValidValues(const Quantity& default_value, const Quantity& capacity,
                   const std::vector<Quantity>& values, const Path& p) {
    for (size_t i = 0; i + 1 < values.size(); ++i) {
      if (values[i] > values[i + 1]) {
        Add(model::Invalid(p.Index(i + 1).str(), Quote(values[i + 1].String()),
                           "values must be sorted in ascending order"));
      }
    }
    bool found_default = false;
    if (values.size() > kMaxValidValues) {
      Add(model::TooMany(p.str(), values.size(), kMaxValidValues));
    } else {
      // Duplicates are keyed by the integer value, as without the DRAFractionalCapacityRange gate.
      std::set<int64_t> seen;
      std::vector<std::pair<size_t, int64_t>> duplicates;
      for (size_t i = 0; i < values.size(); ++i) {
        if (values[i] > capacity) {
          Add(model::Invalid(p.Index(i).str(), Quote(values[i].String()),
                             "option is larger than capacity value: " + capacity.String()));
        }
        if (values[i] == default_value) found_default = true;
        if (!seen.insert(values[i].Value()).second) duplicates.emplace_back(i, values[i].Value());
      }
      for (const auto& [i, key] : duplicates) {
        Add(model::Duplicate(p.Index(i).str(), Quote(std::to_string(key))));
      }
    }
    if (!found_default) {
      Add(model::Invalid(p.str(), Quote(default_value.String()),
                         "default value is not valid according to the requestPolicy"));
    }
  }

  void ValidRange(const Quantity& default_value, const Quantity& capacity,
                  const std::optional<Quantity>& min, const std::optional<Quantity>& max,
                  const std::optional<Quantity>& step, const Path& p) {
    if (!min.has_value()) {
      Add(model::Required(p.Child("min").str(), "required when validRange is defined"));
      return;
    }
    if (*min > capacity) {
      Add(model::Invalid(p.Child("min").str(), Quote(min->String()),
                         "min is larger than capacity value: " + capacity.String()));
    }
    if (default_value < *min) {
      Add(model::Invalid(p.Child("default").str(), Quote(default_value.String()),
                         "default is less than min: " + min->String()));
    }
    if (max.has_value()) {
      if (*min > *max) {
        Add(model::Invalid(p.Child("max").str(), Quote(min->String()),
                           "min is larger than max: " + max->String()));
      }
      if (*max > capacity) {
        Add(model::Invalid(p.Child("max").str(), Quote(max->String()),
                           "max is larger than capacity value: " + capacity.String()));
      }
      if (default_value > *max) {
        Add(model::Invalid(p.Child("default").str(), Quote(default_value.String()),
                           "default is more than max: " + max->String()));
      }
    }
    if (!step.has_value()) return;
    if (step->Sign() <= 0) {
      Add(model::Invalid(p.Child("step").str(), Quote(step->String()),
                         "must be greater than zero"));
      return;
    }
    const Quantity one_step = *min + *step;
    if (one_step > capacity) {
      Add(model::Invalid(p.Child("step").str(), Quote(step->String()),
                         "one step " + one_step.String() +
                             " is larger than capacity value: " + capacity.String()));
    }
    // Without the DRAFractionalCapacityRange gate the step arithmetic uses whole units, which
    // only holds for values in [0, MaxInt64].
    const Quantity int64_max = Quantity::FromInt(std::numeric_limits<int64_t>::max());
    bool unsafe = false;
    const std::pair<const std::optional<Quantity>*, const char*> bounds[] = {
        {nullptr, "default"}, {&min, "min"}, {&max, "max"}, {&step, "step"}};
    for (const auto& [bound, name] : bounds) {
      const Quantity* q =
          bound == nullptr ? &default_value : (bound->has_value() ? &**bound : nullptr);
      if (q == nullptr) continue;
      if (q->Sign() < 0) {
        Add(model::Invalid(p.Child(name).str(), Quote(q->String()),
                           "must be greater than or equal to 0"));
        unsafe = true;
      } else if (*q > int64_max) {
        Add(model::Invalid(p.Child(name).str(), Quote(q->String()),
                           "must not be larger than 9223372036854775807"));
        unsafe = true;
      }
    }
    if (unsafe) return;
    RangeStep(default_value, *min, *step, p.Child("step"));
    if (max.has_value()) RangeStep(*max, *min, *step, p.Child("step"));
  }

  void RangeStep(const Quantity& value, const Quantity& min, const Quantity& step, const Path& p) {
    if ((value.Value() - min.Value()) % step.Value() != 0) {
      Add(model::Invalid(p.str(), Quote(value.String()),
                         "value is not a multiple of a given step (" + step.String() + ") from (" +
                             min.String() + ")"));
    }
  }

  void CounterSet(const json& set, const Path& p) {
    const std::string name = String(set, "name", p.Child("name"));
    if (name.empty()) {
      Add(model::Required(p.Child("name").str()));
    } else {
      DnsLabel(name, p.Child("name"));
    }
    Counters(set, p.Child("counters"), kMaxCountersPerSet);
  }

  void CounterConsumption(const json& consumption, const Path& p) {
    const std::string set = String(consumption, "counterSet", p.Child("counterSet"));
    if (set.empty()) {
      Add(model::Required(p.Child("counterSet").str()));
    } else {
      DnsLabel(set, p.Child("counterSet"));
    }
    Counters(consumption, p.Child("counters"), kMaxCountersPerConsumption);
  }

  void Counters(const json& holder, const Path& p, size_t max) {
    const json* counters = OptObject(holder, "counters", p);
    if (counters == nullptr || counters->empty()) {
      Add(model::Required(p.str()));
      return;
    }
    if (counters->size() > max) {
      Add(model::TooMany(p.str(), counters->size(), max));
      return;
    }
    for (const auto& [name, counter] : counters->items()) {
      DnsLabel(name, p);
      const Path cp = p.Key(TruncateKey(name, model::kDns1123LabelMaxLength));
      QuantityAt(Get(Object(&counter, cp), "value"), cp.Child("value"));
    }
  }
};

}  // namespace

void ResourceSliceRules(const ObjectInput& in, FieldErrors& errs) {
  ResourceSliceValidator(errs).ResourceSliceSpec(in.spec, in.old_spec, Path("spec"));
}

}  // namespace qm::api::validation
