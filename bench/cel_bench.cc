// CEL engine micro-benchmarks (issue 3 targets: evaluate a typical two-clause selector against
// one device <= 0.5 us; compile it <= 50 us). Run: build/bench/cel_bench
#include <benchmark/benchmark.h>

#include "cel/compiler.h"
#include "cel/dra_env.h"
#include "cel/parser.h"
#include "cel/source.h"

namespace {

constexpr char kTwoClauses[] =
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'";
constexpr char kSeedA100[] =
    "device.driver == \"gpu.nvidia.com\" &&\n"
    "device.attributes[\"gpu.nvidia.com\"].productName.lowerAscii().contains(\"a100\") &&\n"
    "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"80Gi\")) >= 0";

qm::cel::DeviceInput A100() {
  qm::cel::DeviceInput d;
  d.driver = "gpu.nvidia.com";
  d.attributes["type"] = std::string("gpu");
  d.attributes["productName"] = std::string("NVIDIA A100-SXM4-80GB");
  d.attributes["cudaComputeCapability"] = qm::cel::VersionString{"8.0.0"};
  d.attributes["resource.kubernetes.io/pcieRoot"] = std::string("pci0000:00");
  d.capacity["memory"] = *qm::ParseQuantity("80Gi");
  return d;
}

void BM_ParseTwoClauseSelector(benchmark::State& state) {
  for (auto _ : state) {
    qm::cel::Source source(kTwoClauses);
    auto result = qm::cel::Parse(source);
    benchmark::DoNotOptimize(result.ast);
  }
}
BENCHMARK(BM_ParseTwoClauseSelector);

void BM_CompileTwoClauseSelector(benchmark::State& state) {
  for (auto _ : state) {
    auto compiled = qm::cel::CompileSelector(kTwoClauses);
    benchmark::DoNotOptimize(compiled.ast);
  }
}
BENCHMARK(BM_CompileTwoClauseSelector);

void BM_EvalTwoClauseSelector(benchmark::State& state) {
  auto compiled = qm::cel::CompileSelector(kTwoClauses);
  auto device = qm::cel::BuildDeviceValue(A100());
  for (auto _ : state) {
    auto matched =
        qm::cel::MatchesValue(*compiled.ast, *device, 1'000'000, nullptr, compiled.constants.get());
    benchmark::DoNotOptimize(matched);
  }
}
BENCHMARK(BM_EvalTwoClauseSelector);

void BM_EvalSeedA100Selector(benchmark::State& state) {
  auto compiled = qm::cel::CompileSelector(kSeedA100);
  auto device = qm::cel::BuildDeviceValue(A100());
  qm::cel::RegexCache regexes;
  for (auto _ : state) {
    auto matched = qm::cel::MatchesValue(*compiled.ast, *device, 1'000'000, &regexes,
                                         compiled.constants.get());
    benchmark::DoNotOptimize(matched);
  }
}
BENCHMARK(BM_EvalSeedA100Selector);

void BM_BuildDeviceValue(benchmark::State& state) {
  auto input = A100();
  for (auto _ : state) {
    auto device = qm::cel::BuildDeviceValue(input);
    benchmark::DoNotOptimize(device);
  }
}
BENCHMARK(BM_BuildDeviceValue);

}  // namespace

BENCHMARK_MAIN();
