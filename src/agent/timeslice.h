#pragma once

// The GPU side of a TimeSlicing sharing config, as NVIDIA's DRA driver applies it when it
// prepares a claim: the GPU goes to the default compute mode (`nvidia-smi -i <uuid> -c DEFAULT`:
// several processes may use it, which time slicing needs), then its compute time slice is set
// (`nvidia-smi compute-policy -i <uuid> --set-timeslice <n>`: Default 0, Short 1, Medium 2,
// Long 3). Whole GPUs only: nvidia-smi sets no time slice for a MIG device. The setting is the
// GPU's, so claims sharing a GPU with different intervals end with the last one prepared.

#include <chrono>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace qm::agent {

inline constexpr char kDefaultNvidiaSmi[] = "nvidia-smi";

// The value `nvidia-smi compute-policy --set-timeslice` takes for an interval name; -1 for a
// name that is not Default, Short, Medium or Long.
int TimeSliceValue(const std::string& interval);

class TimeSlicer {
 public:
  // `binary`: nvidia-smi, a path or a name looked up on PATH. Its output goes to `output_path`
  // (appended; the end of it is quoted in errors).
  TimeSlicer(std::string binary, std::string output_path,
             std::chrono::milliseconds timeout = std::chrono::seconds(30))
      : binary_(std::move(binary)), output_path_(std::move(output_path)), timeout_(timeout) {}

  // Sets GPU `uuid` to the default compute mode and the time slice `interval`.
  // FailedPrecondition when nvidia-smi cannot be run; Internal when it refuses (its words).
  absl::Status Apply(const std::string& uuid, const std::string& interval) const;

  const std::string& binary() const { return binary_; }

 private:
  const std::string binary_;
  const std::string output_path_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace qm::agent
