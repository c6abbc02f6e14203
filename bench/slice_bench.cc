// The server's work for each ResourceSlice a fleet's setup creates (bench/README.md): REST
// validation as a create, and the decoding the scheduler does when the slice reaches it. For a
// slice of eight GPUs as scheduler_load creates them (four attributes and one capacity each), and
// one as the NVIDIA DRA driver publishes them (twelve attributes).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "api/rest/validation.h"
#include "model/json/dra_json.h"
#include "model/resource_types.h"
#include "nlohmann/json.hpp"
#include "slices.h"

namespace {

using nlohmann::json;

void ValidateSlice(benchmark::State& state, bool nvidia) {
  const qm::model::ResourceType* type =
      qm::model::FindResourceType("resource.k8s.io", "resourceslices");
  const json slice = bench::Slice(static_cast<int>(state.range(0)), nvidia);
  if (type == nullptr || !qm::api::ValidateObject(*type, slice, nullptr).empty()) {
    std::cerr << "the benchmark's slice does not validate\n";
    std::abort();
  }
  for (auto _ : state) {
    auto errors = qm::api::ValidateObject(*type, slice, nullptr);
    benchmark::DoNotOptimize(errors);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));  // devices
}

void DecodeSlice(benchmark::State& state, bool nvidia) {
  const json slice = bench::Slice(static_cast<int>(state.range(0)), nvidia);
  if (!qm::model::json::DecodeResourceSlice(slice).ok()) {
    std::cerr << "the benchmark's slice does not decode\n";
    std::abort();
  }
  for (auto _ : state) {
    auto decoded = qm::model::json::DecodeResourceSlice(slice);
    benchmark::DoNotOptimize(decoded);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));  // devices
}

void BM_ValidateSchedulerPerfSlice(benchmark::State& state) { ValidateSlice(state, false); }
void BM_ValidateNvidiaSlice(benchmark::State& state) { ValidateSlice(state, true); }

BENCHMARK(BM_ValidateSchedulerPerfSlice)->Arg(8)->Arg(128);
BENCHMARK(BM_ValidateNvidiaSlice)->Arg(8);

void BM_DecodeSchedulerPerfSlice(benchmark::State& state) { DecodeSlice(state, false); }
void BM_DecodeNvidiaSlice(benchmark::State& state) { DecodeSlice(state, true); }

BENCHMARK(BM_DecodeSchedulerPerfSlice)->Arg(8)->Arg(128);
BENCHMARK(BM_DecodeNvidiaSlice)->Arg(8);

}  // namespace

BENCHMARK_MAIN();
