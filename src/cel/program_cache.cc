#include "cel/program_cache.h"

namespace qm::cel {

std::shared_ptr<const CompileResult> ProgramCache::Get(const std::string& expression) {
  {
    qm::MutexLock lock(&mu_);
    auto it = index_.find(expression);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->second;
    }
    ++misses_;
  }
  // Compile outside the lock; two threads missing on the same text both compile, one wins.
  auto compiled = std::make_shared<const CompileResult>(CompileSelector(expression));
  qm::MutexLock lock(&mu_);
  auto it = index_.find(expression);
  if (it != index_.end()) return it->second->second;
  lru_.emplace_front(expression, compiled);
  index_[expression] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

size_t ProgramCache::hits() {
  qm::MutexLock lock(&mu_);
  return hits_;
}

size_t ProgramCache::misses() {
  qm::MutexLock lock(&mu_);
  return misses_;
}

size_t ProgramCache::size() {
  qm::MutexLock lock(&mu_);
  return lru_.size();
}

}  // namespace qm::cel
