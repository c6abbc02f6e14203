#pragma once

// Kubernetes' CEL network libraries (k8s.io/apiserver/pkg/cel/library ip.go, cidr.go, urls.go):
// IP addresses and CIDR prefixes parsed as Go's net/netip does, and URLs parsed as Go's net/url
// does, with Kubernetes' error texts. All functions are pure and thread-safe; errors are
// absl::InvalidArgumentError carrying the message cel-go reports.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace qm::cel {

struct IpAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // IPv4 in bytes[0..3]

  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

// ip(string): IPv4 (no leading zeros) or IPv6, without zone and not IPv4-mapped. Errors:
//   IP Address "x" parse error during conversion from string: ParseAddr("x"): unable to parse IP
//   IP address "fe80::1%eth0" with zone value is not allowed
//   IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed
absl::StatusOr<IpAddress> ParseIp(std::string_view text);
// The canonical text (Go's netip.Addr.String(): RFC 5952 for IPv6).
std::string FormatIp(const IpAddress& ip);
bool IpIsUnspecified(const IpAddress& ip);
bool IpIsLoopback(const IpAddress& ip);
bool IpIsLinkLocalMulticast(const IpAddress& ip);
bool IpIsLinkLocalUnicast(const IpAddress& ip);
bool IpIsGlobalUnicast(const IpAddress& ip);

struct Cidr {
  IpAddress addr;  // as written (host bits may be set)
  int bits = 0;

  friend bool operator==(const Cidr&, const Cidr&) = default;
};

// cidr(string): "addr/bits". Errors start with "network address parse error during conversion
// from string: " (twice for netip errors, as Kubernetes wraps twice).
absl::StatusOr<Cidr> ParseCidr(std::string_view text);
std::string FormatCidr(const Cidr& cidr);
Cidr MaskedCidr(const Cidr& cidr);
bool CidrContainsIp(const Cidr& cidr, const IpAddress& ip);
// Kubernetes' test, literally: masked(cidr) == (other.addr, cidr.bits) and cidr.bits <=
// other.bits. So the other prefix's address must equal the masked network address.
bool CidrContainsCidr(const Cidr& cidr, const Cidr& other);

struct Url {
  std::string text;  // as given
  std::string scheme;
  std::string opaque;
  std::string host;      // host[:port], as written
  std::string raw_path;  // the path as written (escaped)
  std::string path;      // unescaped
  std::string raw_query;
};

// url(string): an absolute URI or an absolute path (Go's url.ParseRequestURI, then url.Parse).
// Errors: `URL parse error during conversion from string: parse "x": invalid URI for request`.
absl::StatusOr<Url> ParseUrl(std::string_view text);
// u.Hostname(): the host without port and IPv6 brackets.
std::string UrlHostname(const Url& url);
// u.Port(): the digits after the host's last colon, or "".
std::string UrlPort(const Url& url);
// u.EscapedPath().
std::string UrlEscapedPath(const Url& url);
// u.Query(): key -> values in first-seen key order; malformed pairs are skipped as Go does.
std::vector<std::pair<std::string, std::vector<std::string>>> UrlQuery(const Url& url);

}  // namespace qm::cel
