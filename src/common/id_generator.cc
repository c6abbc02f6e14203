#include "common/id_generator.h"

#include <cstdio>

namespace qm {

namespace {
constexpr char kNameAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";  // as Kubernetes' util/rand
constexpr size_t kNameAlphabetSize = sizeof(kNameAlphabet) - 1;
}  // namespace

std::string IdGenerator::NameSuffix(size_t n) {
  std::string out;
  while (out.size() < n) {
    for (char c : NewUid()) {
      if (c == '-') continue;
      const int digit = c <= '9' ? c - '0' : c - 'a' + 10;
      out.push_back(kNameAlphabet[digit % kNameAlphabetSize]);
      if (out.size() == n) break;
    }
  }
  return out;
}

RandomIdGenerator::RandomIdGenerator() : rng_(std::random_device{}()) {}

std::string RandomIdGenerator::NameSuffix(size_t n) {
  std::string out;
  qm::MutexLock lock(&mu_);
  for (size_t i = 0; i < n; ++i) out.push_back(kNameAlphabet[rng_() % kNameAlphabetSize]);
  return out;
}

namespace {

// Two random words as a version-4 UUID.
std::string Uuid4(uint64_t hi, uint64_t lo) {
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // RFC 4122 variant
  char buf[37];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return buf;
}

// A seed for a new thread's generator. std::random_device is opened once per process, not once
// per thread: the gRPC sync server starts and ends threads with bursts of calls, and opening it
// for each new thread cost about 2% of the server's CPU during a burst of ReportPrepared calls.
class ThreadSeeds {
 public:
  ThreadSeeds() : rng_(std::random_device{}()) {}
  uint64_t Next() {
    qm::MutexLock lock(&mu_);
    return rng_();
  }

 private:
  qm::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

uint64_t NextThreadSeed() {
  static ThreadSeeds* const seeds = new ThreadSeeds();
  return seeds->Next();
}

}  // namespace

std::string RandomUuid() {
  thread_local std::mt19937_64 rng{NextThreadSeed()};
  const uint64_t hi = rng();
  return Uuid4(hi, rng());
}

std::string RandomIdGenerator::NewUid() {
  uint64_t hi, lo;
  {
    qm::MutexLock lock(&mu_);
    hi = rng_();
    lo = rng_();
  }
  return Uuid4(hi, lo);
}

}  // namespace qm
