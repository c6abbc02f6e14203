// The JSON reader (read.h).

#include "model/json/read.h"

#include <cstdint>
#include <string>

#include "model/json/utf8.h"

namespace qm::model::json {

namespace {

using nlohmann::json;

// Thrown where the reader leaves the text to parse(): an error, or something it does not read.
struct Unread {};

constexpr int kMaxDepth = 256;

class Reader {
 public:
  explicit Reader(std::string_view text)
      : p_(reinterpret_cast<const unsigned char*>(text.data())), end_(p_ + text.size()) {}

  json Document() {
    SkipSpace();
    json value = Value(0);
    SkipSpace();
    if (p_ != end_) throw Unread{};
    return value;
  }

 private:
  void SkipSpace() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  void Expect(const char* word, size_t n) {
    if (static_cast<size_t>(end_ - p_) < n ||
        std::string_view(reinterpret_cast<const char*>(p_), n) != std::string_view(word, n)) {
      throw Unread{};
    }
    p_ += n;
  }

  json Value(int depth) {
    if (p_ == end_) throw Unread{};
    switch (*p_) {
      case '{':
        return Object(depth + 1);
      case '[':
        return Array(depth + 1);
      case '"': {
        std::string s;
        String(&s);
        return json(std::move(s));
      }
      case 't':
        Expect("true", 4);
        return json(true);
      case 'f':
        Expect("false", 5);
        return json(false);
      case 'n':
        Expect("null", 4);
        return json(nullptr);
      default:
        return Number();
    }
  }

  json Object(int depth) {
    if (depth > kMaxDepth) throw Unread{};
    ++p_;  // '{'
    json out(json::value_t::object);
    auto& members = out.get_ref<json::object_t&>();
    SkipSpace();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      return out;
    }
    std::string key;
    while (true) {
      if (p_ == end_ || *p_ != '"') throw Unread{};
      key.clear();
      String(&key);
      SkipSpace();
      if (p_ == end_ || *p_ != ':') throw Unread{};
      ++p_;
      SkipSpace();
      // A repeated key takes the later value, as parse() does.
      auto it = members.try_emplace(members.end(), key);
      it->second = Value(depth);
      SkipSpace();
      if (p_ == end_) throw Unread{};
      if (*p_ == '}') {
        ++p_;
        return out;
      }
      if (*p_ != ',') throw Unread{};
      ++p_;
      SkipSpace();
    }
  }

  json Array(int depth) {
    if (depth > kMaxDepth) throw Unread{};
    ++p_;  // '['
    json out(json::value_t::array);
    auto& items = out.get_ref<json::array_t&>();
    SkipSpace();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      return out;
    }
    while (true) {
      items.push_back(Value(depth));
      SkipSpace();
      if (p_ == end_) throw Unread{};
      if (*p_ == ']') {
        ++p_;
        return out;
      }
      if (*p_ != ',') throw Unread{};
      ++p_;
      SkipSpace();
    }
  }

  // A string's contents, appended to `out`; p_ is at its opening quote.
  void String(std::string* out) {
    ++p_;
    while (true) {
      const unsigned char* run = p_;
      while (p_ != end_ && *p_ >= 0x20 && *p_ < 0x80 && *p_ != '"' && *p_ != '\\') ++p_;
      out->append(reinterpret_cast<const char*>(run), static_cast<size_t>(p_ - run));
      if (p_ == end_) throw Unread{};
      const unsigned char c = *p_;
      if (c == '"') {
        ++p_;
        return;
      }
      if (c >= 0x80) {
        const size_t len = Utf8SequenceLength(p_, static_cast<size_t>(end_ - p_));
        if (len == 0) throw Unread{};
        out->append(reinterpret_cast<const char*>(p_), len);
        p_ += len;
        continue;
      }
      if (c != '\\' || end_ - p_ < 2) throw Unread{};  // a control character, or the end
      switch (p_[1]) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        default:  // \u, and what is no escape at all
          throw Unread{};
      }
      p_ += 2;
    }
  }

  // An integer of at most 18 digits: non-negative ones unsigned, negative ones signed, as
  // parse() types them.
  json Number() {
    const bool negative = *p_ == '-';
    if (negative) ++p_;
    const unsigned char* digits = p_;
    uint64_t value = 0;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') value = value * 10 + (*p_++ - '0');
    const size_t n = static_cast<size_t>(p_ - digits);
    if (n == 0 || n > 18 || (digits[0] == '0' && n > 1)) throw Unread{};
    if (p_ != end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) throw Unread{};
    if (negative) return json(static_cast<json::number_integer_t>(-static_cast<int64_t>(value)));
    return json(static_cast<json::number_unsigned_t>(value));
  }

  const unsigned char* p_;
  const unsigned char* const end_;
};

}  // namespace

json Read(std::string_view text) {
  if (!text.empty() && static_cast<unsigned char>(text.front()) == 0xEF) {
    return json::parse(text, nullptr, false);  // a byte-order mark, which parse() skips
  }
  try {
    return Reader(text).Document();
  } catch (const Unread&) {
    return json::parse(text, nullptr, false);
  }
}

}  // namespace qm::model::json
