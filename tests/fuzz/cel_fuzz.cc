// libFuzzer target for the CEL engine: any byte string must parse into a tree or into issues,
// a tree must type-check and evaluate against a device to a value or an error within the cost
// limit, never crashing, hanging or leaking, and evaluate with and without a ConstantTable
// (the planned evaluation) to the same value at the same cost. Built and run by run_cel_fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cel/ast.h"
#include "cel/checker.h"
#include "cel/dra_env.h"
#include "cel/interpreter.h"
#include "cel/parser.h"
#include "cel/source.h"

namespace {

const qm::cel::Value& Device() {
  static const qm::cel::Value* device = [] {
    qm::cel::DeviceInput d;
    d.driver = "gpu.nvidia.com";
    d.attributes["type"] = std::string("gpu");
    d.attributes["productName"] = std::string("NVIDIA A100-SXM4-80GB");
    d.attributes["cudaComputeCapability"] = qm::cel::VersionString{"8.0.0"};
    d.attributes["index"] = int64_t{3};
    d.attributes["numa"] = std::vector<int64_t>{0, 1};
    d.capacity["memory"] = *qm::ParseQuantity("80Gi");
    return new qm::cel::Value(*qm::cel::BuildDeviceValue(d));
  }();
  return *device;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  qm::cel::Source source(text);
  qm::cel::ParseResult result = qm::cel::Parse(source);
  if (result.ast != nullptr) {
    // Every node kind renders (walks the whole tree).
    if (qm::cel::DebugString(result.ast->root()).empty()) __builtin_trap();
    // Type checking and cost estimation terminate on every tree.
    (void)qm::cel::Check(*result.ast);
    // A smaller cost limit than production keeps each input fast; the limit must hold.
    (void)qm::cel::MatchesValue(*result.ast, Device(), 20000);
    // The planned evaluation (ConstantTable) gives the same value at the same cost.
    const qm::cel::ConstantTable plan(*result.ast);
    qm::cel::Activation vars;
    vars.Insert("device", Device());
    qm::cel::EvalOptions options;
    options.cost_limit = 20000;
    const qm::cel::EvalResult plain = qm::cel::Evaluate(*result.ast, vars, options);
    options.constants = &plan;
    const qm::cel::EvalResult planned = qm::cel::Evaluate(*result.ast, vars, options);
    if (plain.cost != planned.cost || plain.value.DebugString() != planned.value.DebugString()) {
      __builtin_trap();
    }
  } else {
    std::string issues = source.DisplayIssues(result.issues);
    if (issues.empty()) __builtin_trap();  // a failed parse must say why
  }
  return 0;
}
