#pragma once

// The DRA environment for device selectors (Kubernetes dynamic-resource-allocation cel/compile.go):
// the `device` variable built from one device of a ResourceSlice, and Matches(), which evaluates a
// selector against it and requires a bool result.
//
// The `device` value:
//   device.driver                    string
//   device.attributes[domain][id]    int, bool, string, Semver (version attributes), or a list of
//                                    one of those
//   device.capacity[domain][id]      Quantity
//   device.allowMultipleAllocations  bool
// Attribute and capacity names without a domain ("productName") are placed under the driver's
// name as domain; qualified names ("gpu.nvidia.com/productName") are split at the first '/'.
// An unknown domain is an empty map (`"x" in device.attributes["nope"]` is false), while an
// unknown id inside a domain is the runtime error "no such key: <id>".

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "cel/ast.h"
#include "cel/interpreter.h"
#include "cel/value.h"
#include "common/quantity.h"

namespace qm::cel {

// A `version` attribute's text (semantic version 2.0.0, e.g. "8.0.0").
struct VersionString {
  std::string value;
};

// One attribute value as a ResourceSlice carries it. std::monostate is an attribute with no value
// set, which (like an empty list) makes every evaluation against the device fail.
using AttributeValue =
    std::variant<std::monostate, int64_t, bool, std::string, VersionString, std::vector<int64_t>,
                 std::vector<bool>, std::vector<std::string>, std::vector<VersionString>>;

struct DeviceInput {
  std::string driver;
  // Keys as in the slice: "productName" or "gpu.nvidia.com/productName".
  std::map<std::string, AttributeValue> attributes;
  std::map<std::string, Quantity> capacity;
  bool allow_multiple_allocations = false;
};

// The hint Kubernetes appends to "no such key" errors (dra/cel/errors.go).
inline constexpr std::string_view kNoSuchKeyHint =
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with "
    "has() for optional fields";

// Builds the `device` value. Errors (InvalidArgument): "attribute <name>: unsupported attribute
// value" for an attribute without a value or with an empty list, and
// "attribute <name>: invalid semantic version \"<text>\"" for a version that does not parse.
absl::StatusOr<Value> BuildDeviceValue(const DeviceInput& device);

// Builds the `device` values of many devices (an inventory's), sharing what they have in
// common: every attribute and capacity value, name and domain is made once, devices whose
// attributes (or capacity) of one domain are equal share that map, and devices equal in all but
// their name share one value. A fleet of identical GPUs then holds one copy of
// "NVIDIA A100-SXM4-80GB" instead of one per GPU. The values are the same
// as BuildDeviceValue's. Not thread-safe; keep it only as long as the batch (what it keeps grows
// with the distinct values seen).
class DeviceValueBuilder {
 public:
  DeviceValueBuilder();
  ~DeviceValueBuilder();
  DeviceValueBuilder(const DeviceValueBuilder&) = delete;
  DeviceValueBuilder& operator=(const DeviceValueBuilder&) = delete;

  // As BuildDeviceValue, with the same errors.
  absl::StatusOr<Value> Build(const DeviceInput& device);

 private:
  struct Shared;
  std::unique_ptr<Shared> shared_;
};

// Evaluates a selector against a device: true or false when the expression yields a bool.
// Errors (InvalidArgument) carry the runtime error text; "no such key" errors get kNoSuchKeyHint
// appended; a non-bool result is "CEL result of type <type> could not be converted to bool";
// building the device value may fail first (see BuildDeviceValue). Thread-safe.
absl::StatusOr<bool> Matches(const Ast& ast, const DeviceInput& device,
                             uint64_t cost_limit = 1'000'000, RegexCache* regex_cache = nullptr);

// As above, with a `device` value built once by BuildDeviceValue (for evaluating many selectors
// against one device).
// `constants`, when given, must be the ConstantTable of `ast`.
absl::StatusOr<bool> MatchesValue(const Ast& ast, const Value& device, uint64_t cost_limit,
                                  RegexCache* regex_cache = nullptr,
                                  const ConstantTable* constants = nullptr);

}  // namespace qm::cel
