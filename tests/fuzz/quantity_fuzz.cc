// libFuzzer target for resource quantities (common/quantity.h).
//
// Input: `a` [ '\n' `b` ]. Each text that parses must print (String) to a canonical text that
// parses back to the same value and prints the same again (one extra step for
// binary-SI values printed as plain integers, as Kubernetes does), agree with itself on Sign,
// IsZero and comparison with zero, and survive FromNanos. Two parsed values must compare
// antisymmetrically, add commutatively, and give a back from (a + b) - b and (a - b) + b.
// Never a crash, hang or exception; a finding aborts (see fuzz_util.h).
#include <compare>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/quantity.h"
#include "fuzz_util.h"

namespace {

using qm::Quantity;
using qm::fuzz::Crash;

std::string Show(const Quantity& q) { return q.String(); }

void One(const std::string& text, const Quantity& q) {
  const std::string canonical = q.String();
  auto again = qm::ParseQuantity(canonical);
  if (!again.ok()) {
    Crash("String() of \"" + text + "\" is \"" + canonical +
          "\", which does not parse: " + std::string(again.status().message()));
  }
  if (*again != q) Crash("\"" + text + "\" -> \"" + canonical + "\" parses to another value");
  // Kubernetes prints a binary-SI value that is not a multiple of 1024 as a plain integer
  // ("62.5Ki" -> "64000"), which parses as decimal-SI and prints as "64k": one more step,
  // then a fixed point. Any other change of the text is a finding.
  std::string settled = canonical;
  if (again->String() != canonical) {
    if (q.format() != Quantity::Format::kBinarySI ||
        again->format() != Quantity::Format::kDecimalSI) {
      Crash("\"" + text + "\" -> \"" + canonical + "\" -> \"" + again->String() +
            "\": the canonical form is not a fixed point");
    }
    settled = again->String();
  }
  auto third = qm::ParseQuantity(settled);
  if (!third.ok() || *third != q || third->String() != settled) {
    Crash("\"" + text + "\" -> \"" + canonical + "\" -> \"" + settled +
          "\": the canonical form does not settle");
  }
  const auto vs_zero = q <=> Quantity();
  if ((q.Sign() > 0) != (vs_zero > 0) || (q.Sign() < 0) != (vs_zero < 0) ||
      q.IsZero() != (q.Sign() == 0)) {
    Crash("Sign/IsZero/compare disagree for \"" + text + "\"");
  }
  if (Quantity::FromNanos(q.nanos(), q.format()) != q) Crash("FromNanos differs: " + text);
  (void)q.Value();
  (void)q.HasFraction();
}

void Two(const Quantity& a, const Quantity& b) {
  const auto ab = a <=> b, ba = b <=> a;
  if ((ab < 0) != (ba > 0) || (ab == 0) != (ba == 0)) {
    Crash("comparison is not antisymmetric: " + Show(a) + " vs " + Show(b));
  }
  if (a + b != b + a) Crash("addition is not commutative: " + Show(a) + " + " + Show(b));
  if ((a + b) - b != a || (a - b) + b != a) {
    Crash("(a + b) - b or (a - b) + b is not a: " + Show(a) + ", " + Show(b));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  auto nl = in.find('\n');
  std::string a_text = in.substr(0, nl);
  std::string b_text = nl == std::string::npos ? "" : in.substr(nl + 1);
  auto a = qm::ParseQuantity(a_text);
  auto b = qm::ParseQuantity(b_text);
  if (!a.ok() && a.status().message().empty()) Crash("parse error without a message");
  if (a.ok()) One(a_text, *a);
  if (b.ok()) One(b_text, *b);
  if (a.ok() && b.ok()) Two(*a, *b);
  return 0;
}
