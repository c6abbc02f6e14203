#include "cel/checker.h"

#include <gtest/gtest.h>

#include <string>

#include "cel/compiler.h"
#include "cel/parser.h"
#include "cel/source.h"

namespace qm::cel {
namespace {

CheckResult CheckText(const std::string& text) {
  Source source(text);
  ParseResult parsed = Parse(source);
  EXPECT_NE(parsed.ast, nullptr) << source.DisplayIssues(parsed.issues);
  if (parsed.ast == nullptr) return {};
  return Check(*parsed.ast);
}

// The type of a well-typed expression, or the rendered issues.
std::string TypeOf(const std::string& text) {
  CheckResult r = CheckText(text);
  if (!r.issues.empty()) return Source(text).DisplayIssues(r.issues);
  return FormatType(r.result_type);
}

std::string Issues(const std::string& text) {
  return Source(text).DisplayIssues(CheckText(text).issues);
}

TEST(CheckerTest, TypesLiteralsAndOperators) {
  EXPECT_EQ(TypeOf("1"), "int");
  EXPECT_EQ(TypeOf("1u + 2u"), "uint");
  EXPECT_EQ(TypeOf("1.5 * 2.0"), "double");
  EXPECT_EQ(TypeOf("'a' + 'b'"), "string");
  EXPECT_EQ(TypeOf("b'a'"), "bytes");
  EXPECT_EQ(TypeOf("null"), "null_type");
  EXPECT_EQ(TypeOf("[1, 2]"), "list(int)");
  EXPECT_EQ(TypeOf("[]"), "list(dyn)");
  EXPECT_EQ(TypeOf("{'a': 1}"), "map(string, int)");
  EXPECT_EQ(TypeOf("[1, 2] + [3]"), "list(int)");
  EXPECT_EQ(TypeOf("{'a': [1]}['a'][0]"), "int");
  EXPECT_EQ(TypeOf("true ? 'yes' : 'no'"), "string");
  EXPECT_EQ(TypeOf("1 < 2u && 1.0 >= 1"), "bool");
  EXPECT_EQ(TypeOf("dyn(1) == 1.0"), "bool");
  EXPECT_EQ(TypeOf("2 in [1, 2]"), "bool");
  EXPECT_EQ(TypeOf("type(1)"), "type(int)");
  EXPECT_EQ(TypeOf("int('1') + size('abc')"), "int");
  EXPECT_EQ(TypeOf("dyn(1)"), "dyn");
}

TEST(CheckerTest, EqualityRequiresTheSameTypeAsCelGo) {
  EXPECT_NE(
      Issues("1 == 1.0").find("found no matching overload for '_==_' applied to '(int, double)'"),
      std::string::npos);
  EXPECT_NE(
      Issues("1u != 1").find("found no matching overload for '_!=_' applied to '(uint, int)'"),
      std::string::npos);
  EXPECT_NE(Issues("[1] == [1.0]").find("'_==_' applied to '(list(int), list(double))'"),
            std::string::npos);
  EXPECT_EQ(TypeOf("device.attributes['d'].x == 1.0"), "bool");
  EXPECT_EQ(TypeOf("1 < 1.0"), "bool");  // ordering is cross-type (CrossTypeNumericComparisons)
}

TEST(CheckerTest, TypesTimestampsAndDurations) {
  EXPECT_EQ(TypeOf("timestamp('2024-01-01T00:00:00Z')"), "google.protobuf.Timestamp");
  EXPECT_EQ(TypeOf("timestamp(0)"), "google.protobuf.Timestamp");
  EXPECT_EQ(TypeOf("duration('1h')"), "google.protobuf.Duration");
  EXPECT_EQ(TypeOf("duration(5)"), "google.protobuf.Duration");
  EXPECT_EQ(TypeOf("timestamp(0) + duration('1h')"), "google.protobuf.Timestamp");
  EXPECT_EQ(TypeOf("duration('1h') + timestamp(0)"), "google.protobuf.Timestamp");
  EXPECT_EQ(TypeOf("timestamp(0) - timestamp(1)"), "google.protobuf.Duration");
  EXPECT_EQ(TypeOf("timestamp(0) - duration('1s')"), "google.protobuf.Timestamp");
  EXPECT_EQ(TypeOf("duration('1h') - duration('1s') + duration('1m')"), "google.protobuf.Duration");
  EXPECT_EQ(TypeOf("timestamp(0) < timestamp(1) && duration('1s') >= duration('1ms')"), "bool");
  EXPECT_EQ(TypeOf("timestamp(0) == timestamp(1)"), "bool");
  EXPECT_EQ(TypeOf("int(timestamp(0)) + int(duration('1s'))"), "int");
  EXPECT_EQ(TypeOf("string(timestamp(0)) + string(duration('1s'))"), "string");
  for (const char* f :
       {"getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfYear", "getDayOfWeek",
        "getHours", "getMinutes", "getSeconds", "getMilliseconds"}) {
    EXPECT_EQ(TypeOf("timestamp(0)." + std::string(f) + "()"), "int") << f;
    EXPECT_EQ(TypeOf("timestamp(0)." + std::string(f) + "('+01:00')"), "int") << f;
  }
  for (const char* f : {"getHours", "getMinutes", "getSeconds", "getMilliseconds"}) {
    EXPECT_EQ(TypeOf("duration('1s')." + std::string(f) + "()"), "int") << f;
  }
  EXPECT_NE(Issues("duration('1s').getHours('UTC')").find("found no matching overload"),
            std::string::npos);
  EXPECT_NE(Issues("-duration('1s')").find("found no matching overload for '-_'"),
            std::string::npos);
  EXPECT_NE(Issues("timestamp(true)")
                .find("found no matching overload for 'timestamp' applied to '(bool)'"),
            std::string::npos);
}

TEST(CheckerTest, ValidatesTimestampAndDurationLiterals) {
  EXPECT_EQ(Issues("timestamp('2024-13-01T00:00:00Z') == timestamp(0)"),
            "ERROR: <input>:1:11: invalid timestamp argument\n"
            " | timestamp('2024-13-01T00:00:00Z') == timestamp(0)\n"
            " | ..........^");
  EXPECT_NE(Issues("timestamp(253402300800) == timestamp(0)").find("invalid timestamp argument"),
            std::string::npos);
  EXPECT_NE(Issues("duration('5 s') == duration('1s')").find("invalid duration argument"),
            std::string::npos);
  // Only literals are validated; a computed argument fails at runtime instead.
  EXPECT_EQ(TypeOf("timestamp(device.driver)"), "google.protobuf.Timestamp");
}

TEST(CheckerTest, TypesNetworkLibraries) {
  EXPECT_EQ(TypeOf("ip('10.0.0.1')"), "net.IP");
  EXPECT_EQ(TypeOf("ip('10.0.0.1').family()"), "int");
  for (const char* f : {"isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast",
                        "isGlobalUnicast"}) {
    EXPECT_EQ(TypeOf("ip('10.0.0.1')." + std::string(f) + "()"), "bool") << f;
  }
  EXPECT_EQ(TypeOf("isIP('x') || ip.isCanonical('::1')"), "bool");
  EXPECT_EQ(TypeOf("string(ip('::1')) + string(cidr('::/0'))"), "string");
  EXPECT_EQ(TypeOf("cidr('10.0.0.0/8')"), "net.CIDR");
  EXPECT_EQ(TypeOf("cidr('10.0.0.0/8').ip()"), "net.IP");
  EXPECT_EQ(TypeOf("cidr('10.0.0.0/8').masked()"), "net.CIDR");
  EXPECT_EQ(TypeOf("cidr('10.0.0.0/8').prefixLength()"), "int");
  EXPECT_EQ(TypeOf("cidr('10.0.0.0/8').containsIP('10.0.0.1') && "
                   "cidr('10.0.0.0/8').containsIP(ip('10.0.0.1')) && "
                   "cidr('10.0.0.0/8').containsCIDR('10.0.0.0/9') && "
                   "cidr('10.0.0.0/8').containsCIDR(cidr('10.0.0.0/9')) && isCIDR('x')"),
            "bool");
  EXPECT_EQ(TypeOf("ip('::1') == cidr('::1/128').ip()"), "bool");
  EXPECT_EQ(TypeOf("url('https://x')"), "kubernetes.URL");
  for (const char* f : {"getScheme", "getHost", "getHostname", "getPort", "getEscapedPath"}) {
    EXPECT_EQ(TypeOf("url('https://x')." + std::string(f) + "()"), "string") << f;
  }
  EXPECT_EQ(TypeOf("url('https://x').getQuery()"), "map(string, list(string))");
  EXPECT_EQ(TypeOf("isURL('x')"), "bool");
  EXPECT_NE(Issues("ip('::1') == cidr('::1/128')").find("'_==_' applied to '(net.IP, net.CIDR)'"),
            std::string::npos);
  EXPECT_NE(Issues("url('https://x').getQuery(1)").find("found no matching overload"),
            std::string::npos);
}

TEST(CheckerTest, TypesTheFormatLibrary) {
  EXPECT_EQ(TypeOf("format.dns1123Label()"), "kubernetes.NamedFormat");
  EXPECT_EQ(TypeOf("format.named('uuid')"), "optional_type(kubernetes.NamedFormat)");
  EXPECT_EQ(TypeOf("format.labelValue().validate('x')"), "optional_type(list(string))");
  EXPECT_NE(Issues("format.dns1123Label('x')").find("found no matching overload"),
            std::string::npos);
  // validate() costs ceil((1 + size) * 0.1) * ceil(regex size * 0.25), with the largest regex.
  const CheckResult small = CheckText("format.uuid().validate('x').hasValue()");
  const CheckResult large = CheckText("format.uuid().validate(device.driver).hasValue()");
  ASSERT_TRUE(small.issues.empty());
  ASSERT_TRUE(large.issues.empty());
  EXPECT_GT(large.estimated_cost, small.estimated_cost);
}

TEST(CheckerTest, TypesTheDeviceAndLibraries) {
  EXPECT_EQ(TypeOf("device"), "kubernetes.DRADevice");
  EXPECT_EQ(TypeOf("device.driver"), "string");
  EXPECT_EQ(TypeOf("device.allowMultipleAllocations"), "bool");
  EXPECT_EQ(TypeOf("device.attributes"), "map(string, map(string, dyn))");
  EXPECT_EQ(TypeOf("device.attributes['d'].x"), "dyn");
  EXPECT_EQ(TypeOf("device.capacity['d'].memory"), "kubernetes.Quantity");
  EXPECT_EQ(TypeOf("device.capacity['d'].memory.compareTo(quantity('1Gi'))"), "int");
  EXPECT_EQ(TypeOf("device.capacity['d'].memory.add(1)"), "kubernetes.Quantity");
  EXPECT_EQ(TypeOf("semver('1.0.0').major()"), "int");
  EXPECT_EQ(TypeOf("device.attributes['d'].?x"), "optional_type(dyn)");
  EXPECT_EQ(TypeOf("optional.of(1).orValue(2)"), "int");
  EXPECT_EQ(TypeOf("optional.none()"), "optional_type(dyn)");
  EXPECT_EQ(TypeOf("'a,b'.split(',')"), "list(string)");
  EXPECT_EQ(TypeOf("['a'].join('-')"), "string");
  EXPECT_EQ(TypeOf("sets.contains([1], [1])"), "bool");
  EXPECT_EQ(TypeOf("has(device.attributes['d'].x)"), "bool");
  EXPECT_EQ(TypeOf("device.attributes['d'].x.includes(1)"), "bool");
}

TEST(CheckerTest, TypesComprehensionVariables) {
  EXPECT_EQ(TypeOf("[1, 2].all(x, x > 0)"), "bool");
  EXPECT_EQ(TypeOf("[1, 2].map(x, x * 2)"), "list(int)");
  EXPECT_EQ(TypeOf("['a'].filter(x, x.startsWith('a'))"), "list(string)");
  EXPECT_EQ(TypeOf("{'a': 1}.exists(k, k.size() > 0)"), "bool");
  EXPECT_EQ(TypeOf("{'a': 1}.all(k, v, v > 0 && k != '')"), "bool");
  EXPECT_EQ(TypeOf("cel.bind(v, 'abc', v.size())"), "int");
  EXPECT_EQ(TypeOf("device.attributes.exists_one(d, d == 'gpu.nvidia.com')"), "bool");
  // The element type reaches the body: `x` is an int here.
  EXPECT_EQ(Issues("[1].all(x, x.startsWith('a'))"),
            "ERROR: <input>:1:24: found no matching overload for 'startsWith' applied to "
            "'int.(string)'\n"
            " | [1].all(x, x.startsWith('a'))\n"
            " | .......................^");
}

TEST(CheckerTest, ReportsUndeclaredReferences) {
  EXPECT_EQ(Issues("devise.driver == 'x'"),
            "ERROR: <input>:1:1: undeclared reference to 'devise' (in container '')\n"
            " | devise.driver == 'x'\n"
            " | ^");
  EXPECT_EQ(Issues("[1].all(x, x > 0) && x > 0"),
            "ERROR: <input>:1:22: undeclared reference to 'x' (in container '')\n"
            " | [1].all(x, x > 0) && x > 0\n"
            " | .....................^");
  EXPECT_EQ(Issues("frob(1) == 1"),
            "ERROR: <input>:1:5: undeclared reference to 'frob' (in container '')\n"
            " | frob(1) == 1\n"
            " | ....^");
}

TEST(CheckerTest, DeclaresKubernetesListsLibraryOnly) {
  // library.Lists: one overload per element type, as in k8s.io/apiserver/pkg/cel/library.
  EXPECT_EQ(TypeOf("[1, 2].sum()"), "int");
  EXPECT_EQ(TypeOf("[1.5].max()"), "double");
  EXPECT_EQ(TypeOf("['a'].min()"), "string");
  EXPECT_EQ(TypeOf("[duration('1s')].sum()"), "google.protobuf.Duration");
  EXPECT_EQ(TypeOf("[true].isSorted()"), "bool");
  EXPECT_EQ(TypeOf("['a'].indexOf('a') + ['a'].lastIndexOf('b')"), "int");
  EXPECT_EQ(TypeOf("device.attributes['d'].x.max()"), "dyn");
  EXPECT_EQ(Issues("['a'].sum() == 'a'"),
            "ERROR: <input>:1:10: found no matching overload for 'sum' applied to "
            "'list(string).()'\n"
            " | ['a'].sum() == 'a'\n"
            " | .........^");
  EXPECT_NE(
      Issues("[timestamp(0)].sum()").find("'sum' applied to 'list(google.protobuf.Timestamp)"),
      std::string::npos);
  // cel-go's ext.Lists is not in Kubernetes' base environment, although the evaluator has it.
  EXPECT_EQ(Issues("[[1], [2]].flatten().size() == 2"),
            "ERROR: <input>:1:19: undeclared reference to 'flatten' (in container '')\n"
            " | [[1], [2]].flatten().size() == 2\n"
            " | ..................^");
  for (const char* f :
       {"slice(0, 1)", "distinct()", "reverse()", "sort()", "first()", "last()", "flatten(1)"}) {
    const std::string name = std::string(f).substr(0, std::string(f).find('('));
    EXPECT_NE(Issues(std::string("[1].") + f + " == [1]")
                  .find("undeclared reference to '" + name + "' (in container '')"),
              std::string::npos)
        << f;
  }
  // `lists` is no namespace here: both the target and the function are undeclared.
  EXPECT_EQ(Issues("lists.range(3).size() == 3"),
            "ERROR: <input>:1:1: undeclared reference to 'lists' (in container '')\n"
            " | lists.range(3).size() == 3\n"
            " | ^\n"
            "ERROR: <input>:1:12: undeclared reference to 'range' (in container '')\n"
            " | lists.range(3).size() == 3\n"
            " | ...........^");
  // Quantity mul/div/divInt arrived after Kubernetes 1.34.
  for (const char* f : {"mul(2)", "div(2)", "div(2, 1)", "divInt(2)"}) {
    const std::string name = std::string(f).substr(0, std::string(f).find('('));
    EXPECT_NE(Issues(std::string("quantity('1').") + f + " == quantity('1')")
                  .find("undeclared reference to '" + name + "' (in container '')"),
              std::string::npos)
        << f;
  }
  EXPECT_NE(CompileSelector("device.attributes['d'].x.sort() == [1]")
                .error.find("undeclared reference to 'sort' (in container '')"),
            std::string::npos);
  EXPECT_EQ(CompileSelector("device.attributes['d'].x.sort() == [1]").ast, nullptr);
}

TEST(CheckerTest, ReportsUndefinedFields) {
  EXPECT_EQ(Issues("device.drivr == 'x'"),
            "ERROR: <input>:1:7: undefined field 'drivr'\n"
            " | device.drivr == 'x'\n"
            " | ......^");
  EXPECT_EQ(Issues("device.driver.x"),
            "ERROR: <input>:1:14: type 'string' does not support field selection\n"
            " | device.driver.x\n"
            " | .............^");
}

TEST(CheckerTest, ReportsOverloadMismatches) {
  EXPECT_EQ(Issues("1 + 'a' == 2"),
            "ERROR: <input>:1:3: found no matching overload for '_+_' applied to '(int, string)'\n"
            " | 1 + 'a' == 2\n"
            " | ..^");
  EXPECT_EQ(Issues("device.driver > 1"),
            "ERROR: <input>:1:15: found no matching overload for '_>_' applied to "
            "'(string, int)'\n"
            " | device.driver > 1\n"
            " | ..............^");
  EXPECT_EQ(Issues("device.capacity['d'].memory.isGreaterThan(semver('1.0.0'))"),
            "ERROR: <input>:1:42: found no matching overload for 'isGreaterThan' applied to "
            "'kubernetes.Quantity.(kubernetes.Semver)'\n"
            " | device.capacity['d'].memory.isGreaterThan(semver('1.0.0'))\n"
            " | .........................................^");
  EXPECT_EQ(Issues("device.driver == 1"),
            "ERROR: <input>:1:15: found no matching overload for '_==_' applied to "
            "'(string, int)'\n"
            " | device.driver == 1\n"
            " | ..............^");
  // Errors do not cascade from an undeclared operand.
  EXPECT_EQ(CheckText("nope + 1 == 2").issues.size(), 1u);
}

TEST(CheckerTest, ReportsOtherTypeErrors) {
  EXPECT_EQ(Issues("[1, 'a'].size() == 2"),
            "ERROR: <input>:1:5: type 'string' does not match previous type 'int' in aggregate. "
            "Use 'dyn(x)' to make the aggregate dynamic.\n"
            " | [1, 'a'].size() == 2\n"
            " | ....^");
  EXPECT_EQ(TypeOf("[1, dyn('a')].size() == 2"), "bool");
  EXPECT_EQ(Issues("1.all(x, x)"),
            "ERROR: <input>:1:1: expression of type 'int' cannot be range of a comprehension "
            "(must be list, map, or dynamic)\n"
            " | 1.all(x, x)\n"
            " | ^");
}

TEST(CheckerTest, EstimatesCost) {
  EXPECT_LE(CheckText("device.driver == 'dra.example.com'").estimated_cost, 20u);
  const uint64_t one = CheckText("device.attributes['d'].x.all(e, e > 0)").estimated_cost;
  const uint64_t nested =
      CheckText("device.attributes['d'].x.all(e, device.attributes['d'].y.all(f, f > e))")
          .estimated_cost;
  EXPECT_GT(nested, one * 10);
  EXPECT_LE(nested, uint64_t{1'000'000});
}

TEST(CompileSelectorCheckTest, RejectsNonBoolResults) {
  EXPECT_EQ(CompileSelector("device.driver").error,
            "must evaluate to bool or the unknown type, not string");
  EXPECT_EQ(CompileSelector("[1].map(x, x)").error,
            "must evaluate to bool or the unknown type, not list(int)");
  EXPECT_TRUE(CompileSelector("device.attributes['d'].flag").error.empty());  // dyn
}

TEST(CompileSelectorCheckTest, RejectsExpensiveSelectors) {
  std::string big = "[";
  for (int i = 0; i < 200; ++i) big += (i ? ", " : "") + std::to_string(i);
  big += "]";
  const std::string expr = big + ".all(a, " + big + ".all(b, " + big + ".all(c, a + b + c >= 0)))";
  CompileResult r = CompileSelector(expr);
  EXPECT_EQ(r.ast, nullptr);
  EXPECT_EQ(r.error.rfind("too complex, exceeds cost limit (estimated cost ", 0), 0u) << r.error;
  // Nested scans over every attribute of the device stay under the limit.
  EXPECT_TRUE(CompileSelector("device.attributes.all(d, device.attributes[d].all(k, k != ''))")
                  .error.empty());
}

TEST(CompileSelectorCheckTest, AcceptsSeedAndVendorSelectors) {
  for (const char* ok : {
           "device.driver == \"gpu.nvidia.com\" && "
           "device.attributes[\"gpu.nvidia.com\"].productName.lowerAscii().contains(\"a100\") && "
           "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"80Gi\")) >= 0",
           "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
           "device.attributes[\"gpu.nvidia.com\"].productName.contains(\"A100\") && "
           "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0",
           "device.attributes[\"gpu.nvidia.com\"].productName.lowerAscii().matches(\"^.*a100.*$\")",
           "device.attributes[\"gpu.nvidia.com\"].cudaComputeCapability.isGreaterThan("
           "semver(\"8.0.0\"))",
           "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0",
           "device.attributes['dra.example.com'].name > 0",
           "device.attributes['dra.example.com'].name.isGreaterThan(semver('v0.0.1', true)) && "
           "isSemver('v1.0.0', true)",
           "device.capacity['dra.example.com'].name.isGreaterThan(quantity('1Ki'))",
           "device.attributes.exists_one(x, x == 'dra.example.com')",
           "device.attributes['dra.example.com'].services.split('example').size() >= 2",
           "cel.bind(dra, device.attributes['dra.example.com'], dra.name)",
           "1 in device.attributes['dra.example.com'].names",
           "device.allowMultipleAllocations == true",
           "'name' in device.capacity['dra.example.com'] && "
           "device.capacity['dra.example.com'].name.isLessThan(quantity('1'))",
           "device.attributes['d'].?x.orValue(1) == 1 && optional.none().hasValue() == false",
           "device.attributes['dra.example.com'].models.includes('a100')",
       }) {
    CompileResult r = CompileSelector(ok);
    EXPECT_TRUE(r.error.empty()) << ok << "\n" << r.error;
  }
}

}  // namespace
}  // namespace qm::cel
