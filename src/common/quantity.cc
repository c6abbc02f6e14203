#include "common/quantity.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace qm {
namespace {

constexpr char kErrFormatWrong[] =
    "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
constexpr char kErrSuffix[] = "unable to parse quantity's suffix";
constexpr char kErrTooLarge[] = "quantity is too large: this server accepts magnitudes up to 1000E";

// Kubernetes keeps at most 18 decimal digits on its int64 fast path.
constexpr int kMaxInt64Factors = 18;
// Digits of MaxMagnitudeNanos() (10^30) plus one: anything longer is certainly too large.
constexpr int kMaxNanoDigits = 31;

absl::int128 Pow10(int n) {
  absl::int128 v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

// The textual pieces of a quantity, split the way apimachinery's parseQuantityString does.
struct QuantityParts {
  bool positive = true;
  std::string num;    // integer digits, leading zeros stripped, "0" when none
  std::string denom;  // fraction digits, possibly empty
  std::string suffix;
};

absl::StatusOr<QuantityParts> SplitQuantity(const std::string& str) {
  QuantityParts parts;
  size_t pos = 0;
  const size_t end = str.size();
  if (pos < end && (str[0] == '-' || str[0] == '+')) {
    parts.positive = str[0] != '-';
    ++pos;
  }
  while (pos < end && str[pos] == '0') ++pos;
  if (pos >= end) {
    parts.num = "0";
    return parts;
  }
  size_t start = pos;
  while (pos < end && absl::ascii_isdigit(static_cast<unsigned char>(str[pos]))) ++pos;
  parts.num = str.substr(start, pos - start);
  if (pos >= end) return parts;
  if (parts.num.empty()) parts.num = "0";
  if (str[pos] == '.') {
    ++pos;
    start = pos;
    while (pos < end && absl::ascii_isdigit(static_cast<unsigned char>(str[pos]))) ++pos;
    parts.denom = str.substr(start, pos - start);
    if (pos >= end) return parts;
  }
  const size_t suffix_start = pos;
  static constexpr std::string_view kSuffixChars = "eEinumkKMGTP";
  while (pos < end && kSuffixChars.find(str[pos]) != std::string_view::npos) ++pos;
  if (pos < end && (str[pos] == '-' || str[pos] == '+')) ++pos;
  while (pos < end && absl::ascii_isdigit(static_cast<unsigned char>(str[pos]))) ++pos;
  if (pos < end) return absl::InvalidArgumentError(kErrFormatWrong);
  parts.suffix = str.substr(suffix_start);
  return parts;
}

struct SuffixMeaning {
  int base = 10;  // 10 or 2
  int32_t exponent = 0;
  Quantity::Format format = Quantity::Format::kDecimalSI;
};

std::optional<SuffixMeaning> InterpretSuffix(const std::string& suffix) {
  struct Entry {
    const char* text;
    int base;
    int32_t exponent;
  };
  static constexpr Entry kDecimal[] = {{"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3}, {"", 10, 0},
                                       {"k", 10, 3},  {"M", 10, 6},  {"G", 10, 9},  {"T", 10, 12},
                                       {"P", 10, 15}, {"E", 10, 18}};
  static constexpr Entry kBinary[] = {{"Ki", 2, 10}, {"Mi", 2, 20}, {"Gi", 2, 30},
                                      {"Ti", 2, 40}, {"Pi", 2, 50}, {"Ei", 2, 60}};
  for (const Entry& e : kDecimal) {
    if (suffix == e.text) return SuffixMeaning{e.base, e.exponent, Quantity::Format::kDecimalSI};
  }
  for (const Entry& e : kBinary) {
    if (suffix == e.text) return SuffixMeaning{e.base, e.exponent, Quantity::Format::kBinarySI};
  }
  if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    int64_t parsed = 0;
    if (!absl::SimpleAtoi(suffix.substr(1), &parsed)) return std::nullopt;
    // Kubernetes narrows the exponent to int32; keep that wrap-around.
    return SuffixMeaning{10, static_cast<int32_t>(parsed), Quantity::Format::kDecimalExponent};
  }
  return std::nullopt;
}

// Multiplies a decimal digit string by 2^n.
std::string ShiftLeftDecimal(std::string digits, int n) {
  for (int i = 0; i < n; ++i) {
    int carry = 0;
    for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
      int d = (*it - '0') * 2 + carry;
      *it = static_cast<char>('0' + d % 10);
      carry = d / 10;
    }
    if (carry) digits.insert(digits.begin(), static_cast<char>('0' + carry));
  }
  return digits;
}

absl::int128 ParseDigits(std::string_view digits) {
  absl::int128 v = 0;
  for (char c : digits) v = v * 10 + (c - '0');
  return v;
}

// Converts digits * 10^scale to nano-units, rounding a non-zero remainder up (away from zero).
// Returns nullopt when the magnitude certainly exceeds kMaxNanoDigits digits.
std::optional<absl::int128> ToNanos(std::string digits, int64_t scale) {
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  if (digits.empty()) return absl::int128(0);
  const int64_t shift = scale + 9;
  if (shift >= 0) {
    if (static_cast<int64_t>(digits.size()) + shift > kMaxNanoDigits) return std::nullopt;
    return ParseDigits(digits) * Pow10(static_cast<int>(shift));
  }
  const int64_t drop = -shift;
  if (drop >= static_cast<int64_t>(digits.size())) return absl::int128(1);
  std::string_view whole(digits.data(), digits.size() - drop);
  std::string_view rest(digits.data() + whole.size(), drop);
  if (static_cast<int64_t>(whole.size()) > kMaxNanoDigits) return std::nullopt;
  absl::int128 v = ParseDigits(whole);
  if (rest.find_first_not_of('0') != std::string_view::npos) v += 1;
  return v;
}

std::string Int128ToString(absl::int128 v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  absl::uint128 magnitude =
      negative ? absl::uint128(0) - static_cast<absl::uint128>(v) : static_cast<absl::uint128>(v);
  std::string out;
  while (magnitude > 0) {
    out.push_back(static_cast<char>('0' + static_cast<int>(magnitude % 10)));
    magnitude /= 10;
  }
  if (negative) out.push_back('-');
  std::reverse(out.begin(), out.end());
  return out;
}

absl::int128 Abs(absl::int128 v) { return v < 0 ? -v : v; }

// Kubernetes caps binary-SI quantities at the largest int64 number of units.
absl::int128 MaxBinaryNanos() {
  return absl::int128(std::numeric_limits<int64_t>::max()) * Quantity::kNanosPerUnit;
}

}  // namespace

absl::int128 Quantity::MaxMagnitudeNanos() { return Pow10(30); }

Quantity Quantity::FromInt(int64_t units, Format format) {
  return FromNanos(absl::int128(units) * kNanosPerUnit, format);
}

Quantity Quantity::FromNanos(absl::int128 nanos, Format format) {
  Quantity q;
  q.nanos_ = nanos;
  q.format_ = format;
  return q;
}

int64_t Quantity::Value() const {
  absl::int128 units = nanos_ / kNanosPerUnit;
  if (nanos_ % kNanosPerUnit != 0) units += Sign();
  if (units > std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
  if (units < std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(units);
}

std::string Quantity::String() const {
  if (!verbatim_.empty()) return verbatim_;
  if (nanos_ == 0) return "0";
  Format format = format_;
  if (format == Format::kBinarySI &&
      (Abs(nanos_) < absl::int128(1024) * kNanosPerUnit || HasFraction())) {
    format = Format::kDecimalSI;
  }
  if (format == Format::kBinarySI) {
    static constexpr const char* kSuffixes[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    absl::int128 units = nanos_ / kNanosPerUnit;
    int k = 0;
    while (k < 6 && Abs(units) >= 1024 && units % 1024 == 0) {
      units /= 1024;
      ++k;
    }
    return Int128ToString(units) + kSuffixes[k];
  }
  absl::int128 mantissa = nanos_;
  int exponent = -9;
  while (mantissa % 10 == 0) {
    mantissa /= 10;
    ++exponent;
  }
  while (exponent % 3 != 0) {
    mantissa *= 10;
    --exponent;
  }
  if (format == Format::kDecimalExponent) {
    return Int128ToString(mantissa) + (exponent == 0 ? "" : "e" + std::to_string(exponent));
  }
  if (exponent > 18) {
    mantissa *= Pow10(exponent - 18);
    exponent = 18;
  }
  static constexpr const char* kDecimalSuffixes[] = {"n", "u", "m", "",  "k",
                                                     "M", "G", "T", "P", "E"};
  return Int128ToString(mantissa) + kDecimalSuffixes[(exponent + 9) / 3];
}

Quantity Quantity::operator+(const Quantity& other) const {
  return FromNanos(nanos_ + other.nanos_, nanos_ == 0 ? other.format_ : format_);
}

Quantity Quantity::operator-(const Quantity& other) const {
  return FromNanos(nanos_ - other.nanos_, nanos_ == 0 ? other.format_ : format_);
}

absl::StatusOr<Quantity> ParseQuantity(const std::string& text) {
  if (text.empty()) return absl::InvalidArgumentError(kErrFormatWrong);
  if (text == "0") return Quantity();
  absl::StatusOr<QuantityParts> parts = SplitQuantity(text);
  if (!parts.ok()) return parts.status();
  std::optional<SuffixMeaning> suffix = InterpretSuffix(parts->suffix);
  if (!suffix.has_value()) return absl::InvalidArgumentError(kErrSuffix);

  Quantity q;
  q.format_ = suffix->format;
  const std::string digits = parts->num + parts->denom;
  const int64_t denom_len = static_cast<int64_t>(parts->denom.size());

  // Kubernetes keeps the input text as the serialized form when its int64 fast path parsed a
  // value that is already canonical; mirror those conditions so String() matches.
  if (suffix->base == 10) {
    const int64_t precision = kMaxInt64Factors - static_cast<int64_t>(digits.size());
    const int64_t scale = int64_t{suffix->exponent} - denom_len;
    if (precision >= 0 && scale >= -9 && scale % 3 == 0 && !absl::EndsWith(digits, "000") &&
        digits[0] != '0') {
      q.verbatim_ = text;
    }
  } else if (parts->denom.empty()) {
    const int64_t precision = 15 - static_cast<int64_t>(parts->num.size()) -
                              static_cast<int64_t>(static_cast<float>(suffix->exponent) * 3 / 10) -
                              1;
    if (precision >= 0) {
      const absl::int128 value = ParseDigits(parts->num);
      const absl::int128 product = value << suffix->exponent;
      if (product <= std::numeric_limits<int64_t>::max() && suffix->exponent % 10 == 0 &&
          (value & 7) != 0) {
        q.verbatim_ = text;
      }
    }
  }

  std::optional<absl::int128> nanos;
  if (suffix->base == 10) {
    nanos = ToNanos(digits, int64_t{suffix->exponent} - denom_len);
  } else if (parts->denom.empty() && parts->num.size() <= 18) {
    // A whole number with a binary suffix ("80Gi", nearly every capacity): shifted as an
    // integer (below 10^18 * 2^60, well inside int128) instead of doubling its decimal text
    // once per bit. Above int64's range it is clamped below, as the text path's result is.
    const absl::int128 shifted = ParseDigits(parts->num) << suffix->exponent;
    nanos = shifted > std::numeric_limits<int64_t>::max() ? MaxBinaryNanos()
                                                          : shifted * Quantity::kNanosPerUnit;
  } else {
    nanos = ToNanos(ShiftLeftDecimal(digits, suffix->exponent), -denom_len);
  }
  if (suffix->base == 2) {
    if (!nanos.has_value() || *nanos > MaxBinaryNanos()) nanos = MaxBinaryNanos();
    if (*nanos < absl::int128(1024) * Quantity::kNanosPerUnit) {
      q.format_ = Quantity::Format::kDecimalSI;
    }
  }
  if (!nanos.has_value() || *nanos > Quantity::MaxMagnitudeNanos()) {
    return absl::InvalidArgumentError(kErrTooLarge);
  }
  q.nanos_ = parts->positive ? *nanos : -*nanos;
  return q;
}

}  // namespace qm
