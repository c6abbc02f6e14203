#pragma once

#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "cel/compiler.h"
#include "common/mutex.h"

namespace qm::cel {

// A bounded LRU cache of compiled selectors keyed by expression text, so a selector shared by
// many claims or classes is compiled once. Entries are immutable and shared; a result stays
// valid after eviction for as long as a caller holds it. Thread-safe.
class ProgramCache {
 public:
  explicit ProgramCache(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // The compile result for `expression`, compiling it on a miss. Failed compilations are cached
  // too (their error text is as deterministic as a success).
  std::shared_ptr<const CompileResult> Get(const std::string& expression);

  size_t size();
  size_t hits();
  size_t misses();

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const CompileResult>>;

  const size_t capacity_;
  qm::Mutex mu_;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mu_);
  size_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  size_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace qm::cel
