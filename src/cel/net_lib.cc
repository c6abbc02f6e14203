#include "cel/net_lib.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "absl/status/status.h"
#include "cel/ast.h"

namespace qm::cel {
namespace {

absl::Status Error(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

// Go's netip parseAddrError text.
std::string AddrError(std::string_view in, std::string_view msg, std::string_view at = {},
                      bool has_at = false) {
  std::string out = "ParseAddr(" + QuoteString(in) + "): " + std::string(msg);
  if (has_at && !at.empty()) out += " (at " + QuoteString(at) + ")";
  return out;
}

// Parses dotted-quad text in[off, end) into out[0..3]; returns an error text or "".
std::string ParseV4Fields(std::string_view in, size_t off, size_t end, uint8_t* out) {
  std::string_view s = in.substr(off, end - off);
  int val = 0, pos = 0, dig = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      if (dig == 1 && val == 0) return AddrError(in, "IPv4 field has octet with leading zero");
      val = val * 10 + (c - '0');
      ++dig;
      if (val > 255) return AddrError(in, "IPv4 field has value >255");
    } else if (c == '.') {
      if (i == 0 || i == s.size() - 1 || s[i - 1] == '.') {
        return AddrError(in, "IPv4 field must have at least one digit", s.substr(i), true);
      }
      if (pos == 3) return AddrError(in, "IPv4 address too long");
      out[pos++] = static_cast<uint8_t>(val);
      val = 0;
      dig = 0;
    } else {
      return AddrError(in, "unexpected character", s.substr(i), true);
    }
  }
  if (pos < 3) return AddrError(in, "IPv4 address too short");
  out[3] = static_cast<uint8_t>(val);
  return "";
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Go's netip.ParseAddr: the address, whether it had a zone, or an error text.
std::string ParseAddr(std::string_view in, IpAddress* ip, bool* zoned) {
  *zoned = false;
  *ip = IpAddress{};
  char kind = 0;
  for (char c : in) {
    if (c == '.' || c == ':' || c == '%') {
      kind = c;
      break;
    }
  }
  if (kind == '%') return AddrError(in, "missing IPv6 address");
  if (kind == 0) return AddrError(in, "unable to parse IP");
  if (kind == '.') return ParseV4Fields(in, 0, in.size(), ip->bytes.data());
  ip->v6 = true;
  std::string_view s = in;
  std::string_view zone;
  const size_t pct = s.find('%');
  if (pct != std::string_view::npos) {
    zone = s.substr(pct + 1);
    s = s.substr(0, pct);
    if (zone.empty()) return AddrError(in, "zone must be a non-empty string");
    *zoned = true;
  }
  uint8_t* b = ip->bytes.data();
  int ellipsis = -1;
  if (s.size() >= 2 && s[0] == ':' && s[1] == ':') {
    ellipsis = 0;
    s.remove_prefix(2);
    if (s.empty()) return "";
  }
  int i = 0;
  while (i < 16) {
    size_t off = 0;
    uint32_t acc = 0;
    for (; off < s.size(); ++off) {
      const int h = HexValue(s[off]);
      if (h < 0) break;
      acc = (acc << 4) + static_cast<uint32_t>(h);
      if (off > 3) return AddrError(in, "each group must have 4 or less digits", s, true);
      if (acc > 0xffff) return AddrError(in, "IPv6 field has value >=2^16", s, true);
    }
    if (off == 0) {
      return AddrError(in, "each colon-separated field must have at least one digit", s, true);
    }
    if (off < s.size() && s[off] == '.') {
      if (ellipsis < 0 && i != 12) {
        return AddrError(in, "embedded IPv4 address must replace the final 2 fields of the address",
                         s, true);
      }
      if (i + 4 > 16) {
        return AddrError(
            in, "too many hex fields to fit an embedded IPv4 at the end of the address", s, true);
      }
      size_t end = in.size();
      if (!zone.empty()) end -= zone.size() + 1;
      std::string err = ParseV4Fields(in, end - s.size(), end, b + i);
      if (!err.empty()) return err;
      s = {};
      i += 4;
      break;
    }
    b[i] = static_cast<uint8_t>(acc >> 8);
    b[i + 1] = static_cast<uint8_t>(acc);
    i += 2;
    s.remove_prefix(off);
    if (s.empty()) break;
    if (s[0] != ':') return AddrError(in, "unexpected character, want colon", s, true);
    if (s.size() == 1) return AddrError(in, "colon must be followed by more characters", s, true);
    s.remove_prefix(1);
    if (s[0] == ':') {
      if (ellipsis >= 0) return AddrError(in, "multiple :: in address", s, true);
      ellipsis = i;
      s.remove_prefix(1);
      if (s.empty()) break;
    }
  }
  if (!s.empty()) return AddrError(in, "trailing garbage after address", s, true);
  if (i < 16) {
    if (ellipsis < 0) return AddrError(in, "address string too short");
    const int n = 16 - i;
    for (int j = i - 1; j >= ellipsis; --j) b[j + n] = b[j];
    std::fill(b + ellipsis, b + ellipsis + n, 0);
  } else if (ellipsis >= 0) {
    return AddrError(in, "the :: must expand to at least one field of zeros");
  }
  return "";
}

bool Is4In6(const IpAddress& ip) {
  if (!ip.v6) return false;
  for (int i = 0; i < 10; ++i) {
    if (ip.bytes[i] != 0) return false;
  }
  return ip.bytes[10] == 0xff && ip.bytes[11] == 0xff;
}

int BitLen(const IpAddress& ip) { return ip.v6 ? 128 : 32; }

IpAddress MaskIp(const IpAddress& ip, int bits) {
  IpAddress out = ip;
  const int len = BitLen(ip) / 8;
  for (int i = 0; i < len; ++i) {
    const int keep = std::clamp(bits - i * 8, 0, 8);
    out.bytes[i] &= static_cast<uint8_t>(0xff00 >> keep);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// URLs (Go's net/url)

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

enum class Encode { kPath, kHost, kUserPassword, kQueryComponent };

bool ShouldEscape(char c, Encode mode) {
  if (IsAlpha(c) || IsDigit(c)) return false;
  if (mode == Encode::kHost) {
    switch (c) {
      case '!':
      case '$':
      case '&':
      case '\'':
      case '(':
      case ')':
      case '*':
      case '+':
      case ',':
      case ';':
      case '=':
      case ':':
      case '[':
      case ']':
      case '<':
      case '>':
      case '"':
        return false;
      default:
        break;
    }
  }
  switch (c) {
    case '-':
    case '_':
    case '.':
    case '~':
      return false;
    case '$':
    case '&':
    case '+':
    case ',':
    case '/':
    case ':':
    case ';':
    case '=':
    case '?':
    case '@':
      switch (mode) {
        case Encode::kPath:
          return c == '?';
        case Encode::kUserPassword:
          return c == '@' || c == '/' || c == '?' || c == ':';
        case Encode::kQueryComponent:
          return true;
        default:
          return false;
      }
    default:
      break;
  }
  return true;
}

// Go's url.unescape; on error returns false and sets *error.
bool Unescape(std::string_view s, Encode mode, std::string* out, std::string* error) {
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size() || HexValue(s[i + 1]) < 0 || HexValue(s[i + 2]) < 0) {
        std::string_view bad = s.substr(i, 3);
        *error = "invalid URL escape " + QuoteString(bad);
        return false;
      }
      out->push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
      continue;
    }
    if (c == '+' && mode == Encode::kQueryComponent) {
      out->push_back(' ');
      continue;
    }
    if (mode == Encode::kHost && static_cast<unsigned char>(c) < 0x80 && ShouldEscape(c, mode)) {
      *error = "invalid character " + QuoteString(std::string_view(&c, 1)) + " in host name";
      return false;
    }
    out->push_back(c);
  }
  return true;
}

std::string Escape(std::string_view s, Encode mode) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    if (ShouldEscape(c, mode)) {
      const auto u = static_cast<unsigned char>(c);
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

bool ValidEncodedPath(std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '!':
      case '$':
      case '&':
      case '\'':
      case '(':
      case ')':
      case '*':
      case '+':
      case ',':
      case ';':
      case '=':
      case ':':
      case '@':
      case '[':
      case ']':
      case '%':
        continue;
      default:
        if (ShouldEscape(c, Encode::kPath)) return false;
    }
  }
  return true;
}

bool ValidUserinfo(std::string_view s) {
  for (char c : s) {
    if (IsAlpha(c) || IsDigit(c)) continue;
    switch (c) {
      case '-':
      case '.':
      case '_':
      case ':':
      case '~':
      case '!':
      case '$':
      case '&':
      case '\'':
      case '(':
      case ')':
      case '*':
      case '+':
      case ',':
      case ';':
      case '=':
      case '%':
      case '@':
        continue;
      default:
        return false;
    }
  }
  return true;
}

bool ValidOptionalPort(std::string_view port) {
  if (port.empty()) return true;
  if (port[0] != ':') return false;
  for (char c : port.substr(1)) {
    if (!IsDigit(c)) return false;
  }
  return true;
}

// Go's parseHost: returns false with *error on failure.
bool ParseHost(std::string_view host, std::string* out, std::string* error) {
  if (!host.empty() && host[0] == '[') {
    const size_t close = host.rfind(']');
    if (close == std::string_view::npos) {
      *error = "missing ']' in host";
      return false;
    }
    std::string_view colon_port = host.substr(close + 1);
    if (!ValidOptionalPort(colon_port)) {
      *error = "invalid port " + QuoteString(colon_port) + " after host";
      return false;
    }
  } else {
    const size_t colon = host.rfind(':');
    if (colon != std::string_view::npos) {
      std::string_view colon_port = host.substr(colon);
      if (!ValidOptionalPort(colon_port)) {
        *error = "invalid port " + QuoteString(colon_port) + " after host";
        return false;
      }
    }
  }
  return Unescape(host, Encode::kHost, out, error);
}

// Go's url.parse(rawURL, viaRequest) reduced to the parts the library exposes.
bool ParseGo(std::string_view raw, bool via_request, Url* u, std::string* error) {
  for (char c : raw) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      *error = "net/url: invalid control character in URL";
      return false;
    }
  }
  if (raw.empty() && via_request) {
    *error = "empty url";
    return false;
  }
  if (raw == "*") {
    u->path = u->raw_path = "*";
    return true;
  }
  // Scheme.
  std::string_view rest = raw;
  for (size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (IsAlpha(c)) continue;
    if (IsDigit(c) || c == '+' || c == '-' || c == '.') {
      if (i == 0) break;
      continue;
    }
    if (c == ':') {
      if (i == 0) {
        *error = "missing protocol scheme";
        return false;
      }
      u->scheme = std::string(raw.substr(0, i));
      std::transform(u->scheme.begin(), u->scheme.end(), u->scheme.begin(),
                     [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
      rest = raw.substr(i + 1);
    }
    break;
  }
  const size_t q = rest.find('?');
  if (q != std::string_view::npos) {
    if (q + 1 != rest.size() || rest.find('?', q + 1) != std::string_view::npos) {
      u->raw_query = std::string(rest.substr(q + 1));
    }
    rest = rest.substr(0, q);
  }
  if (rest.empty() || rest[0] != '/') {
    if (!u->scheme.empty()) {
      u->opaque = std::string(rest);
      return true;
    }
    if (via_request) {
      *error = "invalid URI for request";
      return false;
    }
    const size_t colon = rest.find(':');
    const size_t slash = rest.find('/');
    if (colon != std::string_view::npos && (slash == std::string_view::npos || colon < slash)) {
      *error = "first path segment in URL cannot contain colon";
      return false;
    }
  }
  if ((!u->scheme.empty() || (!via_request && rest.substr(0, 3) != "///")) &&
      rest.substr(0, 2) == "//") {
    std::string_view authority = rest.substr(2);
    rest = {};
    const size_t slash = authority.find('/');
    if (slash != std::string_view::npos) {
      rest = authority.substr(slash);
      authority = authority.substr(0, slash);
    }
    std::string_view host_part = authority;
    const size_t at = authority.rfind('@');
    if (at != std::string_view::npos) {
      if (!ValidUserinfo(authority.substr(0, at))) {
        *error = "net/url: invalid userinfo";
        return false;
      }
      host_part = authority.substr(at + 1);
    }
    std::string host;
    if (!ParseHost(host_part, &host, error)) return false;
    u->host = host;
  }
  std::string path;
  if (!Unescape(rest, Encode::kPath, &path, error)) return false;
  u->path = path;
  u->raw_path = std::string(rest);
  return true;
}

}  // namespace

absl::StatusOr<IpAddress> ParseIp(std::string_view text) {
  IpAddress ip;
  bool zoned = false;
  const std::string err = ParseAddr(text, &ip, &zoned);
  if (!err.empty()) {
    return Error("IP Address " + QuoteString(text) +
                 " parse error during conversion from string: " + err);
  }
  if (zoned) return Error("IP address " + QuoteString(text) + " with zone value is not allowed");
  if (Is4In6(ip)) return Error("IPv4-mapped IPv6 address " + QuoteString(text) + " is not allowed");
  return ip;
}

std::string FormatIp(const IpAddress& ip) {
  char buf[8];
  if (!ip.v6) {
    std::string out;
    for (int i = 0; i < 4; ++i) {
      if (i > 0) out += '.';
      out += std::to_string(ip.bytes[i]);
    }
    return out;
  }
  auto group = [&](int i) { return (ip.bytes[2 * i] << 8) | ip.bytes[2 * i + 1]; };
  int zero_start = 255, zero_end = 255;
  for (int i = 0; i < 8; ++i) {
    int j = i;
    while (j < 8 && group(j) == 0) ++j;
    const int len = j - i;
    if (len >= 2 && len > zero_end - zero_start) {
      zero_start = i;
      zero_end = j;
    }
  }
  std::string out;
  for (int i = 0; i < 8; ++i) {
    if (i == zero_start) {
      out += "::";
      i = zero_end;
      if (i >= 8) break;
    } else if (i > 0) {
      out += ':';
    }
    std::snprintf(buf, sizeof(buf), "%x", group(i));
    out += buf;
  }
  return out;
}

bool IpIsUnspecified(const IpAddress& ip) {
  const int len = BitLen(ip) / 8;
  for (int i = 0; i < len; ++i) {
    if (ip.bytes[i] != 0) return false;
  }
  return true;
}

bool IpIsLoopback(const IpAddress& ip) {
  if (!ip.v6) return ip.bytes[0] == 127;
  for (int i = 0; i < 15; ++i) {
    if (ip.bytes[i] != 0) return false;
  }
  return ip.bytes[15] == 1;
}

bool IpIsLinkLocalMulticast(const IpAddress& ip) {
  if (!ip.v6) return ip.bytes[0] == 224 && ip.bytes[1] == 0 && ip.bytes[2] == 0;
  return ip.bytes[0] == 0xff && (ip.bytes[1] & 0x0f) == 0x02;
}

bool IpIsLinkLocalUnicast(const IpAddress& ip) {
  if (!ip.v6) return ip.bytes[0] == 169 && ip.bytes[1] == 254;
  return ip.bytes[0] == 0xfe && (ip.bytes[1] & 0xc0) == 0x80;
}

bool IpIsGlobalUnicast(const IpAddress& ip) {
  const bool multicast = ip.v6 ? ip.bytes[0] == 0xff : (ip.bytes[0] & 0xf0) == 0xe0;
  if (!ip.v6 && ip.bytes[0] == 255 && ip.bytes[1] == 255 && ip.bytes[2] == 255 &&
      ip.bytes[3] == 255) {
    return false;
  }
  return !IpIsUnspecified(ip) && !IpIsLoopback(ip) && !multicast && !IpIsLinkLocalUnicast(ip);
}

absl::StatusOr<Cidr> ParseCidr(std::string_view text) {
  const std::string outer = "network address parse error during conversion from string: ";
  const std::string prefix = outer + outer + "netip.ParsePrefix(" + QuoteString(text) + "): ";
  const size_t slash = text.rfind('/');
  if (slash == std::string_view::npos) return Error(prefix + "no '/'");
  Cidr cidr;
  bool zoned = false;
  const std::string err = ParseAddr(text.substr(0, slash), &cidr.addr, &zoned);
  if (!err.empty()) return Error(prefix + err);
  if (zoned) return Error(prefix + "IPv6 zones cannot be present in a prefix");
  std::string_view bits = text.substr(slash + 1);
  const std::string bad_bits = prefix + "bad bits after slash: " + QuoteString(bits);
  if (bits.empty() || bits.size() > 3 || (bits.size() > 1 && (bits[0] < '1' || bits[0] > '9'))) {
    return Error(bad_bits);
  }
  int n = 0;
  for (char c : bits) {
    if (!IsDigit(c)) return Error(bad_bits);
    n = n * 10 + (c - '0');
  }
  if (n > BitLen(cidr.addr)) return Error(prefix + "prefix length out of range");
  cidr.bits = n;
  if (Is4In6(cidr.addr)) {
    return Error(outer + "IPv4-mapped IPv6 address " + QuoteString(text) + " is not allowed");
  }
  return cidr;
}

std::string FormatCidr(const Cidr& cidr) {
  return FormatIp(cidr.addr) + "/" + std::to_string(cidr.bits);
}

Cidr MaskedCidr(const Cidr& cidr) { return Cidr{MaskIp(cidr.addr, cidr.bits), cidr.bits}; }

bool CidrContainsIp(const Cidr& cidr, const IpAddress& ip) {
  if (cidr.addr.v6 != ip.v6) return false;
  return MaskIp(ip, cidr.bits) == MaskIp(cidr.addr, cidr.bits);
}

bool CidrContainsCidr(const Cidr& cidr, const Cidr& other) {
  const Cidr masked = MaskedCidr(cidr);
  return masked.addr == other.addr && masked.bits == cidr.bits && cidr.bits <= other.bits;
}

absl::StatusOr<Url> ParseUrl(std::string_view text) {
  const std::string prefix =
      "URL parse error during conversion from string: parse " + QuoteString(text) + ": ";
  Url check;
  std::string error;
  if (!ParseGo(text, /*via_request=*/true, &check, &error)) return Error(prefix + error);
  // Like Kubernetes, parse again without the fragment (url.Parse splits it off first).
  Url u;
  u.text = std::string(text);
  const size_t hash = text.find('#');
  if (!ParseGo(text.substr(0, hash), /*via_request=*/false, &u, &error)) {
    return Error(prefix + error);
  }
  return u;
}

std::string UrlHostname(const Url& url) {
  std::string_view host = url.host;
  if (!host.empty() && host[0] == '[') {
    const size_t close = host.find(']');
    if (close != std::string_view::npos) return std::string(host.substr(1, close - 1));
    return std::string(host.substr(1));
  }
  const size_t colon = host.rfind(':');
  if (colon != std::string_view::npos) host = host.substr(0, colon);
  return std::string(host);
}

std::string UrlPort(const Url& url) {
  std::string_view host = url.host;
  const size_t colon = host.rfind(':');
  if (colon == std::string_view::npos) return "";
  if (host.find(']', colon) != std::string_view::npos) return "";
  std::string_view port = host.substr(colon + 1);
  for (char c : port) {
    if (!IsDigit(c)) return "";
  }
  return std::string(port);
}

std::string UrlEscapedPath(const Url& url) {
  if (!url.raw_path.empty() && ValidEncodedPath(url.raw_path)) return url.raw_path;
  if (url.path == "*") return "*";
  return Escape(url.path, Encode::kPath);
}

std::vector<std::pair<std::string, std::vector<std::string>>> UrlQuery(const Url& url) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  std::string_view q = url.raw_query;
  while (!q.empty()) {
    std::string_view pair = q;
    const size_t amp = q.find('&');
    if (amp != std::string_view::npos) {
      pair = q.substr(0, amp);
      q = q.substr(amp + 1);
    } else {
      q = {};
    }
    if (pair.find(';') != std::string_view::npos || pair.empty()) continue;
    std::string_view key = pair, value;
    const size_t eq = pair.find('=');
    if (eq != std::string_view::npos) {
      key = pair.substr(0, eq);
      value = pair.substr(eq + 1);
    }
    std::string k, v, error;
    if (!Unescape(key, Encode::kQueryComponent, &k, &error) ||
        !Unescape(value, Encode::kQueryComponent, &v, &error)) {
      continue;
    }
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == k; });
    if (it == out.end()) {
      out.emplace_back(std::move(k), std::vector<std::string>{std::move(v)});
    } else {
      it->second.push_back(std::move(v));
    }
  }
  return out;
}

}  // namespace qm::cel
