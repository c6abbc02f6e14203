#pragma once

// The device-match preview behind DeviceMatchReview (admin.quartermaster.io/v1alpha1, see
// api/rest/admin_api.h): which devices of the current inventory a DeviceClass and/or extra CEL
// selectors match, which of those are allocated now, and the problems in the selectors with
// their positions. Read-only: it reads the object cache and an allocator::Inventory built as the
// scheduler builds its own (kept by an InventoryCache between requests), so the preview and the
// allocator agree on what a selector matches.

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/dra.h"
#include "service/inventory_cache.h"
#include "service/object_service.h"

namespace qm::service {

struct DeviceMatchRequest {
  std::string class_name;              // empty: no class, only `selectors`
  std::vector<std::string> selectors;  // CEL, ANDed with each other and the class's selectors
  size_t limit = 500;                  // devices listed at most; all matches are counted
};

// One problem with the request. Problems in `selectors` carry the position they point at.
struct DeviceMatchIssue {
  std::string field;    // "spec.selectors[1].cel.expression", "spec.className"
  std::string message;  // one problem, without its position
  // 1-based line and column (code points) and the byte offset in the expression; line 0 when the
  // problem has no position (result type, cost limit, a missing class).
  int line = 0;
  int column = 0;
  size_t offset = 0;
};

struct MatchedDevice {
  std::string node_name;  // empty when the device is not bound to one node
  bool all_nodes = false;
  std::string driver;
  std::string pool;
  std::string name;
  std::map<std::string, model::AttributeValue> attributes;
  std::map<std::string, model::DeviceCapacity> capacity;
  std::vector<model::DeviceTaint> taints;
  std::vector<std::string> allocated_to;  // "namespace/name" of the claims that hold it now
};

struct DeviceMatchResult {
  std::vector<MatchedDevice> devices;  // inventory order (pool, slice, device), at most `limit`
  size_t matched = 0;                  // every match, listed or not
  size_t allocated = 0;                // matches allocated to at least one claim
  size_t nodes = 0;                    // distinct nodes of the matches
  // Selectors that failed to compile, a missing class or broken class selectors. When present,
  // no device is matched.
  std::vector<DeviceMatchIssue> issues;
  // Devices whose evaluation failed at run time ("driver/pool/device: message"), at most 20; the
  // allocator treats such a device as an error for the class, never as a match.
  std::vector<std::string> evaluation_errors;
};

// Checks each selector (syntax, types, result type, cost) and, when all compile and the class
// exists, evaluates class and selectors against the newest generation of every valid pool.
// Errors only when the object cache cannot be read.
absl::StatusOr<DeviceMatchResult> PreviewDeviceMatches(ObjectService& objects,
                                                       InventoryCache& inventories,
                                                       const DeviceMatchRequest& request);

}  // namespace qm::service
