#include "common/clock.h"

#include <chrono>
#include <string>

#include <gtest/gtest.h>

namespace qm {
namespace {

using std::chrono::days;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using std::chrono::system_clock;

constexpr int64_t kSample = 1795313177;  // 2026-11-22T02:06:17Z

system_clock::time_point At(int64_t unix_seconds) {
  return system_clock::time_point(seconds(unix_seconds));
}

system_clock::time_point MustParse(const std::string& text) {
  system_clock::time_point t;
  EXPECT_TRUE(ParseRfc3339(text, &t)) << text;
  return t;
}

// --- FormatRfc3339 ----------------------------------------------------------------------------

TEST(ClockTest, FormatsUtcWithSecondPrecision) {
  EXPECT_EQ(FormatRfc3339(At(0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(At(kSample)), "2026-11-22T02:06:17Z");
  EXPECT_EQ(FormatRfc3339(At(951782400)), "2000-02-29T00:00:00Z");  // leap day
}

TEST(ClockTest, FormatTruncatesFractionalSeconds) {
  EXPECT_EQ(FormatRfc3339(At(kSample) + milliseconds(999)), "2026-11-22T02:06:17Z");
}

TEST(ClockTest, SystemClockIsCloseToNow) {
  SystemClock clock;
  auto before = system_clock::now();
  auto now = clock.Now();
  auto after = system_clock::now();
  EXPECT_LE(before, now);
  EXPECT_LE(now, after);
}

// --- ParseRfc3339 -----------------------------------------------------------------------------

TEST(ClockTest, ParsesUtcTimestamp) {
  EXPECT_EQ(MustParse("2026-11-22T02:06:17Z"), At(kSample));
  EXPECT_EQ(MustParse("1970-01-01T00:00:00Z"), At(0));
  EXPECT_EQ(MustParse("2026-11-22T02:06:17z"), At(kSample));
}

TEST(ClockTest, FormatAndParseRoundTrip) {
  for (int64_t secs : {int64_t{0}, kSample, int64_t{951782400}, int64_t{4102444799}}) {
    EXPECT_EQ(MustParse(FormatRfc3339(At(secs))), At(secs)) << secs;
  }
}

TEST(ClockTest, ParseDropsFractionalSeconds) {
  EXPECT_EQ(MustParse("2026-11-22T02:06:17.5Z"), At(kSample));
  EXPECT_EQ(MustParse("2026-11-22T02:06:17.123456789Z"), At(kSample));
  EXPECT_EQ(MustParse("2026-11-22T04:06:17.25+02:00"), At(kSample));
}

TEST(ClockTest, ParseAppliesNumericOffsets) {
  EXPECT_EQ(MustParse("2026-11-22T04:06:17+02:00"), At(kSample));
  EXPECT_EQ(MustParse("2026-11-21T21:06:17-05:00"), At(kSample));
  EXPECT_EQ(MustParse("2026-11-22T07:36:17+05:30"), At(kSample));
  EXPECT_EQ(MustParse("2026-11-22T02:06:17+00:00"), At(kSample));
  EXPECT_EQ(MustParse("2026-11-22T02:06:17-00:00"), At(kSample));
}

TEST(ClockTest, ParseRejectsNonTimestamps) {
  for (const char* text :
       {"", "now", "2026-11-22", "2026-11-22T02:06:17",  // no zone
        "2026-11-22T02:06Z", "2026-11-22T02:06:17Zjunk", "2026-11-22T02:06:17+0200",
        "2026-11-22T02:06:17+02:00x", "2026-11-22T02:06:17 UTC", "2026-13-22T02:06:17Z",
        "2026-00-22T02:06:17Z", "2026-11-32T02:06:17Z", "2026-11-00T02:06:17Z",
        "2026-11-22T24:06:17Z", "2026-11-22T02:60:17Z", "2026-11-22T02:06:61Z"}) {
    system_clock::time_point t = At(42);
    EXPECT_FALSE(ParseRfc3339(text, &t)) << text;
    EXPECT_EQ(t, At(42)) << "output written for " << text;
  }
}

TEST(ClockTest, ParseClampsTimesTo1900Until2150) {
  // Nanoseconds in 64 bits reach about 292 years either side of 1970 and ages subtract times;
  // Kubernetes allows years 0-9999.
  EXPECT_EQ(MustParse("1013-01-15T08:00:00Z"), At(-2208988800));
  EXPECT_EQ(MustParse("0000-01-01T00:00:00Z"), At(-2208988800));
  EXPECT_EQ(MustParse("9999-12-31T23:59:59Z"), At(5680281600));
  EXPECT_EQ(MustParse("1900-01-01T00:00:01Z"), At(-2208988799));
  EXPECT_EQ(MustParse("2149-12-31T23:59:59Z"), At(5680281599));
  // The extremes are 250 years apart: their difference and their age from now fit.
  EXPECT_GT(MustParse("9999-01-01T00:00:00Z") - MustParse("0001-01-01T00:00:00Z"),
            system_clock::duration::zero());
}

// --- ShortHumanDuration (kubectl ages, apimachinery duration.HumanDuration) -------------------

TEST(ClockTest, HumanDurationShowsSecondsBelowTwoMinutes) {
  EXPECT_EQ(ShortHumanDuration(seconds(0)), "0s");
  EXPECT_EQ(ShortHumanDuration(milliseconds(999)), "0s");
  EXPECT_EQ(ShortHumanDuration(seconds(8)), "8s");
  EXPECT_EQ(ShortHumanDuration(seconds(59)), "59s");
  EXPECT_EQ(ShortHumanDuration(seconds(60)), "60s");
  EXPECT_EQ(ShortHumanDuration(seconds(119)), "119s");
}

TEST(ClockTest, HumanDurationShowsMinutesAndSecondsBelowTenMinutes) {
  EXPECT_EQ(ShortHumanDuration(seconds(120)), "2m");
  EXPECT_EQ(ShortHumanDuration(minutes(5)), "5m");
  EXPECT_EQ(ShortHumanDuration(minutes(5) + seconds(30)), "5m30s");
  EXPECT_EQ(ShortHumanDuration(minutes(9) + seconds(59)), "9m59s");
}

TEST(ClockTest, HumanDurationShowsMinutesBelowThreeHours) {
  EXPECT_EQ(ShortHumanDuration(minutes(10)), "10m");
  EXPECT_EQ(ShortHumanDuration(minutes(10) + seconds(59)), "10m");
  EXPECT_EQ(ShortHumanDuration(minutes(179)), "179m");
}

TEST(ClockTest, HumanDurationShowsHoursAndMinutesBelowEightHours) {
  EXPECT_EQ(ShortHumanDuration(hours(3)), "3h");
  EXPECT_EQ(ShortHumanDuration(hours(3) + minutes(30)), "3h30m");
  EXPECT_EQ(ShortHumanDuration(hours(7) + minutes(59) + seconds(59)), "7h59m");
}

TEST(ClockTest, HumanDurationShowsHoursBelowTwoDays) {
  EXPECT_EQ(ShortHumanDuration(hours(8)), "8h");
  EXPECT_EQ(ShortHumanDuration(hours(8) + minutes(30)), "8h");
  EXPECT_EQ(ShortHumanDuration(hours(47)), "47h");
}

TEST(ClockTest, HumanDurationShowsDaysAndHoursBelowEightDays) {
  EXPECT_EQ(ShortHumanDuration(hours(48)), "2d");
  EXPECT_EQ(ShortHumanDuration(days(2) + hours(5)), "2d5h");
  EXPECT_EQ(ShortHumanDuration(days(7) + hours(23)), "7d23h");
}

TEST(ClockTest, HumanDurationShowsDaysBelowTwoYears) {
  EXPECT_EQ(ShortHumanDuration(days(8)), "8d");
  EXPECT_EQ(ShortHumanDuration(days(8) + hours(5)), "8d");
  EXPECT_EQ(ShortHumanDuration(days(729)), "729d");
}

TEST(ClockTest, HumanDurationShowsYearsAndDaysBelowEightYears) {
  EXPECT_EQ(ShortHumanDuration(days(730)), "2y");
  EXPECT_EQ(ShortHumanDuration(days(3 * 365)), "3y");
  EXPECT_EQ(ShortHumanDuration(days(3 * 365 + 10)), "3y10d");
}

TEST(ClockTest, HumanDurationShowsYearsFromEightYears) {
  EXPECT_EQ(ShortHumanDuration(days(8 * 365)), "8y");
  EXPECT_EQ(ShortHumanDuration(days(9 * 365 + 100)), "9y");
}

}  // namespace
}  // namespace qm
