#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace qm {

// Source of time. Injected everywhere time matters so tests can control it. Implementations are
// thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time: what objects record (timestamps, ages, expiry).
  virtual std::chrono::system_clock::time_point Now() const = 0;
  // Monotonic time: what budgets and durations are measured in (the allocator's deadline, pass
  // timings). The real steady clock unless a test says otherwise.
  virtual std::chrono::steady_clock::time_point Monotonic() const {
    return std::chrono::steady_clock::now();
  }
};

class SystemClock final : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override {
    return std::chrono::system_clock::now();
  }
};

// Formats a time as RFC 3339 in UTC with second precision: "2026-11-22T02:06:17Z".
std::string FormatRfc3339(std::chrono::system_clock::time_point t);

// Parses the RFC 3339 forms Kubernetes emits ("...Z", optional fraction, or a numeric offset).
// Returns false when `text` is not a timestamp. Times before 1900 or after 2150 are clamped to
// those bounds (a time_point's nanoseconds would overflow; see clock.cc).
bool ParseRfc3339(const std::string& text, std::chrono::system_clock::time_point* out);

// A short human duration as the apiserver prints ages (apimachinery duration.HumanDuration):
// "8s", "119s", "5m30s", "10m", "3h30m", "47h", "2d5h", "30d", "3y10d", "9y". Negative
// durations (clock skew) print as "0s".
std::string ShortHumanDuration(std::chrono::system_clock::duration d);

}  // namespace qm
