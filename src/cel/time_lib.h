#pragma once

// CEL timestamps and durations (google.protobuf.Timestamp / google.protobuf.Duration) with
// cel-go's semantics and error texts, as Kubernetes configures cel-go (DefaultUTCTimeZone:
// accessors without a time zone argument read the UTC calendar).
//
//   * A timestamp is an instant between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999999Z
//     ("timestamp overflow" outside). It remembers the UTC offset it was written with, which
//     only string() shows (Go's time.Time keeps its location the same way).
//   * A duration is a signed number of nanoseconds that fits int64 (Go's time.Duration);
//     arithmetic past that range is "integer overflow".
//
// All functions are pure and thread-safe. Errors are absl::InvalidArgumentError carrying the
// cel-go message.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace qm::cel {

struct Timestamp {
  int64_t seconds = 0;  // since 1970-01-01T00:00:00Z, floor
  int32_t nanos = 0;    // [0, 999999999]
  int32_t offset = 0;   // seconds east of UTC of the text it was parsed from (display only)
};

// The first and last second cel-go accepts (0001-01-01T00:00:00Z, 9999-12-31T23:59:59Z).
inline constexpr int64_t kMinTimestampSeconds = -62135596800;
inline constexpr int64_t kMaxTimestampSeconds = 253402300799;

// timestamp(string): RFC 3339 ("2006-01-02T15:04:05[.frac](Z|+07:00)"), as Go's
// time.Parse(time.RFC3339). Errors: "type conversion error from 'string' to
// 'google.protobuf.Timestamp'" for bad text, "timestamp overflow" outside the range.
absl::StatusOr<Timestamp> ParseTimestamp(std::string_view text);
// timestamp(int): Unix seconds, UTC. Error: "timestamp overflow".
absl::StatusOr<Timestamp> TimestampFromUnixSeconds(int64_t seconds);
// string(timestamp): Go's RFC3339Nano in the timestamp's own offset ("Z" for UTC).
std::string FormatTimestamp(const Timestamp& t);
// -1, 0, 1 by instant (offsets do not matter).
int CompareTimestamps(const Timestamp& a, const Timestamp& b);

// duration(string): Go's time.ParseDuration ("1h30m", "-1.5s", "300ms", units ns us µs ms s m
// h). Error: "type conversion error from 'string' to 'google.protobuf.Duration'".
absl::StatusOr<int64_t> ParseDuration(std::string_view text);
// string(duration): seconds with the shortest exact decimal, and "s" ("90s", "1.5s",
// "0.000000001s").
std::string FormatDuration(int64_t nanos);

// timestamp + duration, timestamp - duration. Errors: "integer overflow", "timestamp overflow".
absl::StatusOr<Timestamp> AddDuration(const Timestamp& t, int64_t nanos);
absl::StatusOr<Timestamp> SubtractDuration(const Timestamp& t, int64_t nanos);
// timestamp - timestamp. Error: "integer overflow" when the difference does not fit a duration.
absl::StatusOr<int64_t> SubtractTimestamps(const Timestamp& a, const Timestamp& b);
// duration + duration, duration - duration. Error: "integer overflow".
absl::StatusOr<int64_t> AddDurations(int64_t a, int64_t b);
absl::StatusOr<int64_t> SubtractDurations(int64_t a, int64_t b);

// True for getFullYear, getMonth, getDate, getDayOfMonth, getDayOfYear, getDayOfWeek, getHours,
// getMinutes, getSeconds, getMilliseconds.
bool IsTimestampAccessor(std::string_view fn);
// True for getHours, getMinutes, getSeconds, getMilliseconds.
bool IsDurationAccessor(std::string_view fn);
// A calendar field of `t` in time zone `tz` ("UTC", an IANA name such as "Europe/Berlin", or a
// fixed offset such as "+01:00" / "-05:30"); month, day of month (getDayOfMonth) and day of
// year are zero-based, getDate is one-based, Sunday is day 0. Errors are Go's: "unknown time
// zone X", `strconv.Atoi: parsing "x": invalid syntax`.
// REQUIRES: IsTimestampAccessor(fn).
absl::StatusOr<int64_t> TimestampAccessor(const Timestamp& t, std::string_view fn,
                                          std::string_view tz = "UTC");
// The duration in whole hours, minutes, seconds or milliseconds (truncated toward zero).
// REQUIRES: IsDurationAccessor(fn).
int64_t DurationAccessor(int64_t nanos, std::string_view fn);

}  // namespace qm::cel
