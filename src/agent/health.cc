#include "agent/health.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace qm::agent {
namespace {

// What the XIDs the agent is most likely to see mean (NVIDIA's XID catalogue), for messages.
std::string XidMeaning(uint64_t xid) {
  switch (xid) {
    case 48:
      return "double-bit ECC error";
    case 62:
      return "internal micro-controller halt";
    case 63:
      return "ECC page retirement or row remapping recording event";
    case 64:
      return "ECC page retirement or row remapping recording failure";
    case 74:
      return "NVLink error";
    case 79:
      return "GPU has fallen off the bus";
    case 92:
      return "high single-bit ECC error rate";
    case 94:
      return "contained ECC error";
    case 95:
      return "uncontained ECC error";
    case 119:
    case 120:
      return "GSP error";
    default:
      return "";
  }
}

}  // namespace

std::set<uint64_t> DefaultIgnoredXids() { return {13, 31, 43, 45, 68, 109}; }

absl::StatusOr<std::set<uint64_t>> ParseXidList(const std::string& text) {
  std::set<uint64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    uint64_t xid = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &xid)) {
      return absl::InvalidArgumentError("not an XID: \"" + std::string(part) + "\"");
    }
    out.insert(xid);
  }
  return out;
}

std::optional<HealthChange> ClassifyEvent(const DeviceEvent& event, const Inventory& inventory,
                                          const std::set<uint64_t>& ignored_xids) {
  HealthChange change;
  if (event.type & kEventXidCriticalError) {
    if (ignored_xids.contains(event.data)) return std::nullopt;
    change.reason = "XidCriticalError";
    change.message = "XID " + std::to_string(event.data) + " on " + event.gpu_uuid;
    if (std::string meaning = XidMeaning(event.data); !meaning.empty()) {
      change.message += ": " + meaning;
    }
  } else if (event.type & kEventDoubleBitEccError) {
    change.reason = "DoubleBitEccError";
    change.message = "double-bit ECC error on " + event.gpu_uuid;
  } else {
    return std::nullopt;  // corrected ECC errors and anything else: nothing to do
  }
  // The published devices of that GPU: the whole GPU, or its MIG devices. An event with GPU and
  // compute instance ids concerns only that MIG device (as in NVIDIA's device plugin); one
  // without concerns every MIG device of the GPU.
  for (const auto& d : inventory.devices) {
    auto local = inventory.local.find(d.name);
    if (local == inventory.local.end()) continue;
    const LocalDevice& l = local->second;
    if (l.parent_uuid.empty()) {
      if (l.uuid == event.gpu_uuid) change.devices.push_back(d.name);
      continue;
    }
    if (l.parent_uuid != event.gpu_uuid) continue;
    // A MIG placement without an instance (dynamic MIG strategy) is no MIG device an event with
    // instance ids can be about.
    if (event.gpu_instance_id >= 0 && l.mig_placement && l.gpu_instance_id < 0) continue;
    if (event.gpu_instance_id >= 0 && l.gpu_instance_id >= 0 &&
        event.gpu_instance_id != l.gpu_instance_id) {
      continue;
    }
    if (event.compute_instance_id >= 0 && l.compute_instance_id >= 0 &&
        event.compute_instance_id != l.compute_instance_id) {
      continue;
    }
    change.devices.push_back(d.name);
  }
  if (change.devices.empty()) return std::nullopt;
  return change;
}

}  // namespace qm::agent
