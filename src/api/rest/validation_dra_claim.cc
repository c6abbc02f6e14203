#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <arpa/inet.h>

#include "absl/strings/ascii.h"
#include "api/rest/validation_dra.h"
#include "api/rest/validation_limits.h"
#include "api/rest/validator.h"
#include "model/field_error.h"

// ResourceClaim and ResourceClaimTemplate (pkg/apis/resource/validation): the requests,
// constraints and configuration of a claim's spec, and its status (reservations, the allocation,
// per-device status).
namespace qm::api::validation {
namespace {

using model::FieldErrors;
using model::Quote;

constexpr size_t kMaxRequests = 32;
constexpr size_t kMaxFirstAvailable = 8;
constexpr size_t kMaxConstraints = 32;
constexpr size_t kMaxAllocationConfigs = 2 * kMaxConfigs;
constexpr size_t kMaxReservedFor = 256;
constexpr size_t kMaxDeviceStatusConditions = 8;
constexpr size_t kDeviceStatusDataMaxLength = 10 * 1024;
constexpr size_t kMaxNetworkIps = 16;
constexpr size_t kInterfaceNameMaxLength = 256;
constexpr size_t kHardwareAddressMaxLength = 128;

constexpr char kRequestRefMsg[] =
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'";
constexpr char kConstraintOneOfMsg[] =
    "exactly one of \"matchAttribute\" or \"distinctAttribute\" is required, but multiple fields "
    "are set";
constexpr char kExactlyOrFirstAvailableMsg[] =
    "exactly one of `exactly` or `firstAvailable` is required";

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

// Whether metadata.deletionTimestamp is set.
bool Deleting(const json& obj) {
  return Get(ObjectOrEmpty(Get(obj, "metadata")), "deletionTimestamp") != nullptr;
}

class ResourceClaimValidator : public DraValidator {
 public:
  using DraValidator::DraValidator;

  // ---- names and request references --------------------------------------------------------

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

  // ---- spec --------------------------------------------------------------------------------

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

  // ---- status ------------------------------------------------------------------------------

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
    if (const json* results = List(devices, "results", dp.Child("results"),
                                   CurrentValidationLimits().max_results_per_claim)) {
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
};

}  // namespace

void ResourceClaimRules(const ObjectInput& in, FieldErrors& errs) {
  ResourceClaimValidator v(errs);
  const Path spec_path("spec");
  if (in.old_spec != nullptr) {
    // The spec never changes; what was stored was validated then.
    if (in.spec != *in.old_spec) v.Add(model::Immutable(spec_path.str()));
    return;
  }
  v.ResourceClaimSpec(in.spec, spec_path);
  // Status is written through /status; a status sent on create gets the same checks.
  if (const json* status = Get(in.obj, "status")) {
    const Path sp("status");
    v.ResourceClaimStatus(v.Object(status, sp), EmptyObject(), Deleting(in.obj),
                          RequestNames(ObjectOrEmpty(Get(in.spec, "devices"))), sp);
  }
}

void ResourceClaimStatusRules(const StatusInput& in, FieldErrors& errs) {
  // The spec cannot change, so the stored one names the requests results may refer to.
  const json& old_spec = ObjectOrEmpty(Get(in.old, "spec"));
  const RequestNames names(ObjectOrEmpty(Get(old_spec, "devices")));
  ResourceClaimValidator(errs).ResourceClaimStatus(in.status, ObjectOrEmpty(Get(in.old, "status")),
                                                   Deleting(in.obj) || Deleting(in.old), names,
                                                   Path("status"));
}

void ResourceClaimTemplateRules(const ObjectInput& in, FieldErrors& errs) {
  ResourceClaimValidator v(errs);
  const Path spec_path("spec");
  if (in.old_spec != nullptr) {
    if (in.spec != *in.old_spec) v.Add(model::Immutable(spec_path.str()));
    return;
  }
  const Path mp = spec_path.Child("metadata");
  v.TemplateObjectMeta(v.Object(Get(in.spec, "metadata"), mp), mp);
  const Path cp = spec_path.Child("spec");
  v.ResourceClaimSpec(v.Object(Get(in.spec, "spec"), cp), cp);
}

}  // namespace qm::api::validation
