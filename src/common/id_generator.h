#pragma once

#include <random>
#include <string>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"

namespace qm {

// Produces object uids. Injected so tests can make them deterministic. Thread-safe.
class IdGenerator {
 public:
  virtual ~IdGenerator() = default;
  // Returns a lowercase RFC 4122 version-4 UUID (36 characters).
  virtual std::string NewUid() = 0;
};

class RandomIdGenerator final : public IdGenerator {
 public:
  RandomIdGenerator();
  std::string NewUid() override;

 private:
  qm::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace qm
