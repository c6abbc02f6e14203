#include "common/symbol.h"

#include <string_view>
#include <unordered_map>

#include "common/mutex.h"

namespace qm {

namespace {

struct Table {
  Mutex mu;
  // Keys view the entries' own text.
  std::unordered_map<std::string_view, Symbol::Entry*> entries ABSL_GUARDED_BY(mu);
};

Table& TheTable() {
  static Table* table = new Table();  // never destroyed: Symbols may outlive static destructors
  return *table;
}

// The empty text's entry: never freed, so a default Symbol needs no lock.
Symbol::Entry* EmptyEntry() {
  static Symbol::Entry* empty = [] {
    auto* e = new Symbol::Entry("");
    e->refs.store(1);  // the table's own reference: never released
    return e;
  }();
  return empty;
}

void Acquire(Symbol::Entry* e) { e->refs.fetch_add(1, std::memory_order_relaxed); }

void Release(Symbol::Entry* e) {
  if (e == EmptyEntry()) return;
  int64_t r = e->refs.load(std::memory_order_relaxed);
  while (r > 1) {
    if (e->refs.compare_exchange_weak(r, r - 1, std::memory_order_acq_rel)) return;
  }
  // Possibly the last reference: decide under the lock that interning takes references under.
  Table& t = TheTable();
  MutexLock lock(&t.mu);
  if (e->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    t.entries.erase(std::string_view(e->text));
    delete e;
  }
}

}  // namespace

Symbol::Symbol() : entry_(EmptyEntry()) {}

Symbol::Symbol(std::string_view text) {
  if (text.empty()) {
    entry_ = EmptyEntry();
    return;
  }
  Table& t = TheTable();
  MutexLock lock(&t.mu);
  auto it = t.entries.find(text);
  if (it == t.entries.end()) {
    auto* e = new Entry(text);
    it = t.entries.emplace(std::string_view(e->text), e).first;
  }
  entry_ = it->second;
  Acquire(entry_);
}

Symbol::Symbol(const Symbol& other) noexcept : entry_(other.entry_) {
  if (entry_ != EmptyEntry()) Acquire(entry_);
}

Symbol::Symbol(Symbol&& other) noexcept : entry_(other.entry_) { other.entry_ = EmptyEntry(); }

Symbol& Symbol::operator=(const Symbol& other) noexcept {
  if (entry_ == other.entry_) return *this;
  if (other.entry_ != EmptyEntry()) Acquire(other.entry_);
  Release(entry_);
  entry_ = other.entry_;
  return *this;
}

Symbol& Symbol::operator=(Symbol&& other) noexcept {
  if (this == &other) return *this;
  Release(entry_);
  entry_ = other.entry_;
  other.entry_ = EmptyEntry();
  return *this;
}

Symbol::~Symbol() { Release(entry_); }

size_t Symbol::TableSize() {
  Table& t = TheTable();
  MutexLock lock(&t.mu);
  return t.entries.size();
}

}  // namespace qm
