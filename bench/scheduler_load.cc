// Scheduler load driver: the Kubernetes scheduler_perf DRA workload
// SchedulingWithResourceClaimTemplate/5000pods_500nodes (dra-api.md §6.1) through the REST API
// of a running server: 500 nodes, each with one node-local ResourceSlice of 10 devices, class
// `test-class`, a one-device claim template; 2,500 pods scheduled first, then 2,500 measured.
// Reports pods/s from the first measured creation to the last measured binding seen on a
// watch, and p50/p99 create-to-bound latency. Every binding is a durable commit.
//
//   scheduler_load --url http://127.0.0.1:8080 [--nodes 500] [--devices 10]
//                  [--warmup 2500] [--measured 2500] [--concurrency 8]
//                  [--selector]   (claims with a CEL selector, the selector_* variant)
//                  [--match]      (two devices per claim with matchAttribute on numa)
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "http_client.h"

namespace {

using nlohmann::json;
using qm::bench::Connection;
using qm::bench::Percentile;
using Clock = std::chrono::steady_clock;

constexpr char kNamespace[] = "sched-bench";

struct Args {
  std::string host = "127.0.0.1";
  int port = 8080;
  int nodes = 500;
  int devices = 10;
  int warmup = 2500;
  int measured = 2500;
  int concurrency = 8;
  bool selector = false;
  bool match = false;
};

void Must(int code, const std::string& body, int want, const char* what) {
  if (code != want && !(want == 201 && code == 200)) {
    std::fprintf(stderr, "%s: HTTP %d: %s\n", what, code, body.c_str());
    std::exit(1);
  }
}

void Setup(const Args& a) {
  Connection c(a.host, a.port);
  std::string out;
  Must(c.Request(
           "POST", "/api/v1/namespaces",
           json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNamespace}}}}
               .dump(),
           &out),
       out, 201, "namespace");
  Must(c.Request(
           "POST", "/apis/resource.k8s.io/v1/deviceclasses",
           json{{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "DeviceClass"},
                {"metadata", {{"name", "test-class"}}},
                {"spec",
                 {{"selectors",
                   {{{"cel", {{"expression", "device.driver == \"test-driver.cdi.k8s.io\""}}}}}}}}}
               .dump(),
           &out),
       out, 201, "class");
  json request = {{"name", "req-0"}, {"exactly", {{"deviceClassName", "test-class"}}}};
  if (a.selector) {
    request["exactly"]["selectors"] = {
        {{"cel",
          {{"expression",
            "device.attributes[\"test-driver.cdi.k8s.io\"].driverVersion.major() >= 1 && "
            "device.capacity[\"test-driver.cdi.k8s.io\"].memory.compareTo(quantity(\"1Mi\")) > "
            "0"}}}}};
  }
  json devices = {{"requests", {request}}};
  if (a.match) {
    devices["requests"][0]["exactly"]["count"] = 2;
    devices["constraints"] = {{{"matchAttribute", "test-driver.cdi.k8s.io/numa"}}};
  }
  Must(c.Request("POST",
                 std::string("/apis/resource.k8s.io/v1/namespaces/") + kNamespace +
                     "/resourceclaimtemplates",
                 json{{"apiVersion", "resource.k8s.io/v1"},
                      {"kind", "ResourceClaimTemplate"},
                      {"metadata", {{"name", "test-claim-template"}}},
                      {"spec", {{"spec", {{"devices", devices}}}}}}
                     .dump(),
                 &out),
       out, 201, "template");
  for (int n = 0; n < a.nodes; ++n) {
    const std::string node = "scheduler-perf-dra-" + std::to_string(n);
    Must(c.Request(
             "POST", "/api/v1/nodes",
             json{{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node}}}}.dump(),
             &out),
         out, 201, "node");
    json list = json::array();
    for (int d = 0; d < a.devices; ++d) {
      list.push_back({{"name", "instance-" + std::to_string(d)},
                      {"attributes",
                       {{"model", {{"string", "A100"}}},
                        {"family", {{"string", "GPU"}}},
                        {"driverVersion", {{"version", "1.2.3"}}},
                        {"numa", {{"int", a.match ? d / 2 : d}}}}},
                      {"capacity", {{"memory", {{"value", "1Gi"}}}}}});
    }
    Must(c.Request("POST", "/apis/resource.k8s.io/v1/resourceslices",
                   json{{"apiVersion", "resource.k8s.io/v1"},
                        {"kind", "ResourceSlice"},
                        {"metadata", {{"name", node + "-slice"}}},
                        {"spec",
                         {{"driver", "test-driver.cdi.k8s.io"},
                          {"nodeName", node},
                          {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
                          {"devices", list}}}}
                       .dump(),
                   &out),
         out, 201, "slice");
  }
}

std::string PodBody(const std::string& name) {
  return json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}}},
              {"spec",
               {{"containers",
                 {{{"name", "pause"},
                   {"image", "registry.k8s.io/pause:3.10"},
                   {"resources", {{"claims", {{{"name", "resource"}}}}}}}}},
                {"resourceClaims",
                 {{{"name", "resource"}, {"resourceClaimTemplateName", "test-claim-template"}}}}}}}
      .dump();
}

// Creates pods [first, first+count) over `concurrency` connections; records creation times.
void CreatePods(const Args& a, int first, int count,
                std::map<std::string, Clock::time_point>* created, std::mutex* mu) {
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < a.concurrency; ++w) {
    threads.emplace_back([&] {
      Connection c(a.host, a.port);
      std::string out;
      for (int i = next++; i < count; i = next++) {
        const std::string name = "pod-" + std::to_string(first + i);
        auto t = Clock::now();
        Must(c.Request("POST", std::string("/api/v1/namespaces/") + kNamespace + "/pods",
                       PodBody(name), &out),
             out, 201, "pod");
        std::lock_guard<std::mutex> lock(*mu);
        (*created)[name] = t;
      }
    });
  }
  for (auto& t : threads) t.join();
}

// Follows a pod watch until `want` pods named in `names` (all when empty) are bound.
std::map<std::string, Clock::time_point> WaitBound(
    const Args& a, int64_t from_rv, size_t want,
    const std::map<std::string, Clock::time_point>* names, std::mutex* mu) {
  std::map<std::string, Clock::time_point> bound;
  Connection c(a.host, a.port);
  c.StartStream(std::string("/api/v1/namespaces/") + kNamespace +
                "/pods?watch=true&resourceVersion=" + std::to_string(from_rv));
  std::string chunk;
  std::string pending;
  auto deadline = Clock::now() + std::chrono::minutes(5);
  while (bound.size() < want && Clock::now() < deadline && c.NextChunk(&chunk)) {
    pending += chunk;
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      json ev = json::parse(pending.substr(0, nl), nullptr, false);
      pending.erase(0, nl + 1);
      if (!ev.is_object() || !ev.contains("object")) continue;
      const json& pod = ev["object"];
      if (!pod.contains("spec") || !pod["spec"].contains("nodeName")) continue;
      const std::string name = pod["metadata"]["name"];
      if (names != nullptr) {
        std::lock_guard<std::mutex> lock(*mu);
        if (!names->contains(name)) continue;
      }
      bound.emplace(name, Clock::now());
    }
  }
  return bound;
}

int64_t PodListRevision(const Args& a) {
  Connection c(a.host, a.port);
  std::string out;
  Must(
      c.Request("GET", std::string("/api/v1/namespaces/") + kNamespace + "/pods?limit=1", "", &out),
      out, 200, "list");
  return std::stoll(json::parse(out)["metadata"]["resourceVersion"].get<std::string>());
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--url") {
      std::string url = next();
      auto hp = url.substr(url.find("//") + 2);
      a.host = hp.substr(0, hp.find(':'));
      a.port = std::stoi(hp.substr(hp.find(':') + 1));
    } else if (arg == "--nodes") {
      a.nodes = std::stoi(next());
    } else if (arg == "--devices") {
      a.devices = std::stoi(next());
    } else if (arg == "--warmup") {
      a.warmup = std::stoi(next());
    } else if (arg == "--measured") {
      a.measured = std::stoi(next());
    } else if (arg == "--concurrency") {
      a.concurrency = std::stoi(next());
    } else if (arg == "--selector") {
      a.selector = true;
    } else if (arg == "--match") {
      a.match = true;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  auto t0 = Clock::now();
  Setup(a);
  std::printf("setup: %d nodes x %d devices in %.1f s\n", a.nodes, a.devices,
              std::chrono::duration<double>(Clock::now() - t0).count());

  std::mutex mu;
  std::map<std::string, Clock::time_point> warm;
  int64_t rv = PodListRevision(a);
  std::thread warm_watch([&] {
    auto bound = WaitBound(a, rv, static_cast<size_t>(a.warmup), nullptr, &mu);
    std::printf("warmup: %zu of %d pods bound\n", bound.size(), a.warmup);
  });
  auto w0 = Clock::now();
  CreatePods(a, 0, a.warmup, &warm, &mu);
  warm_watch.join();
  std::printf("warmup: %.1f s\n", std::chrono::duration<double>(Clock::now() - w0).count());

  std::map<std::string, Clock::time_point> created;
  rv = PodListRevision(a);
  std::map<std::string, Clock::time_point> bound;
  std::thread watch(
      [&] { bound = WaitBound(a, rv, static_cast<size_t>(a.measured), &created, &mu); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the watch is established
  CreatePods(a, a.warmup, a.measured, &created, &mu);
  watch.join();

  Clock::time_point first = Clock::time_point::max();
  Clock::time_point last = Clock::time_point::min();
  std::vector<double> latencies;
  for (const auto& [name, t] : created) first = std::min(first, t);
  for (const auto& [name, t] : bound) {
    last = std::max(last, t);
    latencies.push_back(std::chrono::duration<double, std::milli>(t - created[name]).count());
  }
  const double seconds = std::chrono::duration<double>(last - first).count();
  std::printf(
      "measured: %zu of %d pods bound in %.2f s: %.0f pods/s, create-to-bound p50 %.0f ms, p99 "
      "%.0f ms\n",
      bound.size(), a.measured, seconds, static_cast<double>(bound.size()) / seconds,
      Percentile(latencies, 0.5), Percentile(latencies, 0.99));
  return bound.size() == static_cast<size_t>(a.measured) ? 0 : 1;
}
