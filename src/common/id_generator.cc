#include "common/id_generator.h"

#include <cstdio>

namespace qm {

RandomIdGenerator::RandomIdGenerator() : rng_(std::random_device{}()) {}

std::string RandomIdGenerator::NewUid() {
  uint64_t hi, lo;
  {
    qm::MutexLock lock(&mu_);
    hi = rng_();
    lo = rng_();
  }
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // RFC 4122 variant
  char buf[37];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return buf;
}

}  // namespace qm
