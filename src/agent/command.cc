#include "agent/command.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_join.h"

extern char** environ;

namespace qm::agent {

std::vector<std::string> EnvironmentWith(const std::vector<std::string>& drop,
                                         const std::vector<std::string>& add) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string v = *e;
    bool dropped = false;
    for (const auto& name : drop) dropped |= v.rfind(name + "=", 0) == 0;
    if (!dropped) env.push_back(std::move(v));
  }
  env.insert(env.end(), add.begin(), add.end());
  return env;
}

std::string TailOf(const std::string& path, size_t max) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.size() > max ? text.substr(text.size() - max) : text;
}

absl::Status RunCommand(const Command& command) {
  std::vector<std::string> env = command.env;
  std::vector<char*> envp, argv;
  for (auto& v : env) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::vector<std::string> all = {command.binary};
  all.insert(all.end(), command.args.begin(), command.args.end());
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);

  int in_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_addopen(&actions, 1, command.output_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // The agent blocks SIGINT/SIGTERM for its signal thread: the child must not inherit that.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all_signals;
  sigemptyset(&none);
  sigfillset(&all_signals);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all_signals);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int rc =
      posix_spawnp(&pid, command.binary.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(in_pipe[0]);
  if (rc != 0) {
    close(in_pipe[1]);
    return absl::FailedPreconditionError("cannot run " + command.binary + ": " + std::strerror(rc));
  }
  // A few short lines: they fit the pipe's buffer, so writing cannot block.
  if (!command.input.empty() && write(in_pipe[1], command.input.data(), command.input.size()) < 0) {
    // The binary exited without reading: its status says why.
  }
  close(in_pipe[1]);
  const std::string what = command.input.empty() ? absl::StrJoin(command.args, " ") : [&] {
    std::string text = command.input;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }();
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + command.timeout;
  while (true) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      return absl::InternalError(std::string("waitpid: ") + std::strerror(errno));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return absl::InternalError(command.binary + " (" + what + ") did not finish within " +
                                 std::to_string(command.timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  const std::string how = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                            : "signal " + std::to_string(WTERMSIG(status));
  return absl::InternalError(command.binary + " (" + what + ") failed with " + how + ": " +
                             TailOf(command.output_path));
}

}  // namespace qm::agent
