#include "common/process.h"

#include <pthread.h>

#include "absl/synchronization/mutex.h"

namespace qm {

sigset_t PrepareProcess() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return signals;
}

}  // namespace qm
