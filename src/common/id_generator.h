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
  // `n` characters of Kubernetes' generateName alphabet (no vowels, no look-alikes), for names
  // the server makes up (generateName, generated claims, Events). Derived from NewUid() unless
  // overridden, so deterministic uids give deterministic names.
  virtual std::string NameSuffix(size_t n);
};

// A random RFC 4122 version-4 UUID from a generator of the calling thread (no lock): request
// ids, and ids that tests need not predict.
std::string RandomUuid();

class RandomIdGenerator final : public IdGenerator {
 public:
  RandomIdGenerator();
  std::string NewUid() override;
  std::string NameSuffix(size_t n) override;

 private:
  qm::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace qm
