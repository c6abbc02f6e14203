#include "cel/interpreter.h"

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "cel/dra_env.h"
#include "cel/parser.h"
#include "cel/source.h"
#include "cel/value.h"
#include "common/quantity.h"

namespace qm::cel {
namespace {

enum class Fixture {
  kNone,
  kA100,     // gpu-node-a gpu-0 of the seed inventory: A100-SXM4-80GB
  kA100_40,  // gpu-node-b gpu-0: A100-PCIE-40GB
  kL4,       // gpu-node-b gpu-2: L4, 24Gi
  kH100,     // gpu-node-c gpu-0: H100 80GB
  kExample,  // a dra.example.com device with every attribute kind
};

Quantity Q(const std::string& text) {
  absl::StatusOr<Quantity> q = ParseQuantity(text);
  EXPECT_TRUE(q.ok()) << text;
  return q.ok() ? *q : Quantity();
}

DeviceInput NvidiaGpu(const std::string& product, const std::string& arch,
                      const std::string& compute, const std::string& memory) {
  DeviceInput d;
  d.driver = "gpu.nvidia.com";
  d.attributes["type"] = std::string("gpu");
  d.attributes["productName"] = product;
  d.attributes["brand"] = std::string("Nvidia");
  d.attributes["architecture"] = arch;
  d.attributes["cudaComputeCapability"] = VersionString{compute};
  d.attributes["driverVersion"] = VersionString{"560.35.3"};
  d.attributes["uuid"] = std::string("GPU-6513270e-269e-0d37-f2a7-4de452e6b438");
  d.attributes["resource.kubernetes.io/pcieRoot"] = std::string("pci0000:00");
  d.capacity["memory"] = Q(memory);
  return d;
}

DeviceInput MakeDevice(Fixture f) {
  switch (f) {
    case Fixture::kNone:
      break;
    case Fixture::kA100:
      return NvidiaGpu("NVIDIA A100-SXM4-80GB", "Ampere", "8.0.0", "80Gi");
    case Fixture::kA100_40:
      return NvidiaGpu("NVIDIA A100-PCIE-40GB", "Ampere", "8.0.0", "40Gi");
    case Fixture::kL4:
      return NvidiaGpu("NVIDIA L4", "Ada Lovelace", "8.9.0", "24Gi");
    case Fixture::kH100:
      return NvidiaGpu("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", "80Gi");
    case Fixture::kExample: {
      DeviceInput d;
      d.driver = "dra.example.com";
      d.attributes["name"] = int64_t{42};
      d.attributes["model"] = std::string("fish");
      d.attributes["enabled"] = true;
      d.attributes["version"] = VersionString{"1.2.3-rc.1"};
      d.attributes["services"] = std::string("example-sym-example");
      d.attributes["names"] = std::vector<int64_t>{1, 2, 3};
      d.attributes["tags"] = std::vector<std::string>{"a", "b"};
      d.attributes["other.example.com/color"] = std::string("blue");
      d.capacity["memory"] = Q("1Gi");
      d.capacity["cores"] = Q("1500m");
      d.allow_multiple_allocations = true;
      return d;
    }
  }
  return DeviceInput{};
}

// The value as Value::DebugString(), "error: <message>", or "parse error: <issues>".
std::string EvalText(const std::string& expr, Fixture fixture = Fixture::kNone,
                     uint64_t cost_limit = 1'000'000, uint64_t* cost = nullptr) {
  const Source source(expr);
  const ParseResult parsed = Parse(source);
  if (parsed.ast == nullptr) return "parse error: " + source.DisplayIssues(parsed.issues);
  Activation vars;
  if (fixture != Fixture::kNone) {
    absl::StatusOr<Value> device = BuildDeviceValue(MakeDevice(fixture));
    if (!device.ok()) return "device error: " + std::string(device.status().message());
    vars.Insert("device", *device);
  }
  vars.Insert("x", Value::Int(7));
  EvalOptions options;
  options.cost_limit = cost_limit;
  const EvalResult result = Evaluate(*parsed.ast, vars, options);
  // The planned evaluation (ConstantTable) agrees with the unplanned one in value and cost.
  const ConstantTable plan(*parsed.ast);
  options.constants = &plan;
  const EvalResult planned = Evaluate(*parsed.ast, vars, options);
  EXPECT_EQ(planned.value.DebugString(), result.value.DebugString()) << expr;
  EXPECT_EQ(planned.cost, result.cost) << expr;
  if (cost != nullptr) *cost = result.cost;
  if (!result.ok()) return "error: " + result.error();
  return result.value.DebugString();
}

struct Case {
  std::string expr;
  std::string want;
  Fixture fixture = Fixture::kNone;
};

void RunTable(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    EXPECT_EQ(EvalText(c.expr, c.fixture), c.want) << "expression: " << c.expr;
  }
}

TEST(InterpreterTest, Literals) {
  RunTable({
      {"null", "null"},
      {"true", "true"},
      {"42", "42"},
      {"-9223372036854775808", "-9223372036854775808"},
      {"42u", "42u"},
      {"1.5", "1.5"},
      {"'abc'", "\"abc\""},
      {"b'ab'", "b\"ab\""},
      {"[1, 'a', [true]]", "[1, \"a\", [true]]"},
      {"{'a': 1, 2: 'b'}", "{\"a\": 1, 2: \"b\"}"},
      {"{'a': 1, 'a': 2}", "error: insert failed: key a already exists"},
      {"{1: 'a', 1u: 'b'}", "error: insert failed: key 1 already exists"},
      {"{1.5: 'a'}", "error: unsupported key type: double"},
      {"x", "7"},
      {"y", "error: no such attribute(s): y"},
      {"int", "int"},
      {"type(1) == int", "true"},
      {"type('a') == string && type(1u) == uint && type(1.0) == double", "true"},
      {"type([]) == list && type({}) == map && type(null) == null_type", "true"},
      {"type(type(1))", "type"},
      {"type(true) == bool && type(b'') == bytes", "true"},
  });
}

TEST(InterpreterTest, Arithmetic) {
  RunTable({
      {"1 + 2 * 3 - 4 / 2 % 3", "5"},
      {"7 / 2", "3"},
      {"-7 / 2", "-3"},
      {"-7 % 3", "-1"},
      {"7u / 2u", "3u"},
      {"7u % 4u", "3u"},
      {"1.5 * 2.0 + 0.25 - 1.0 / 4.0", "3.0"},
      {"1.0 / 0.0", "+Inf"},
      {"9223372036854775807 + 1", "error: integer overflow"},
      {"-9223372036854775808 - 1", "error: integer overflow"},
      {"9223372036854775807 * 2", "error: integer overflow"},
      {"-9223372036854775808 / -1", "error: integer overflow"},
      {"-9223372036854775808 % -1", "error: integer overflow"},
      {"-(-9223372036854775808)", "error: integer overflow"},
      {"-x", "-7"},
      {"-(1.5)", "-1.5"},
      {"0u - 1u", "error: unsigned integer overflow"},
      {"18446744073709551615u + 1u", "error: unsigned integer overflow"},
      {"9223372036854775808u * 2u", "error: unsigned integer overflow"},
      {"1 / 0", "error: division by zero"},
      {"1 % 0", "error: modulus by zero"},
      {"1u / 0u", "error: division by zero"},
      {"1u % 0u", "error: modulus by zero"},
      {"1 + 1u", "error: no such overload: _+_(int, uint)"},
      {"1 + 1.0", "error: no such overload: _+_(int, double)"},
      {"1.5 % 1.0", "error: no such overload: _%_(double, double)"},
      {"-'a'", "error: no such overload: -_(string)"},
      {"-(1u)", "error: no such overload: -_(uint)"},
      {"'ab' + 'cd'", "\"abcd\""},
      {"b'ab' + b'cd'", "b\"abcd\""},
      {"[1] + [2, 3]", "[1, 2, 3]"},
      {"{} + {}", "error: no such overload: _+_(map, map)"},
  });
}

TEST(InterpreterTest, ComparisonAndEquality) {
  RunTable({
      {"1 == 1u", "true"},
      {"1 == 1.0", "true"},
      {"1u == 1.0", "true"},
      {"1 != 2", "true"},
      {"-1 < 1u", "true"},
      {"1u > -1", "true"},
      {"2 > 1.5", "true"},
      {"1.5 < 2u", "true"},
      {"9223372036854775807 < 9223372036854775808.0", "true"},
      {"9223372036854775807 == 9223372036854775808.0", "false"},
      {"18446744073709551615u > 9223372036854775807", "true"},
      {"2 <= 2 && 2 >= 2 && !(2 < 2) && !(2 > 2)", "true"},
      {"'a' < 'b' && 'abc' > 'ab' && 'a' <= 'a'", "true"},
      {"b'a' < b'b'", "true"},
      {"false < true", "true"},
      {"1 < 'a'", "error: no such overload: _<_(int, string)"},
      {"[1] < [2]", "error: no such overload: _<_(list, list)"},
      {"0.0/0.0 == 0.0/0.0", "false"},
      {"0.0/0.0 < 1.0", "false"},
      {"1 == 'a'", "false"},
      {"null == null", "true"},
      {"null != 0", "true"},
      {"[1, 2] == [1, 2]", "true"},
      {"[1, 2] == [1.0, 2u]", "true"},
      {"[1, 2] == [2, 1]", "false"},
      {"[1] == [1, 2]", "false"},
      {"{'a': 1, 'b': [2]} == {'b': [2.0], 'a': 1u}", "true"},
      {"{'a': 1} == {'a': 2}", "false"},
      {"{'a': 1} == {'b': 1}", "false"},
      {"{1: 'x'}[1u]", "\"x\""},
      {"{1u: 'x'}[1]", "\"x\""},
      {"{1: 'x'}[1.0]", "\"x\""},
      {"optional.of(1) == optional.of(1.0)", "true"},
      {"optional.none() == optional.none()", "true"},
      {"optional.none() == optional.of(1)", "false"},
      {"quantity('1Gi') == quantity('1024Mi')", "true"},
      {"semver('1.2.3') == semver('1.2.3+build')", "true"},
      {"1 / 0 == 1", "error: division by zero"},
  });
}

TEST(InterpreterTest, LogicalOperatorsAbsorbErrors) {
  RunTable({
      {"true && true", "true"},
      {"true && false", "false"},
      {"false || true", "true"},
      {"false || false", "false"},
      {"false && 1 / 0 == 1", "false"},
      {"1 / 0 == 1 && false", "false"},
      {"true || 1 / 0 == 1", "true"},
      {"1 / 0 == 1 || true", "true"},
      {"1 / 0 == 1 && true", "error: division by zero"},
      {"true && 1 / 0 == 1", "error: division by zero"},
      {"1 / 0 == 1 || false", "error: division by zero"},
      {"1 / 0 == 1 && 1 % 0 == 1", "error: division by zero"},
      {"1 % 0 == 1 || 1 / 0 == 1", "error: modulus by zero"},
      {"{}.a && false", "false"},
      {"{}.a || true", "true"},
      {"1 && true", "error: no such overload: _&&_(int, bool)"},
      {"1 && false", "false"},
      {"true || 'a'", "true"},
      {"false || 'a'", "error: no such overload: _||_(bool, string)"},
      {"!true", "false"},
      {"!!false", "false"},
      {"!1", "error: no such overload: !_(int)"},
      {"true ? 1 : 1 / 0", "1"},
      {"false ? 1 / 0 : 2", "2"},
      {"1 / 0 == 1 ? 1 : 2", "error: division by zero"},
      {"1 ? 2 : 3", "error: no such overload: _?_:_(int)"},
  });
}

TEST(InterpreterTest, IndexSelectAndIn) {
  RunTable({
      {"[1, 2, 3][1]", "2"},
      {"[1, 2, 3][2u]", "3"},
      {"[1, 2, 3][0.0]", "1"},
      {"[1, 2, 3][3]", "error: index out of bounds: 3"},
      {"[1, 2, 3][-1]", "error: index out of bounds: -1"},
      {"[1, 2, 3]['a']", "error: no such overload: _[_](list, string)"},
      {"{'a': 1}['a']", "1"},
      {"{'a': 1}['b']", "error: no such key: b"},
      {"{1: 1}[2]", "error: no such key: 2"},
      {"{'a': {'b': 2}}.a.b", "2"},
      {"{'a': 1}.b", "error: no such key: b"},
      {"'abc'[0]", "error: no such overload: _[_](string, int)"},
      {"(1).a", "error: type 'int' does not support field selection"},
      {"has({'a': 1}.a)", "true"},
      {"has({'a': 1}.b)", "false"},
      {"2 in [1, 2, 3]", "true"},
      {"2.0 in [1, 2, 3]", "true"},
      {"4 in [1, 2, 3]", "false"},
      {"'a' in {'a': 1}", "true"},
      {"'b' in {'a': 1}", "false"},
      {"1u in {1: 'x'}", "true"},
      {"1 in 1", "error: no such overload: @in(int, int)"},
  });
}

TEST(InterpreterTest, Optionals) {
  RunTable({
      {"{'a': 1}.?a", "optional.of(1)"},
      {"{'a': 1}.?b", "optional.none()"},
      {"{'a': 1}.?b.orValue(5)", "5"},
      {"{'a': 1}.?a.orValue(5)", "1"},
      {"{'a': {'b': 2}}.?a.b", "optional.of(2)"},
      {"{'a': {'b': 2}}.?a.c", "optional.none()"},
      {"{'a': {'b': 2}}.?x.b.orValue(0)", "0"},
      {"{'a': 1}[?'a']", "optional.of(1)"},
      {"{'a': 1}[?'z']", "optional.none()"},
      {"[1, 2][?1]", "optional.of(2)"},
      {"[1, 2][?5]", "optional.none()"},
      {"[1, 2][?5].hasValue()", "false"},
      {"optional.of(3).hasValue()", "true"},
      {"optional.of(3).value()", "3"},
      {"optional.none().value()", "error: optional.none() dereference"},
      {"optional.none().or(optional.of(2))", "optional.of(2)"},
      {"optional.of(1).or(optional.of(2))", "optional.of(1)"},
      {"optional.ofNonZeroValue(0)", "optional.none()"},
      {"optional.ofNonZeroValue('')", "optional.none()"},
      {"optional.ofNonZeroValue([1])", "optional.of([1])"},
      {"[1, ?optional.none(), ?optional.of(3)]", "[1, 3]"},
      {"{'a': 1, ?'b': optional.none(), ?'c': optional.of(2)}", "{\"a\": 1, \"c\": 2}"},
      {"[?1]", "error: cannot initialize optional list element from non-optional value 1"},
      {"optional.of(2).optMap(v, v * 3)", "optional.of(6)"},
      {"optional.none().optMap(v, v * 3)", "optional.none()"},
      {"optional.of(2).optFlatMap(v, optional.of(v + 1))", "optional.of(3)"},
  });
}

TEST(InterpreterTest, Comprehensions) {
  RunTable({
      {"[1, 2, 3].all(i, i > 0)", "true"},
      {"[1, 2, 3].all(i, i > 1)", "false"},
      {"[1, 0, 3].all(i, 6 / i > 1)", "error: division by zero"},
      {"[0, 1].all(i, 6 / i > 100)", "false"},
      {"[0, 1].exists(i, 6 / i == 6)", "true"},
      {"[0, 2].exists(i, 6 / i == 6)", "error: division by zero"},
      {"[1, 2, 3].exists(i, i == 2)", "true"},
      {"[1, 2, 3].exists_one(i, i > 1)", "false"},
      {"[1, 2, 3].exists_one(i, i > 2)", "true"},
      {"[1, 2, 3].map(i, i * 2)", "[2, 4, 6]"},
      {"[1, 2, 3].map(i, i > 1, i * 10)", "[20, 30]"},
      {"[1, 2, 3, 4].filter(i, i % 2 == 0)", "[2, 4]"},
      {"{'a': 1, 'b': 2}.map(k, k)", "[\"a\", \"b\"]"},
      {"{'a': 1, 'b': 2}.exists(k, k == 'b')", "true"},
      {"[[1, 2], [3]].map(l, l.map(i, i + 1))", "[[2, 3], [4]]"},
      {"cel.bind(a, 2, a * a + a)", "6"},
      {"cel.bind(a, [1, 2], cel.bind(b, 3, a.map(i, i * b)))", "[3, 6]"},
      {"5.all(i, true)", "error: got 'types.Int', expected iterable type"},
      {"[1, 2].all(i, v, i < v)", "true"},
      {"['a', 'b'].exists(i, v, i == 1 && v == 'b')", "true"},
      {"{'a': 1, 'b': 2}.all(k, v, v > 0)", "true"},
      {"[1, 2, 3].existsOne(i, v, v > 2)", "true"},
      {"[1, 2].transformList(i, v, v * i)", "[0, 2]"},
      {"[1, 2, 3].transformList(i, v, v > 1, v)", "[2, 3]"},
      {"['a', 'b'].transformMap(i, v, v + '!')", "{0: \"a!\", 1: \"b!\"}"},
      {"{'a': 1, 'b': 2}.transformMap(k, v, v > 1, v * 10)", "{\"b\": 20}"},
      {"{'a': 1}.transformMapEntry(k, v, {v: k})", "{1: \"a\"}"},
      {"[1, 1].transformMapEntry(i, v, {v: i})", "error: insert failed: key 1 already exists"},
  });
}

TEST(InterpreterTest, Conversions) {
  RunTable({
      {"int('42')", "42"},
      {"int('-42')", "-42"},
      {"int('4x')", "error: strconv.ParseInt: parsing \"4x\": invalid syntax"},
      {"int('99999999999999999999')",
       "error: strconv.ParseInt: parsing \"99999999999999999999\": value out of range"},
      {"int(2.9)", "2"},
      {"int(-2.9)", "-2"},
      {"int(1e19)", "error: integer overflow"},
      {"int(18446744073709551615u)", "error: integer overflow"},
      {"int(42u)", "42"},
      {"uint(-1)", "error: unsigned integer overflow"},
      {"uint(42)", "42u"},
      {"uint('42')", "42u"},
      {"uint(-1.0)", "error: unsigned integer overflow"},
      {"double(1)", "1.0"},
      {"double('1.5')", "1.5"},
      {"double('x')", "error: strconv.ParseFloat: parsing \"x\": invalid syntax"},
      {"string(1)", "\"1\""},
      {"string(2u)", "\"2\""},
      {"string(1.5)", "\"1.5\""},
      {"string(true)", "\"true\""},
      {"string(b'abc')", "\"abc\""},
      {"string(b'\\xff')", "error: invalid UTF-8 in bytes, cannot convert to string"},
      {"bytes('abc')", "b\"abc\""},
      {"bool('true')", "true"},
      {"bool('f')", "false"},
      {"bool('yes')", "error: strconv.ParseBool: parsing \"yes\": invalid syntax"},
      {"dyn(1) == 1", "true"},
      {"int([])", "error: no such overload: int(list)"},
  });
}

TEST(InterpreterTest, Strings) {
  RunTable({
      {"size('héllo')", "5"},
      {"'héllo'.size()", "5"},
      {"size(b'h\\xc3\\xa9')", "3"},
      {"size([1, 2])", "2"},
      {"size({'a': 1})", "1"},
      {"{'a': 1}.size()", "1"},
      {"size(1)", "error: no such overload: size(int)"},
      {"'hello'.contains('ell')", "true"},
      {"'hello'.startsWith('he') && 'hello'.endsWith('lo')", "true"},
      {"'hello'.matches('^h.*o$')", "true"},
      {"matches('hello', 'x')", "false"},
      {"'hello'.matches('(')", "error: error parsing regexp: missing closing ): `(`"},
      {"'hello'.charAt(1)", "\"e\""},
      {"'hello'.charAt(10)", "error: index out of range: 10"},
      {"'hello mellow'.indexOf('ello', 2)", "7"},
      {"'hello mellow'.lastIndexOf('ello')", "7"},
      {"'TacoCat'.lowerAscii()", "\"tacocat\""},
      {"'TacoCat'.upperAscii()", "\"TACOCAT\""},
      {"'a-b-c'.replace('-', '+')", "\"a+b+c\""},
      {"'a-b-c'.replace('-', '+', 1)", "\"a+b-c\""},
      {"'a,b,c'.split(',')", "[\"a\", \"b\", \"c\"]"},
      {"'a,b,c'.split(',', 2)", "[\"a\", \"b,c\"]"},
      {"'hello'.substring(1, 3)", "\"el\""},
      {"'hello'.substring(3, 1)", "error: invalid substring range. start: 3, end: 1"},
      {"'  x '.trim()", "\"x\""},
      {"['a', 'b'].join('-')", "\"a-b\""},
      {"['a', 'b'].join()", "\"ab\""},
      {"'%s is %d'.format(['x', 3])", "\"x is 3\""},
      {"strings.quote('a\"b')", "\"\\\"a\\\\\\\"b\\\"\""},
      {"'abc 123'.find('[0-9]+')", "\"123\""},
      {"'a1b2'.findAll('[0-9]')", "[\"1\", \"2\"]"},
      {"'abc'.reverse()", "error: no such overload: string.reverse()"},
      {"'abc'.nope()", "error: no such overload: string.nope()"},
  });
}

TEST(InterpreterTest, ListsAndSets) {
  RunTable({
      {"[1, 2, 3].isSorted()", "true"},
      {"[3, 1].isSorted()", "false"},
      {"[1, 2, 3].sum()", "6"},
      {"[1.5, 2.5].sum()", "4.0"},
      {"[].sum()", "0"},
      {"[9223372036854775807, 1].sum()", "error: integer overflow"},
      {"[3, 1, 2].min()", "1"},
      {"[3, 1, 2].max()", "3"},
      {"[].min()", "error: min called on empty list"},
      {"[].max()", "error: max called on empty list"},
      {"[1, 2, 1].indexOf(1)", "0"},
      {"[1, 2, 1].lastIndexOf(1)", "2"},
      {"[1, 2].indexOf(5)", "-1"},
      {"[1, 2, 3, 4].slice(1, 3)", "[2, 3]"},
      {"[1, 2].slice(2, 1)",
       "error: cannot slice(2, 1), start index must be less than or equal to end index"},
      {"[1, 2].slice(0, 3)", "error: cannot slice(0, 3), list is length 2"},
      {"[1, [2, [3]]].flatten()", "[1, 2, [3]]"},
      {"[1, [2, [3]]].flatten(2)", "[1, 2, 3]"},
      {"[1, 2, 1, 2.0].distinct()", "[1, 2]"},
      {"[1, 2, 3].reverse()", "[3, 2, 1]"},
      {"[3, 1, 2].sort()", "[1, 2, 3]"},
      {"['b', 'a'].sort()", "[\"a\", \"b\"]"},
      {"lists.range(3)", "[0, 1, 2]"},
      {"sets.contains([1, 2, 3], [2, 3])", "true"},
      {"sets.contains([1, 2], [3])", "false"},
      {"sets.contains([1], [])", "true"},
      {"sets.equivalent([1, 2], [2, 1, 1])", "true"},
      {"sets.equivalent([1, 2], [1])", "false"},
      {"sets.intersects([1, 2], [2, 5])", "true"},
      {"sets.intersects([1, 2], [5])", "false"},
      {"[1, 2].includes(2)", "true"},
      {"[1, 2].includes(3)", "false"},
      {"'a'.includes('a')", "true"},
      {"5.includes(6)", "false"},
      {"lists.range(49).includes(1)",
       "error: includes() supports lists of at most 48 elements, got 49"},
  });
}

TEST(InterpreterTest, QuantityLibrary) {
  RunTable({
      {"quantity('1Gi')", "quantity(\"1Gi\")"},
      {"quantity('x')",
       "error: quantities must match the regular expression "
       "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
      {"isQuantity('1Gi')", "true"},
      {"isQuantity('1Gx')", "false"},
      {"quantity('-1').sign()", "-1"},
      {"quantity('0').sign()", "0"},
      {"quantity('1Gi').isGreaterThan(quantity('1G'))", "true"},
      {"quantity('1G').isLessThan(quantity('1Gi'))", "true"},
      {"quantity('1Gi').compareTo(quantity('1024Mi'))", "0"},
      {"quantity('1Gi').compareTo(quantity('2Gi'))", "-1"},
      {"quantity('1Ki').asInteger()", "1024"},
      {"quantity('1500m').asInteger()", "error: cannot convert value to integer"},
      {"quantity('1500m').isInteger()", "false"},
      {"quantity('1k').isInteger()", "true"},
      {"quantity('1500m').asApproximateFloat()", "1.5"},
      {"quantity('1Gi').add(quantity('1Gi')) == quantity('2Gi')", "true"},
      {"quantity('1k').add(1) == quantity('1001')", "true"},
      {"quantity('1k').sub(quantity('1')).asInteger()", "999"},
      {"quantity('1k').sub(2000).sign()", "-1"},
      {"quantity('1').isGreaterThan(1)",
       "error: no such overload: kubernetes.Quantity.isGreaterThan(int)"},
      {"quantity('1') < quantity('2')",
       "error: no such overload: _<_(kubernetes.Quantity, kubernetes.Quantity)"},
  });
}

TEST(InterpreterTest, SemverLibrary) {
  RunTable({
      {"semver('1.2.3')", "semver(\"1.2.3\")"},
      {"semver('v1.2', true)", "semver(\"1.2.0\")"},
      {"semver('v1.2')", "error: invalid semver: v1.2"},
      {"isSemver('1.2.3')", "true"},
      {"isSemver('v1.0.0')", "false"},
      {"isSemver('v1.0.0', true)", "true"},
      {"semver('1.2.3').major() == 1 && semver('1.2.3').minor() == 2", "true"},
      {"semver('1.2.3').patch()", "3"},
      {"semver('1.2.3').isGreaterThan(semver('1.2.3-rc.1'))", "true"},
      {"semver('1.2.3').isLessThan(semver('1.10.0'))", "true"},
      {"semver('2.0.0').compareTo(semver('1.9.9'))", "1"},
      {"semver('1.0.0').compareTo(semver('1.0.0'))", "0"},
  });
}

TEST(InterpreterTest, DeviceVariable) {
  RunTable({
      {"device.driver", "\"dra.example.com\"", Fixture::kExample},
      {"device.attributes['dra.example.com'].name > 0", "true", Fixture::kExample},
      {"device.attributes['dra.example.com'].model == 'fish'", "true", Fixture::kExample},
      {"device.attributes['dra.example.com'].enabled", "true", Fixture::kExample},
      {"device.attributes['dra.example.com'].version.isLessThan(semver('1.2.3'))", "true",
       Fixture::kExample},
      {"device.attributes['dra.example.com'].version.isGreaterThan(semver('v0.0.1', true)) && "
       "isSemver('v1.0.0', true)",
       "true", Fixture::kExample},
      {"device.attributes['other.example.com'].color", "\"blue\"", Fixture::kExample},
      {"device.capacity['dra.example.com'].memory.isGreaterThan(quantity('1Ki'))", "true",
       Fixture::kExample},
      {"device.capacity['dra.example.com'].cores.asApproximateFloat()", "1.5", Fixture::kExample},
      {"device.attributes.exists_one(x, x == 'dra.example.com')", "true", Fixture::kExample},
      {"device.attributes['dra.example.com'].services.split('example').size() >= 2", "true",
       Fixture::kExample},
      {"device.attributes['dra.example.com'].services.matches('[^a]?sym')", "true",
       Fixture::kExample},
      {"cel.bind(dra, device.attributes['dra.example.com'], dra.name)", "42", Fixture::kExample},
      {"1 in device.attributes['dra.example.com'].names", "true", Fixture::kExample},
      {"device.attributes['dra.example.com'].names.includes(2)", "true", Fixture::kExample},
      {"device.attributes['dra.example.com'].model.includes('fish')", "true", Fixture::kExample},
      {"device.attributes['dra.example.com'].tags.includes('c')", "false", Fixture::kExample},
      {"device.allowMultipleAllocations == true", "true", Fixture::kExample},
      {"device.attributes['nope']", "{}", Fixture::kExample},
      {"'x' in device.attributes['nope']", "false", Fixture::kExample},
      {"'nope' in device.attributes", "false", Fixture::kExample},
      {"device.attributes['no-such-domain'].noSuchAttr.isGreaterThan(quantity('0'))",
       "error: no such key: noSuchAttr", Fixture::kExample},
      {"device.attributes['dra.example.com'].missing", "error: no such key: missing",
       Fixture::kExample},
      {"has(device.attributes['dra.example.com'].model)", "true", Fixture::kExample},
      {"has(device.attributes['dra.example.com'].missing)", "false", Fixture::kExample},
      {"device.attributes['dra.example.com'].?missing.orValue('none')", "\"none\"",
       Fixture::kExample},
      {"device.attributes['dra.example.com'].?model.orValue('none')", "\"fish\"",
       Fixture::kExample},
      {"'memory' in device.capacity['dra.example.com'] && "
       "device.capacity['dra.example.com'].memory.compareTo(quantity('1Gi')) == 0",
       "true", Fixture::kExample},
      {"device.attributes['dra.example.com'].name.exists(i, true)",
       "error: got 'types.Int', expected iterable type", Fixture::kExample},
      {"device.attributes['resource.kubernetes.io'].pcieRoot", "\"pci0000:00\"", Fixture::kA100},
  });
}

TEST(InterpreterTest, VendorSelectors) {
  const std::string lower_match =
      "device.attributes[\"gpu.nvidia.com\"].productName.lowerAscii().matches(\"^.*a100.*$\")";
  const std::string compute =
      "device.attributes[\"gpu.nvidia.com\"].cudaComputeCapability.isGreaterThan(semver(\"8.0.0\")"
      ")";
  const std::string memory =
      "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0";
  RunTable({
      {lower_match, "true", Fixture::kA100},
      {lower_match, "true", Fixture::kA100_40},
      {lower_match, "false", Fixture::kL4},
      {compute, "false", Fixture::kA100},
      {compute, "true", Fixture::kL4},
      {compute, "true", Fixture::kH100},
      {memory, "true", Fixture::kA100},
      {memory, "true", Fixture::kA100_40},
      {memory, "false", Fixture::kL4},
  });
}

// The selectors of the seed objects (shared/fixtures/seeds) against seed inventory devices.
TEST(InterpreterTest, SeedSelectors) {
  const std::string a100_80g =
      "device.driver == \"gpu.nvidia.com\" &&\n"
      "device.attributes[\"gpu.nvidia.com\"].productName.lowerAscii().contains(\"a100\") &&\n"
      "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"80Gi\")) >= 0";
  const std::string gpu_class =
      "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'";
  const std::string fallback_a100 =
      "device.attributes[\"gpu.nvidia.com\"].productName.contains(\"A100\") &&\n"
      "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0";
  const std::string fallback_l4 =
      "device.attributes[\"gpu.nvidia.com\"].productName.contains(\"L4\")";
  struct SeedCase {
    std::string expr;
    Fixture fixture;
    bool want;
  };
  const std::vector<SeedCase> cases = {
      {a100_80g, Fixture::kA100, true},         {a100_80g, Fixture::kA100_40, false},
      {a100_80g, Fixture::kL4, false},          {a100_80g, Fixture::kH100, false},
      {gpu_class, Fixture::kA100, true},        {gpu_class, Fixture::kL4, true},
      {gpu_class, Fixture::kExample, false},    {fallback_a100, Fixture::kA100, true},
      {fallback_a100, Fixture::kA100_40, true}, {fallback_a100, Fixture::kL4, false},
      {fallback_l4, Fixture::kL4, true},        {fallback_l4, Fixture::kA100, false},
  };
  for (const SeedCase& c : cases) {
    const Source source(c.expr);
    const ParseResult parsed = Parse(source);
    ASSERT_NE(parsed.ast, nullptr) << source.DisplayIssues(parsed.issues);
    absl::StatusOr<bool> got = Matches(*parsed.ast, MakeDevice(c.fixture));
    ASSERT_TRUE(got.ok()) << c.expr << ": " << got.status();
    EXPECT_EQ(*got, c.want) << c.expr << " on fixture " << static_cast<int>(c.fixture);
  }
}

absl::StatusOr<bool> MatchText(const std::string& expr, const DeviceInput& device) {
  const Source source(expr);
  const ParseResult parsed = Parse(source);
  if (parsed.ast == nullptr) return absl::InternalError(source.DisplayIssues(parsed.issues));
  return Matches(*parsed.ast, device);
}

TEST(DraEnvTest, MatchesErrors) {
  const DeviceInput device = MakeDevice(Fixture::kExample);
  absl::StatusOr<bool> r = MatchText(
      "device.attributes['no-such-domain'].noSuchAttr.isGreaterThan(quantity('0'))", device);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "no such key: noSuchAttr. consider using CEL optional chaining (.? followed by "
            "orValue()) or guarding the check with has() for optional fields");

  r = MatchText("device.attributes['dra.example.com'].names", device);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "CEL result of type list could not be converted to bool");

  r = MatchText("1 / 0 == 1", device);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "division by zero");

  r = MatchText("device.driver == 'dra.example.com'", device);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(*r);
}

TEST(DraEnvTest, UnsupportedAttributeFailsBeforeEvaluation) {
  DeviceInput device = MakeDevice(Fixture::kExample);
  device.attributes["broken"] = AttributeValue{};
  absl::StatusOr<bool> r = MatchText("true", device);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "attribute broken: unsupported attribute value");

  device = MakeDevice(Fixture::kExample);
  device.attributes["empty"] = std::vector<std::string>{};
  r = MatchText("true", device);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "attribute empty: unsupported attribute value");

  device = MakeDevice(Fixture::kExample);
  device.attributes["v"] = VersionString{"not-a-version"};
  r = MatchText("true", device);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "attribute v: invalid semantic version \"not-a-version\"");
}

TEST(DraEnvTest, QualifiedNamesUnderTheirDomain) {
  DeviceInput device = MakeDevice(Fixture::kExample);
  device.attributes["dra.example.com/extra"] = int64_t{5};
  EXPECT_EQ(*MatchText("device.attributes['dra.example.com'].extra == 5 && "
                       "device.attributes['dra.example.com'].name == 42",
                       device),
            true);
}

TEST(InterpreterTest, CostIsCounted) {
  uint64_t cost = 0;
  EXPECT_EQ(EvalText("device.driver == 'dra.example.com'", Fixture::kExample, 1'000'000, &cost),
            "true");
  // device (1) + .driver (1) + == on 15-byte strings (ceil(15 * 0.1) = 2).
  EXPECT_EQ(cost, 4u);
  EXPECT_EQ(EvalText("1 + 2", Fixture::kNone, 1'000'000, &cost), "3");
  EXPECT_EQ(cost, 1u);
}

TEST(InterpreterTest, CostLimitStopsEvaluation) {
  uint64_t cost = 0;
  const std::string nested = "lists.range(2000).all(i, lists.range(2000).all(j, i + j >= 0))";
  EXPECT_EQ(EvalText(nested, Fixture::kNone, 1'000'000, &cost),
            "error: operation cancelled: actual cost limit exceeded");
  EXPECT_GT(cost, 1'000'000u);
  EXPECT_LT(cost, 1'100'000u);
  // The cancellation is not absorbed by || or &&.
  EXPECT_EQ(EvalText("true || " + nested, Fixture::kNone), "true");
  EXPECT_EQ(EvalText(nested + " || true", Fixture::kNone),
            "error: operation cancelled: actual cost limit exceeded");
  EXPECT_EQ(EvalText("lists.range(10).all(i, true)", Fixture::kNone, 5),
            "error: operation cancelled: actual cost limit exceeded");
  EXPECT_EQ(EvalText("lists.range(10).all(i, true)", Fixture::kNone, 1000), "true");
}

// EvalText compares every planned evaluation (ConstantTable, which precomputes calls such as
// quantity('1Gi')) with the unplanned one; here around every cost limit a folded call can cross.
TEST(InterpreterTest, PlannedEvaluationStopsWhereUnplannedDoes) {
  const char* const exprs[] = {
      "quantity('1Gi').isGreaterThan(quantity('1Mi')) && device.driver == 'dra.example.com'",
      "semver('1.2.3') == semver('v1.2.3', true) && isSemver('x') == false",
      "ip('10.0.0.1').family() == 4 && cidr('10.0.0.0/8').containsIP('10.1.2.3')",
      "timestamp('2024-01-01T00:00:00Z') < timestamp(1) || duration('1h') > duration('1m')",
      "quantity('bad') == quantity('1')",
  };
  const char* const want[] = {"true", "true", "true", "true", "error: quantities must match"};
  for (size_t i = 0; i < std::size(exprs); ++i) {
    uint64_t full = 0;
    EXPECT_EQ(EvalText(exprs[i], Fixture::kExample, 1'000'000, &full).rfind(want[i], 0), 0u)
        << exprs[i];
    for (uint64_t limit = 0; limit <= full + 1; ++limit) {
      uint64_t cost = 0;
      const std::string got = EvalText(exprs[i], Fixture::kExample, limit, &cost);
      if (limit < full) {
        EXPECT_EQ(got, "error: operation cancelled: actual cost limit exceeded") << exprs[i];
      } else {
        EXPECT_EQ(cost, full) << exprs[i];
      }
    }
  }
}

TEST(InterpreterTest, LargeMapAndFilterStayLinear) {
  uint64_t cost = 0;
  EXPECT_EQ(EvalText("lists.range(50000).map(i, i * 2).filter(i, i % 4 == 0).size()",
                     Fixture::kNone, 10'000'000, &cost),
            "25000");
  EXPECT_EQ(EvalText("lists.range(3000).transformMap(i, v, v).size()", Fixture::kNone, 10'000'000),
            "3000");
}

TEST(InterpreterTest, RegexCacheIsUsed) {
  RegexCache cache;
  const Source source("'abc'.matches('^a.c$') && !'abd'.matches('^a.c$')");
  const ParseResult parsed = Parse(source);
  ASSERT_NE(parsed.ast, nullptr);
  EvalOptions options;
  options.regex_cache = &cache;
  const EvalResult r = Evaluate(*parsed.ast, Activation(), options);
  EXPECT_EQ(r.value.DebugString(), "true");
  std::string error;
  EXPECT_NE(cache.Get("^a.c$", &error), nullptr);
  EXPECT_EQ(cache.Get("(", &error), nullptr);
  EXPECT_EQ(error, "error parsing regexp: missing closing ): `(`");
}

TEST(InterpreterTest, ConcurrentEvaluationOfOneAst) {
  const Source source(
      "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$') && "
      "[1, 2, 3].map(i, i * 2).sum() == 12");
  const ParseResult parsed = Parse(source);
  ASSERT_NE(parsed.ast, nullptr);
  absl::StatusOr<Value> a100 = BuildDeviceValue(MakeDevice(Fixture::kA100));
  absl::StatusOr<Value> l4 = BuildDeviceValue(MakeDevice(Fixture::kL4));
  ASSERT_TRUE(a100.ok() && l4.ok());
  RegexCache cache;
  std::vector<int> failures(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const bool even = (i + t) % 2 == 0;
        absl::StatusOr<bool> r = MatchesValue(*parsed.ast, even ? *a100 : *l4, 1'000'000, &cache);
        if (!r.ok() || *r != even) ++failures[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

TEST(InterpreterTest, DeeplyNestedValuesCompare) {
  // Nesting is bounded by the parser; equality of the deepest accepted literal still works.
  std::string deep = "1";
  for (int i = 0; i < 100; ++i) deep = "[" + deep + "]";
  EXPECT_EQ(EvalText(deep + " == " + deep), "true");
}

}  // namespace
}  // namespace qm::cel
