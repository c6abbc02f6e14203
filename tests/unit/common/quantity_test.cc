#include "common/quantity.h"

#include <cstdint>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace qm {
namespace {

constexpr char kFormatError[] =
    "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
constexpr char kSuffixError[] = "unable to parse quantity's suffix";

Quantity MustParse(const std::string& text) {
  absl::StatusOr<Quantity> q = ParseQuantity(text);
  EXPECT_TRUE(q.ok()) << text << ": " << q.status();
  return q.ok() ? *q : Quantity();
}

absl::int128 Nanos(int64_t units) { return absl::int128(units) * Quantity::kNanosPerUnit; }

struct CanonicalCase {
  std::string input;
  absl::int128 nanos;
  std::string canonical;
};

class QuantityCanonicalTest : public testing::TestWithParam<CanonicalCase> {};

TEST_P(QuantityCanonicalTest, ParsesToValueAndKubernetesText) {
  const CanonicalCase& c = GetParam();
  Quantity q = MustParse(c.input);
  EXPECT_EQ(q.nanos(), c.nanos) << c.input;
  EXPECT_EQ(q.String(), c.canonical) << c.input;
}

INSTANTIATE_TEST_SUITE_P(
    Kubernetes, QuantityCanonicalTest,
    testing::Values(
        CanonicalCase{"0", 0, "0"}, CanonicalCase{"1", Nanos(1), "1"},
        CanonicalCase{"-1", Nanos(-1), "-1"},
        // Kubernetes keeps an already-canonical input verbatim, sign and leading zeros included.
        CanonicalCase{"+1", Nanos(1), "+1"}, CanonicalCase{"01", Nanos(1), "01"},
        CanonicalCase{"1.5", 1'500'000'000, "1500m"}, CanonicalCase{"0.5", 500'000'000, "500m"},
        CanonicalCase{"100m", 100'000'000, "100m"}, CanonicalCase{"1000m", Nanos(1), "1"},
        CanonicalCase{"1.5k", Nanos(1500), "1500"}, CanonicalCase{"10000", Nanos(10000), "10k"},
        CanonicalCase{"1n", 1, "1n"}, CanonicalCase{"1u", 1000, "1u"},
        CanonicalCase{"80G", Nanos(80'000'000'000), "80G"},
        CanonicalCase{"1Gi", Nanos(1LL << 30), "1Gi"},
        CanonicalCase{"80Gi", Nanos(80LL << 30), "80Gi"},
        CanonicalCase{"1024Mi", Nanos(1LL << 30), "1Gi"},
        CanonicalCase{"1536Mi", Nanos(1536LL << 20), "1536Mi"},
        CanonicalCase{"0.5Gi", Nanos(1LL << 29), "512Mi"},
        CanonicalCase{"1.5Ki", Nanos(1536), "1536"}, CanonicalCase{"0.5Ki", Nanos(512), "512"},
        CanonicalCase{"1Ei", Nanos(1LL << 60), "1Ei"}, CanonicalCase{"1e3", Nanos(1000), "1e3"},
        CanonicalCase{"1E3", Nanos(1000), "1E3"}, CanonicalCase{"1.5e3", Nanos(1500), "1500"},
        CanonicalCase{"12e4", Nanos(120000), "120e3"}, CanonicalCase{"1e-3", 1'000'000, "1e-3"},
        CanonicalCase{"1000E", absl::int128(1'000'000'000'000'000'000) * 1'000'000'000'000,
                      "1000E"},
        // Digits below one nano-unit round away from zero.
        CanonicalCase{"0.0000000001", 1, "1n"}, CanonicalCase{"-0.0000000001", -1, "-1n"},
        CanonicalCase{"1.0000000001", 1'000'000'001, "1000000001n"},
        // A lone "." parses as zero in Kubernetes too.
        CanonicalCase{".", 0, "0"}, CanonicalCase{"-0", 0, "0"}, CanonicalCase{"000", 0, "0"}));

TEST(QuantityTest, BinaryQuantitiesAreCappedAtInt64Units) {
  Quantity q = MustParse("16Ei");
  EXPECT_EQ(q.nanos(), Nanos(std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(q.String(), "9223372036854775807");
  EXPECT_EQ(MustParse("-16Ei").nanos(), -Nanos(std::numeric_limits<int64_t>::max()));
}

// Whole numbers with a binary suffix are shifted as integers, the others through their decimal
// text: both agree at the edges of int64 and of the integer path's 18 digits.
TEST(QuantityTest, BinaryWholeNumbersAgreeWithTheDecimalPath) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  // 2^33 - 1 GiB is 2^63 - 2^30 bytes, just inside int64; 2^33 GiB is 2^63, clamped.
  EXPECT_EQ(MustParse("8589934591Gi").nanos(), Nanos(kMax - (int64_t{1} << 30) + 1));
  EXPECT_EQ(MustParse("8589934592Gi").nanos(), Nanos(kMax));
  // 18 digits take the integer path, 19 the text path; both clamp alike.
  EXPECT_EQ(MustParse("999999999999999999Ki").nanos(), Nanos(kMax));
  EXPECT_EQ(MustParse("9999999999999999999Ki").nanos(), Nanos(kMax));
  EXPECT_EQ(MustParse("000000000000000001Ki").nanos(), Nanos(1024));
  EXPECT_EQ(MustParse("1.0Ki").nanos(), MustParse("1Ki").nanos());
  EXPECT_EQ(MustParse("7Ei").nanos(), Nanos(int64_t{7} << 60));
  EXPECT_EQ(MustParse("-3Mi").nanos(), -Nanos(int64_t{3} << 20));
}

TEST(QuantityTest, RejectsMalformedTextWithKubernetesErrors) {
  for (const char* text : {"", "1.5.5", "1Gx", " 1", "1 ", "abc", "1e3.5"}) {
    absl::StatusOr<Quantity> q = ParseQuantity(text);
    ASSERT_FALSE(q.ok()) << "'" << text << "'";
    EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(q.status().message(), kFormatError) << "'" << text << "'";
  }
  for (const char* text : {"1K", "1ee3", "1e", "1Kii", "1i", "1e+", "1mi", "--1"}) {
    absl::StatusOr<Quantity> q = ParseQuantity(text);
    ASSERT_FALSE(q.ok()) << text;
    EXPECT_EQ(q.status().message(), kSuffixError) << text;
  }
}

TEST(QuantityTest, RejectsDecimalMagnitudesAboveThousandExa) {
  EXPECT_TRUE(ParseQuantity("1000E").ok());
  absl::StatusOr<Quantity> q = ParseQuantity("1001E");
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseQuantity("1e30").ok());
  EXPECT_TRUE(ParseQuantity("0e999999").ok());
}

TEST(QuantityTest, ComparesByValueOnly) {
  EXPECT_EQ(MustParse("1000m"), MustParse("1"));
  EXPECT_EQ(MustParse("1Ki"), MustParse("1024"));
  EXPECT_GT(MustParse("1Gi"), MustParse("1G"));
  EXPECT_LT(MustParse("-1"), MustParse("1n"));
  EXPECT_LT(MustParse("999m"), MustParse("1"));
}

TEST(QuantityTest, ValueRoundsAwayFromZero) {
  EXPECT_EQ(MustParse("1500m").Value(), 2);
  EXPECT_EQ(MustParse("-1500m").Value(), -2);
  EXPECT_EQ(MustParse("2").Value(), 2);
  EXPECT_EQ(MustParse("1n").Value(), 1);
  EXPECT_TRUE(MustParse("1n").HasFraction());
  EXPECT_FALSE(MustParse("1Gi").HasFraction());
  EXPECT_EQ(MustParse("1000E").Value(), std::numeric_limits<int64_t>::max());
}

TEST(QuantityTest, ArithmeticIsExactAndKeepsFormat) {
  Quantity sum = MustParse("1Gi") + MustParse("512Mi");
  EXPECT_EQ(sum.String(), "1536Mi");
  EXPECT_EQ((MustParse("1") - MustParse("1n")).String(), "999999999n");
  EXPECT_EQ((Quantity() + MustParse("2Gi")).String(), "2Gi");
  EXPECT_EQ((MustParse("2Gi") - MustParse("2Gi")).String(), "0");
  EXPECT_EQ(Quantity::FromInt(3, Quantity::Format::kBinarySI).String(), "3");
  EXPECT_EQ(Quantity::FromInt(4096, Quantity::Format::kBinarySI).String(), "4Ki");
}

}  // namespace
}  // namespace qm
