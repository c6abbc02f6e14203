#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace qm {

// Locking with clang's thread-safety analysis (docs/README.md, "Locking"): shared state is
// declared ABSL_GUARDED_BY(mu_) next to a qm::Mutex, functions that expect the lock held are
// ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) (and named ...Locked), and the thread_safety test
// (tests/lint/thread_safety.sh) compiles src/ and server/ with -Wthread-safety -Werror.
//
// These are std::mutex and std::condition_variable with the capability annotations that clang
// checks, and nothing more. absl::Mutex carries the same annotations, but the abseil Debian 12
// ships (20220623) is built without NDEBUG: every qm::Mutex acquisition goes through its
// deadlock detector (about 4x the cost of std::mutex, under a process-wide graph lock) and the
// process aborts the first time two mutexes have been taken in both orders; and absl::CondVar
// times its waits against the realtime clock, so stepping the wall clock back stretches a
// heartbeat or a resync period by as much.

// An exclusive lock (std::mutex). Prefer MutexLock to Lock/Unlock.
class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // True when the lock was free and is now held.
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds *mu for its scope. The analysis follows an explicit mu->Unlock() and mu->Lock() inside
// the scope (to call out without the lock), as long as the lock is held again at its end; an
// exception thrown in between would unlock twice, so do that only where none can come, or where
// one ends the thread anyway (a thread's own loop). clang 14 cannot check a scoped unlock.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable (std::condition_variable: timed waits run on the steady clock). Every
// wait requires the mutex held and returns with it held. Waits may wake spuriously: wait in a
// loop over the condition, which the analysis then checks like any other access, as in
//
//   qm::MutexLock lock(&mu_);
//   const auto deadline = std::chrono::steady_clock::now() + timeout;
//   while (!done_ && changed_.WaitUntil(&mu_, deadline)) {
//   }
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases *mu, blocks until woken, and reacquires *mu.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held, by the caller
  }

  // As Wait, but returns false once the deadline has passed (true when woken before it).
  bool WaitUntil(Mutex* mu, std::chrono::steady_clock::time_point deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace qm
