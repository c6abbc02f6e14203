// The JSON writer and reader every stored body and request body goes through
// (model/json/write.h, read.h) against nlohmann::json's dump() and parse(), on the bodies the
// service handles most: a bound pod, an allocated claim, and a slice of eight GPUs as the NVIDIA
// DRA driver publishes them (bench/README.md).
#include <benchmark/benchmark.h>

#include <string>

#include "model/json/read.h"
#include "model/json/write.h"
#include "nlohmann/json.hpp"
#include "slices.h"

namespace {

using nlohmann::json;

json Pod() {
  return json::parse(R"({"apiVersion":"v1","kind":"Pod",
    "spec":{"containers":[{"name":"train","image":"registry.example.com/ml/train:2.4.1",
      "command":["python","-m","train","--epochs","10"],
      "resources":{"claims":[{"name":"gpu"}],"limits":{"cpu":"4","memory":"16Gi"}},
      "terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File",
      "imagePullPolicy":"IfNotPresent"}],
      "resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"one-gpu"}],
      "nodeName":"gpu-node-0042","restartPolicy":"Always","schedulerName":"default-scheduler",
      "terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","priority":0,
      "tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists",
        "effect":"NoExecute","tolerationSeconds":300},
        {"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute",
        "tolerationSeconds":300}]},
    "status":{"phase":"Pending","qosClass":"Burstable",
      "conditions":[{"type":"PodScheduled","status":"True",
        "lastTransitionTime":"2026-12-02T17:00:00Z","lastProbeTime":null}],
      "resourceClaimStatuses":[{"name":"gpu","resourceClaimName":"train-7x2kq-gpu-mz4tn"}]}})");
}

json Claim() {
  return json::parse(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
    "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.nvidia.com",
      "allocationMode":"ExactCount","count":1}}]}},
    "status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com",
      "pool":"gpu-node-0042","device":"gpu-3"}]},
      "nodeSelector":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name",
        "operator":"In","values":["gpu-node-0042"]}]}]}},
      "reservedFor":[{"resource":"pods","name":"train-7x2kq","uid":
        "3f1c9a4e-8b7d-4c2e-9f10-2a6b5d8e7c41"}],
      "devices":[{"driver":"gpu.nvidia.com","pool":"gpu-node-0042","device":"gpu-3",
        "conditions":[{"type":"Ready","status":"True","reason":"Prepared",
          "message":"prepared by qm-agent on node gpu-node-0042",
          "lastTransitionTime":"2026-12-02T17:00:01Z","observedGeneration":1}],
        "data":{"cdiDeviceIDs":["k8s.gpu.nvidia.com/claim=3f1c9a4e-gpu-3"]}}]}})");
}

json Slice() { return bench::Slice(8, /*nvidia=*/true); }

void BM_Dump(benchmark::State& state, json (*make)()) {
  const json value = make();
  for (auto _ : state) benchmark::DoNotOptimize(value.dump());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * value.dump().size()));
}

void BM_Write(benchmark::State& state, json (*make)()) {
  const json value = make();
  if (qm::model::json::Write(value) != value.dump()) {
    state.SkipWithError("Write differs from dump()");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(qm::model::json::Write(value));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * value.dump().size()));
}

void BM_Parse(benchmark::State& state, json (*make)()) {
  const std::string text = make().dump();
  for (auto _ : state) benchmark::DoNotOptimize(json::parse(text, nullptr, false));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

void BM_Read(benchmark::State& state, json (*make)()) {
  const std::string text = make().dump();
  if (qm::model::json::Read(text) != json::parse(text)) {
    state.SkipWithError("Read differs from parse()");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(qm::model::json::Read(text));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

BENCHMARK_CAPTURE(BM_Dump, pod, Pod);
BENCHMARK_CAPTURE(BM_Write, pod, Pod);
BENCHMARK_CAPTURE(BM_Dump, claim, Claim);
BENCHMARK_CAPTURE(BM_Write, claim, Claim);
BENCHMARK_CAPTURE(BM_Dump, slice, Slice);
BENCHMARK_CAPTURE(BM_Write, slice, Slice);
BENCHMARK_CAPTURE(BM_Parse, pod, Pod);
BENCHMARK_CAPTURE(BM_Read, pod, Pod);
BENCHMARK_CAPTURE(BM_Parse, claim, Claim);
BENCHMARK_CAPTURE(BM_Read, claim, Claim);
BENCHMARK_CAPTURE(BM_Parse, slice, Slice);
BENCHMARK_CAPTURE(BM_Read, slice, Slice);

}  // namespace

BENCHMARK_MAIN();
