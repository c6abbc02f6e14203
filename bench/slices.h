#pragma once

// The ResourceSlices the benchmarks build (slice_bench, json_bench): `devices` GPUs as
// scheduler_load creates them (four attributes and one capacity each), or as the NVIDIA DRA
// driver publishes them (twelve attributes).

#include <string>

#include "nlohmann/json.hpp"

namespace bench {

using nlohmann::json;

inline json Slice(int devices, bool nvidia) {
  json list = json::array();
  for (int d = 0; d < devices; ++d) {
    json attributes = {{"model", {{"string", "A100"}}},
                       {"family", {{"string", "GPU"}}},
                       {"driverVersion", {{"version", "1.2.3"}}},
                       {"numa", {{"int", d}}}};
    if (nvidia) {
      attributes = {
          {"architecture", {{"string", "Hopper"}}},
          {"brand", {{"string", "Nvidia"}}},
          {"cudaComputeCapability", {{"version", "9.0.0"}}},
          {"cudaDriverVersion", {{"version", "12.4.0"}}},
          {"driverVersion", {{"version", "550.54.15"}}},
          {"index", {{"int", d}}},
          {"minor", {{"int", d}}},
          {"productName", {{"string", "NVIDIA H200"}}},
          {"type", {{"string", "gpu"}}},
          {"uuid", {{"string", "GPU-4c1b6a9e-0d1f-4b7a-9c2e-00000000000" + std::to_string(d)}}},
          {"pcieBusID", {{"string", "0000:1" + std::to_string(d) + ":00.0"}}},
          {"resource.kubernetes.io/pcieRoot", {{"string", "pci0000:10"}}}};
    }
    list.push_back({{"name", "gpu-" + std::to_string(d)},
                    {"attributes", attributes},
                    {"capacity", {{"memory", {{"value", nvidia ? "141Gi" : "1Gi"}}}}}});
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", "node-1-slice"}}},
          {"spec",
           {{"driver", "gpu.example.com"},
            {"nodeName", "node-1"},
            {"pool", {{"name", "node-1"}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", list}}}};
}

}  // namespace bench
