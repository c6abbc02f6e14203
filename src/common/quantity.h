#pragma once

#include <compare>
#include <cstdint>
#include <string>

#include "absl/numeric/int128.h"
#include "absl/status/statusor.h"

namespace qm {

// A Kubernetes resource quantity ("80Gi", "500m", "1.5e3") held exactly as a count of
// nano-units, which is the finest precision Kubernetes keeps.
//
// Parsing follows apimachinery's ParseQuantity: the same grammar and errors, digits below 1n
// rounded away from zero, binary-SI values capped at 2^63-1, and String() producing the same
// canonical text Kubernetes serializes. One deliberate difference: Kubernetes keeps arbitrarily
// large decimal quantities, this type rejects magnitudes above 10^21 units ("1000E"). Because
// every parsed value is bounded that way, sums and differences of up to 10^8 parsed quantities
// cannot overflow.
class Quantity {
 public:
  // How the value prefers to be printed, as in Kubernetes.
  enum class Format { kDecimalSI, kBinarySI, kDecimalExponent };

  static constexpr int64_t kNanosPerUnit = 1'000'000'000;
  // 10^21 units, i.e. 10^30 nano-units: the largest magnitude ParseQuantity accepts.
  static absl::int128 MaxMagnitudeNanos();

  // Zero, printed as "0".
  Quantity() = default;
  static Quantity FromInt(int64_t units, Format format = Format::kDecimalSI);
  static Quantity FromNanos(absl::int128 nanos, Format format = Format::kDecimalSI);

  absl::int128 nanos() const { return nanos_; }
  Format format() const { return format_; }
  int Sign() const { return nanos_ > 0 ? 1 : (nanos_ < 0 ? -1 : 0); }
  bool IsZero() const { return nanos_ == 0; }
  // True when the value has a part below one unit ("1500m", "0.5").
  bool HasFraction() const { return nanos_ % kNanosPerUnit != 0; }
  // The value in whole units rounded away from zero, like Kubernetes' Quantity.Value();
  // saturates at the int64 limits where Kubernetes would overflow.
  int64_t Value() const;

  // The canonical text Kubernetes would serialize for this value ("1Gi", "1500m", "0").
  std::string String() const;

  // Numeric comparison; the format does not take part.
  std::strong_ordering operator<=>(const Quantity& other) const {
    if (nanos_ < other.nanos_) return std::strong_ordering::less;
    return nanos_ == other.nanos_ ? std::strong_ordering::equal : std::strong_ordering::greater;
  }
  bool operator==(const Quantity& other) const { return nanos_ == other.nanos_; }

  // Exact arithmetic. The result keeps this operand's format unless this operand is zero, in
  // which case it takes the other's (as Kubernetes' Add and Sub do).
  Quantity operator+(const Quantity& other) const;
  Quantity operator-(const Quantity& other) const;

 private:
  absl::int128 nanos_ = 0;
  Format format_ = Format::kDecimalSI;
  // The input text, kept only where Kubernetes keeps it verbatim as the serialized form.
  std::string verbatim_;

  friend absl::StatusOr<Quantity> ParseQuantity(const std::string& text);
};

// Parses Kubernetes quantity syntax: an optionally signed decimal number followed by a decimal
// SI suffix (n, u, m, "", k, M, G, T, P, E), a binary SI suffix (Ki, Mi, Gi, Ti, Pi, Ei) or a
// decimal exponent (e3, E-2). InvalidArgument carries Kubernetes' error text, e.g.
// "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".
absl::StatusOr<Quantity> ParseQuantity(const std::string& text);

}  // namespace qm
