#include "cel/time_lib.h"

#include <charconv>
#include <cstdio>
#include <limits>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cel/ast.h"

namespace qm::cel {
namespace {

constexpr int64_t kNanosPerSecond = 1'000'000'000;
constexpr int64_t kSecondsPerDay = 86'400;

absl::Status Error(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

absl::Status IntOverflow() { return Error("integer overflow"); }
absl::Status TimestampOverflow() { return Error("timestamp overflow"); }

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = FloorDiv(y, 400);
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

struct Civil {
  int64_t year;
  int month;  // 1-12
  int day;    // 1-31
  int hour, minute, second;
  int yday;     // 0-365
  int weekday;  // 0 = Sunday
};

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int DaysInMonth(int64_t y, int m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

// The civil time of `local_seconds` (seconds since the epoch in local wall time).
Civil CivilFromSeconds(int64_t local_seconds) {
  const int64_t days = FloorDiv(local_seconds, kSecondsPerDay);
  const int64_t sod = local_seconds - days * kSecondsPerDay;
  // civil_from_days.
  const int64_t z = days + 719468;
  const int64_t era = FloorDiv(z, 146097);
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  const int m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  const int64_t y = yoe + era * 400 + (m <= 2 ? 1 : 0);
  Civil c{};
  c.year = y;
  c.month = m;
  c.day = d;
  c.hour = static_cast<int>(sod / 3600);
  c.minute = static_cast<int>(sod / 60 % 60);
  c.second = static_cast<int>(sod % 60);
  c.yday = static_cast<int>(days - DaysFromCivil(y, 1, 1));
  c.weekday = static_cast<int>(((days + 4) % 7 + 7) % 7);  // 1970-01-01 was a Thursday
  return c;
}

bool Digits(std::string_view s, size_t pos, size_t n, int* out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

absl::StatusOr<Timestamp> Normalize(int64_t seconds, int64_t nanos, int32_t offset) {
  // |nanos| < 2e9 here, so one carry step suffices.
  int64_t carry = FloorDiv(nanos, kNanosPerSecond);
  nanos -= carry * kNanosPerSecond;
  if (__builtin_add_overflow(seconds, carry, &seconds)) return IntOverflow();
  if (seconds < kMinTimestampSeconds || seconds > kMaxTimestampSeconds) {
    return TimestampOverflow();
  }
  return Timestamp{seconds, static_cast<int32_t>(nanos), offset};
}

// Go's strconv.Atoi.
absl::StatusOr<int64_t> Atoi(std::string_view s) {
  const std::string prefix = "strconv.Atoi: parsing " + QuoteString(s) + ": ";
  size_t i = 0;
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    i = 1;
  }
  if (i == s.size()) return Error(prefix + "invalid syntax");
  uint64_t v = 0;
  bool range = false;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return Error(prefix + "invalid syntax");
    if (v > (uint64_t{1} << 63) / 10) range = true;
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
    if (v > (uint64_t{1} << 63)) range = true;
  }
  if (range || (!neg && v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
    return Error(prefix + "value out of range");
  }
  return neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
}

// The UTC offset (seconds east) of zone `tz` at instant `t`, as cel-go's inTimeZone resolves it.
absl::StatusOr<int64_t> ZoneOffset(const Timestamp& t, std::string_view tz) {
  const size_t colon = tz.find(':');
  if (colon == std::string_view::npos) {
    if (tz.empty() || tz == "UTC" || tz == "Local") return 0;
    absl::TimeZone zone;
    if (!absl::LoadTimeZone(std::string(tz), &zone)) {
      return Error("unknown time zone " + std::string(tz));
    }
    return zone.At(absl::FromUnixSeconds(t.seconds)).offset;
  }
  absl::StatusOr<int64_t> hr = Atoi(tz.substr(0, colon));
  if (!hr.ok()) return hr.status();
  absl::StatusOr<int64_t> min = Atoi(tz.substr(colon + 1));
  if (!min.ok()) return min.status();
  // Go computes in int (wrapping); offsets beyond a few days make no calendar sense, so clamp.
  const __int128 minutes = tz[0] == '-' ? __int128{*hr} * 60 - *min : __int128{*hr} * 60 + *min;
  constexpr __int128 kLimit = 1'000'000'000;
  if (minutes > kLimit || minutes < -kLimit) return Error("time zone offset out of range");
  return static_cast<int64_t>(minutes) * 60;
}

}  // namespace

absl::StatusOr<Timestamp> ParseTimestamp(std::string_view s) {
  const absl::Status bad =
      Error("type conversion error from 'string' to 'google.protobuf.Timestamp'");
  int year, month, day, hour, minute, second;
  if (s.size() < 20 || !Digits(s, 0, 4, &year) || s[4] != '-' || !Digits(s, 5, 2, &month) ||
      s[7] != '-' || !Digits(s, 8, 2, &day) || s[10] != 'T' || !Digits(s, 11, 2, &hour) ||
      s[13] != ':' || !Digits(s, 14, 2, &minute) || s[16] != ':' || !Digits(s, 17, 2, &second)) {
    return bad;
  }
  if (month < 1 || month > 12 || day < 1 || day > DaysInMonth(year, month) || hour > 23 ||
      minute > 59 || second > 59) {
    return bad;
  }
  size_t pos = 19;
  int64_t nanos = 0;
  if (pos < s.size() && (s[pos] == '.' || s[pos] == ',')) {
    ++pos;
    const size_t start = pos;
    int64_t scale = kNanosPerSecond;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (scale > 1) {
        scale /= 10;
        nanos += (s[pos] - '0') * scale;
      }
      ++pos;
    }
    if (pos == start) return bad;
  }
  int32_t offset = 0;
  std::string_view zone = s.substr(pos);
  if (zone == "Z") {
    offset = 0;
  } else {
    int oh, om;
    if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || !Digits(zone, 1, 2, &oh) ||
        zone[3] != ':' || !Digits(zone, 4, 2, &om) || oh > 24 || om > 60) {
      return bad;
    }
    offset = (oh * 3600 + om * 60) * (zone[0] == '-' ? -1 : 1);
  }
  const int64_t local =
      DaysFromCivil(year, month, day) * kSecondsPerDay + hour * 3600 + minute * 60 + second;
  return Normalize(local - offset, nanos, offset);
}

absl::StatusOr<Timestamp> TimestampFromUnixSeconds(int64_t seconds) {
  if (seconds < kMinTimestampSeconds || seconds > kMaxTimestampSeconds) {
    return TimestampOverflow();
  }
  return Timestamp{seconds, 0, 0};
}

std::string FormatTimestamp(const Timestamp& t) {
  const Civil c = CivilFromSeconds(t.seconds + t.offset);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04lld-%02d-%02dT%02d:%02d:%02d", static_cast<long long>(c.year),
                c.month, c.day, c.hour, c.minute, c.second);
  std::string out = buf;
  if (t.nanos != 0) {
    std::snprintf(buf, sizeof(buf), ".%09d", t.nanos);
    std::string frac = buf;
    while (frac.back() == '0') frac.pop_back();
    out += frac;
  }
  if (t.offset == 0) {
    out += "Z";
  } else {
    const int32_t off = t.offset < 0 ? -t.offset : t.offset;
    std::snprintf(buf, sizeof(buf), "%c%02d:%02d", t.offset < 0 ? '-' : '+', off / 3600,
                  off / 60 % 60);
    out += buf;
  }
  return out;
}

int CompareTimestamps(const Timestamp& a, const Timestamp& b) {
  if (a.seconds != b.seconds) return a.seconds < b.seconds ? -1 : 1;
  if (a.nanos != b.nanos) return a.nanos < b.nanos ? -1 : 1;
  return 0;
}

absl::StatusOr<int64_t> ParseDuration(std::string_view text) {
  const absl::Status bad =
      Error("type conversion error from 'string' to 'google.protobuf.Duration'");
  std::string_view s = text;
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return 0;
  if (s.empty()) return bad;
  constexpr uint64_t kLimit = uint64_t{1} << 63;
  uint64_t total = 0;
  while (!s.empty()) {
    if (!(s[0] == '.' || (s[0] >= '0' && s[0] <= '9'))) return bad;
    // Integer part.
    uint64_t v = 0;
    size_t i = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (v > (kLimit - 1) / 10) return bad;
      v = v * 10 + static_cast<uint64_t>(s[i] - '0');
      if (v > kLimit) return bad;
      ++i;
    }
    const bool pre = i > 0;
    s.remove_prefix(i);
    // Fraction.
    uint64_t f = 0;
    double scale = 1;
    bool post = false;
    if (!s.empty() && s[0] == '.') {
      s.remove_prefix(1);
      i = 0;
      bool overflow = false;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        if (!overflow) {
          if (f > (kLimit - 1) / 10) {
            overflow = true;
          } else {
            const uint64_t y = f * 10 + static_cast<uint64_t>(s[i] - '0');
            if (y > kLimit) {
              overflow = true;
            } else {
              f = y;
              scale *= 10;
            }
          }
        }
        ++i;
      }
      post = i > 0;
      s.remove_prefix(i);
    }
    if (!pre && !post) return bad;
    // Unit.
    i = 0;
    while (i < s.size() && s[i] != '.' && !(s[i] >= '0' && s[i] <= '9')) ++i;
    if (i == 0) return bad;
    const std::string_view u = s.substr(0, i);
    s.remove_prefix(i);
    uint64_t unit = 0;
    if (u == "ns") {
      unit = 1;
    } else if (u == "us" || u == "\xC2\xB5s" || u == "\xCE\xBCs") {
      unit = 1'000;
    } else if (u == "ms") {
      unit = 1'000'000;
    } else if (u == "s") {
      unit = 1'000'000'000;
    } else if (u == "m") {
      unit = 60'000'000'000;
    } else if (u == "h") {
      unit = 3'600'000'000'000;
    } else {
      return bad;
    }
    if (v > kLimit / unit) return bad;
    v *= unit;
    if (f > 0) {
      v += static_cast<uint64_t>(static_cast<double>(f) * (static_cast<double>(unit) / scale));
      if (v > kLimit) return bad;
    }
    total += v;
    if (total > kLimit) return bad;
  }
  if (neg) return static_cast<int64_t>(0 - total);
  if (total > kLimit - 1) return bad;
  return static_cast<int64_t>(total);
}

std::string FormatDuration(int64_t nanos) {
  const double seconds = static_cast<double>(nanos / kNanosPerSecond) +
                         static_cast<double>(nanos % kNanosPerSecond) / 1e9;
  char buf[128];
  const auto r = std::to_chars(buf, buf + sizeof(buf), seconds, std::chars_format::fixed);
  std::string out(buf, r.ptr);
  if (out == "-0") out = "0";
  return out + "s";
}

absl::StatusOr<Timestamp> AddDuration(const Timestamp& t, int64_t nanos) {
  int64_t seconds;
  if (__builtin_add_overflow(t.seconds, nanos / kNanosPerSecond, &seconds)) return IntOverflow();
  return Normalize(seconds, int64_t{t.nanos} + nanos % kNanosPerSecond, t.offset);
}

absl::StatusOr<Timestamp> SubtractDuration(const Timestamp& t, int64_t nanos) {
  if (nanos == std::numeric_limits<int64_t>::min()) return IntOverflow();
  return AddDuration(t, -nanos);
}

absl::StatusOr<int64_t> SubtractTimestamps(const Timestamp& a, const Timestamp& b) {
  int64_t seconds, scaled, out;
  if (__builtin_sub_overflow(a.seconds, b.seconds, &seconds) ||
      __builtin_mul_overflow(seconds, kNanosPerSecond, &scaled) ||
      __builtin_add_overflow(scaled, int64_t{a.nanos} - b.nanos, &out)) {
    return IntOverflow();
  }
  return out;
}

absl::StatusOr<int64_t> AddDurations(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return IntOverflow();
  return r;
}

absl::StatusOr<int64_t> SubtractDurations(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return IntOverflow();
  return r;
}

bool IsTimestampAccessor(std::string_view fn) {
  return fn == "getFullYear" || fn == "getMonth" || fn == "getDate" || fn == "getDayOfMonth" ||
         fn == "getDayOfYear" || fn == "getDayOfWeek" || IsDurationAccessor(fn);
}

bool IsDurationAccessor(std::string_view fn) {
  return fn == "getHours" || fn == "getMinutes" || fn == "getSeconds" || fn == "getMilliseconds";
}

absl::StatusOr<int64_t> TimestampAccessor(const Timestamp& t, std::string_view fn,
                                          std::string_view tz) {
  absl::StatusOr<int64_t> offset = ZoneOffset(t, tz);
  if (!offset.ok()) return offset.status();
  const Civil c = CivilFromSeconds(t.seconds + *offset);
  if (fn == "getFullYear") return c.year;
  if (fn == "getMonth") return c.month - 1;
  if (fn == "getDate") return c.day;
  if (fn == "getDayOfMonth") return c.day - 1;
  if (fn == "getDayOfYear") return c.yday;
  if (fn == "getDayOfWeek") return c.weekday;
  if (fn == "getHours") return c.hour;
  if (fn == "getMinutes") return c.minute;
  if (fn == "getSeconds") return c.second;
  return t.nanos / 1'000'000;  // getMilliseconds
}

int64_t DurationAccessor(int64_t nanos, std::string_view fn) {
  if (fn == "getHours") return nanos / 3'600'000'000'000;
  if (fn == "getMinutes") return nanos / 60'000'000'000;
  if (fn == "getSeconds") return nanos / kNanosPerSecond;
  return nanos / 1'000'000;  // getMilliseconds
}

}  // namespace qm::cel
