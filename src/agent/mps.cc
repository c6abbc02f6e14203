#include "agent/mps.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_join.h"

extern char** environ;

namespace qm::agent {
namespace {

std::string Tail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.size() > 512 ? text.substr(text.size() - 512) : text;
}

}  // namespace

absl::Status MpsControl::Run(const std::vector<std::string>& args, const MpsDaemonSpec& spec,
                             const std::string& input) const {
  const std::string out_path = spec.log_dir + "/control.out";
  // The environment of the agent, with the MPS variables of this claim.
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string v = *e;
    if (v.rfind("CUDA_MPS_PIPE_DIRECTORY=", 0) == 0 || v.rfind("CUDA_MPS_LOG_DIRECTORY=", 0) == 0 ||
        v.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0) {
      continue;
    }
    env.push_back(std::move(v));
  }
  env.push_back("CUDA_MPS_PIPE_DIRECTORY=" + spec.pipe_dir);
  env.push_back("CUDA_MPS_LOG_DIRECTORY=" + spec.log_dir);
  if (!spec.visible_devices.empty()) {
    env.push_back("CUDA_VISIBLE_DEVICES=" + absl::StrJoin(spec.visible_devices, ","));
  }
  std::vector<char*> envp, argv;
  for (auto& v : env) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::vector<std::string> all = {binary_};
  all.insert(all.end(), args.begin(), args.end());
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);

  int in_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // The agent blocks SIGINT/SIGTERM for its signal thread: the daemon must not inherit that.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all_signals;
  sigemptyset(&none);
  sigfillset(&all_signals);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all_signals);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, binary_.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(in_pipe[0]);
  if (rc != 0) {
    close(in_pipe[1]);
    return absl::FailedPreconditionError("cannot run the MPS control binary " + binary_ + ": " +
                                         std::strerror(rc) +
                                         " (is the NVIDIA driver's MPS installed? "
                                         "--mps-control-binary PATH names it)");
  }
  // A few short lines: they fit the pipe's buffer, so writing cannot block.
  if (!input.empty() && write(in_pipe[1], input.data(), input.size()) < 0) {
    // The binary exited without reading: its status says why.
  }
  close(in_pipe[1]);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (true) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      return absl::InternalError(std::string("waitpid: ") + std::strerror(errno));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return absl::InternalError(binary_ + " " + absl::StrJoin(args, " ") + " (" + input +
                                 ") did not finish within " + std::to_string(timeout_.count()) +
                                 " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  std::string what = input.empty() ? absl::StrJoin(args, " ") : input;
  while (!what.empty() && what.back() == '\n') what.pop_back();
  const std::string how = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                            : "signal " + std::to_string(WTERMSIG(status));
  return absl::InternalError(binary_ + " (" + what + ") failed with " + how + ": " +
                             Tail(out_path));
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
