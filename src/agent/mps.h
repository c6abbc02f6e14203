#pragma once

// MPS control daemons, one per claim with an MPS sharing config, as NVIDIA's DRA driver runs
// them: `nvidia-cuda-mps-control -d` with CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY of
// the claim's own and CUDA_VISIBLE_DEVICES set to the claim's GPUs (or MIG devices), then the
// claim's defaults through the control interface (`set_default_active_thread_percentage N`,
// `set_default_device_pinned_mem_limit <uuid> <MiB>M`, one command per run of the binary, on its
// standard input), and `quit` to stop it. The daemon detaches from the agent, so it keeps
// serving the claim's workloads while the agent restarts.
//
// The binary's output (and the daemon's start) is written to `<log dir>/control.out`; a command
// that runs longer than the timeout is killed and is an error.

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace qm::agent {

inline constexpr char kDefaultMpsControlBinary[] = "nvidia-cuda-mps-control";

struct MpsDaemonSpec {
  std::string pipe_dir;                      // CUDA_MPS_PIPE_DIRECTORY (created)
  std::string log_dir;                       // CUDA_MPS_LOG_DIRECTORY (created)
  std::vector<std::string> visible_devices;  // CUDA_VISIBLE_DEVICES: GPU or MIG UUIDs
  std::optional<int> active_thread_percentage;
  // Per device UUID, the pinned memory limit in the control interface's form ("8192M").
  std::vector<std::pair<std::string, std::string>> pinned_memory_limits;
};

class MpsControl {
 public:
  // `binary`: a path, or a name looked up on PATH.
  explicit MpsControl(std::string binary,
                      std::chrono::milliseconds timeout = std::chrono::seconds(15))
      : binary_(std::move(binary)), timeout_(timeout) {}

  // Starts the daemon and applies the defaults. FailedPrecondition naming the binary when it
  // cannot be found or run; Internal with the exit status and output when the daemon does not
  // start or refuses a setting (the daemon is stopped again then).
  absl::Status Start(const MpsDaemonSpec& spec) const;

  // Tells the daemon serving `pipe_dir` to quit. OK when none serves it (no control pipe there).
  absl::Status Stop(const std::string& pipe_dir, const std::string& log_dir) const;

  const std::string& binary() const { return binary_; }

 private:
  // Runs the binary with `args`, the MPS environment and `input` on standard input.
  absl::Status Run(const std::vector<std::string>& args, const MpsDaemonSpec& spec,
                   const std::string& input) const;

  const std::string binary_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace qm::agent
