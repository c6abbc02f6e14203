// The checker's types: how argument types match parameter types (binding type parameters), the
// overload table of every declared function, parsed from signatures, and FormatType.

#include "cel/checker.h"

#include <cctype>
#include <map>
#include <string_view>
#include <utility>

#include "cel/checker_internal.h"
#include "cel/operators.h"

namespace qm::cel {

using namespace checker_internal;  // NOLINT(google-build-using-namespace)

Type checker_internal::Substitute(const Type& t, const Bindings& b) {
  if (t.kind == TypeKind::kParam) {
    auto it = b.find(t.name);
    return it == b.end() ? Type::Of(TypeKind::kDyn) : it->second;
  }
  Type out = t;
  for (Type& p : out.params) p = Substitute(p, b);
  return out;
}

bool checker_internal::Assignable(const Type& param, const Type& arg, Bindings* b) {
  if (param.kind == TypeKind::kParam) {
    auto it = b->find(param.name);
    if (it == b->end()) {
      (*b)[param.name] = arg;
      return true;
    }
    if (it->second.kind == TypeKind::kDyn) {
      it->second = arg;  // a more precise binding
      return true;
    }
    return Assignable(it->second, arg, b) || Assignable(arg, it->second, b);
  }
  if (IsDynLike(param) || IsDynLike(arg)) return true;
  if (param.kind != arg.kind) return false;
  if (param.kind == TypeKind::kType) return true;
  if (param.params.size() != arg.params.size()) return false;
  for (size_t i = 0; i < param.params.size(); ++i) {
    if (!Assignable(param.params[i], arg.params[i], b)) return false;
  }
  return true;
}

namespace {

// Tiny signature parser: "int", "list(A)", "map(A, B)", "opt(A)", "Q" (Quantity), "V" (Semver),
// "A"/"B" (type parameters), "dyn", "type(A)".
class SigParser {
 public:
  explicit SigParser(std::string_view s) : s_(s) {}
  Type Parse() {
    Skip();
    size_t start = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) {
      ++pos_;
    }
    std::string_view word = s_.substr(start, pos_ - start);
    std::vector<Type> params;
    Skip();
    if (pos_ < s_.size() && s_[pos_] == '(') {
      ++pos_;
      params.push_back(Parse());
      Skip();
      while (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        params.push_back(Parse());
        Skip();
      }
      ++pos_;  // ')'
    }
    static const std::map<std::string_view, TypeKind> kKinds = {
        {"dyn", TypeKind::kDyn},
        {"null", TypeKind::kNull},
        {"bool", TypeKind::kBool},
        {"int", TypeKind::kInt},
        {"uint", TypeKind::kUint},
        {"double", TypeKind::kDouble},
        {"string", TypeKind::kString},
        {"bytes", TypeKind::kBytes},
        {"list", TypeKind::kList},
        {"map", TypeKind::kMap},
        {"opt", TypeKind::kOptional},
        {"Q", TypeKind::kQuantity},
        {"V", TypeKind::kSemver},
        {"type", TypeKind::kType},
        {"timestamp", TypeKind::kTimestamp},
        {"duration", TypeKind::kDuration},
        {"IP", TypeKind::kIp},
        {"CIDR", TypeKind::kCidr},
        {"URL", TypeKind::kUrl},
        {"Fmt", TypeKind::kFormat},
    };
    auto it = kKinds.find(word);
    if (it == kKinds.end()) return Type{TypeKind::kParam, {}, std::string(word)};
    return Type{it->second, std::move(params), {}};
  }
  // A comma-separated list of types (may be empty).
  std::vector<Type> ParseList() {
    std::vector<Type> out;
    Skip();
    if (pos_ >= s_.size()) return out;
    out.push_back(Parse());
    Skip();
    while (pos_ < s_.size() && s_[pos_] == ',') {
      ++pos_;
      out.push_back(Parse());
      Skip();
    }
    return out;
  }

 private:
  void Skip() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

const OverloadTable& checker_internal::Overloads() {
  static const OverloadTable* table = [] {
    auto* t = new OverloadTable();
    auto add = [t](std::string_view name, bool member, std::string_view args,
                   std::string_view result) {
      (*t)[std::string(name)].push_back(
          Overload{member, SigParser(args).ParseList(), SigParser(result).Parse()});
    };
    auto global = [&](std::string_view name, std::string_view args, std::string_view result) {
      add(name, false, args, result);
    };
    auto method = [&](std::string_view name, std::string_view args, std::string_view result) {
      add(name, true, args, result);
    };
    // Logic.
    global(op::kLogicalNot, "bool", "bool");
    global(op::kLogicalAnd, "bool, bool", "bool");
    global(op::kLogicalOr, "bool, bool", "bool");
    global(op::kConditional, "bool, A, A", "A");
    global(op::kNotStrictlyFalse, "bool", "bool");
    // Arithmetic.
    for (std::string_view num : {"int", "uint", "double"}) {
      std::string two = std::string(num) + ", " + std::string(num);
      for (std::string_view f : {op::kAdd, op::kSubtract, op::kMultiply, op::kDivide}) {
        global(f, two, num);
      }
      if (num != "double") global(op::kModulo, two, num);
    }
    global(op::kNegate, "int", "int");
    global(op::kNegate, "double", "double");
    global(op::kAdd, "string, string", "string");
    global(op::kAdd, "bytes, bytes", "bytes");
    global(op::kAdd, "list(A), list(A)", "list(A)");
    // Ordering (CrossTypeNumericComparisons).
    for (std::string_view f : {op::kLess, op::kLessEquals, op::kGreater, op::kGreaterEquals}) {
      for (std::string_view a : {"int", "uint", "double"}) {
        for (std::string_view b : {"int", "uint", "double"}) {
          global(f, std::string(a) + ", " + std::string(b), "bool");
        }
      }
      for (std::string_view a : {"string", "bytes", "bool"}) {
        global(f, std::string(a) + ", " + std::string(a), "bool");
      }
    }
    // Indexing and membership.
    global(op::kIndex, "list(A), int", "A");
    global(op::kIndex, "map(A, B), A", "B");
    global(op::kOptIndex, "list(A), int", "opt(A)");
    global(op::kOptIndex, "map(A, B), A", "opt(B)");
    global(op::kOptIndex, "opt(list(A)), int", "opt(A)");
    global(op::kOptIndex, "opt(map(A, B)), A", "opt(B)");
    global(op::kIn, "A, list(A)", "bool");
    global(op::kIn, "A, map(A, B)", "bool");
    global(op::kMapInsert, "map(A, B), A, B", "map(A, B)");
    global(op::kMapInsert, "map(A, B), map(A, B)", "map(A, B)");
    // Conversions.
    for (std::string_view a : {"int", "uint", "double", "string"}) {
      global("int", a, "int");
      global("uint", a, "uint");
      global("double", a, "double");
      global("string", a, "string");
    }
    global("string", "bytes", "string");
    global("string", "bool", "string");
    global("bool", "bool", "bool");
    global("bool", "string", "bool");
    global("bytes", "bytes", "bytes");
    global("bytes", "string", "bytes");
    global("type", "A", "type(A)");
    global("dyn", "A", "dyn");
    // size.
    for (std::string_view a : {"string", "bytes", "list(A)", "map(A, B)"}) {
      global("size", a, "int");
      method("size", a, "int");
    }
    // Strings (standard library, ext.Strings v2, library.Regex).
    method("contains", "string, string", "bool");
    method("startsWith", "string, string", "bool");
    method("endsWith", "string, string", "bool");
    method("matches", "string, string", "bool");
    global("matches", "string, string", "bool");
    method("charAt", "string, int", "string");
    method("indexOf", "string, string", "int");
    method("indexOf", "string, string, int", "int");
    method("lastIndexOf", "string, string", "int");
    method("lastIndexOf", "string, string, int", "int");
    method("lowerAscii", "string", "string");
    method("upperAscii", "string", "string");
    method("trim", "string", "string");
    method("replace", "string, string, string", "string");
    method("replace", "string, string, string, int", "string");
    method("split", "string, string", "list(string)");
    method("split", "string, string, int", "list(string)");
    method("substring", "string, int", "string");
    method("substring", "string, int, int", "string");
    method("format", "string, list(dyn)", "string");
    method("find", "string, string", "string");
    method("findAll", "string, string", "list(string)");
    method("findAll", "string, string, int", "list(string)");
    method("join", "list(string)", "string");
    method("join", "list(string), string", "string");
    global("strings.quote", "string", "string");
    // Lists: Kubernetes' library.Lists, ext.Sets and DRA's includes. cel-go's ext.Lists (slice,
    // flatten, distinct, reverse, sort, sortBy, first, last, lists.range) is not part of
    // Kubernetes' base environment (1.32-1.34), so those names are undeclared here even though
    // the evaluator implements them. isSorted, min and max take lists of comparable types, sum
    // lists of summable ones, one overload per element type as in library/lists.go.
    method("indexOf", "list(A), A", "int");
    method("lastIndexOf", "list(A), A", "int");
    method("includes", "list(A), A", "bool");
    method("includes", "A, A", "bool");
    for (std::string_view a :
         {"int", "uint", "double", "bool", "duration", "timestamp", "string", "bytes"}) {
      const std::string list = "list(" + std::string(a) + ")";
      method("isSorted", list, "bool");
      method("min", list, a);
      method("max", list, a);
    }
    for (std::string_view a : {"int", "uint", "double", "duration"}) {
      method("sum", "list(" + std::string(a) + ")", a);
    }
    for (std::string_view f : {"sets.contains", "sets.equivalent", "sets.intersects"}) {
      global(f, "list(A), list(A)", "bool");
    }
    // Quantity.
    global("quantity", "string", "Q");
    global("isQuantity", "string", "bool");
    method("sign", "Q", "int");
    method("isInteger", "Q", "bool");
    method("asInteger", "Q", "int");
    method("asApproximateFloat", "Q", "double");
    method("isGreaterThan", "Q, Q", "bool");
    method("isLessThan", "Q, Q", "bool");
    method("compareTo", "Q, Q", "int");
    for (std::string_view f : {"add", "sub"}) {
      method(f, "Q, Q", "Q");
      method(f, "Q, int", "Q");
    }
    // Semver.
    global("semver", "string", "V");
    global("semver", "string, bool", "V");
    global("isSemver", "string", "bool");
    global("isSemver", "string, bool", "bool");
    method("major", "V", "int");
    method("minor", "V", "int");
    method("patch", "V", "int");
    method("isGreaterThan", "V, V", "bool");
    method("isLessThan", "V, V", "bool");
    method("compareTo", "V, V", "int");
    // Timestamps and durations (CEL standard library, DefaultUTCTimeZone).
    for (std::string_view a : {"string", "int", "timestamp"}) global("timestamp", a, "timestamp");
    for (std::string_view a : {"string", "int", "duration"}) global("duration", a, "duration");
    for (std::string_view t : {"timestamp", "duration"}) {
      global("int", t, "int");
      global("string", t, "string");
    }
    global(op::kAdd, "timestamp, duration", "timestamp");
    global(op::kAdd, "duration, timestamp", "timestamp");
    global(op::kAdd, "duration, duration", "duration");
    global(op::kSubtract, "timestamp, timestamp", "duration");
    global(op::kSubtract, "timestamp, duration", "timestamp");
    global(op::kSubtract, "duration, duration", "duration");
    for (std::string_view f : {op::kLess, op::kLessEquals, op::kGreater, op::kGreaterEquals}) {
      global(f, "timestamp, timestamp", "bool");
      global(f, "duration, duration", "bool");
    }
    for (std::string_view f :
         {"getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfYear", "getDayOfWeek",
          "getHours", "getMinutes", "getSeconds", "getMilliseconds"}) {
      method(f, "timestamp", "int");
      method(f, "timestamp, string", "int");
    }
    for (std::string_view f : {"getHours", "getMinutes", "getSeconds", "getMilliseconds"}) {
      method(f, "duration", "int");
    }
    // Kubernetes library.IP and library.CIDR.
    global("ip", "string", "IP");
    global("isIP", "string", "bool");
    global("ip.isCanonical", "string", "bool");
    global("string", "IP", "string");
    method("family", "IP", "int");
    for (std::string_view f : {"isUnspecified", "isLoopback", "isLinkLocalMulticast",
                               "isLinkLocalUnicast", "isGlobalUnicast"}) {
      method(f, "IP", "bool");
    }
    global("cidr", "string", "CIDR");
    global("isCIDR", "string", "bool");
    global("string", "CIDR", "string");
    method("containsIP", "CIDR, string", "bool");
    method("containsIP", "CIDR, IP", "bool");
    method("containsCIDR", "CIDR, string", "bool");
    method("containsCIDR", "CIDR, CIDR", "bool");
    method("ip", "CIDR", "IP");
    method("masked", "CIDR", "CIDR");
    method("prefixLength", "CIDR", "int");
    // Kubernetes library.URLs.
    global("url", "string", "URL");
    global("isURL", "string", "bool");
    for (std::string_view f :
         {"getScheme", "getHost", "getHostname", "getPort", "getEscapedPath"}) {
      method(f, "URL", "string");
    }
    method("getQuery", "URL", "map(string, list(string))");
    // Kubernetes library.Format.
    for (std::string_view f : {"dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName",
                               "dns1123LabelPrefix", "dns1123SubdomainPrefix", "dns1035LabelPrefix",
                               "labelValue", "uri", "uuid", "byte", "date", "datetime"}) {
      global("format." + std::string(f), "", "Fmt");
    }
    global("format.named", "string", "opt(Fmt)");
    method("validate", "Fmt, string", "opt(list(string))");
    // Optional types.
    global("optional.of", "A", "opt(A)");
    global("optional.none", "", "opt(dyn)");
    global("optional.ofNonZeroValue", "A", "opt(A)");
    method("hasValue", "opt(A)", "bool");
    method("value", "opt(A)", "A");
    method("orValue", "opt(A), A", "A");
    method("or", "opt(A), opt(A)", "opt(A)");
    return t;
  }();
  return *table;
}

std::string FormatType(const Type& type) {
  auto p = [&](size_t i) { return i < type.params.size() ? FormatType(type.params[i]) : "dyn"; };
  switch (type.kind) {
    case TypeKind::kDyn:
      return "dyn";
    case TypeKind::kError:
      return "*error*";
    case TypeKind::kNull:
      return "null_type";
    case TypeKind::kBool:
      return "bool";
    case TypeKind::kInt:
      return "int";
    case TypeKind::kUint:
      return "uint";
    case TypeKind::kDouble:
      return "double";
    case TypeKind::kString:
      return "string";
    case TypeKind::kBytes:
      return "bytes";
    case TypeKind::kList:
      return "list(" + p(0) + ")";
    case TypeKind::kMap:
      return "map(" + p(0) + ", " + p(1) + ")";
    case TypeKind::kOptional:
      return "optional_type(" + p(0) + ")";
    case TypeKind::kQuantity:
      return "kubernetes.Quantity";
    case TypeKind::kSemver:
      return "kubernetes.Semver";
    case TypeKind::kType:
      return type.params.empty() ? "type" : "type(" + p(0) + ")";
    case TypeKind::kDevice:
      return "kubernetes.DRADevice";
    case TypeKind::kParam:
      return type.name;
    case TypeKind::kTimestamp:
      return "google.protobuf.Timestamp";
    case TypeKind::kDuration:
      return "google.protobuf.Duration";
    case TypeKind::kIp:
      return "net.IP";
    case TypeKind::kCidr:
      return "net.CIDR";
    case TypeKind::kUrl:
      return "kubernetes.URL";
    case TypeKind::kFormat:
      return "kubernetes.NamedFormat";
  }
  return "dyn";
}

}  // namespace qm::cel
