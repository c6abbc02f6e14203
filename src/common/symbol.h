#pragma once

#include <atomic>
#include <compare>
#include <concepts>
#include <cstddef>
#include <string>
#include <string_view>

namespace qm {

// An immutable string kept once per process and shared by every Symbol equal to it: 8 bytes
// instead of a std::string's 32, and equality is a pointer comparison. For the names that
// hundreds of thousands of objects repeat (a device's attribute and capacity names). Symbols
// are counted: a text no Symbol holds any more leaves the table, so names a client invents
// and drops do not accumulate. Ordering is the text's, so a sorted container of Symbols
// iterates as one of strings would. Thread-safe.
class Symbol {
 public:
  Symbol();                       // ""
  Symbol(std::string_view text);  // NOLINT(google-explicit-constructor): a name, interned
  Symbol(const std::string& text) : Symbol(std::string_view(text)) {}  // NOLINT
  Symbol(const char* text) : Symbol(std::string_view(text)) {}         // NOLINT
  Symbol(const Symbol& other) noexcept;
  Symbol(Symbol&& other) noexcept;
  Symbol& operator=(const Symbol& other) noexcept;
  Symbol& operator=(Symbol&& other) noexcept;
  ~Symbol();

  const std::string& str() const { return entry_->text; }
  std::string_view view() const { return str(); }
  operator const std::string&() const { return str(); }  // NOLINT(google-explicit-constructor)
  operator std::string_view() const { return view(); }   // NOLINT(google-explicit-constructor)
  bool empty() const { return str().empty(); }
  size_t size() const { return str().size(); }

  friend bool operator==(const Symbol& a, const Symbol& b) { return a.entry_ == b.entry_; }
  friend std::strong_ordering operator<=>(const Symbol& a, const Symbol& b) {
    if (a.entry_ == b.entry_) return std::strong_ordering::equal;
    return a.view().compare(b.view()) <=> 0;
  }
  // Against any other string type, without interning it: an exact match of the template beats
  // converting the other side to a Symbol.
  template <typename S>
  requires(std::convertible_to<const S&, std::string_view> && !std::same_as<S, Symbol>) friend bool
  operator==(const Symbol& a, const S& b) {
    return a.view() == std::string_view(b);
  }
  template <typename S>
  requires(std::convertible_to<const S&, std::string_view> &&
           !std::same_as<S, Symbol>) friend std::strong_ordering
  operator<=>(const Symbol& a, const S& b) {
    return a.view().compare(std::string_view(b)) <=> 0;
  }

  // How many distinct texts the table holds (tests).
  static size_t TableSize();

  struct Entry {
    explicit Entry(std::string_view t) : text(t) {}
    std::string text;
    // References held by Symbols. It goes from 1 to 0 only under the table's lock, where new
    // references to an entry in the table are taken, so a freed entry is never revived.
    std::atomic<int64_t> refs{0};
  };

 private:
  Entry* entry_;
};

}  // namespace qm
