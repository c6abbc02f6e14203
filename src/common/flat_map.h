#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <utility>
#include <vector>

namespace qm {

// An ordered map kept as one sorted vector: for the small maps that many objects hold (a device's
// attributes and capacity), one allocation instead of a node per entry, in the order std::map
// would iterate. It offers the part of std::map's interface this project uses. Unlike std::map,
// inserting or erasing moves entries: references and iterators into it do not survive a change.
template <typename K, typename V, typename Compare = std::less<>>
class FlatMap {
 public:
  using key_type = K;
  using mapped_type = V;
  using value_type = std::pair<K, V>;
  using size_type = std::size_t;
  using iterator = typename std::vector<value_type>::iterator;
  using const_iterator = typename std::vector<value_type>::const_iterator;

  FlatMap() = default;
  FlatMap(std::initializer_list<value_type> init) {
    for (const auto& v : init) insert(v);
  }
  template <typename It>
  FlatMap(It first, It last) {
    for (; first != last; ++first) insert(value_type(first->first, first->second));
  }

  iterator begin() { return entries_.begin(); }
  iterator end() { return entries_.end(); }
  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }
  const_iterator cbegin() const { return entries_.cbegin(); }
  const_iterator cend() const { return entries_.cend(); }

  size_type size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void clear() { entries_.clear(); }
  void reserve(size_type n) { entries_.reserve(n); }
  void shrink_to_fit() { entries_.shrink_to_fit(); }

  template <typename Q>
  iterator find(const Q& key) {
    auto it = Lower(key);
    return it != entries_.end() && !Compare{}(key, it->first) ? it : entries_.end();
  }
  template <typename Q>
  const_iterator find(const Q& key) const {
    return const_cast<FlatMap*>(this)->find(key);
  }
  template <typename Q>
  bool contains(const Q& key) const {
    return find(key) != end();
  }
  template <typename Q>
  size_type count(const Q& key) const {
    return contains(key) ? 1 : 0;
  }

  V& operator[](const K& key) { return try_emplace(key).first->second; }
  V& operator[](K&& key) { return try_emplace(std::move(key)).first->second; }
  template <typename Q>
  V& at(const Q& key) {
    auto it = find(key);
    if (it == end()) throw std::out_of_range("FlatMap::at: no such key");
    return it->second;
  }
  template <typename Q>
  const V& at(const Q& key) const {
    return const_cast<FlatMap*>(this)->at(key);
  }

  template <typename KK, typename... Args>
  std::pair<iterator, bool> try_emplace(KK&& key, Args&&... args) {
    auto it = Lower(key);
    if (it != entries_.end() && !Compare{}(key, it->first)) return {it, false};
    it =
        entries_.emplace(it, std::piecewise_construct, std::forward_as_tuple(std::forward<KK>(key)),
                         std::forward_as_tuple(std::forward<Args>(args)...));
    return {it, true};
  }
  std::pair<iterator, bool> insert(value_type v) {
    auto it = Lower(v.first);
    if (it != entries_.end() && !Compare{}(v.first, it->first)) return {it, false};
    return {entries_.insert(it, std::move(v)), true};
  }
  template <typename... Args>
  std::pair<iterator, bool> emplace(Args&&... args) {
    return insert(value_type(std::forward<Args>(args)...));
  }
  template <typename Q>
  size_type erase(const Q& key) {
    auto it = find(key);
    if (it == end()) return 0;
    entries_.erase(it);
    return 1;
  }
  iterator erase(const_iterator it) { return entries_.erase(it); }

  bool operator==(const FlatMap& other) const = default;

 private:
  template <typename Q>
  iterator Lower(const Q& key) {
    return std::lower_bound(entries_.begin(), entries_.end(), key,
                            [](const value_type& e, const Q& k) { return Compare{}(e.first, k); });
  }

  std::vector<value_type> entries_;
};

}  // namespace qm
