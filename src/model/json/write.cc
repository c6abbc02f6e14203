// The compact JSON writer (write.h).

#include "model/json/write.h"

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "model/json/utf8.h"

namespace qm::model::json {

namespace {

using nlohmann::json;

// Thrown at a string that is not valid UTF-8: the whole value is then left to dump(), which
// throws its own error for it.
struct NotUtf8 {};

// The bytes a string keeps as they are: ASCII but the control characters, '"' and '\'. DEL
// (0x7F) is one of them: dump() escapes it only when asked for ASCII output.
constexpr std::array<bool, 256> kPlain = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x80; ++c) plain[c] = c != '"' && c != '\\';
  return plain;
}();

// Collects the text in a buffer of its own and appends it to the string in pieces: appending
// to a std::string byte by byte was a third of the writer's time.
class Sink {
 public:
  explicit Sink(std::string* out) : out_(out) {}
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  void Put(char c) {
    if (used_ == sizeof(buf_)) Flush();
    buf_[used_++] = c;
  }
  void Put(const char* p, size_t n) {
    if (n > sizeof(buf_) - used_) {
      Flush();
      if (n > sizeof(buf_)) {
        out_->append(p, n);
        return;
      }
    }
    std::memcpy(buf_ + used_, p, n);
    used_ += n;
  }
  void Put(std::string_view s) { Put(s.data(), s.size()); }
  void Flush() {
    out_->append(buf_, used_);
    used_ = 0;
  }

 private:
  std::string* out_;
  char buf_[2048];
  size_t used_ = 0;
};

void AppendString(std::string_view s, Sink& out) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  out.Put('"');
  size_t i = 0;
  while (i < n) {
    size_t end = i;
    while (end < n) {
      if (kPlain[p[end]]) {
        ++end;
      } else if (p[end] >= 0x80) {
        const size_t len = Utf8SequenceLength(p + end, n - end);
        if (len == 0) throw NotUtf8{};
        end += len;
      } else {
        break;
      }
    }
    out.Put(s.data() + i, end - i);
    if (end == n) break;
    switch (const unsigned char c = p[end]) {
      case '"':
        out.Put("\\\"", 2);
        break;
      case '\\':
        out.Put("\\\\", 2);
        break;
      case '\b':
        out.Put("\\b", 2);
        break;
      case '\t':
        out.Put("\\t", 2);
        break;
      case '\n':
        out.Put("\\n", 2);
        break;
      case '\f':
        out.Put("\\f", 2);
        break;
      case '\r':
        out.Put("\\r", 2);
        break;
      default: {  // another control character: \u00XX, in lower-case hex as dump() writes it
        static constexpr char kHex[] = "0123456789abcdef";
        const char escape[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
        out.Put(escape, sizeof(escape));
      }
    }
    i = end + 1;
  }
  out.Put('"');
}

template <typename Int>
void AppendInteger(Int value, Sink& out) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  out.Put(buf, static_cast<size_t>(end - buf));
}

void Append(const json& value, Sink& out) {
  switch (value.type()) {
    case json::value_t::null:
      out.Put("null", 4);
      return;
    case json::value_t::boolean:
      out.Put(value.get<bool>() ? std::string_view("true") : std::string_view("false"));
      return;
    case json::value_t::number_integer:
      AppendInteger(value.get<json::number_integer_t>(), out);
      return;
    case json::value_t::number_unsigned:
      AppendInteger(value.get<json::number_unsigned_t>(), out);
      return;
    case json::value_t::string:
      AppendString(value.get_ref<const json::string_t&>(), out);
      return;
    case json::value_t::array: {
      out.Put('[');
      bool first = true;
      for (const json& item : value.get_ref<const json::array_t&>()) {
        if (!first) out.Put(',');
        first = false;
        Append(item, out);
      }
      out.Put(']');
      return;
    }
    case json::value_t::object: {
      out.Put('{');
      bool first = true;
      for (const auto& [key, item] : value.get_ref<const json::object_t&>()) {
        if (!first) out.Put(',');
        first = false;
        AppendString(key, out);
        out.Put(':');
        Append(item, out);
      }
      out.Put('}');
      return;
    }
    default:  // floating-point numbers, binary values, a discarded parse: as dump() has them
      out.Put(value.dump());
      return;
  }
}

}  // namespace

void AppendJson(const json& value, std::string* out) {
  const size_t start = out->size();
  try {
    Sink sink(out);
    Append(value, sink);
    sink.Flush();
  } catch (const NotUtf8&) {
    out->resize(start);
    out->append(value.dump());  // throws, as dump() does for such a string
  }
}

void AppendJsonString(std::string_view s, std::string* out) {
  const size_t start = out->size();
  try {
    Sink sink(out);
    AppendString(s, sink);
    sink.Flush();
  } catch (const NotUtf8&) {
    out->resize(start);
    out->append(json(std::string(s)).dump());  // throws, as dump() does for such a string
  }
}

std::string WriteStringMap(const std::map<std::string, std::string>& map) {
  std::string out;
  try {
    Sink sink(&out);
    sink.Put('{');
    bool first = true;
    for (const auto& [key, value] : map) {
      if (!first) sink.Put(',');
      first = false;
      AppendString(key, sink);
      sink.Put(':');
      AppendString(value, sink);
    }
    sink.Put('}');
    sink.Flush();
  } catch (const NotUtf8&) {
    return json(map).dump();  // throws, as dump() does for such a string
  }
  return out;
}

std::string WriteStringList(const std::vector<std::string>& list) {
  std::string out;
  try {
    Sink sink(&out);
    sink.Put('[');
    for (size_t i = 0; i < list.size(); ++i) {
      if (i > 0) sink.Put(',');
      AppendString(list[i], sink);
    }
    sink.Put(']');
    sink.Flush();
  } catch (const NotUtf8&) {
    return json(list).dump();  // throws, as dump() does for such a string
  }
  return out;
}

std::string Write(const json& value) {
  std::string out;
  AppendJson(value, &out);
  return out;
}

}  // namespace qm::model::json
