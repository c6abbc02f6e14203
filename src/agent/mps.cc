#include "agent/mps.h"

#include <filesystem>

#include "absl/strings/str_join.h"
#include "agent/command.h"

namespace qm::agent {

absl::Status MpsControl::Run(const std::vector<std::string>& args, const MpsDaemonSpec& spec,
                             const std::string& input) const {
  // The environment of the agent, with the MPS variables of this claim.
  std::vector<std::string> mps_env = {"CUDA_MPS_PIPE_DIRECTORY=" + spec.pipe_dir,
                                      "CUDA_MPS_LOG_DIRECTORY=" + spec.log_dir};
  if (!spec.visible_devices.empty()) {
    mps_env.push_back("CUDA_VISIBLE_DEVICES=" + absl::StrJoin(spec.visible_devices, ","));
  }
  Command command;
  command.binary = binary_;
  command.args = args;
  command.env = EnvironmentWith(
      {"CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY", "CUDA_VISIBLE_DEVICES"}, mps_env);
  command.input = input;
  command.output_path = spec.log_dir + "/control.out";
  command.timeout = timeout_;
  absl::Status st = RunCommand(command);
  if (absl::IsFailedPrecondition(st)) {
    return absl::FailedPreconditionError(
        "cannot run the MPS control binary " + binary_ + ": " +
        std::string(st.message()).substr(std::string("cannot run " + binary_ + ": ").size()) +
        " (is the NVIDIA driver's MPS installed? --mps-control-binary PATH names it)");
  }
  return st;
}

absl::Status MpsControl::Start(const MpsDaemonSpec& spec) const {
  for (const auto* dir : {&spec.pipe_dir, &spec.log_dir}) {
    std::error_code ec;
    std::filesystem::create_directories(*dir, ec);
    if (ec) return absl::FailedPreconditionError("cannot create " + *dir + ": " + ec.message());
  }
  if (absl::Status st = Run({"-d"}, spec, ""); !st.ok()) return st;
  std::vector<std::string> commands;
  if (spec.active_thread_percentage) {
    commands.push_back("set_default_active_thread_percentage " +
                       std::to_string(*spec.active_thread_percentage));
  }
  for (const auto& [uuid, limit] : spec.pinned_memory_limits) {
    commands.push_back("set_default_device_pinned_mem_limit " + uuid + " " + limit);
  }
  for (const auto& command : commands) {
    if (absl::Status st = Run({}, spec, command + "\n"); !st.ok()) {
      (void)Stop(spec.pipe_dir, spec.log_dir);
      return st;
    }
  }
  return absl::OkStatus();
}

absl::Status MpsControl::Stop(const std::string& pipe_dir, const std::string& log_dir) const {
  std::error_code ec;
  if (!std::filesystem::exists(pipe_dir + "/control", ec)) return absl::OkStatus();
  MpsDaemonSpec spec;
  spec.pipe_dir = pipe_dir;
  spec.log_dir = log_dir;
  std::filesystem::create_directories(log_dir, ec);
  return Run({}, spec, "quit\n");
}

}  // namespace qm::agent
