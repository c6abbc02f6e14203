// strings.format(): cel-go's ext/formatting.go over Go's fmt and strconv, as strings_lib.h
// describes it (the clauses %s %d %f %e %b %x %X %o, with lists, maps and the other CEL types
// as cel-go prints them).

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cel/strings_internal.h"
#include "cel/strings_lib.h"

namespace qm::cel::strings {

using namespace internal;  // NOLINT(google-build-using-namespace)

namespace {

// ---------------------------------------------------------------------------------------------
// Number rendering for format().

bool IsValidUtf8(std::string_view s) {
  while (!s.empty()) {
    const Decoded d = DecodeRune(s);
    if (d.rune == kRuneError && d.width == 1) return false;
    s.remove_prefix(d.width);
  }
  return true;
}

// printf into a std::string; only used with numeric conversions.
template <typename... Args>
std::string Printf(const char* format, Args... args) {
  const int size = std::snprintf(nullptr, 0, format, args...);
  if (size <= 0) return "";
  std::string out(static_cast<size_t>(size) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, args...);
  out.resize(static_cast<size_t>(size));
  return out;
}

// Go's strconv.FormatFloat(v, 'g', -1, 64): the shortest digits that round-trip, in %e form when
// the decimal exponent is < -4 or >= 6 (Go decides with precision 6 when printing the shortest
// form), otherwise in %f form.
std::string GoShortestDouble(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(result.ptr - buf));  // "-d.ddde+XX"
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  int exp = 0;
  const std::string_view exp_text = sci.substr(e + 1);
  std::from_chars(exp_text.data() + (exp_text[0] == '+' ? 1 : 0), exp_text.data() + exp_text.size(),
                  exp);
  const int nd = static_cast<int>(digits.size());
  if (exp < -4 || exp >= 6) {
    out.push_back(digits[0]);
    if (nd > 1) {
      out.push_back('.');
      out.append(digits, 1, std::string::npos);
    }
    out.push_back('e');
    out.push_back(exp < 0 ? '-' : '+');
    const int abs_exp = std::abs(exp);
    if (abs_exp < 10) out.push_back('0');
    absl::StrAppend(&out, abs_exp);
    return out;
  }
  const int dp = exp + 1;  // digits before the decimal point
  if (dp > 0) {
    for (int i = 0; i < dp; ++i) out.push_back(i < nd ? digits[i] : '0');
  } else {
    out.push_back('0');
  }
  const int frac = std::max(nd - dp, 0);
  if (frac > 0) {
    out.push_back('.');
    for (int i = 0; i < frac; ++i) {
      const int j = dp + i;
      out.push_back(j >= 0 && j < nd ? digits[j] : '0');
    }
  }
  return out;
}

// Go's fmt "%.6f" (used for doubles inside lists and maps).
std::string GoFixed6(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return Printf("%.6f", v);
}

// golang.org/x/text/message's "%.<precision>f" for en_US: correctly rounded digits, integer part
// grouped by three with ',', a '-' only for values below zero (so -0.0 prints as 0).
std::string LocalizedFixed(double v, int precision) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "∞" : "-∞";
  const std::string plain = Printf("%.*f", precision, std::fabs(v));
  const size_t dot = std::min(plain.find('.'), plain.size());
  std::string out = v < 0 ? "-" : "";
  for (size_t i = 0; i < dot; ++i) {
    out.push_back(plain[i]);
    const size_t remaining = dot - i - 1;
    if (remaining > 0 && remaining % 3 == 0) out.push_back(',');
  }
  out.append(plain, dot, std::string::npos);
  return out;
}

// golang.org/x/text/message's "%<width>e" for en_US: 7 significant digits, then
// U+202F × U+202F 10 and the exponent in superscript digits (at least two), e.g.
// "1.052033 × 10⁰³". cel-go builds "%<precision>e", so the precision arrives here as a field
// width: the result is left-padded with spaces to `width` code points. `width` 0 means none.
std::string LocalizedScientific(double v, int width) {
  static constexpr const char* kSuperscript[] = {"⁰", "¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"};
  std::string body;
  if (std::isnan(v)) {
    body = "NaN";
  } else if (std::isinf(v)) {
    body = v > 0 ? "∞" : "-∞";
  } else {
    const std::string plain = Printf("%.6e", std::fabs(v));  // "d.dddddde+XX"
    const size_t e = plain.find('e');
    int exp = 0;
    const char* exp_begin = plain.data() + e + 1;
    if (*exp_begin == '+') ++exp_begin;
    std::from_chars(exp_begin, plain.data() + plain.size(), exp);
    if (v < 0) body.push_back('-');
    body.append(plain, 0, e);
    body += "\u202f×\u202f10";
    if (exp < 0) body += "⁻";
    const std::string exp_digits = absl::StrCat(std::abs(exp));
    if (exp_digits.size() < 2) body += kSuperscript[0];
    for (char c : exp_digits) body += kSuperscript[c - '0'];
  }
  const int64_t runes = Size(body);
  if (width > runes) body.insert(0, static_cast<size_t>(width - runes), ' ');
  return body;
}

// Go's fmt %b/%o/%x/%X of an integer: the magnitude in `base`, with '-' for negative values.
std::string IntegerInBase(uint64_t magnitude, bool negative, int base, bool upper) {
  char buf[80];
  auto result = std::to_chars(buf, buf + sizeof(buf), magnitude, base);
  std::string digits(buf, result.ptr);
  if (upper) {
    for (char& c : digits) {
      if (c >= 'a' && c <= 'f') c = static_cast<char>(c - 'a' + 'A');
    }
  }
  return negative ? "-" + digits : digits;
}

uint64_t Magnitude(int64_t v) {
  return v < 0 ? ~static_cast<uint64_t>(v) + 1 : static_cast<uint64_t>(v);
}

std::string HexOfBytes(std::string_view bytes, bool upper) {
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 0xF]);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// format() clauses (cel-go ext/formatting.go, stringFormatter).

using Kind = FormatArg::Kind;

absl::Status ClauseError(const std::string& message) { return absl::InvalidArgumentError(message); }

absl::Status StringClauseError(const FormatArg& arg) {
  return ClauseError(
      "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, "
      "types, durations, and timestamps, was given " +
      arg.TypeName());
}

absl::StatusOr<std::string> BytesAsString(const FormatArg& arg) {
  if (!IsValidUtf8(arg.text)) {
    return ClauseError(
        "could not convert argument \"invalid UTF-8 in bytes, cannot convert to string\" to "
        "string");
  }
  return arg.text;
}

absl::StatusOr<std::string> FormatStringClause(const FormatArg& arg);

// A list element or map value: cel-go's clauseForType followed by quoteForCEL.
absl::StatusOr<std::string> FormatNested(const FormatArg& arg) {
  switch (arg.kind) {
    case Kind::kInt:
      return absl::StrCat(arg.int_value);
    case Kind::kUint:
      return absl::StrCat(arg.uint_value);
    case Kind::kString:
      return GoQuote(arg.text);
    case Kind::kBytes: {
      auto text = BytesAsString(arg);
      if (!text.ok()) return text.status();
      return "b" + GoQuote(*text);
    }
    case Kind::kDouble: {
      const std::string text = GoFixed6(arg.double_value);
      return std::isfinite(arg.double_value) ? text : GoQuote(text);
    }
    case Kind::kTimestamp:
      return "timestamp(" + GoQuote(arg.text) + ")";
    case Kind::kDuration:
      return "duration(" + GoQuote(arg.text) + ")";
    case Kind::kNull:
    case Kind::kBool:
    case Kind::kType:
    case Kind::kList:
    case Kind::kMap:
    case Kind::kOther:
      return FormatStringClause(arg);
  }
  return StringClauseError(arg);
}

absl::StatusOr<std::string> FormatList(const FormatArg& arg) {
  std::string out = "[";
  for (size_t i = 0; i < arg.elements.size(); ++i) {
    if (i > 0) out += ", ";
    auto element = FormatNested(arg.elements[i]);
    if (!element.ok()) return element.status();
    out += *element;
  }
  out += "]";
  return out;
}

absl::StatusOr<std::string> FormatMap(const FormatArg& arg) {
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(arg.entries.size());
  for (const FormatArg::MapEntry& entry : arg.entries) {
    std::string key;
    switch (entry.key.kind) {
      case Kind::kString:
        key = GoQuote(entry.key.text);
        break;
      case Kind::kBool:
        key = entry.key.bool_value ? "true" : "false";
        break;
      case Kind::kInt:
        key = absl::StrCat(entry.key.int_value);
        break;
      case Kind::kUint:
        key = absl::StrCat(entry.key.uint_value);
        break;
      default:
        return ClauseError("no formatting function for map key of type " + entry.key.TypeName());
    }
    auto value = FormatNested(entry.value);
    if (!value.ok()) return value.status();
    pairs.emplace_back(std::move(key), *std::move(value));
  }
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out = "{";
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (i > 0) out += ", ";
    absl::StrAppend(&out, pairs[i].first, ":", pairs[i].second);
  }
  out += "}";
  return out;
}

// %s (cel-go's FormatString).
absl::StatusOr<std::string> FormatStringClause(const FormatArg& arg) {
  switch (arg.kind) {
    case Kind::kList:
      return FormatList(arg);
    case Kind::kMap:
      return FormatMap(arg);
    case Kind::kInt:
      return absl::StrCat(arg.int_value);
    case Kind::kUint:
      return absl::StrCat(arg.uint_value);
    case Kind::kDouble:
      return GoShortestDouble(arg.double_value);
    case Kind::kBool:
      return std::string(arg.bool_value ? "true" : "false");
    case Kind::kBytes:
      return BytesAsString(arg);
    case Kind::kString:
    case Kind::kType:
    case Kind::kTimestamp:
    case Kind::kDuration:
      return arg.text;
    case Kind::kNull:
      return std::string("null");
    case Kind::kOther:
      break;
  }
  return StringClauseError(arg);
}

absl::StatusOr<std::string> FormatDecimalClause(const FormatArg& arg) {
  if (arg.kind == Kind::kInt) return absl::StrCat(arg.int_value);
  if (arg.kind == Kind::kUint) return absl::StrCat(arg.uint_value);
  return ClauseError("decimal clause can only be used on integers, was given " + arg.TypeName());
}

// The double behind %f and %e: a double, or one of the strings cel-go converts.
std::optional<double> FloatOperand(const FormatArg& arg) {
  if (arg.kind == Kind::kDouble) return arg.double_value;
  if (arg.kind == Kind::kString) {
    if (arg.text == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (arg.text == "Infinity") return std::numeric_limits<double>::infinity();
    if (arg.text == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  return std::nullopt;
}

absl::StatusOr<std::string> FormatFixedClause(const FormatArg& arg, int precision) {
  const std::optional<double> v = FloatOperand(arg);
  if (!v) {
    return ClauseError("fixed-point clause can only be used on doubles, was given " +
                       arg.TypeName());
  }
  return LocalizedFixed(*v, precision);
}

absl::StatusOr<std::string> FormatScientificClause(const FormatArg& arg, int width) {
  const std::optional<double> v = FloatOperand(arg);
  if (!v) {
    return ClauseError("scientific clause can only be used on doubles, was given " +
                       arg.TypeName());
  }
  return LocalizedScientific(*v, width);
}

absl::StatusOr<std::string> FormatBinaryClause(const FormatArg& arg) {
  switch (arg.kind) {
    case Kind::kInt:
      return IntegerInBase(Magnitude(arg.int_value), arg.int_value < 0, 2, false);
    case Kind::kUint:
      return IntegerInBase(arg.uint_value, false, 2, false);
    case Kind::kBool:
      return std::string(arg.bool_value ? "1" : "0");
    default:
      return ClauseError("only integers and bools can be formatted as binary, was given " +
                         arg.TypeName());
  }
}

absl::StatusOr<std::string> FormatHexClause(const FormatArg& arg, bool upper) {
  switch (arg.kind) {
    case Kind::kString:
    case Kind::kBytes:
      return HexOfBytes(arg.text, upper);
    case Kind::kInt:
      return IntegerInBase(Magnitude(arg.int_value), arg.int_value < 0, 16, upper);
    case Kind::kUint:
      return IntegerInBase(arg.uint_value, false, 16, upper);
    default:
      return ClauseError(
          "only integers, byte buffers, and strings can be formatted as hex, was given " +
          arg.TypeName());
  }
}

absl::StatusOr<std::string> FormatOctalClause(const FormatArg& arg) {
  if (arg.kind == Kind::kInt) {
    return IntegerInBase(Magnitude(arg.int_value), arg.int_value < 0, 8, false);
  }
  if (arg.kind == Kind::kUint) return IntegerInBase(arg.uint_value, false, 8, false);
  return ClauseError("octal clause can only be used on integers, was given " + arg.TypeName());
}

// Precisions up to this value behave as in cel-go; larger ones are rejected (see the header).
constexpr int64_t kMaxPrecision = 255;

absl::Status ParseClauseError(const std::string& message) {
  return absl::InvalidArgumentError("could not parse formatting clause: " + message);
}

}  // namespace

// --- FormatArg -----------------------------------------------------------------------------

FormatArg FormatArg::Null() { return FormatArg(); }

FormatArg FormatArg::Bool(bool value) {
  FormatArg arg;
  arg.kind = Kind::kBool;
  arg.bool_value = value;
  return arg;
}

FormatArg FormatArg::Int(int64_t value) {
  FormatArg arg;
  arg.kind = Kind::kInt;
  arg.int_value = value;
  return arg;
}

FormatArg FormatArg::Uint(uint64_t value) {
  FormatArg arg;
  arg.kind = Kind::kUint;
  arg.uint_value = value;
  return arg;
}

FormatArg FormatArg::Double(double value) {
  FormatArg arg;
  arg.kind = Kind::kDouble;
  arg.double_value = value;
  return arg;
}

namespace {
FormatArg TextArg(FormatArg::Kind kind, std::string text) {
  FormatArg arg;
  arg.kind = kind;
  arg.text = std::move(text);
  return arg;
}
}  // namespace

FormatArg FormatArg::String(std::string value) { return TextArg(Kind::kString, std::move(value)); }
FormatArg FormatArg::Bytes(std::string value) { return TextArg(Kind::kBytes, std::move(value)); }
FormatArg FormatArg::Type(std::string name) { return TextArg(Kind::kType, std::move(name)); }
FormatArg FormatArg::Timestamp(std::string text) {
  return TextArg(Kind::kTimestamp, std::move(text));
}
FormatArg FormatArg::Duration(std::string text) {
  return TextArg(Kind::kDuration, std::move(text));
}
FormatArg FormatArg::Other(std::string type_name) {
  return TextArg(Kind::kOther, std::move(type_name));
}

FormatArg FormatArg::List(std::vector<FormatArg> elements) {
  FormatArg arg;
  arg.kind = Kind::kList;
  arg.elements = std::move(elements);
  return arg;
}

FormatArg FormatArg::Map(std::vector<MapEntry> entries) {
  FormatArg arg;
  arg.kind = Kind::kMap;
  arg.entries = std::move(entries);
  return arg;
}

std::string FormatArg::TypeName() const {
  switch (kind) {
    case Kind::kNull:
      return "null_type";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kUint:
      return "uint";
    case Kind::kDouble:
      return "double";
    case Kind::kString:
      return "string";
    case Kind::kBytes:
      return "bytes";
    case Kind::kList:
      return "list";
    case Kind::kMap:
      return "map";
    case Kind::kType:
      return "type";
    case Kind::kTimestamp:
      return "google.protobuf.Timestamp";
    case Kind::kDuration:
      return "google.protobuf.Duration";
    case Kind::kOther:
      return text;
  }
  return text;
}

// --- Format --------------------------------------------------------------------------------

absl::StatusOr<std::string> Format(std::string_view format, absl::Span<const FormatArg> args) {
  std::string out;
  size_t arg_index = 0;
  size_t i = 0;
  while (i < format.size()) {
    if (format[i] != '%') {
      out.push_back(format[i++]);
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '%') {
      out.push_back('%');
      i += 2;
      continue;
    }
    // cel-go fetches the argument before looking at the clause.
    if (arg_index >= args.size()) {
      return absl::InvalidArgumentError(absl::StrCat("index ", arg_index, " out of range"));
    }
    if (i + 1 >= format.size()) return absl::InvalidArgumentError("unexpected end of string");
    size_t j = i + 1;
    std::optional<int64_t> precision;
    if (format[j] == '.') {
      const size_t digits_begin = ++j;
      while (j < format.size() && format[j] >= '0' && format[j] <= '9') ++j;
      if (j >= format.size()) {
        return ParseClauseError(
            "error while parsing precision: could not find end of precision specifier");
      }
      const std::string_view digits = format.substr(digits_begin, j - digits_begin);
      int64_t value = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (digits.empty() || ec != std::errc()) {
        return ParseClauseError(absl::StrCat(
            "error while parsing precision: error while converting precision to integer: "
            "strconv.Atoi: parsing ",
            GoQuote(digits), digits.empty() ? ": invalid syntax" : ": value out of range"));
      }
      if (value > kMaxPrecision) {
        return ParseClauseError(absl::StrCat("error while parsing precision: precision ", value,
                                             " exceeds the supported maximum of ", kMaxPrecision));
      }
      precision = value;
    }
    const char verb = format[j++];
    const FormatArg& arg = args[arg_index];
    absl::StatusOr<std::string> clause;
    switch (verb) {
      case 's':
        clause = FormatStringClause(arg);
        break;
      case 'd':
        clause = FormatDecimalClause(arg);
        break;
      case 'f':
        clause = FormatFixedClause(arg, static_cast<int>(precision.value_or(6)));
        break;
      case 'e':
        clause = FormatScientificClause(arg, static_cast<int>(precision.value_or(6)));
        break;
      case 'b':
        clause = FormatBinaryClause(arg);
        break;
      case 'x':
      case 'X':
        clause = FormatHexClause(arg, verb == 'X');
        break;
      case 'o':
        clause = FormatOctalClause(arg);
        break;
      default: {
        // Go prints the offending byte with %c, i.e. as the code point of the same value.
        std::string shown;
        AppendRune(shown, static_cast<unsigned char>(verb));
        return ParseClauseError("unrecognized formatting clause \"" + shown + "\"");
      }
    }
    if (!clause.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("error during formatting: ", clause.status().message()));
    }
    out += *clause;
    i = j;
    ++arg_index;
  }
  return out;
}

}  // namespace qm::cel::strings
