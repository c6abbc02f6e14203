#pragma once

// Runs the NVIDIA tools the agent drives (nvidia-cuda-mps-control, nvidia-smi) as child
// processes: with the environment given, input on standard input, standard output and error
// appended to a file, the signals the agent blocks for its signal thread unblocked again, and a
// deadline after which the child is killed.

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace qm::agent {

struct Command {
  std::string binary;             // a path, or a name looked up on PATH
  std::vector<std::string> args;  // without the binary
  std::vector<std::string> env;   // "NAME=value", the child's whole environment
  std::string input;              // written to its standard input (a few lines at most)
  std::string output_path;        // standard output and error are appended here (mode 0600)
  std::chrono::milliseconds timeout{15000};
};

// The agent's own environment without the variables named in `drop`, plus `add`.
std::vector<std::string> EnvironmentWith(const std::vector<std::string>& drop,
                                         const std::vector<std::string>& add);

// Runs `command` and waits for it. OK when it exits with status 0. FailedPrecondition when the
// binary cannot be run (the message names it and the reason); Internal when it exits otherwise
// (with its exit status or signal and the end of its output) or runs past the timeout (killed).
absl::Status RunCommand(const Command& command);

// The last `max` bytes of the file at `path`, trailing blanks removed ("" when unreadable).
std::string TailOf(const std::string& path, size_t max = 512);

}  // namespace qm::agent
