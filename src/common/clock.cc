#include "common/clock.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace qm {

std::string FormatRfc3339(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool ParseRfc3339(const std::string& text, std::chrono::system_clock::time_point* out) {
  int year, mon, day, hour, min, sec;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &mon, &day, &hour, &min, &sec,
                  &consumed) != 6) {
    return false;
  }
  size_t pos = static_cast<size_t>(consumed);
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
  }
  long offset = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int oh, om;
    if (std::sscanf(text.c_str() + pos + 1, "%2d:%2d", &oh, &om) != 2) return false;
    offset = (oh * 3600L + om * 60L) * (text[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return false;
  }
  if (pos != text.size()) return false;
  if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60) {
    return false;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  const std::time_t secs = timegm(&tm) - offset;
  // A time_point counts nanoseconds in 64 bits (about 292 years either side of 1970), and
  // callers subtract parsed times from each other and from now. Kubernetes accepts years 0 to
  // 9999, so times are clamped to 1900-01-01..2150-01-01 (250 years: no difference of two of
  // them overflows) instead of overflowing (found by object_decode_fuzz: an Event with
  // firstTimestamp in the year 1013, whose age the table printer computes).
  constexpr std::time_t kLowest = -2208988800;  // 1900-01-01T00:00:00Z
  constexpr std::time_t kHighest = 5680281600;  // 2150-01-01T00:00:00Z
  *out = std::chrono::system_clock::from_time_t(std::clamp(secs, kLowest, kHighest));
  return true;
}

std::string ShortHumanDuration(std::chrono::system_clock::duration d) {
  // apimachinery's duration.HumanDuration, which the apiserver's table printer uses for ages:
  // two units while the larger one is small ("5m30s", "3h30m", "2d5h", "3y10d").
  long long s = std::chrono::duration_cast<std::chrono::seconds>(d).count();
  if (s < 0) s = 0;
  if (s < 120) return std::to_string(s) + "s";
  auto two = [](long long big, const char* big_unit, long long small, const char* small_unit) {
    std::string out = std::to_string(big) + big_unit;
    if (small != 0) out += std::to_string(small) + small_unit;
    return out;
  };
  long long m = s / 60;
  if (m < 10) return two(m, "m", s % 60, "s");
  if (m < 180) return std::to_string(m) + "m";
  long long h = m / 60;
  if (h < 8) return two(h, "h", m % 60, "m");
  if (h < 48) return std::to_string(h) + "h";
  if (h < 24 * 8) return two(h / 24, "d", h % 24, "h");
  long long days = h / 24;
  if (days < 365 * 2) return std::to_string(days) + "d";
  if (days < 365 * 8) return two(days / 365, "y", days % 365, "d");
  return std::to_string(days / 365) + "y";
}

}  // namespace qm
