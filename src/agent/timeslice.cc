#include "agent/timeslice.h"

#include "agent/command.h"

namespace qm::agent {

int TimeSliceValue(const std::string& interval) {
  if (interval == "Default") return 0;
  if (interval == "Short") return 1;
  if (interval == "Medium") return 2;
  if (interval == "Long") return 3;
  return -1;
}

absl::Status TimeSlicer::Apply(const std::string& uuid, const std::string& interval) const {
  const int value = TimeSliceValue(interval);
  if (value < 0) {
    return absl::InvalidArgumentError("time slice interval \"" + interval +
                                      "\": want Default, Short, Medium or Long");
  }
  Command command;
  command.binary = binary_;
  command.env = EnvironmentWith({}, {});
  command.output_path = output_path_;
  command.timeout = timeout_;
  command.args = {"-i", uuid, "-c", "DEFAULT"};
  absl::Status st = RunCommand(command);
  if (st.ok()) {
    command.args = {"compute-policy", "-i", uuid, "--set-timeslice", std::to_string(value)};
    st = RunCommand(command);
  }
  if (absl::IsFailedPrecondition(st)) {
    return absl::FailedPreconditionError(
        std::string(st.message()) + " (time slicing needs nvidia-smi; --nvidia-smi PATH names it)");
  }
  return st;
}

}  // namespace qm::agent
