#include "api/rest/validation_dra.h"

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "api/rest/validator.h"
#include "cel/compiler.h"
#include "cel/program_cache.h"
#include "model/field_error.h"
#include "model/names.h"

// The DRA names and structures several kinds share, and the two small kinds: DeviceClass and
// DeviceTaintRule. The Kubernetes code is pkg/apis/resource/validation.
namespace qm::api::validation {
namespace {

using model::FieldErrors;
using model::Quote;

// Compiled selectors shared by every validation: the same expression in many claims (or a
// client re-applying a manifest) is compiled once.
cel::ProgramCache& SelectorCache() {
  static auto* cache = new cel::ProgramCache(4096);
  return *cache;
}

constexpr size_t kDriverNameMaxLength = 63;
constexpr size_t kPoolNameMaxLength = 253;
constexpr size_t kDeviceMaxIdLength = 32;
constexpr size_t kMaxSelectors = 32;
constexpr size_t kMaxTolerations = 16;
constexpr size_t kMaxBindingConditions = 4;
constexpr size_t kCelExpressionMaxLength = 10 * 1024;
constexpr size_t kOpaqueParametersMaxLength = 10 * 1024;
constexpr size_t kMaxTaintRuleConditions = 8;

const std::vector<std::string>& DeviceTaintEffects() {
  static const auto* effects = new std::vector<std::string>{"NoExecute", "NoSchedule", "None"};
  return *effects;
}

bool IsExtendedResourceName(const std::string& name) {
  if (name.find('/') == std::string::npos) return false;        // a native resource
  if (absl::StrContains(name, "kubernetes.io/")) return false;  // a prefixed native resource
  if (absl::StartsWith(name, "requests.")) return false;        // the quota prefix
  return model::IsQualifiedName("requests." + name).empty();
}

}  // namespace

// ---- names ---------------------------------------------------------------------------------

void DraValidator::DriverName(const std::string& name, const Path& p) {
  if (name.empty()) Add(model::Required(p.str()));
  if (name.size() > kDriverNameMaxLength) Add(model::TooLong(p.str(), kDriverNameMaxLength));
  for (const auto& msg : model::IsDns1123Subdomain(absl::AsciiStrToLower(name))) {
    Add(model::Invalid(p.str(), Quote(name), msg));
  }
}

void DraValidator::PoolName(const std::string& name, const Path& p) {
  if (name.empty()) {
    Add(model::Required(p.str()));
    return;
  }
  if (name.size() > kPoolNameMaxLength) Add(model::TooLong(p.str(), kPoolNameMaxLength));
  for (const auto& part : Split(name, '/')) DnsSubdomain(part, p);
}

void DraValidator::CIdentifier(const std::string& id, const Path& p) {
  if (id.size() > kDeviceMaxIdLength) Add(model::TooLong(p.str(), kDeviceMaxIdLength));
  for (const auto& msg : model::IsCIdentifier(id)) Add(model::Invalid(p.str(), Quote(id), msg));
}

void DraValidator::DraQualifiedName(const std::string& name, const Path& p) {
  std::vector<std::string> parts = Split(name, '/');
  if (parts.size() == 1) {
    CIdentifier(parts[0], p);
  } else if (parts.size() == 2) {
    if (parts[0].empty()) {
      Add(model::Invalid(p.str(), Quote(""), "the domain must not be empty"));
    } else {
      DriverName(parts[0], p);
    }
    if (parts[1].empty()) {
      Add(model::Invalid(p.str(), Quote(""), "the name must not be empty"));
    } else {
      CIdentifier(parts[1], p);
    }
  } else {
    Add(model::Invalid(p.str(), Quote(name), "must not contain more than one slash"));
  }
}

// ---- shared structures ---------------------------------------------------------------------

void DraValidator::Selectors(const json& holder, const Path& p, bool stored) {
  const json* selectors = List(holder, "selectors", p, kMaxSelectors);
  if (selectors == nullptr) return;
  for (size_t i = 0; i < selectors->size(); ++i) {
    const Path sp = p.Index(i);
    const json& selector = Object(&(*selectors)[i], sp);
    const json* cel = OptObject(selector, "cel", sp.Child("cel"));
    if (cel == nullptr) {
      Add(model::Required(sp.Child("cel").str()));
      continue;
    }
    const Path ep = sp.Child("cel").Child("expression");
    const std::string expression = String(*cel, "expression", ep);
    if (stored) continue;
    if (expression.empty()) {
      Add(model::Required(ep.str()));
    } else if (expression.size() > kCelExpressionMaxLength) {
      Add(model::TooLong(ep.str(), kCelExpressionMaxLength));
    } else if (auto compiled = SelectorCache().Get(expression); !compiled->error.empty()) {
      const bool syntax_or_reference = compiled->error.rfind("ERROR: ", 0) == 0;
      Add(model::Invalid(ep.str(), Quote(expression),
                         (syntax_or_reference ? "compilation failed: " : "") + compiled->error));
    }
  }
}

void DraValidator::RawExtension(const json* value, const Path& p, bool stored, size_t max) {
  if (value == nullptr) {
    Add(model::Required(p.str()));
  } else if (!stored && value->dump().size() > max) {
    Add(model::TooLong(p.str(), max));
  } else if (!value->is_object()) {
    Add(model::Invalid(p.str(), Quote("<value omitted>"), "must be a valid JSON object"));
  }
}

void DraValidator::DeviceConfiguration(const json& config, const Path& p, bool stored) {
  const json* opaque = OptObject(config, "opaque", p.Child("opaque"));
  if (opaque == nullptr) {
    Add(model::Required(p.Child("opaque").str()));
    return;
  }
  const Path op = p.Child("opaque");
  DriverName(String(*opaque, "driver", op.Child("driver")), op.Child("driver"));
  RawExtension(Get(*opaque, "parameters"), op.Child("parameters"), stored,
               kOpaqueParametersMaxLength);
}

void DraValidator::DeviceTaint(const json& taint, const json* old_taint, const Path& p) {
  LabelName(String(taint, "key", p.Child("key")), p.Child("key"));
  const std::string value = String(taint, "value", p.Child("value"));
  if (!value.empty()) LabelValue(value, p.Child("value"));
  const std::string effect = String(taint, "effect", p.Child("effect"));
  if (old_taint != nullptr && SameValue(Get(taint, "effect"), Get(*old_taint, "effect"))) return;
  if (effect.empty()) {
    Add(model::Required(p.Child("effect").str()));
  } else if (!IsOneOf(effect, DeviceTaintEffects())) {
    Add(model::NotSupported(p.Child("effect").str(), Quote(effect), DeviceTaintEffects()));
  }
}

void DraValidator::Tolerations(const json& holder, const Path& p) {
  const json* tolerations = List(holder, "tolerations", p, kMaxTolerations);
  if (tolerations == nullptr) return;
  for (size_t i = 0; i < tolerations->size(); ++i) {
    DeviceToleration(Object(&(*tolerations)[i], p.Index(i)), p.Index(i));
  }
}

void DraValidator::DeviceToleration(const json& toleration, const Path& p) {
  const std::string key = String(toleration, "key", p.Child("key"));
  if (!key.empty()) LabelName(key, p.Child("key"));
  // The operator defaults to Equal; an unset one can only reach here undefaulted.
  std::string op = String(toleration, "operator", p.Child("operator"));
  if (op.empty()) op = "Equal";
  const std::string value = String(toleration, "value", p.Child("value"));
  if (op == "Exists") {
    if (!value.empty()) {
      Add(model::Invalid(p.Child("value").str(), Quote(value),
                         "must be empty for operator `Exists`"));
    }
  } else if (op == "Equal") {
    LabelValue(value, p.Child("value"));
  } else {
    Add(model::NotSupported(p.Child("operator").str(), Quote(op), {"Equal", "Exists"}));
  }
  const std::string effect = String(toleration, "effect", p.Child("effect"));
  if (!effect.empty() && !IsOneOf(effect, DeviceTaintEffects())) {
    Add(model::NotSupported(p.Child("effect").str(), Quote(effect), DeviceTaintEffects()));
  }
}

void DraValidator::BindingParameters(const json& holder, const Path& p) {
  const Path cp = p.Child("bindingConditions");
  const Path fp = p.Child("bindingFailureConditions");
  const json* conditions = OptArray(holder, "bindingConditions", cp);
  const json* failures = OptArray(holder, "bindingFailureConditions", fp);
  std::vector<std::string> cond = StringItems(conditions, cp);
  std::vector<std::string> fail = StringItems(failures, fp);
  auto check_names = [&](const std::vector<std::string>& items, const Path& lp) {
    if (items.size() > kMaxBindingConditions) {
      Add(model::TooMany(lp.str(), items.size(), kMaxBindingConditions));
      return;
    }
    for (size_t i = 0; i < items.size(); ++i) LabelName(items[i], lp.Index(i));
  };
  check_names(cond, cp);
  check_names(fail, fp);
  const std::set<std::string> cond_set(cond.begin(), cond.end());
  std::set<std::string> seen;
  for (size_t i = 0; i < cond.size(); ++i) {
    if (!seen.insert(cond[i]).second) Add(model::Duplicate(cp.Index(i).str(), Quote(cond[i])));
  }
  seen.clear();
  for (size_t i = 0; i < fail.size(); ++i) {
    if (!seen.insert(fail[i]).second) Add(model::Duplicate(fp.Index(i).str(), Quote(fail[i])));
    if (cond_set.count(fail[i]) > 0) {
      Add(model::Invalid(fp.Index(i).str(), Quote(fail[i]),
                         "bindingFailureConditions must not overlap with bindingConditions"));
    }
  }
  // Go prints the empty list as it is typed: a nil or an empty slice of strings.
  auto go_list = [](const json* list) {
    return list == nullptr ? std::string("[]string(nil)") : std::string("[]string{}");
  };
  if (cond.empty() && !fail.empty()) {
    Add(model::Invalid(cp.str(), go_list(conditions),
                       "bindingConditions are required to use bindingFailureConditions"));
  }
  if (fail.empty() && !cond.empty()) {
    Add(model::Invalid(fp.str(), go_list(failures),
                       "bindingFailureConditions are required to use bindingConditions"));
  }
}

// ---- DeviceClass, DeviceTaintRule ----------------------------------------------------------

namespace {

class DeviceClassValidator : public DraValidator {
 public:
  using DraValidator::DraValidator;

  void DeviceClassSpec(const json& spec, const json* old_spec, const Path& p) {
    // Unchanged selectors and config are treated as stored: valid when they were written.
    const bool stored_selectors =
        old_spec != nullptr && SameValue(Get(spec, "selectors"), Get(*old_spec, "selectors"));
    Selectors(spec, p.Child("selectors"), stored_selectors);
    const bool stored_config =
        old_spec != nullptr && SameValue(Get(spec, "config"), Get(*old_spec, "config"));
    if (const json* configs = List(spec, "config", p.Child("config"), kMaxConfigs)) {
      for (size_t i = 0; i < configs->size(); ++i) {
        const Path cp = p.Child("config").Index(i);
        DeviceConfiguration(Object(&(*configs)[i], cp), cp, stored_config);
      }
    }
    const Path ep = p.Child("extendedResourceName");
    if (auto name = OptString(spec, "extendedResourceName", ep);
        name.has_value() && !IsExtendedResourceName(*name)) {
      Add(model::Invalid(ep.str(), Quote(*name), "must be a valid extended resource name"));
    }
  }
};

class DeviceTaintRuleValidator : public DraValidator {
 public:
  using DraValidator::DraValidator;

  void DeviceTaintRuleSpec(const json& spec, const json* old_spec, const Path& p) {
    const Path sp = p.Child("deviceSelector");
    if (const json* selector = OptObject(spec, "deviceSelector", sp)) {
      if (auto driver = OptString(*selector, "driver", sp.Child("driver"))) {
        DriverName(*driver, sp.Child("driver"));
      }
      if (auto pool = OptString(*selector, "pool", sp.Child("pool"))) {
        PoolName(*pool, sp.Child("pool"));
      }
      if (auto device = OptString(*selector, "device", sp.Child("device"))) {
        DnsLabel(*device, sp.Child("device"));
      }
    }
    // The taint is a required struct: a missing one is validated as an empty one.
    const json& taint = Object(Get(spec, "taint"), p.Child("taint"));
    const json* old_taint = nullptr;
    if (old_spec != nullptr) old_taint = &ObjectOrEmpty(Get(*old_spec, "taint"));
    DeviceTaint(taint, old_taint, p.Child("taint"));
  }

  void DeviceTaintRuleStatus(const json& status, const Path& p) {
    const Path cp = p.Child("conditions");
    const json* conditions = OptArray(status, "conditions", cp);
    Conditions(conditions, cp);
    if (conditions != nullptr && conditions->size() > kMaxTaintRuleConditions) {
      Add(model::TooMany(cp.str(), conditions->size(), kMaxTaintRuleConditions));
    }
  }
};

}  // namespace

void DeviceClassRules(const ObjectInput& in, FieldErrors& errs) {
  DeviceClassValidator(errs).DeviceClassSpec(in.spec, in.old_spec, Path("spec"));
}

void DeviceTaintRuleRules(const ObjectInput& in, FieldErrors& errs) {
  DeviceTaintRuleValidator v(errs);
  v.DeviceTaintRuleSpec(in.spec, in.old_spec, Path("spec"));
  if (in.old == nullptr) {
    if (const json* status = Get(in.obj, "status")) {
      v.DeviceTaintRuleStatus(v.Object(status, Path("status")), Path("status"));
    }
  }
}

void DeviceTaintRuleStatusRules(const StatusInput& in, FieldErrors& errs) {
  DeviceTaintRuleValidator(errs).DeviceTaintRuleStatus(in.status, Path("status"));
}

}  // namespace qm::api::validation
