#include "api/rest/validation.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <arpa/inet.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "cel/compiler.h"
#include "cel/program_cache.h"
#include "common/quantity.h"
#include "model/names.h"

// Checks mirror Kubernetes' pkg/apis/resource/validation and the core/apimachinery helpers it
// calls, including the order in which errors are reported and their wording, so that clients
// (kubectl, controllers, tests written against a real apiserver) see the same field paths and
// messages.
namespace qm::api {
namespace {

// Compiled selectors shared by every validation: the same expression in many claims (or a
// client re-applying a manifest) is compiled once.
cel::ProgramCache& SelectorCache() {
  static auto* cache = new cel::ProgramCache(4096);
  return *cache;
}

using json = nlohmann::json;
using model::FieldError;
using model::FieldErrors;
using model::Quote;

// Limits of resource.k8s.io/v1 (reference/dra-api.md §1.8).
constexpr size_t kDriverNameMaxLength = 63;
constexpr size_t kPoolNameMaxLength = 253;
constexpr size_t kDeviceMaxIdLength = 32;
constexpr size_t kAttributeKeyMaxLength = 63 + 1 + 32;
constexpr size_t kMaxDevices = 128;
constexpr size_t kMaxDevicesWithAdvancedFeatures = 64;
constexpr size_t kMaxAttributesAndCapacities = 32;
constexpr size_t kMaxAttributeValues = 48;
constexpr size_t kAttributeMaxValueLength = 64;
constexpr size_t kMaxCounterSets = 8;
constexpr size_t kMaxCountersPerSet = 32;
constexpr size_t kMaxCounterConsumptions = 2;
constexpr size_t kMaxCountersPerConsumption = 32;
constexpr size_t kMaxDeviceTaints = 16;
constexpr size_t kMaxBindingConditions = 4;
constexpr size_t kMaxValidValues = 10;
constexpr size_t kMaxRequests = 32;
constexpr size_t kMaxFirstAvailable = 8;
constexpr size_t kMaxSelectors = 32;
constexpr size_t kMaxConstraints = 32;
constexpr size_t kMaxConfigs = 32;
constexpr size_t kMaxTolerations = 16;
constexpr size_t kMaxResults = 32;
constexpr size_t kMaxAllocationConfigs = 2 * kMaxConfigs;
constexpr size_t kMaxReservedFor = 256;
constexpr size_t kCelExpressionMaxLength = 10 * 1024;
constexpr size_t kOpaqueParametersMaxLength = 10 * 1024;
constexpr size_t kMaxDeviceStatusConditions = 8;
constexpr size_t kDeviceStatusDataMaxLength = 10 * 1024;
constexpr size_t kMaxNetworkIps = 16;
constexpr size_t kInterfaceNameMaxLength = 256;
constexpr size_t kHardwareAddressMaxLength = 128;
constexpr size_t kMaxTaintRuleConditions = 8;
constexpr size_t kTotalAnnotationSizeLimit = 256 * 1024;
constexpr size_t kConditionReasonMaxLength = 1024;
constexpr size_t kConditionMessageMaxLength = 32 * 1024;

constexpr char kRequestRefMsg[] =
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'";
constexpr char kNodeSelectionMsg[] =
    "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
constexpr char kPerDeviceNodeSelectionMsg[] =
    "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
    "`perDeviceNodeSelection` is set to true in the ResourceSlice spec";
constexpr char kConstraintOneOfMsg[] =
    "exactly one of \"matchAttribute\" or \"distinctAttribute\" is required, but multiple fields "
    "are set";
constexpr char kExactlyOrFirstAvailableMsg[] =
    "exactly one of `exactly` or `firstAvailable` is required";

const std::vector<std::string>& DeviceTaintEffects() {
  static const auto* effects = new std::vector<std::string>{"NoExecute", "NoSchedule", "None"};
  return *effects;
}

class Path {
 public:
  Path() = default;
  explicit Path(std::string s) : s_(std::move(s)) {}

  Path Child(std::string_view name) const {
    return Path(s_.empty() ? std::string(name) : s_ + "." + std::string(name));
  }
  Path Index(size_t i) const { return Path(s_ + "[" + std::to_string(i) + "]"); }
  Path Key(std::string_view key) const { return Path(s_ + "[" + std::string(key) + "]"); }
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};

const json& EmptyObject() {
  static const json* empty = new json(json::object());
  return *empty;
}

// obj[key] when obj is an object holding a non-null value there (a Go pointer that is set).
const json* Get(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// Stored values were validated when written: read them without reporting anything.
const json& ObjectOrEmpty(const json* value) {
  return value != nullptr && value->is_object() ? *value : EmptyObject();
}

// A string used as a list key; mistyped values are reported where the item is validated.
std::string KeyString(const json& obj, std::string_view key) {
  const json* v = Get(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

// The way Kubernetes prints a bad value: strings quoted, numbers and booleans bare, nil as
// "null", anything else in JSON form.
std::string Render(const json& v) {
  if (v.is_string()) return Quote(v.get<std::string>());
  if (v.is_null()) return Quote("null");
  return v.dump();
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    if (pos == std::string::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

// Map keys in paths are shortened in the middle beyond maxLen, as Kubernetes does.
std::string TruncateKey(const std::string& key, size_t max_len) {
  max_len = std::max<size_t>(max_len, 16);
  if (key.size() <= max_len) return key;
  const size_t remaining = max_len - 3;
  return key.substr(0, (remaining + 1) / 2) + "..." + key.substr(key.size() - remaining / 2);
}

// Generated names get a suffix appended, so a trailing dash is fine there.
std::string MaskTrailingDash(const std::string& name) {
  if (name.size() > 1 && name.back() == '-') return name.substr(0, name.size() - 2) + "a";
  return name;
}

bool IsExtendedResourceName(const std::string& name) {
  if (name.find('/') == std::string::npos) return false;        // a native resource
  if (absl::StrContains(name, "kubernetes.io/")) return false;  // a prefixed native resource
  if (absl::StartsWith(name, "requests.")) return false;        // the quota prefix
  return model::IsQualifiedName("requests." + name).empty();
}

// google/uuid's Validate, whose error text Kubernetes passes through.
std::optional<std::string> UuidError(std::string s) {
  auto is_hex = [](char c) { return absl::ascii_isxdigit(static_cast<unsigned char>(c)); };
  switch (s.size()) {
    case 36:
      break;
    case 36 + 9:
      if (absl::AsciiStrToLower(s.substr(0, 9)) != "urn:uuid:") {
        return "invalid urn prefix: " + Quote(s.substr(0, 9));
      }
      s = s.substr(9);
      break;
    case 36 + 2:
      if (s.front() != '{' || s.back() != '}') return std::string("invalid bracketed UUID format");
      s = s.substr(1, 36);
      break;
    case 32:
      if (!std::all_of(s.begin(), s.end(), is_hex)) return std::string("invalid UUID format");
      return std::nullopt;
    default:
      return "invalid UUID length: " + std::to_string(s.size());
  }
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !is_hex(s[i])) return std::string("invalid UUID format");
  }
  return std::nullopt;
}

// Parses "a.b.c.d" the way Go's sloppy parser does (leading zeros allowed).
std::optional<std::array<uint8_t, 4>> ParseIpv4(const std::string& s) {
  std::vector<std::string> parts = Split(s, '.');
  if (parts.size() != 4) return std::nullopt;
  std::array<uint8_t, 4> out{};
  for (size_t i = 0; i < 4; ++i) {
    if (parts[i].empty()) return std::nullopt;
    int n = 0;
    for (char c : parts[i]) {
      if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
      n = n * 10 + (c - '0');
      if (n > 255) return std::nullopt;
    }
    out[i] = static_cast<uint8_t>(n);
  }
  return out;
}

std::string FormatIpv4(const uint8_t* b) {
  return std::to_string(b[0]) + "." + std::to_string(b[1]) + "." + std::to_string(b[2]) + "." +
         std::to_string(b[3]);
}

// Go's net.IP.String() for a 16-byte address: RFC 5952, IPv4-mapped addresses dotted.
std::string FormatIpv6(const uint8_t* b) {
  bool mapped =
      std::all_of(b, b + 10, [](uint8_t x) { return x == 0; }) && b[10] == 0xff && b[11] == 0xff;
  if (mapped) return FormatIpv4(b + 12);
  int best_start = -1, best_end = -1;
  for (int i = 0; i < 16; i += 2) {
    int j = i;
    while (j < 16 && b[j] == 0 && b[j + 1] == 0) j += 2;
    if (j > i && j - i > best_end - best_start) {
      best_start = i;
      best_end = j;
      i = j;
    }
  }
  if (best_end - best_start <= 2) best_start = best_end = -1;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 16; i += 2) {
    if (i == best_start) {
      out += "::";
      i = best_end;
      if (i >= 16) break;
    } else if (i > 0) {
      out += ":";
    }
    unsigned group = (static_cast<unsigned>(b[i]) << 8) | b[i + 1];
    std::string hex;
    do {
      hex.insert(hex.begin(), kHex[group & 0xf]);
      group >>= 4;
    } while (group != 0);
    out += hex;
  }
  return out;
}

// Kubernetes' IsValidInterfaceAddress: "ip/prefix" with a full address, in canonical form.
std::optional<std::string> InterfaceAddressError(const std::string& value) {
  constexpr char kNotCidr[] =
      "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)";
  const size_t slash = value.find('/');
  if (slash == std::string::npos) return std::string(kNotCidr);
  const std::string addr = value.substr(0, slash);
  const std::string prefix = value.substr(slash + 1);
  if (prefix.empty() || prefix.size() > 4 || !std::all_of(prefix.begin(), prefix.end(), [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c));
      })) {
    return std::string(kNotCidr);
  }
  int bits = 0;
  for (char c : prefix) bits = bits * 10 + (c - '0');
  std::string ip;
  if (auto v4 = ParseIpv4(addr)) {
    if (bits > 32) return std::string(kNotCidr);
    ip = FormatIpv4(v4->data());
  } else {
    uint8_t b[16];
    if (addr.find(':') == std::string::npos || inet_pton(AF_INET6, addr.c_str(), b) != 1 ||
        bits > 128) {
      return std::string(kNotCidr);
    }
    ip = FormatIpv6(b);
    // Go reports an IPv4-mapped address with the prefix counted from the IPv4 part.
    if (ip.find(':') == std::string::npos && bits > 32) bits -= 96;
  }
  const std::string canonical = ip + "/" + std::to_string(bits);
  if (value != canonical) return "must be in canonical form (" + Quote(canonical) + ")";
  return std::nullopt;
}

// ValidateRBACName: roles and bindings may be named anything that fits in one URL path segment
// ("system:node" included), as apimachinery's IsValidPathSegmentName says.
std::vector<std::string> IsPathSegmentName(const std::string& name) {
  for (const char* illegal : {".", ".."}) {
    if (name == illegal) return {std::string("may not be '") + illegal + "'"};
  }
  std::vector<std::string> errors;
  for (const char* illegal : {"/", "%"}) {
    if (absl::StrContains(name, illegal)) {
      errors.push_back(std::string("may not contain '") + illegal + "'");
    }
  }
  return errors;
}

// A []string as Go's %#v prints it in an Invalid value: []string{"/a", "/b"}.
std::string GoStringSlice(const std::vector<std::string>& values) {
  std::string out = "[]string{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ", ";
    out += Quote(values[i]);
  }
  return out + "}";
}

bool IsConditionReason(const std::string& reason) {
  if (reason.empty() || !absl::ascii_isalpha(static_cast<unsigned char>(reason[0]))) return false;
  for (char c : reason) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ',' && c != ':') {
      return false;
    }
  }
  const char last = reason.back();
  return absl::ascii_isalnum(static_cast<unsigned char>(last)) || last == '_';
}

// Request names of a claim: each request maps to the names of its subrequests (nullopt for an
// `exactly` request), for resolving "<request>" and "<request>/<subrequest>" references.
class RequestNames {
 public:
  explicit RequestNames(const json& device_claim) {
    const json* requests = Get(device_claim, "requests");
    if (requests == nullptr || !requests->is_array()) return;
    for (const json& request : *requests) {
      const json* name = Get(request, "name");
      if (name == nullptr || !name->is_string()) continue;
      const json* first = Get(request, "firstAvailable");
      if (first == nullptr || !first->is_array() || first->empty()) {
        names_[name->get<std::string>()] = std::nullopt;
        continue;
      }
      std::set<std::string> subrequests;
      for (const json& sub : *first) {
        const json* sub_name = Get(sub, "name");
        if (sub_name != nullptr && sub_name->is_string()) {
          subrequests.insert(sub_name->get<std::string>());
        }
      }
      names_[name->get<std::string>()] = std::move(subrequests);
    }
  }

  bool Has(const std::string& ref) const {
    std::vector<std::string> segments = Split(ref, '/');
    if (segments.size() > 2) return false;
    auto it = names_.find(segments[0]);
    if (it == names_.end()) return false;
    if (segments.size() == 1) return true;
    return it->second.has_value() && it->second->count(segments[1]) > 0;
  }

 private:
  std::map<std::string, std::optional<std::set<std::string>>> names_;
};

// "driver/pool/device[/shareID]": how Kubernetes identifies (and prints) an allocated device.
std::string SharedDeviceId(const json& entry) {
  auto str = [&](const char* key) {
    const json* v = Get(entry, key);
    return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
  };
  std::string id = str("driver") + "/" + str("pool") + "/" + str("device");
  if (const json* share = Get(entry, "shareID"); share != nullptr && share->is_string()) {
    id += "/" + share->get<std::string>();
  }
  return id;
}

// Compares two optional sub-objects treating "absent" and "null" alike, as Go compares a nil
// pointer or an empty struct.
bool SameValue(const json* a, const json* b) {
  if (a == nullptr || b == nullptr) return a == b;
  return *a == *b;
}

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

class Validator {
 public:
  FieldErrors Take() { return std::move(errs_); }

  // ---- metadata ----------------------------------------------------------------------------

  void ObjectMeta(const json& obj, const model::ResourceType& type, const json* old) {
    const Path p("metadata");
    const json& meta = Object(Get(obj, "metadata"), p);
    auto name_check = [&](const std::string& name) {
      if (type.group == model::kRbacGroup) return IsPathSegmentName(name);
      return type.kind == "Namespace" ? model::IsDns1123Label(name)
                                      : model::IsDns1123Subdomain(name);
    };
    const std::string generate_name = String(meta, "generateName", p.Child("generateName"));
    const std::string name = String(meta, "name", p.Child("name"));
    if (!generate_name.empty()) {
      for (const auto& msg : name_check(MaskTrailingDash(generate_name))) {
        Add(model::Invalid(p.Child("generateName").str(), Quote(generate_name), msg));
      }
    }
    if (name.empty()) {
      if (generate_name.empty()) {
        Add(model::Required(p.Child("name").str(), "name or generateName is required"));
      }
    } else {
      for (const auto& msg : name_check(name)) {
        Add(model::Invalid(p.Child("name").str(), Quote(name), msg));
      }
    }
    // Cluster-scoped objects have their namespace cleared before validation, as in Kubernetes.
    if (type.namespaced) {
      const std::string ns = String(meta, "namespace", p.Child("namespace"));
      if (ns.empty()) {
        Add(model::Required(p.Child("namespace").str()));
      } else {
        for (const auto& msg : model::IsDns1123Label(ns)) {
          Add(model::Invalid(p.Child("namespace").str(), Quote(ns), msg));
        }
      }
    }
    if (auto generation = OptInt(meta, "generation", p.Child("generation"));
        generation.has_value() && *generation < 0) {
      Add(model::Invalid(p.Child("generation").str(), std::to_string(*generation),
                         "must be greater than or equal to 0"));
    }
    Labels(meta, p.Child("labels"));
    Annotations(meta, p.Child("annotations"));
    if (const json* finalizers = OptArray(meta, "finalizers", p.Child("finalizers"))) {
      for (size_t i = 0; i < finalizers->size(); ++i) {
        auto finalizer = ItemString((*finalizers)[i], p.Child("finalizers").Index(i));
        if (!finalizer.has_value()) continue;
        for (const auto& msg : model::IsQualifiedName(*finalizer)) {
          Add(model::Invalid(p.Child("finalizers").str(), Quote(*finalizer), msg));
        }
      }
    }
    if (old != nullptr) ObjectMetaUpdate(meta, *old);
  }

  // Name and namespace of an object never change.
  void ObjectMetaUpdate(const json& meta, const json& old) {
    const json* old_meta = Get(old, "metadata");
    if (old_meta == nullptr) return;
    for (const char* key : {"name", "namespace"}) {
      if (!SameValue(Get(meta, key), Get(*old_meta, key))) {
        Add(model::Immutable(Path("metadata").Child(key).str()));
      }
    }
  }

  void Labels(const json& meta, const Path& p) {
    const json* labels = OptObject(meta, "labels", p);
    if (labels == nullptr) return;
    for (const auto& [key, value] : labels->items()) {
      for (const auto& msg : model::IsQualifiedName(key)) {
        Add(model::Invalid(p.str(), Quote(key), msg));
      }
      if (!value.is_string()) {
        TypeError(value, p.Key(key), "string");
        continue;
      }
      for (const auto& msg : model::IsLabelValue(value.get<std::string>())) {
        Add(model::Invalid(p.str(), Quote(value.get<std::string>()), msg));
      }
    }
  }

  void Annotations(const json& meta, const Path& p) {
    const json* annotations = OptObject(meta, "annotations", p);
    if (annotations == nullptr) return;
    size_t total = 0;
    for (const auto& [key, value] : annotations->items()) {
      // Annotation keys are qualified names except that case does not matter.
      for (const auto& msg : model::IsQualifiedName(absl::AsciiStrToLower(key))) {
        Add(model::Invalid(p.str(), Quote(key), msg));
      }
      total += key.size();
      if (value.is_string()) {
        total += value.get<std::string>().size();
      } else {
        TypeError(value, p.Key(key), "string");
      }
    }
    if (total > kTotalAnnotationSizeLimit) Add(model::TooLong(p.str(), kTotalAnnotationSizeLimit));
  }

  // The embedded metadata of a template may only carry labels and annotations.
  void TemplateObjectMeta(const json& meta, const Path& p) {
    Annotations(meta, p.Child("annotations"));
    Labels(meta, p.Child("labels"));
    // In ObjectMeta field order; Kubernetes names the field by its lower-cased Go name.
    static constexpr std::pair<const char*, const char*> kForbidden[] = {
        {"name", "name"},
        {"generateName", "generateName"},
        {"namespace", "namespace"},
        {"selfLink", "selfLink"},
        {"uid", "uID"},
        {"resourceVersion", "resourceVersion"},
        {"generation", "generation"},
        {"creationTimestamp", "creationTimestamp"},
        {"deletionTimestamp", "deletionTimestamp"},
        {"deletionGracePeriodSeconds", "deletionGracePeriodSeconds"},
        {"ownerReferences", "ownerReferences"},
        {"finalizers", "finalizers"},
        {"managedFields", "managedFields"},
    };
    for (const auto& [key, go_name] : kForbidden) {
      const json* v = Get(meta, key);
      if (v == nullptr) continue;
      const bool zero = (v->is_string() && v->get<std::string>().empty()) ||
                        (v->is_number() && *v == 0) ||
                        ((v->is_array() || v->is_object()) && v->empty());
      if (!zero) Add(model::Forbidden(p.Child(go_name).str(), "cannot be set"));
    }
  }

  // ---- name formats ------------------------------------------------------------------------

  // CSI driver-name rules (Kubernetes reuses ValidateCSIDriverName for DRA drivers).
  void DriverName(const std::string& name, const Path& p) {
    if (name.empty()) Add(model::Required(p.str()));
    if (name.size() > kDriverNameMaxLength) Add(model::TooLong(p.str(), kDriverNameMaxLength));
    for (const auto& msg : model::IsDns1123Subdomain(absl::AsciiStrToLower(name))) {
      Add(model::Invalid(p.str(), Quote(name), msg));
    }
  }

  void PoolName(const std::string& name, const Path& p) {
    if (name.empty()) {
      Add(model::Required(p.str()));
      return;
    }
    if (name.size() > kPoolNameMaxLength) Add(model::TooLong(p.str(), kPoolNameMaxLength));
    for (const auto& part : Split(name, '/')) DnsSubdomain(part, p);
  }

  void DnsLabel(const std::string& value, const Path& p) {
    for (const auto& msg : model::IsDns1123Label(value)) {
      Add(model::Invalid(p.str(), Quote(value), msg));
    }
  }

  void DnsSubdomain(const std::string& value, const Path& p) {
    for (const auto& msg : model::IsDns1123Subdomain(value)) {
      Add(model::Invalid(p.str(), Quote(value), msg));
    }
  }

  void LabelName(const std::string& value, const Path& p) {
    for (const auto& msg : model::IsQualifiedName(value)) {
      Add(model::Invalid(p.str(), Quote(value), msg));
    }
  }

  void LabelValue(const std::string& value, const Path& p) {
    for (const auto& msg : model::IsLabelValue(value)) {
      Add(model::Invalid(p.str(), Quote(value), msg));
    }
  }

  void NodeName(const std::string& name, const Path& p) { DnsSubdomain(name, p); }

  void CIdentifier(const std::string& id, const Path& p) {
    if (id.size() > kDeviceMaxIdLength) Add(model::TooLong(p.str(), kDeviceMaxIdLength));
    for (const auto& msg : model::IsCIdentifier(id)) Add(model::Invalid(p.str(), Quote(id), msg));
  }

  // An attribute or capacity name: `<C identifier>` or `<domain>/<C identifier>`.
  void DraQualifiedName(const std::string& name, const Path& p) {
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

  void FullyQualifiedName(const std::string& name, const Path& p) {
    DraQualifiedName(name, p);
    if (name.find('/') == std::string::npos) {
      Add(model::Invalid(
          p.str(), Quote(name),
          "a fully qualified name must be a domain and a name separated by a slash"));
    }
  }

  void Uid(const std::string& uid, const Path& p) {
    if (auto err = UuidError(uid)) {
      Add(model::Invalid(p.str(), Quote(uid), "error validating uid: " + *err));
    } else if (uid.size() != 36 || uid != absl::AsciiStrToLower(uid)) {
      Add(model::Invalid(p.str(), Quote(uid),
                         "uid must be in RFC 4122 normalized form, "
                         "`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal "
                         "characters"));
    }
  }

  void RequestNameRef(const std::string& ref, const Path& p, const RequestNames& names) {
    std::vector<std::string> segments = Split(ref, '/');
    if (segments.size() > 2) {
      Add(model::Invalid(p.str(), Quote(ref), kRequestRefMsg));
      return;
    }
    for (const auto& segment : segments) DnsLabel(segment, p);
    if (!names.Has(ref)) Add(model::Invalid(p.str(), Quote(ref), kRequestRefMsg));
  }

  // A list of request references: at most 32, unique, each naming a request of the claim.
  void RequestRefs(const json& holder, const Path& p, const RequestNames& names) {
    const json* refs = List(holder, "requests", p, kMaxRequests);
    if (refs == nullptr) return;
    std::vector<std::optional<std::string>> keys;
    for (size_t i = 0; i < refs->size(); ++i) {
      keys.push_back(ItemString((*refs)[i], p.Index(i)));
      if (keys.back().has_value()) RequestNameRef(*keys.back(), p.Index(i), names);
    }
    Unique(keys, p);
  }

  // ---- shared structures -------------------------------------------------------------------

  void NodeSelector(const json& selector, const Path& p) {
    const Path terms_path = p.Child("nodeSelectorTerms");
    const json* terms = OptArray(selector, "nodeSelectorTerms", terms_path);
    if (terms == nullptr || terms->empty()) {
      Add(model::Required(terms_path.str(), "must have at least one node selector term"));
      return;
    }
    for (size_t i = 0; i < terms->size(); ++i) {
      const Path tp = terms_path.Index(i);
      const json& term = Object(&(*terms)[i], tp);
      if (const json* exprs = OptArray(term, "matchExpressions", tp.Child("matchExpressions"))) {
        for (size_t j = 0; j < exprs->size(); ++j) {
          const Path rp = tp.Child("matchExpressions").Index(j);
          NodeSelectorRequirement(Object(&(*exprs)[j], rp), rp);
        }
      }
      if (const json* fields = OptArray(term, "matchFields", tp.Child("matchFields"))) {
        for (size_t j = 0; j < fields->size(); ++j) {
          const Path rp = tp.Child("matchFields").Index(j);
          NodeFieldSelectorRequirement(Object(&(*fields)[j], rp), rp);
        }
      }
    }
  }

  void NodeSelectorRequirement(const json& req, const Path& p) {
    const std::string op = String(req, "operator", p.Child("operator"));
    std::vector<std::string> values = StringList(req, "values", p.Child("values"));
    if (op == "In" || op == "NotIn") {
      if (values.empty()) {
        Add(model::Required(p.Child("values").str(),
                            "must be specified when `operator` is 'In' or 'NotIn'"));
      }
    } else if (op == "Exists" || op == "DoesNotExist") {
      if (!values.empty()) {
        Add(model::Forbidden(p.Child("values").str(),
                             "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"));
      }
    } else if (op == "Gt" || op == "Lt") {
      if (values.size() != 1) {
        Add(model::Required(p.Child("values").str(),
                            "must be specified single value when `operator` is 'Lt' or 'Gt'"));
      }
    } else {
      Add(model::Invalid(p.Child("operator").str(), Quote(op), "not a valid selector operator"));
    }
    LabelName(String(req, "key", p.Child("key")), p.Child("key"));
    for (size_t i = 0; i < values.size(); ++i) {
      LabelValue(values[i], p.Child("values").Index(i));
    }
  }

  void NodeFieldSelectorRequirement(const json& req, const Path& p) {
    const std::string op = String(req, "operator", p.Child("operator"));
    std::vector<std::string> values = StringList(req, "values", p.Child("values"));
    if (op == "In" || op == "NotIn") {
      if (values.size() != 1) {
        Add(model::Required(
            p.Child("values").str(),
            "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"));
      }
    } else {
      Add(model::Invalid(p.Child("operator").str(), Quote(op), "not a valid selector operator"));
    }
    const std::string key = String(req, "key", p.Child("key"));
    if (key != "metadata.name") {
      Add(model::Invalid(p.Child("key").str(), Quote(key), "not a valid field selector key"));
      return;
    }
    for (size_t i = 0; i < values.size(); ++i) NodeName(values[i], p.Child("values").Index(i));
  }

  // Stored selectors were valid when written; Kubernetes does not re-check them.
  void Selectors(const json& holder, const Path& p, bool stored) {
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

  // An opaque JSON payload: required, a JSON object, at most `max` bytes when new. The size is
  // that of the compact JSON text, which is what the server stores.
  void RawExtension(const json* value, const Path& p, bool stored, size_t max) {
    if (value == nullptr) {
      Add(model::Required(p.str()));
    } else if (!stored && value->dump().size() > max) {
      Add(model::TooLong(p.str(), max));
    } else if (!value->is_object()) {
      Add(model::Invalid(p.str(), Quote("<value omitted>"), "must be a valid JSON object"));
    }
  }

  void DeviceConfiguration(const json& config, const Path& p, bool stored) {
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

  // `old_taint` is set on update; an unchanged effect is not re-checked.
  void DeviceTaint(const json& taint, const json* old_taint, const Path& p) {
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

  void Tolerations(const json& holder, const Path& p) {
    const json* tolerations = List(holder, "tolerations", p, kMaxTolerations);
    if (tolerations == nullptr) return;
    for (size_t i = 0; i < tolerations->size(); ++i) {
      DeviceToleration(Object(&(*tolerations)[i], p.Index(i)), p.Index(i));
    }
  }

  void DeviceToleration(const json& toleration, const Path& p) {
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

  void BindingParameters(const json& holder, const Path& p) {
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

  // metav1.Condition lists (apimachinery's ValidateConditions).
  void Conditions(const json* conditions, const Path& p) {
    if (conditions == nullptr) return;
    std::set<std::string> types;
    for (size_t i = 0; i < conditions->size(); ++i) {
      const Path cp = p.Index(i);
      const json& c = Object(&(*conditions)[i], cp);
      const std::string type = String(c, "type", cp.Child("type"));
      if (!types.insert(type).second) Add(model::Duplicate(cp.Child("type").str(), Quote(type)));
      LabelName(type, cp.Child("type"));
      const std::string status = String(c, "status", cp.Child("status"));
      if (status != "True" && status != "False" && status != "Unknown") {
        Add(model::NotSupported(cp.Child("status").str(), Quote(status),
                                {"False", "True", "Unknown"}));
      }
      if (auto gen = OptInt(c, "observedGeneration", cp.Child("observedGeneration"));
          gen.has_value() && *gen < 0) {
        Add(model::Invalid(cp.Child("observedGeneration").str(), std::to_string(*gen),
                           "must be greater than or equal to zero"));
      }
      if (String(c, "lastTransitionTime", cp.Child("lastTransitionTime")).empty()) {
        Add(model::Required(cp.Child("lastTransitionTime").str(), "must be set"));
      }
      const std::string reason = String(c, "reason", cp.Child("reason"));
      if (reason.empty()) {
        Add(model::Required(cp.Child("reason").str(), "must be set"));
      } else {
        if (!IsConditionReason(reason)) {
          Add(model::Invalid(
              cp.Child("reason").str(), Quote(reason),
              "a condition reason must start with alphabetic character, optionally followed by a "
              "string of alphanumeric characters or '_,:', and must end with an alphanumeric "
              "character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or "
              "'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is "
              "'[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')"));
        }
        if (reason.size() > kConditionReasonMaxLength) {
          Add(model::TooLong(cp.Child("reason").str(), kConditionReasonMaxLength));
        }
      }
      if (String(c, "message", cp.Child("message")).size() > kConditionMessageMaxLength) {
        Add(model::TooLong(cp.Child("message").str(), kConditionMessageMaxLength));
      }
    }
  }

  // ---- DeviceClass -------------------------------------------------------------------------

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

  // ---- ResourceSlice -----------------------------------------------------------------------

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
    size_t max_devices = kMaxDevices;
    if (devices != nullptr) {
      for (const json& device : *devices) {
        if (NonEmptyList(device, "taints") || NonEmptyList(device, "consumesCounters") ||
            HasListAttributes(device)) {
          max_devices = kMaxDevicesWithAdvancedFeatures;
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
        for (const char* key : {"bools", "ints", "strings", "versions"}) {
          const json* list = Get(attribute, key);
          if (list != nullptr && list->is_array()) items += list->size();
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
    const size_t errors_before = errs_.size();
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
    if (errs_.size() != errors_before) return;

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

  // ---- ResourceClaim -----------------------------------------------------------------------

  void ResourceClaimSpec(const json& spec, const Path& p) {
    const Path dp = p.Child("devices");
    const json& devices = Object(Get(spec, "devices"), dp);
    const RequestNames names(devices);
    if (const json* requests = List(devices, "requests", dp.Child("requests"), kMaxRequests)) {
      std::vector<std::optional<std::string>> keys;
      for (size_t i = 0; i < requests->size(); ++i) {
        const Path rp = dp.Child("requests").Index(i);
        const json& request = Object(&(*requests)[i], rp);
        keys.push_back(KeyString(request, "name"));
        DeviceRequest(request, rp);
      }
      Unique(keys, dp.Child("requests"));
    }
    if (const json* constraints =
            List(devices, "constraints", dp.Child("constraints"), kMaxConstraints)) {
      for (size_t i = 0; i < constraints->size(); ++i) {
        const Path cp = dp.Child("constraints").Index(i);
        DeviceConstraint(Object(&(*constraints)[i], cp), cp, names);
      }
    }
    if (const json* configs = List(devices, "config", dp.Child("config"), kMaxConfigs)) {
      for (size_t i = 0; i < configs->size(); ++i) {
        const Path cp = dp.Child("config").Index(i);
        const json& config = Object(&(*configs)[i], cp);
        RequestRefs(config, cp.Child("requests"), names);
        DeviceConfiguration(config, cp, /*stored=*/false);
      }
    }
  }

  void DeviceRequest(const json& request, const Path& p) {
    DnsLabel(String(request, "name", p.Child("name")), p.Child("name"));
    const json* first = OptArray(request, "firstAvailable", p.Child("firstAvailable"));
    const bool has_first = first != nullptr && !first->empty();
    const json* exactly = OptObject(request, "exactly", p.Child("exactly"));
    if (!has_first && exactly == nullptr) {
      Add(model::Required(p.str(), kExactlyOrFirstAvailableMsg));
    } else if (has_first && exactly != nullptr) {
      Add(model::Invalid(
          p.str(), Quote("null"),
          std::string(kExactlyOrFirstAvailableMsg) + ", but multiple fields are set"));
    } else if (has_first) {
      const Path fp = p.Child("firstAvailable");
      if (first->size() > kMaxFirstAvailable) {
        Add(model::TooMany(fp.str(), first->size(), kMaxFirstAvailable));
        return;
      }
      std::vector<std::optional<std::string>> keys;
      for (size_t i = 0; i < first->size(); ++i) {
        const json& sub = Object(&(*first)[i], fp.Index(i));
        keys.push_back(KeyString(sub, "name"));
        DnsLabel(String(sub, "name", fp.Index(i).Child("name")), fp.Index(i).Child("name"));
        DeviceSelection(sub, fp.Index(i));
      }
      Unique(keys, fp);
    } else {
      DeviceSelection(*exactly, p.Child("exactly"));
    }
  }

  // The fields an exact request and a subrequest share.
  void DeviceSelection(const json& request, const Path& p) {
    const std::string class_name = String(request, "deviceClassName", p.Child("deviceClassName"));
    if (class_name.empty()) {
      Add(model::Required(p.Child("deviceClassName").str()));
    } else {
      DnsSubdomain(class_name, p.Child("deviceClassName"));
    }
    Selectors(request, p.Child("selectors"), /*stored=*/false);
    // Defaulting turns an unset mode into ExactCount with count 1.
    std::string mode = String(request, "allocationMode", p.Child("allocationMode"));
    if (mode.empty()) mode = "ExactCount";
    const int64_t count =
        OptInt(request, "count", p.Child("count")).value_or(mode == "ExactCount" ? 1 : 0);
    if (mode == "All") {
      if (count != 0) {
        Add(model::Invalid(p.Child("count").str(), std::to_string(count),
                           "must not be specified when allocationMode is 'All'"));
      }
    } else if (mode == "ExactCount") {
      if (count <= 0) {
        Add(model::Invalid(p.Child("count").str(), std::to_string(count),
                           "must be greater than zero"));
      }
    } else {
      Add(model::NotSupported(p.Child("allocationMode").str(), Quote(mode), {"All", "ExactCount"}));
    }
    Tolerations(request, p.Child("tolerations"));
    if (const json* capacity = OptObject(request, "capacity", p.Child("capacity"))) {
      const Path rp = p.Child("capacity").Child("requests");
      if (const json* requests = OptObject(*capacity, "requests", rp)) {
        for (const auto& [name, amount] : requests->items()) {
          DraQualifiedName(name, rp);
          QuantityAt(&amount, rp.Key(TruncateKey(name, kAttributeKeyMaxLength)));
        }
      }
    }
  }

  void DeviceConstraint(const json& constraint, const Path& p, const RequestNames& names) {
    RequestRefs(constraint, p.Child("requests"), names);
    const auto match = OptString(constraint, "matchAttribute", p.Child("matchAttribute"));
    const auto distinct = OptString(constraint, "distinctAttribute", p.Child("distinctAttribute"));
    if (!match.has_value() && !distinct.has_value()) {
      Add(model::Required(p.str(), kConstraintOneOfMsg));
      return;
    }
    if (match.has_value() && distinct.has_value()) {
      Add(model::Invalid(p.str(), Quote("{`matchAttribute`, `distinctAttribute`}"),
                         kConstraintOneOfMsg));
    }
    if (match.has_value()) FullyQualifiedName(*match, p.Child("matchAttribute"));
    if (distinct.has_value()) FullyQualifiedName(*distinct, p.Child("distinctAttribute"));
  }

  // Status rules of a claim (§1.5). `old_status` is the stored status (empty on create).
  void ResourceClaimStatus(const json& status, const json& old_status, bool deleting,
                           const RequestNames& names, const Path& p) {
    const Path rp = p.Child("reservedFor");
    const json* reserved = OptArray(status, "reservedFor", rp);
    if (reserved != nullptr && reserved->size() > kMaxReservedFor) {
      Add(model::TooMany(rp.str(), reserved->size(), kMaxReservedFor));
    } else if (reserved != nullptr) {
      std::vector<std::optional<std::string>> uids;
      for (size_t i = 0; i < reserved->size(); ++i) {
        const json& ref = Object(&(*reserved)[i], rp.Index(i));
        for (const char* key : {"resource", "name", "uid"}) {
          if (String(ref, key, rp.Index(i).Child(key)).empty()) {
            Add(model::Required(rp.Index(i).Child(key).str()));
          }
        }
        uids.push_back(KeyString(ref, "uid"));
      }
      Unique(uids, rp);
    }

    const json* allocation = OptObject(status, "allocation", p.Child("allocation"));
    std::set<std::string> allocated;
    if (allocation != nullptr) {
      const json* results = Get(ObjectOrEmpty(Get(*allocation, "devices")), "results");
      if (results != nullptr && results->is_array()) {
        for (const json& result : *results) allocated.insert(SharedDeviceId(result));
      }
    }
    if (const json* devices = OptArray(status, "devices", p.Child("devices"))) {
      std::vector<std::optional<std::string>> ids;
      for (size_t i = 0; i < devices->size(); ++i) {
        const Path dp = p.Child("devices").Index(i);
        const json& device = Object(&(*devices)[i], dp);
        ids.push_back(SharedDeviceId(device));
        AllocatedDeviceStatus(device, dp, allocated);
      }
      Unique(ids, p.Child("devices"), /*quote=*/false);
    }

    if (reserved != nullptr && !reserved->empty()) {
      if (allocation == nullptr) {
        Add(model::Forbidden(rp.str(), "may not be specified when `allocated` is not set"));
      } else if (deleting) {
        // While a claim is going away consumers may only leave.
        const json* old_reserved = Get(old_status, "reservedFor");
        for (const json& entry : *reserved) {
          const bool known =
              old_reserved != nullptr && old_reserved->is_array() &&
              std::find(old_reserved->begin(), old_reserved->end(), entry) != old_reserved->end();
          if (!known) {
            Add(model::Forbidden(rp.str(),
                                 "new entries may not be added while `deallocationRequested` or "
                                 "`deletionTimestamp` are set"));
            break;
          }
        }
      }
    }

    const json* old_allocation = Get(old_status, "allocation");
    if (old_allocation != nullptr && allocation != nullptr) {
      // Stored results are not re-validated: rules for new results may be stricter.
      if (*old_allocation != *allocation) Add(model::Immutable(p.Child("allocation").str()));
    } else if (allocation != nullptr) {
      AllocationResult(*allocation, p.Child("allocation"), names);
    }
  }

  void AllocationResult(const json& allocation, const Path& p, const RequestNames& names) {
    const Path dp = p.Child("devices");
    const json& devices = Object(Get(allocation, "devices"), dp);
    if (const json* results = List(devices, "results", dp.Child("results"), kMaxResults)) {
      for (size_t i = 0; i < results->size(); ++i) {
        const Path rp = dp.Child("results").Index(i);
        DeviceRequestAllocationResult(Object(&(*results)[i], rp), rp, names);
      }
    }
    if (const json* configs = List(devices, "config", dp.Child("config"), kMaxAllocationConfigs)) {
      for (size_t i = 0; i < configs->size(); ++i) {
        const Path cp = dp.Child("config").Index(i);
        const json& config = Object(&(*configs)[i], cp);
        const std::string source = String(config, "source", cp.Child("source"));
        if (source.empty()) {
          Add(model::Required(cp.Child("source").str()));
        } else if (source != "FromClaim" && source != "FromClass") {
          Add(model::NotSupported(cp.Child("source").str(), Quote(source),
                                  {"FromClaim", "FromClass"}));
        }
        RequestRefs(config, cp.Child("requests"), names);
        DeviceConfiguration(config, cp, /*stored=*/false);
      }
    }
    if (const json* selector = OptObject(allocation, "nodeSelector", p.Child("nodeSelector"))) {
      NodeSelector(*selector, p.Child("nodeSelector"));
    }
  }

  void DeviceRequestAllocationResult(const json& result, const Path& p, const RequestNames& names) {
    RequestNameRef(String(result, "request", p.Child("request")), p.Child("request"), names);
    DriverName(String(result, "driver", p.Child("driver")), p.Child("driver"));
    PoolName(String(result, "pool", p.Child("pool")), p.Child("pool"));
    DnsLabel(String(result, "device", p.Child("device")), p.Child("device"));
    BindingParameters(result, p);
    Tolerations(result, p.Child("tolerations"));
    if (auto share = OptString(result, "shareID", p.Child("shareID"))) {
      Uid(*share, p.Child("shareID"));
    }
    const Path cp = p.Child("consumedCapacity");
    if (const json* consumed = OptObject(result, "consumedCapacity", cp)) {
      for (const auto& [name, amount] : consumed->items()) {
        DraQualifiedName(name, cp);
        QuantityAt(&amount, cp.Key(TruncateKey(name, kAttributeKeyMaxLength)));
      }
    }
  }

  void AllocatedDeviceStatus(const json& device, const Path& p,
                             const std::set<std::string>& allocated) {
    DriverName(String(device, "driver", p.Child("driver")), p.Child("driver"));
    PoolName(String(device, "pool", p.Child("pool")), p.Child("pool"));
    DnsLabel(String(device, "device", p.Child("device")), p.Child("device"));
    if (auto share = OptString(device, "shareID", p.Child("shareID"))) {
      Uid(*share, p.Child("shareID"));
    }
    const std::string id = SharedDeviceId(device);
    if (allocated.count(id) == 0) {
      Add(model::Invalid(p.str(), id, "must be an allocated device in the claim"));
    }
    const json* conditions = OptArray(device, "conditions", p.Child("conditions"));
    if (conditions != nullptr && conditions->size() > kMaxDeviceStatusConditions) {
      Add(model::TooMany(p.Child("conditions").str(), conditions->size(),
                         kMaxDeviceStatusConditions));
    }
    Conditions(conditions, p.Child("conditions"));
    if (const json* data = Get(device, "data")) {
      RawExtension(data, p.Child("data"), /*stored=*/false, kDeviceStatusDataMaxLength);
    }
    if (const json* network = OptObject(device, "networkData", p.Child("networkData"))) {
      const Path np = p.Child("networkData");
      if (String(*network, "interfaceName", np.Child("interfaceName")).size() >
          kInterfaceNameMaxLength) {
        Add(model::TooLong(np.Child("interfaceName").str(), kInterfaceNameMaxLength));
      }
      if (String(*network, "hardwareAddress", np.Child("hardwareAddress")).size() >
          kHardwareAddressMaxLength) {
        Add(model::TooLong(np.Child("hardwareAddress").str(), kHardwareAddressMaxLength));
      }
      if (const json* ips = List(*network, "ips", np.Child("ips"), kMaxNetworkIps)) {
        std::vector<std::optional<std::string>> keys;
        for (size_t i = 0; i < ips->size(); ++i) {
          keys.push_back(ItemString((*ips)[i], np.Child("ips").Index(i)));
          if (!keys.back().has_value()) continue;
          if (auto err = InterfaceAddressError(*keys.back())) {
            Add(model::Invalid(np.Child("ips").Index(i).str(), Quote(*keys.back()), *err));
          }
        }
        Unique(keys, np.Child("ips"));
      }
    }
  }

  // ---- DeviceTaintRule ---------------------------------------------------------------------

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

  // ---- core Node ---------------------------------------------------------------------------

  void NodeSpec(const json& spec, const Path& p) {
    const Path tp = p.Child("taints");
    const json* taints = OptArray(spec, "taints", tp);
    if (taints == nullptr) return;
    std::map<std::string, std::set<std::string>> keys_by_effect;
    for (size_t i = 0; i < taints->size(); ++i) {
      const Path ip = tp.Index(i);
      const json& taint = Object(&(*taints)[i], ip);
      const std::string key = String(taint, "key", ip.Child("key"));
      LabelName(key, ip.Child("key"));
      const std::string value = String(taint, "value", ip.Child("value"));
      if (auto msgs = model::IsLabelValue(value); !msgs.empty()) {
        Add(model::Invalid(ip.Child("value").str(), Quote(value), absl::StrJoin(msgs, ";")));
      }
      const std::string effect = String(taint, "effect", ip.Child("effect"));
      if (effect.empty()) {
        Add(model::Required(ip.Child("effect").str()));
      } else if (effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute") {
        Add(model::NotSupported(ip.Child("effect").str(), Quote(effect),
                                {"NoSchedule", "PreferNoSchedule", "NoExecute"}));
      }
      if (!keys_by_effect[effect].insert(key).second) {
        FieldError dup = model::Duplicate(ip.str(), taint.dump());
        dup.detail = "taints must be unique by key and effect pair";
        Add(std::move(dup));
      }
    }
  }

  // ---- core Pod ----------------------------------------------------------------------------
  // pkg/apis/core/validation: ValidatePodSpec (the parts a scheduling service can check),
  // ValidatePodUpdate and ValidatePodStatusUpdate.

  void PodSpec(const json& spec, const json& meta, const Path& p) {
    std::set<std::string> claim_names = PodResourceClaims(spec, meta, p.Child("resourceClaims"));
    std::set<std::string> all_names;
    const Path cp = p.Child("containers");
    const json* containers = OptArray(spec, "containers", cp);
    if (containers == nullptr || containers->empty()) {
      Add(model::Required(cp.str(), ""));
    } else {
      for (size_t i = 0; i < containers->size(); ++i) {
        const Path ip = cp.Index(i);
        const json& c = Object(&(*containers)[i], ip);
        const std::string name = Container(c, claim_names, ip);
        if (!all_names.insert(name).second)
          Add(model::Duplicate(ip.Child("name").str(), Quote(name)));
      }
    }
    const Path icp = p.Child("initContainers");
    if (const json* inits = OptArray(spec, "initContainers", icp)) {
      for (size_t i = 0; i < inits->size(); ++i) {
        const Path ip = icp.Index(i);
        const json& c = Object(&(*inits)[i], ip);
        const std::string name = Container(c, claim_names, ip);
        if (all_names.count(name) > 0) {
          Add(model::Duplicate(ip.Child("name").str(), Quote(name)));
        } else if (!name.empty()) {
          all_names.insert(name);
        }
      }
    }
    const Path rp = p.Child("restartPolicy");
    const std::string restart = String(spec, "restartPolicy", rp);
    if (restart.empty()) {
      Add(model::Required(rp.str(), ""));
    } else if (!IsOneOf(restart, {"Always", "OnFailure", "Never"})) {
      Add(model::NotSupported(rp.str(), Quote(restart), {"Always", "OnFailure", "Never"}));
    }
    const Path np = p.Child("nodeSelector");
    if (const json* selector = OptObject(spec, "nodeSelector", np)) {
      for (const auto& [key, value] : selector->items()) {
        for (const auto& msg : model::IsQualifiedName(key))
          Add(model::Invalid(np.str(), Quote(key), msg));
        if (auto v = ItemString(value, np.Key(key))) {
          for (const auto& msg : model::IsLabelValue(*v))
            Add(model::Invalid(np.str(), Quote(*v), msg));
        }
      }
    }
    if (auto account = OptString(spec, "serviceAccountName", p.Child("serviceAccountName"));
        account.has_value() && !account->empty()) {
      DnsSubdomain(*account, p.Child("serviceAccountName"));
    }
    if (auto node = OptString(spec, "nodeName", p.Child("nodeName")); node && !node->empty()) {
      NodeName(*node, p.Child("nodeName"));
    }
    const Path ap = p.Child("activeDeadlineSeconds");
    if (auto deadline = OptInt(spec, "activeDeadlineSeconds", ap);
        deadline.has_value() &&
        (*deadline < 1 || *deadline > std::numeric_limits<int32_t>::max())) {
      Add(model::Invalid(ap.str(), std::to_string(*deadline),
                         "must be between 1 and 2147483647, inclusive"));
    }
    for (const char* key : {"hostname", "subdomain"}) {
      if (auto v = OptString(spec, key, p.Child(key)); v && !v->empty()) DnsLabel(*v, p.Child(key));
    }
    PodTolerations(spec, p.Child("tolerations"));
    if (auto pc = OptString(spec, "priorityClassName", p.Child("priorityClassName"));
        pc && !pc->empty()) {
      DnsSubdomain(*pc, p.Child("priorityClassName"));
    }
    OptInt(spec, "priority", p.Child("priority"));
    const Path gp = p.Child("readinessGates");
    if (const json* gates = OptArray(spec, "readinessGates", gp)) {
      for (size_t i = 0; i < gates->size(); ++i) {
        const Path ip = gp.Index(i);
        LabelName(String(Object(&(*gates)[i], ip), "conditionType", ip.Child("conditionType")),
                  ip.Child("conditionType"));
      }
    }
  }

  // validatePodResourceClaims; returns the entry names containers may refer to.
  std::set<std::string> PodResourceClaims(const json& spec, const json& meta, const Path& p) {
    std::set<std::string> names;
    const json* claims = OptArray(spec, "resourceClaims", p);
    if (claims == nullptr) return names;
    const std::string pod_name = KeyString(meta, "name");
    for (size_t i = 0; i < claims->size(); ++i) {
      const Path ip = p.Index(i);
      const json& claim = Object(&(*claims)[i], ip);
      const std::string name = String(claim, "name", ip.Child("name"));
      auto claim_name = OptString(claim, "resourceClaimName", ip.Child("resourceClaimName"));
      auto template_name =
          OptString(claim, "resourceClaimTemplateName", ip.Child("resourceClaimTemplateName"));
      if (name.empty()) {
        Add(model::Required(ip.Child("name").str(), ""));
      } else if (names.count(name) > 0) {
        Add(model::Duplicate(ip.Child("name").str(), Quote(name)));
      } else {
        const size_t before = errs_.size();
        DnsLabel(name, ip.Child("name"));
        if (errs_.size() == before && template_name.has_value() && !pod_name.empty()) {
          const std::string generated = pod_name + "-" + name;
          for (const auto& msg : model::IsDns1123Subdomain(generated)) {
            Add(model::Invalid(ip.Child("name").str(), Quote(generated),
                               "final ResourceClaim name: " + msg));
          }
        }
        names.insert(name);
      }
      if (claim_name.has_value() && template_name.has_value()) {
        Add(model::Invalid(ip.str(), claim.dump(),
                           "at most one of `resourceClaimName` or `resourceClaimTemplateName` may "
                           "be specified"));
      }
      if (!claim_name.has_value() && !template_name.has_value()) {
        Add(model::Invalid(
            ip.str(), claim.dump(),
            "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"));
      }
      if (claim_name.has_value()) DnsSubdomain(*claim_name, ip.Child("resourceClaimName"));
      if (template_name.has_value()) {
        DnsSubdomain(*template_name, ip.Child("resourceClaimTemplateName"));
      }
    }
    return names;
  }

  // validateContainerCommon, the parts that do not need volumes or node information. Returns
  // the container's name.
  std::string Container(const json& c, const std::set<std::string>& claim_names, const Path& p) {
    const std::string name = String(c, "name", p.Child("name"));
    if (name.empty()) {
      Add(model::Required(p.Child("name").str(), ""));
    } else {
      DnsLabel(name, p.Child("name"));
    }
    if (String(c, "image", p.Child("image")).empty())
      Add(model::Required(p.Child("image").str(), ""));
    StringList(c, "command", p.Child("command"));
    StringList(c, "args", p.Child("args"));
    const Path pp = p.Child("imagePullPolicy");
    if (auto policy = OptString(c, "imagePullPolicy", pp);
        policy && !IsOneOf(*policy, {"Always", "IfNotPresent", "Never"})) {
      Add(model::NotSupported(pp.str(), Quote(*policy), {"Always", "IfNotPresent", "Never"}));
    }
    const Path rp = p.Child("resources");
    ResourceRequirements(Object(Get(c, "resources"), rp), claim_names, rp);
    return name;
  }

  // Extended resources ("example.com/gpu") and hugepages cannot be overcommitted; everything
  // else native can.
  static bool IsNativeResource(const std::string& name) {
    const size_t slash = name.find('/');
    return slash == std::string::npos || absl::EndsWith(name.substr(0, slash), "kubernetes.io");
  }
  static bool OvercommitAllowed(const std::string& name) {
    return IsNativeResource(name) && !absl::StartsWith(name, "hugepages-");
  }

  void ResourceRequirements(const json& res, const std::set<std::string>& claim_names,
                            const Path& p) {
    const Path lp = p.Child("limits");
    const Path rp = p.Child("requests");
    std::map<std::string, Quantity> limits;
    if (const json* lim = OptObject(res, "limits", lp)) {
      for (const auto& [name, value] : lim->items()) {
        ContainerResourceName(name, lp.Key(name));
        if (auto q = ResourceQuantity(name, &value, lp.Key(name))) limits[name] = *q;
      }
    }
    if (const json* req = OptObject(res, "requests", rp)) {
      for (const auto& [name, value] : req->items()) {
        ContainerResourceName(name, rp.Key(name));
        auto q = ResourceQuantity(name, &value, rp.Key(name));
        if (!q.has_value()) continue;
        auto limit = limits.find(name);
        if (limit != limits.end()) {
          if (*q != limit->second && !OvercommitAllowed(name)) {
            Add(model::Invalid(rp.str(), Quote(q->String()),
                               "must be equal to " + name + " limit of " + limit->second.String()));
          } else if (*q > limit->second) {
            Add(model::Invalid(
                rp.str(), Quote(q->String()),
                "must be less than or equal to " + name + " limit of " + limit->second.String()));
          }
        } else if (!OvercommitAllowed(name)) {
          Add(model::Required(lp.str(), "Limit must be set for non overcommitable resources"));
        }
      }
    }
    // validateResourceClaimNames.
    const Path cp = p.Child("claims");
    const json* claims = OptArray(res, "claims", cp);
    if (claims == nullptr) return;
    std::set<std::string> seen;
    for (size_t i = 0; i < claims->size(); ++i) {
      const Path ip = cp.Index(i);
      const json& claim = Object(&(*claims)[i], ip);
      const std::string name = String(claim, "name", ip.Child("name"));
      if (name.empty()) {
        Add(model::Required(ip.str(), ""));
        continue;
      }
      std::string key = name;
      if (auto request = OptString(claim, "request", ip.Child("request"));
          request && !request->empty()) {
        DnsLabel(*request, ip.Child("request"));
        key += "/" + *request;
      }
      if (!seen.insert(key).second) Add(model::Duplicate(ip.str(), Quote(name)));
      if (claim_names.count(name) == 0) {
        std::string detail = "must be one of the names in pod.spec.resourceClaims";
        if (claim_names.empty()) {
          detail += " which is empty";
        } else {
          detail += ": " + absl::StrJoin(claim_names, ", ");
        }
        Add(model::NotFound(ip.str(), Quote(name), detail));
      }
    }
  }

  void ContainerResourceName(const std::string& name, const Path& p) {
    for (const auto& msg : model::IsQualifiedName(name))
      Add(model::Invalid(p.str(), Quote(name), msg));
    if (name.find('/') == std::string::npos) {
      if (!IsOneOf(name, {"cpu", "memory", "ephemeral-storage"}) &&
          !absl::StartsWith(name, "hugepages-")) {
        Add(model::Invalid(p.str(), Quote(name), "must be a standard resource for containers"));
      }
    } else if (!IsNativeResource(name) && absl::StartsWith(name, "requests.")) {
      Add(model::Invalid(p.str(), Quote(name), "doesn't follow extended resource name standard"));
    }
  }

  // ValidateResourceQuantityValue: never negative, whole numbers for countable resources.
  std::optional<Quantity> ResourceQuantity(const std::string& name, const json* value,
                                           const Path& p) {
    auto q = QuantityAt(value, p);
    if (!q.has_value()) return std::nullopt;
    if (q->Sign() < 0) {
      Add(model::Invalid(p.str(), Quote(q->String()), "must be greater than or equal to 0"));
    }
    if (IsIntegerResource(name) && q->HasFraction()) {
      Add(model::Invalid(p.str(), Quote(q->String()), "must be an integer"));
    }
    return q;
  }

  // helper.IsIntegerResourceName: object counts, extended resources and device counts.
  static bool IsIntegerResource(const std::string& name) {
    static const auto* counted = new std::set<std::string>{"pods",
                                                           "services",
                                                           "replicationcontrollers",
                                                           "resourcequotas",
                                                           "secrets",
                                                           "configmaps",
                                                           "persistentvolumeclaims",
                                                           "services.nodeports",
                                                           "services.loadbalancers"};
    if (counted->count(name) > 0 || absl::StartsWith(name, "count/")) return true;
    std::string n = name;
    if (absl::StartsWith(n, "requests.")) n = n.substr(std::string("requests.").size());
    return !IsNativeResource(n);
  }

  // ValidateTolerations.
  void PodTolerations(const json& spec, const Path& p) {
    const json* tolerations = OptArray(spec, "tolerations", p);
    if (tolerations == nullptr) return;
    const std::vector<std::string> effects = {"NoSchedule", "PreferNoSchedule", "NoExecute"};
    for (size_t i = 0; i < tolerations->size(); ++i) {
      const Path ip = p.Index(i);
      const json& t = Object(&(*tolerations)[i], ip);
      const std::string key = String(t, "key", ip.Child("key"));
      const std::string op = String(t, "operator", ip.Child("operator"));
      const std::string value = String(t, "value", ip.Child("value"));
      const std::string effect = String(t, "effect", ip.Child("effect"));
      if (!key.empty()) LabelName(key, ip.Child("key"));
      if (key.empty() && op != "Exists") {
        Add(model::Invalid(ip.Child("operator").str(), Quote(op),
                           "operator must be Exists when `key` is empty, which means \"match all "
                           "values and all keys\""));
      }
      if (OptInt(t, "tolerationSeconds", ip.Child("tolerationSeconds")).has_value() &&
          effect != "NoExecute") {
        Add(model::Invalid(ip.Child("effect").str(), Quote(effect),
                           "effect must be 'NoExecute' when `tolerationSeconds` is set"));
      }
      if (op.empty() || op == "Equal") {
        if (auto msgs = model::IsLabelValue(value); !msgs.empty()) {
          Add(model::Invalid(ip.Child("operator").str(), Quote(value), absl::StrJoin(msgs, ";")));
        }
      } else if (op == "Exists") {
        if (!value.empty()) {
          Add(model::Invalid(ip.Child("operator").str(), t.dump(),
                             "value must be empty when `operator` is 'Exists'"));
        }
      } else {
        Add(model::NotSupported(ip.Child("operator").str(), Quote(op), {"Equal", "Exists"}));
      }
      if (!effect.empty() && !IsOneOf(effect, effects)) {
        Add(model::NotSupported(ip.Child("effect").str(), Quote(effect), effects));
      }
    }
  }

  // ValidatePodUpdate: only container images, activeDeadlineSeconds, additions to tolerations
  // and (here, standing in for the binding subresource) an unset nodeName may change.
  void PodSpecUpdate(const json& spec, const json& old_spec, const Path& p) {
    for (const char* key : {"containers", "initContainers"}) {
      const json* now = Get(spec, key);
      const json* before = Get(old_spec, key);
      const size_t n = now != nullptr && now->is_array() ? now->size() : 0;
      const size_t o = before != nullptr && before->is_array() ? before->size() : 0;
      if (n != o) {
        Add(model::Forbidden(
            p.Child(key).str(),
            std::string("pod updates may not add or remove ") +
                (std::string(key) == "containers" ? "containers" : "init containers")));
        return;
      }
      for (size_t i = 0; i < n; ++i) {
        const json* image = Get((*now)[i], "image");
        const Path ip = p.Child(key).Index(i).Child("image");
        if (image == nullptr || !image->is_string() || image->get<std::string>().empty()) {
          Add(model::Required(ip.str(), ""));
          continue;
        }
        const std::string text = image->get<std::string>();
        if (absl::StripAsciiWhitespace(text).size() != text.size()) {
          Add(model::Invalid(ip.str(), Quote(text),
                             "must not have leading or trailing whitespace"));
        }
      }
    }
    const Path ap = p.Child("activeDeadlineSeconds");
    const json* deadline = Get(spec, "activeDeadlineSeconds");
    const json* old_deadline = Get(old_spec, "activeDeadlineSeconds");
    if (deadline != nullptr && deadline->is_number_integer()) {
      if (old_deadline != nullptr && old_deadline->is_number_integer() &&
          old_deadline->get<int64_t>() < deadline->get<int64_t>()) {
        Add(model::Invalid(ap.str(), deadline->dump(),
                           "must be less than or equal to previous value"));
        return;
      }
    } else if (deadline == nullptr && old_deadline != nullptr) {
      Add(model::Invalid(ap.str(), "null", "must not update from a positive integer to nil value"));
    }
    // validateOnlyAddedTolerations: every old toleration is still there (its
    // tolerationSeconds may change).
    auto without_seconds = [](const json& t) {
      json out = json::object();
      for (const char* key : {"key", "operator", "value", "effect"}) {
        const json* v = Get(t, key);
        out[key] = v != nullptr && v->is_string() ? *v : json("");
      }
      return out;
    };
    const json* tolerations = Get(spec, "tolerations");
    if (const json* old_tolerations = Get(old_spec, "tolerations");
        old_tolerations != nullptr && old_tolerations->is_array()) {
      for (const json& old_t : *old_tolerations) {
        bool found = false;
        if (tolerations != nullptr && tolerations->is_array()) {
          for (const json& t : *tolerations) {
            if (without_seconds(t) == without_seconds(old_t)) found = true;
          }
        }
        if (!found) {
          Add(model::Forbidden(p.Child("tolerations").str(),
                               "existing toleration can not be modified except its "
                               "tolerationSeconds"));
          return;
        }
      }
    }
    // Everything else is compared with the updatable fields taken from the old spec.
    json munged = spec;
    for (const char* key : {"containers", "initContainers"}) {
      const json* before = Get(old_spec, key);
      if (before == nullptr || !munged.contains(key) || !munged[key].is_array()) continue;
      for (size_t i = 0; i < munged[key].size(); ++i) {
        const json* image = Get((*before)[i], "image");
        if (image != nullptr) {
          munged[key][i]["image"] = *image;
        } else if (munged[key][i].is_object()) {
          munged[key][i].erase("image");
        }
      }
    }
    for (const char* key : {"activeDeadlineSeconds", "tolerations", "schedulingGates"}) {
      if (const json* before = Get(old_spec, key)) {
        munged[key] = *before;
      } else {
        munged.erase(key);
      }
    }
    if (KeyString(old_spec, "nodeName").empty()) {
      if (const json* before = Get(old_spec, "nodeName")) {
        munged["nodeName"] = *before;
      } else {
        munged.erase("nodeName");
      }
    }
    if (munged == old_spec) return;
    std::string diff;
    std::set<std::string> keys;
    for (const auto& [k, v] : munged.items()) keys.insert(k);
    for (const auto& [k, v] : old_spec.items()) keys.insert(k);
    for (const std::string& k : keys) {
      const json* a = Get(old_spec, k);
      const json* b = Get(munged, k);
      if (SameValue(a, b)) continue;
      diff += "\n  spec." + k + ": " + (a ? a->dump() : "null") + " -> " + (b ? b->dump() : "null");
    }
    Add(model::Forbidden(
        p.str(),
        "pod updates may not change fields other than `spec.containers[*].image`,"
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
        "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
        "set to 1 if it was previously negative)" +
            diff));
  }

  void PodStatus(const json& status, const json& spec, const Path& p) {
    const Path php = p.Child("phase");
    const std::vector<std::string> phases = {"Pending", "Running", "Succeeded", "Failed",
                                             "Unknown"};
    if (auto phase = OptString(status, "phase", php); phase && !IsOneOf(*phase, phases)) {
      Add(model::NotSupported(php.str(), Quote(*phase), phases));
    }
    const Path cp = p.Child("conditions");
    if (const json* conditions = OptArray(status, "conditions", cp)) {
      for (size_t i = 0; i < conditions->size(); ++i) {
        const Path ip = cp.Index(i);
        const json& c = Object(&(*conditions)[i], ip);
        const std::string type = String(c, "type", ip.Child("type"));
        if (type.empty()) {
          Add(model::Required(ip.Child("type").str(), ""));
        } else {
          LabelName(type, ip.Child("type"));
        }
        const std::string st = String(c, "status", ip.Child("status"));
        if (!IsOneOf(st, {"True", "False", "Unknown"})) {
          Add(model::NotSupported(ip.Child("status").str(), Quote(st),
                                  {"True", "False", "Unknown"}));
        }
      }
    }
    if (auto nominated = OptString(status, "nominatedNodeName", p.Child("nominatedNodeName"));
        nominated && !nominated->empty()) {
      NodeName(*nominated, p.Child("nominatedNodeName"));
    }
    // validatePodResourceClaimStatuses.
    std::set<std::string> pod_claims;
    if (const json* claims = Get(spec, "resourceClaims"); claims && claims->is_array()) {
      for (const json& c : *claims) pod_claims.insert(KeyString(c, "name"));
    }
    const Path sp = p.Child("resourceClaimStatuses");
    const json* statuses = OptArray(status, "resourceClaimStatuses", sp);
    if (statuses == nullptr) return;
    std::set<std::string> seen;
    for (size_t i = 0; i < statuses->size(); ++i) {
      const Path ip = sp.Index(i);
      const json& s = Object(&(*statuses)[i], ip);
      const std::string name = String(s, "name", ip.Child("name"));
      if (pod_claims.count(name) == 0) {
        Add(model::Invalid(ip.Child("name").str(), Quote(name),
                           "must match the name of an entry in `spec.resourceClaims`"));
      }
      if (!seen.insert(name).second) Add(model::Duplicate(ip.Child("name").str(), Quote(name)));
      if (auto claim = OptString(s, "resourceClaimName", ip.Child("resourceClaimName"))) {
        for (const auto& msg : model::IsDns1123Subdomain(*claim)) {
          Add(model::Invalid(ip.Child("name").str(), Quote(*claim), msg));
        }
      }
    }
  }

  // ---- core Event --------------------------------------------------------------------------

  // legacyValidateEvent (core/v1 events).
  void Event(const json& ev) {
    const std::string ns = KeyString(ObjectOrEmpty(Get(ev, "metadata")), "namespace");
    const Path op("involvedObject");
    const json& involved = Object(Get(ev, "involvedObject"), op);
    const std::string involved_ns = String(involved, "namespace", op.Child("namespace"));
    for (const char* key : {"kind", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"}) {
      OptString(involved, key, op.Child(key));
    }
    for (const char* key :
         {"reason", "message", "type", "action", "reportingComponent", "reportingInstance"}) {
      OptString(ev, key, Path(key));
    }
    OptInt(ev, "count", Path("count"));
    const std::string event_time = String(ev, "eventTime", Path("eventTime"));
    if (event_time.empty()) {
      if (involved_ns.empty() ? (!ns.empty() && ns != "default") : ns != involved_ns) {
        Add(model::Invalid(op.Child("namespace").str(), Quote(involved_ns),
                           "does not match event.namespace"));
      }
    } else {
      if (involved_ns.empty() && ns != "default" && ns != "kube-system") {
        Add(model::Invalid(op.Child("namespace").str(), Quote(involved_ns),
                           "does not match event.namespace"));
      }
      const std::string controller = KeyString(ev, "reportingComponent");
      if (controller.empty()) {
        Add(model::Required("reportingComponent", ""));
      }
      for (const auto& msg : model::IsQualifiedName(controller)) {
        Add(model::Invalid("reportingComponent", Quote(controller), msg));
      }
      if (KeyString(ev, "reportingInstance").empty()) Add(model::Required("reportingInstance", ""));
      if (KeyString(ev, "action").empty()) Add(model::Required("action", ""));
      if (KeyString(ev, "reason").empty()) Add(model::Required("reason", ""));
    }
  }

  // ---- core ResourceQuota ------------------------------------------------------------------

  void ResourceQuotaSpec(const json& spec, const json* old_spec, const Path& p) {
    QuotaResources(spec, "hard", p.Child("hard"));
    const Path sp = p.Child("scopes");
    const std::vector<std::string> scopes = StringList(spec, "scopes", sp);
    for (const std::string& scope : scopes) {
      if (!IsOneOf(scope,
                   {"Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
                    "CrossNamespacePodAffinity", "VolumeAttributesClass"})) {
        Add(model::Invalid(sp.str(), Quote(scope), "unsupported scope"));
      }
    }
    if (old_spec != nullptr && !SameValue(Get(spec, "scopes"), Get(*old_spec, "scopes"))) {
      Add(model::Immutable(sp.str()));
    }
  }

  void QuotaResources(const json& holder, std::string_view key, const Path& p) {
    const json* resources = OptObject(holder, key, p);
    if (resources == nullptr) return;
    for (const auto& [name, value] : resources->items()) {
      const Path rp = p.Key(name);
      for (const auto& msg : model::IsQualifiedName(name)) {
        Add(model::Invalid(rp.str(), Quote(name), msg));
      }
      if (name.find('/') == std::string::npos && !IsStandardQuotaResource(name)) {
        Add(model::Invalid(rp.str(), Quote(name), "must be a standard resource for quota"));
      }
      ResourceQuantity(name, &value, rp);
    }
  }

  static bool IsStandardQuotaResource(const std::string& name) {
    static const auto* standard = new std::set<std::string>{"pods",
                                                            "services",
                                                            "replicationcontrollers",
                                                            "resourcequotas",
                                                            "secrets",
                                                            "configmaps",
                                                            "persistentvolumeclaims",
                                                            "services.nodeports",
                                                            "services.loadbalancers",
                                                            "cpu",
                                                            "memory",
                                                            "ephemeral-storage",
                                                            "requests.cpu",
                                                            "requests.memory",
                                                            "requests.storage",
                                                            "requests.ephemeral-storage",
                                                            "limits.cpu",
                                                            "limits.memory",
                                                            "limits.ephemeral-storage"};
    return standard->count(name) > 0 || absl::StartsWith(name, "hugepages-") ||
           absl::StartsWith(name, "requests.hugepages-");
  }

  void ResourceQuotaStatus(const json& status, const Path& p) {
    QuotaResources(status, "hard", p.Child("hard"));
    QuotaResources(status, "used", p.Child("used"));
  }

  // ---- core ServiceAccount, rbac.authorization.k8s.io ---------------------------------------
  // pkg/apis/rbac/validation: the checks and their order. A ServiceAccount has nothing beyond
  // its metadata to check (ValidateServiceAccount); its secret references are not resolved.

  // ValidateRole and ValidateClusterRole (without aggregationRule).
  void PolicyRules(const json& role, bool namespaced) {
    const Path p("rules");
    const json* rules = OptArray(role, "rules", p);
    if (rules == nullptr) return;
    for (size_t i = 0; i < rules->size(); ++i) {
      const Path rp = p.Index(i);
      PolicyRule(Object(&(*rules)[i], rp), namespaced, rp);
    }
  }

  void PolicyRule(const json& rule, bool namespaced, const Path& p) {
    const std::vector<std::string> verbs = StringList(rule, "verbs", p.Child("verbs"));
    const std::vector<std::string> urls =
        StringList(rule, "nonResourceURLs", p.Child("nonResourceURLs"));
    const std::vector<std::string> groups = StringList(rule, "apiGroups", p.Child("apiGroups"));
    const std::vector<std::string> resources = StringList(rule, "resources", p.Child("resources"));
    const std::vector<std::string> names =
        StringList(rule, "resourceNames", p.Child("resourceNames"));
    if (verbs.empty()) {
      Add(model::Required(p.Child("verbs").str(), "verbs must contain at least one value"));
    }
    if (!urls.empty()) {
      const Path up = p.Child("nonResourceURLs");
      if (namespaced) {
        Add(model::Invalid(up.str(), GoStringSlice(urls),
                           "namespaced rules cannot apply to non-resource URLs"));
      }
      if (!groups.empty() || !resources.empty() || !names.empty()) {
        Add(model::Invalid(up.str(), GoStringSlice(urls),
                           "rules cannot apply to both regular resources and non-resource URLs"));
      }
      return;
    }
    if (groups.empty()) {
      Add(model::Required(p.Child("apiGroups").str(),
                          "resource rules must supply at least one api group"));
    }
    if (resources.empty()) {
      Add(model::Required(p.Child("resources").str(),
                          "resource rules must supply at least one resource"));
    }
  }

  // ClusterRole.aggregationRule: stored as sent once its selectors are valid.
  void AggregationRule(const json& role) {
    const Path p("aggregationRule");
    const json* rule = Get(role, "aggregationRule");
    if (rule == nullptr) return;
    const Path sp = p.Child("clusterRoleSelectors");
    const json* selectors = OptArray(Object(rule, p), "clusterRoleSelectors", sp);
    if (selectors == nullptr || selectors->empty()) {
      Add(model::Required(sp.str(),
                          "at least one clusterRoleSelector required if aggregationRule is "
                          "non-nil"));
      return;
    }
    for (size_t i = 0; i < selectors->size(); ++i) {
      LabelSelector(Object(&(*selectors)[i], sp.Index(i)), sp.Index(i));
    }
  }

  // apimachinery's ValidateLabelSelector.
  void LabelSelector(const json& selector, const Path& p) {
    const Path lp = p.Child("matchLabels");
    if (const json* labels = OptObject(selector, "matchLabels", lp)) {
      for (const auto& [key, value] : labels->items()) {
        LabelName(key, lp);
        if (auto v = ItemString(value, lp.Key(key))) LabelValue(*v, lp);
      }
    }
    const Path ep = p.Child("matchExpressions");
    const json* exprs = OptArray(selector, "matchExpressions", ep);
    if (exprs == nullptr) return;
    for (size_t i = 0; i < exprs->size(); ++i) {
      const Path rp = ep.Index(i);
      const json& req = Object(&(*exprs)[i], rp);
      const std::string op = String(req, "operator", rp.Child("operator"));
      const std::vector<std::string> values = StringList(req, "values", rp.Child("values"));
      if (op == "In" || op == "NotIn") {
        if (values.empty()) {
          Add(model::Required(rp.Child("values").str(),
                              "must be specified when `operator` is 'In' or 'NotIn'"));
        }
      } else if (op == "Exists" || op == "DoesNotExist") {
        if (!values.empty()) {
          Add(model::Forbidden(
              rp.Child("values").str(),
              "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"));
        }
      } else {
        Add(model::Invalid(rp.Child("operator").str(), Quote(op), "not a valid selector operator"));
      }
      LabelName(String(req, "key", rp.Child("key")), rp.Child("key"));
      for (size_t j = 0; j < values.size(); ++j) {
        LabelValue(values[j], rp.Child("values").Index(j));
      }
    }
  }

  // ValidateRoleBinding / ValidateClusterRoleBinding, and on update the immutable roleRef.
  void Binding(const json& binding, const json* old, bool namespaced) {
    const Path rp("roleRef");
    const json& ref = Object(Get(binding, "roleRef"), rp);
    const std::string group = String(ref, "apiGroup", rp.Child("apiGroup"));
    const std::string kind = String(ref, "kind", rp.Child("kind"));
    const std::string name = String(ref, "name", rp.Child("name"));
    if (group != model::kRbacGroup) {
      Add(model::NotSupported(rp.Child("apiGroup").str(), Quote(group), {model::kRbacGroup}));
    }
    const std::vector<std::string> kinds = namespaced
                                               ? std::vector<std::string>{"Role", "ClusterRole"}
                                               : std::vector<std::string>{"ClusterRole"};
    if (!IsOneOf(kind, kinds)) Add(model::NotSupported(rp.Child("kind").str(), Quote(kind), kinds));
    if (name.empty()) {
      Add(model::Required(rp.Child("name").str()));
    } else {
      for (const auto& msg : IsPathSegmentName(name)) {
        Add(model::Invalid(rp.Child("name").str(), Quote(name), msg));
      }
    }
    const Path sp("subjects");
    if (const json* subjects = OptArray(binding, "subjects", sp)) {
      for (size_t i = 0; i < subjects->size(); ++i) {
        Subject(Object(&(*subjects)[i], sp.Index(i)), namespaced, sp.Index(i));
      }
    }
    if (old != nullptr && !SameValue(Get(binding, "roleRef"), Get(*old, "roleRef"))) {
      Add(model::Invalid(rp.str(), RoleRefValue(group, kind, name), "cannot change roleRef"));
    }
  }

  // The roleRef as Go prints the struct in the "cannot change roleRef" error.
  static std::string RoleRefValue(const std::string& group, const std::string& kind,
                                  const std::string& name) {
    return "rbac.RoleRef{APIGroup:" + Quote(group) + ", Kind:" + Quote(kind) +
           ", Name:" + Quote(name) + "}";
  }

  // ValidateRoleBindingSubject.
  void Subject(const json& subject, bool namespaced, const Path& p) {
    const std::string kind = String(subject, "kind", p.Child("kind"));
    const std::string group = String(subject, "apiGroup", p.Child("apiGroup"));
    const std::string name = String(subject, "name", p.Child("name"));
    const std::string ns = String(subject, "namespace", p.Child("namespace"));
    if (name.empty()) Add(model::Required(p.Child("name").str()));
    if (kind == "ServiceAccount") {
      if (!name.empty()) DnsSubdomain(name, p.Child("name"));
      if (!group.empty()) Add(model::NotSupported(p.Child("apiGroup").str(), Quote(group), {""}));
      if (!namespaced && ns.empty()) Add(model::Required(p.Child("namespace").str()));
    } else if (kind == "User" || kind == "Group") {
      if (group != model::kRbacGroup) {
        Add(model::NotSupported(p.Child("apiGroup").str(), Quote(group), {model::kRbacGroup}));
      }
    } else {
      Add(model::NotSupported(p.Child("kind").str(), Quote(kind),
                              {"ServiceAccount", "User", "Group"}));
    }
  }

  // ---- typed access ------------------------------------------------------------------------

  void Add(FieldError e) { errs_.push_back(std::move(e)); }

  void TypeError(const json& value, const Path& p, const char* type) {
    Add(model::Invalid(p.str(), Render(value), std::string("must be of type ") + type));
  }

  // `value` as an object; anything else is reported and read as an empty object.
  const json& Object(const json* value, const Path& p) {
    if (value == nullptr || value->is_null()) return EmptyObject();
    if (!value->is_object()) {
      TypeError(*value, p, "object");
      return EmptyObject();
    }
    return *value;
  }

  std::optional<std::string> OptString(const json& obj, std::string_view key, const Path& p) {
    const json* v = Get(obj, key);
    if (v == nullptr) return std::nullopt;
    return ItemString(*v, p);
  }

  std::string String(const json& obj, std::string_view key, const Path& p) {
    return OptString(obj, key, p).value_or("");
  }

  std::optional<std::string> ItemString(const json& v, const Path& p) {
    if (v.is_string()) return v.get<std::string>();
    TypeError(v, p, "string");
    return std::nullopt;
  }

  std::vector<std::string> StringItems(const json* list, const Path& p) {
    std::vector<std::string> out;
    if (list == nullptr) return out;
    for (size_t i = 0; i < list->size(); ++i) {
      if (auto s = ItemString((*list)[i], p.Index(i))) out.push_back(*s);
    }
    return out;
  }

  std::vector<std::string> StringList(const json& obj, std::string_view key, const Path& p) {
    return StringItems(OptArray(obj, key, p), p);
  }

  std::optional<int64_t> OptInt(const json& obj, std::string_view key, const Path& p) {
    const json* v = Get(obj, key);
    if (v == nullptr) return std::nullopt;
    if (v->is_number_integer() &&
        !(v->is_number_unsigned() &&
          v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
      return v->get<int64_t>();
    }
    TypeError(*v, p, "integer");
    return std::nullopt;
  }

  std::optional<bool> OptBool(const json& obj, std::string_view key, const Path& p) {
    const json* v = Get(obj, key);
    if (v == nullptr) return std::nullopt;
    if (v->is_boolean()) return v->get<bool>();
    TypeError(*v, p, "boolean");
    return std::nullopt;
  }

  const json* OptArray(const json& obj, std::string_view key, const Path& p) {
    const json* v = Get(obj, key);
    if (v == nullptr) return nullptr;
    if (v->is_array()) return v;
    TypeError(*v, p, "array");
    return nullptr;
  }

  const json* OptObject(const json& obj, std::string_view key, const Path& p) {
    const json* v = Get(obj, key);
    if (v == nullptr) return nullptr;
    if (v->is_object()) return v;
    TypeError(*v, p, "object");
    return nullptr;
  }

  // The array at obj[key]. Over `max` items it records one TooMany and returns nullptr: like
  // Kubernetes, the items of an oversized list are not looked at (DoS protection).
  const json* List(const json& obj, std::string_view key, const Path& p, size_t max) {
    const json* list = OptArray(obj, key, p);
    if (list != nullptr && list->size() > max) {
      Add(model::TooMany(p.str(), list->size(), max));
      return nullptr;
    }
    return list;
  }

  // Reports every repeated key (nullopt keys are skipped) as Kubernetes' validateSet does.
  void Unique(const std::vector<std::optional<std::string>>& keys, const Path& p,
              bool quote = true) {
    std::set<std::string> seen;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!keys[i].has_value()) continue;
      if (!seen.insert(*keys[i]).second) {
        Add(model::Duplicate(p.Index(i).str(), quote ? Quote(*keys[i]) : *keys[i]));
      }
    }
  }

  // A quantity given as a JSON string or number; parse errors are reported at `p`.
  std::optional<Quantity> QuantityAt(const json* value, const Path& p) {
    if (value == nullptr || value->is_null()) return std::nullopt;
    std::string text;
    if (value->is_string()) {
      text = value->get<std::string>();
    } else if (value->is_number()) {
      text = value->dump();
    } else {
      TypeError(*value, p, "quantity");
      return std::nullopt;
    }
    absl::StatusOr<Quantity> q = ParseQuantity(text);
    if (!q.ok()) {
      Add(model::Invalid(p.str(), Quote(text), std::string(q.status().message())));
      return std::nullopt;
    }
    return *q;
  }

  static bool IsOneOf(const std::string& v, const std::vector<std::string>& allowed) {
    return std::find(allowed.begin(), allowed.end(), v) != allowed.end();
  }

 private:
  FieldErrors errs_;
};

bool Deleting(const json& obj) {
  return Get(ObjectOrEmpty(Get(obj, "metadata")), "deletionTimestamp") != nullptr;
}

// The stored spec on update, nullptr on create.
const json* OldSpec(const json* old) {
  return old == nullptr ? nullptr : &ObjectOrEmpty(Get(*old, "spec"));
}

}  // namespace

model::FieldErrors ValidateObject(const model::ResourceType& type, const nlohmann::json& obj,
                                  const nlohmann::json* old) {
  Validator v;
  if (!obj.is_object()) {
    v.Add(model::Invalid("", "", "the object must be a JSON object"));
    return v.Take();
  }
  v.ObjectMeta(obj, type, old);
  const Path spec_path("spec");
  const json& spec = v.Object(Get(obj, "spec"), spec_path);
  const json* old_spec = OldSpec(old);
  if (type.kind == "DeviceClass") {
    v.DeviceClassSpec(spec, old_spec, spec_path);
  } else if (type.kind == "ResourceSlice") {
    v.ResourceSliceSpec(spec, old_spec, spec_path);
  } else if (type.kind == "ResourceClaim") {
    if (old_spec != nullptr) {
      // The spec never changes; what was stored was validated then.
      if (spec != *old_spec) v.Add(model::Immutable(spec_path.str()));
    } else {
      v.ResourceClaimSpec(spec, spec_path);
      // Status is written through /status; a status sent on create gets the same checks.
      if (const json* status = Get(obj, "status")) {
        const Path sp("status");
        v.ResourceClaimStatus(v.Object(status, sp), EmptyObject(), Deleting(obj),
                              RequestNames(ObjectOrEmpty(Get(spec, "devices"))), sp);
      }
    }
  } else if (type.kind == "ResourceClaimTemplate") {
    if (old_spec != nullptr) {
      if (spec != *old_spec) v.Add(model::Immutable(spec_path.str()));
    } else {
      const Path mp = spec_path.Child("metadata");
      v.TemplateObjectMeta(v.Object(Get(spec, "metadata"), mp), mp);
      const Path cp = spec_path.Child("spec");
      v.ResourceClaimSpec(v.Object(Get(spec, "spec"), cp), cp);
    }
  } else if (type.kind == "DeviceTaintRule") {
    v.DeviceTaintRuleSpec(spec, old_spec, spec_path);
    if (old == nullptr) {
      if (const json* status = Get(obj, "status")) {
        v.DeviceTaintRuleStatus(v.Object(status, Path("status")), Path("status"));
      }
    }
  } else if (type.kind == "Node") {
    v.NodeSpec(spec, spec_path);
  } else if (type.kind == "Pod") {
    const json& meta = ObjectOrEmpty(Get(obj, "metadata"));
    v.PodSpec(spec, meta, spec_path);
    if (old_spec != nullptr) {
      v.PodSpecUpdate(spec, *old_spec, spec_path);
    } else if (const json* status = Get(obj, "status")) {
      // Status is written through /status; a status sent on create gets the same checks.
      v.PodStatus(v.Object(status, Path("status")), spec, Path("status"));
    }
  } else if (type.kind == "ResourceQuota") {
    v.ResourceQuotaSpec(spec, old_spec, spec_path);
  }
  if (type.group == model::kRbacGroup) {
    if (type.kind == "Role" || type.kind == "ClusterRole") {
      v.PolicyRules(obj, type.namespaced);
      if (type.kind == "ClusterRole") v.AggregationRule(obj);
    } else {
      v.Binding(obj, old, type.namespaced);
    }
  }
  if (type.group.empty() && type.kind == "Event") v.Event(obj);
  return v.Take();
}

model::FieldErrors ValidateStatusUpdate(const model::ResourceType& type, const nlohmann::json& obj,
                                        const nlohmann::json& old) {
  Validator v;
  if (!obj.is_object()) {
    v.Add(model::Invalid("", "", "the object must be a JSON object"));
    return v.Take();
  }
  v.ObjectMetaUpdate(v.Object(Get(obj, "metadata"), Path("metadata")), old);
  const Path sp("status");
  const json& status = v.Object(Get(obj, "status"), sp);
  if (type.kind == "ResourceClaim") {
    // The spec cannot change, so the stored one names the requests results may refer to.
    const json& old_spec = ObjectOrEmpty(Get(old, "spec"));
    const RequestNames names(ObjectOrEmpty(Get(old_spec, "devices")));
    v.ResourceClaimStatus(status, ObjectOrEmpty(Get(old, "status")), Deleting(obj) || Deleting(old),
                          names, sp);
  } else if (type.kind == "DeviceTaintRule") {
    v.DeviceTaintRuleStatus(status, sp);
  } else if (type.kind == "Pod") {
    v.PodStatus(status, ObjectOrEmpty(Get(old, "spec")), sp);
  } else if (type.kind == "ResourceQuota") {
    v.ResourceQuotaStatus(status, sp);
  }
  return v.Take();
}

}  // namespace qm::api
