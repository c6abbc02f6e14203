// Scheduler load driver: Kubernetes scheduler_perf DRA workloads (dra-api.md §6.1) through the
// REST API of a running server. The cluster is scheduler_perf's: 500 nodes, each with one
// node-local ResourceSlice of 10 devices, class `test-class`, a one-device claim template.
//
//  * 5000pods_500nodes (SchedulingWithResourceClaimTemplate): 2,500 pods scheduled first, then
//    2,500 measured. Reports pods/s from the first measured creation to the last measured
//    binding seen on a watch, and p50/p99 create-to-bound latency.
//  * steady_empty, steady_half, steady_full (SteadyStateClusterResourceClaimTemplate): first
//    0 / half / all devices but room for the 10 pods are allocated to claims without pods
//    (allocResourceClaims), then 10 pods are kept in existence for 10 s: each pod seen bound is
//    deleted and replaced. Reports pods bound per second over the duration, and p50/p99
//    create-to-bound latency; fails if a pre-allocated claim lost its allocation.
//
// Every binding is a durable commit.
//
//   scheduler_load --url https://127.0.0.1:PORT --token-file DATA/admin.token
//                  --ca-file DATA/pki/ca.crt    (or --token TOKEN; http:// URLs are plain TCP)
//                  [--workload 5000pods_500nodes]
//                  [--nodes 500] [--devices 10] [--concurrency 64]
//                  [--warmup 2500] [--measured 2500]    (5000pods_500nodes)
//                  [--steady-pods 10] [--duration 10]   (steady_*)
//                  [--selector]   (claims with a CEL selector, the selector_* variant)
//                  [--match]      (two devices per claim with matchAttribute on numa)
//                  [--latency-file FILE]  (one line per pod bound: its creation, in ms after
//                                          the first pod's, and its create-to-bound ms)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "http_client.h"

namespace {

using nlohmann::json;
using qm::bench::ClientConfig;
using qm::bench::Connection;
using qm::bench::Percentile;
using Clock = std::chrono::steady_clock;

constexpr char kNamespace[] = "sched-bench";
constexpr char kDriver[] = "test-driver.cdi.k8s.io";
// How long a watch waits for bindings after the last pod was created.
constexpr int kWatchSeconds = 300;

struct Args {
  ClientConfig client;  // --url, --token-file / --token, --ca-file
  std::string workload = "5000pods_500nodes";
  int nodes = 500;
  int devices = 10;
  int warmup = 2500;
  int measured = 2500;
  int steady_pods = 10;
  std::string latency_file;  // "" writes none
  double duration = 10;
  int concurrency = 64;  // creators in flight, like scheduler_perf's parallel client
  bool selector = false;
  bool match = false;

  // Devices one pod's claim asks for.
  int PerPod() const { return match ? 2 : 1; }
  // Claims allocated without pods before a steady_* workload: full leaves room for exactly
  // `steady_pods` pods.
  int Preallocated() const {
    const int total = nodes * devices;
    if (workload == "steady_half") return total / 2 / PerPod() * PerPod();
    if (workload == "steady_full") return std::max(0, total - steady_pods * PerPod());
    return 0;
  }
};

void Must(int code, const std::string& body, int want, const char* what) {
  if (code != want && !(want == 201 && code == 200) && !(want == 200 && code == 202)) {
    std::fprintf(stderr, "%s: HTTP %d: %s\n", what, code, body.c_str());
    std::exit(1);
  }
}

std::string NamespacePath(const std::string& rest) {
  return std::string("/namespaces/") + kNamespace + "/" + rest;
}

// Runs `fn(connection, i)` for i in [0, count) over `concurrency` keep-alive connections.
void ParallelFor(const Args& a, int count, const std::function<void(Connection&, int)>& fn) {
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < std::min(a.concurrency, count); ++w) {
    threads.emplace_back([&] {
      Connection c(a.client);
      for (int i = next++; i < count; i = next++) fn(c, i);
    });
  }
  for (auto& t : threads) t.join();
}

std::string NodeName(int n) { return "scheduler-perf-dra-" + std::to_string(n); }

// The request bodies are written as text, not built as JSON trees: the driver shares the two
// cores with the server and PostgreSQL, and nlohmann's trees were most of its CPU. Names here
// are plain [a-z0-9-], so nothing needs escaping, and the server checks every body (Must).
std::string NodeBody(const std::string& node) {
  return R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + node + R"("}})";
}

std::string SliceBody(const Args& a, const std::string& node) {
  std::string devices;
  for (int d = 0; d < a.devices; ++d) {
    if (d > 0) devices += ',';
    devices += R"({"name":"instance-)" + std::to_string(d) +
               R"(","attributes":{"model":{"string":"A100"},"family":{"string":"GPU"},)"
               R"("driverVersion":{"version":"1.2.3"},"numa":{"int":)" +
               std::to_string(a.match ? d / 2 : d) + R"(}},"capacity":{"memory":{"value":"1Gi"}}})";
  }
  return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":")" +
         node + R"(-slice"},"spec":{"driver":")" + kDriver + R"(","nodeName":")" + node +
         R"(","pool":{"name":")" + node +
         R"(","generation":1,"resourceSliceCount":1},"devices":[)" + devices + "]}}";
}

void CreateNodeAndSlice(const Args& a, Connection& c, int n) {
  const std::string node = NodeName(n);
  std::string out;
  Must(c.Request("POST", "/api/v1/nodes", NodeBody(node), &out), out, 201, "node");
  Must(c.Request("POST", "/apis/resource.k8s.io/v1/resourceslices", SliceBody(a, node), &out), out,
       201, "slice");
}

void Setup(const Args& a) {
  Connection c(a.client);
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
                   {{{"cel",
                      {{"expression", std::string("device.driver == \"") + kDriver + "\""}}}}}}}}}
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
  Must(c.Request("POST", "/apis/resource.k8s.io/v1" + NamespacePath("resourceclaimtemplates"),
                 json{{"apiVersion", "resource.k8s.io/v1"},
                      {"kind", "ResourceClaimTemplate"},
                      {"metadata", {{"name", "test-claim-template"}}},
                      {"spec", {{"spec", {{"devices", devices}}}}}}
                     .dump(),
                 &out),
       out, 201, "template");
  ParallelFor(a, a.nodes, [&](Connection& conn, int n) { CreateNodeAndSlice(a, conn, n); });
}

// Where the k-th of all nodes * devices device slots lies, as {node, device}: groups of
// PerPod() devices (a numa pair with --match) go round-robin over the nodes, so the first
// slots spread evenly over the nodes and the rest stay free in whole groups.
std::pair<int, int> Slot(const Args& a, int k) {
  const int group = k / a.PerPod();
  return {group % a.nodes, group / a.nodes * a.PerPod() + k % a.PerPod()};
}

// scheduler_perf's allocResourceClaims: `count` one-device claims without pods, each allocated
// through the status subresource to the device of its slot.
void AllocateClaims(const Args& a, int count) {
  ParallelFor(a, count, [&](Connection& c, int i) {
    const std::string name = "allocated-claim-" + std::to_string(i);
    const std::string claims = "/apis/resource.k8s.io/v1" + NamespacePath("resourceclaims");
    std::string out;
    Must(c.Request(
             "POST", claims,
             json{{"apiVersion", "resource.k8s.io/v1"},
                  {"kind", "ResourceClaim"},
                  {"metadata", {{"name", name}}},
                  {"spec",
                   {{"devices",
                     {{"requests",
                       {{{"name", "req-0"}, {"exactly", {{"deviceClassName", "test-class"}}}}}}}}}}}
                 .dump(),
             &out),
         out, 201, "claim");
    json claim = json::parse(out);
    const auto [n, d] = Slot(a, i);
    const std::string node = NodeName(n);
    claim["status"]["allocation"] = {
        {"devices",
         {{"results",
           {{{"request", "req-0"},
             {"driver", kDriver},
             {"pool", node},
             {"device", "instance-" + std::to_string(d)}}}}}},
        {"nodeSelector",
         {{"nodeSelectorTerms",
           {{{"matchFields",
              {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {node}}}}}}}}}}};
    Must(c.Request("PUT", claims + "/" + name + "/status", claim.dump(), &out), out, 200,
         "claim status");
  });
}

// How many of the `count` pre-allocated claims are still allocated.
int StillAllocated(const Args& a, int count) {
  if (count == 0) return 0;
  Connection c(a.client);
  int allocated = 0;
  std::string cont;
  do {
    std::string out;
    Must(c.Request("GET",
                   "/apis/resource.k8s.io/v1" + NamespacePath("resourceclaims?limit=1000") +
                       (cont.empty() ? "" : "&continue=" + cont),
                   "", &out),
         out, 200, "claim list");
    const json list = json::parse(out);
    for (const json& claim : list["items"]) {
      const std::string name = claim["metadata"]["name"];
      const json status = claim.value("status", json::object());
      if (name.starts_with("allocated-claim-") && status.contains("allocation") &&
          !status["allocation"].is_null()) {
        ++allocated;
      }
    }
    cont = list["metadata"].value("continue", "");
  } while (!cont.empty());
  return allocated;
}

std::string PodBody(const std::string& name) {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
         R"("},"spec":{"containers":[{"name":"pause","image":"registry.k8s.io/pause:3.10",)"
         R"("resources":{"claims":[{"name":"resource"}]}}],"resourceClaims":[{"name":"resource",)"
         R"("resourceClaimTemplateName":"test-claim-template"}]}})";
}

// Creates pod `name` and records its creation time first, so that a watch can match it.
void CreatePod(Connection& c, const std::string& name,
               std::map<std::string, Clock::time_point>* created, std::mutex* mu) {
  {
    std::lock_guard<std::mutex> lock(*mu);
    (*created)[name] = Clock::now();
  }
  std::string out;
  Must(c.Request("POST", "/api/v1" + NamespacePath("pods"), PodBody(name), &out), out, 201, "pod");
}

// Creates pods [first, first+count) over `concurrency` connections; records creation times.
void CreatePods(const Args& a, int first, int count,
                std::map<std::string, Clock::time_point>* created, std::mutex* mu) {
  ParallelFor(a, count, [&](Connection& c, int i) {
    CreatePod(c, "pod-" + std::to_string(first + i), created, mu);
  });
}

// Follows a pod watch from revision `from_rv` for at most `timeout_s` seconds and calls
// `on_bound(name)` for every added or modified pod with spec.nodeName set, until it returns
// false. Returns the revision of the last event, to resume from.
int64_t WatchBindings(const Args& a, int64_t from_rv, int timeout_s,
                      const std::function<bool(const std::string&)>& on_bound) {
  Connection c(a.client);
  c.StartStream("/api/v1" + NamespacePath("pods") + "?watch=true&resourceVersion=" +
                std::to_string(from_rv) + "&timeoutSeconds=" + std::to_string(timeout_s));
  int64_t rv = from_rv;
  std::string chunk;
  std::string pending;
  while (c.NextChunk(&chunk)) {
    pending += chunk;
    size_t start = 0;
    size_t nl;
    while ((nl = pending.find('\n', start)) != std::string::npos) {
      const std::string_view line(pending.data() + start, nl - start);
      start = nl + 1;
      // Most events are of pods not yet bound, and parsing each was much of the driver's CPU: an
      // ADDED, MODIFIED or DELETED event whose text names no node is only read for its revision.
      // Anything else (a binding, a BOOKMARK, an ERROR) is parsed.
      const std::string_view head = line.substr(0, 24);
      if (line.find(R"("nodeName":)") == std::string_view::npos &&
          (head.find(R"("type":"ADDED")") != std::string_view::npos ||
           head.find(R"("type":"MODIFIED")") != std::string_view::npos ||
           head.find(R"("type":"DELETED")") != std::string_view::npos)) {
        constexpr std::string_view kRv = R"("resourceVersion":")";
        if (const size_t at = line.find(kRv); at != std::string_view::npos) {
          rv = std::strtoll(line.data() + at + kRv.size(), nullptr, 10);
        }
        continue;
      }
      json ev = json::parse(line, nullptr, false);
      if (!ev.is_object() || !ev.contains("object")) continue;
      const std::string type = ev.value("type", "");
      if (type == "ERROR") {
        std::fprintf(stderr, "pod watch: %s\n", ev["object"].dump().c_str());
        std::exit(1);
      }
      const json& pod = ev["object"];
      rv = std::stoll(pod["metadata"]["resourceVersion"].get<std::string>());
      if (type != "ADDED" && type != "MODIFIED") continue;
      if (!pod.contains("spec") || !pod["spec"].contains("nodeName")) continue;
      if (!on_bound(pod["metadata"]["name"])) return rv;
    }
    pending.erase(0, start);
  }
  return rv;
}

// Follows a pod watch until `want` pods named in `names` (all when null) are bound.
std::map<std::string, Clock::time_point> WaitBound(
    const Args& a, int64_t from_rv, size_t want,
    const std::map<std::string, Clock::time_point>* names, std::mutex* mu) {
  std::map<std::string, Clock::time_point> bound;
  if (want == 0) return bound;
  WatchBindings(a, from_rv, kWatchSeconds, [&](const std::string& name) {
    if (names != nullptr) {
      std::lock_guard<std::mutex> lock(*mu);
      if (!names->contains(name)) return true;
    }
    bound.emplace(name, Clock::now());
    return bound.size() < want;
  });
  return bound;
}

int64_t PodListRevision(const Args& a) {
  Connection c(a.client);
  std::string out;
  Must(c.Request("GET", "/api/v1" + NamespacePath("pods?limit=1"), "", &out), out, 200, "list");
  return std::stoll(json::parse(out)["metadata"]["resourceVersion"].get<std::string>());
}

// What one run measured.
struct Result {
  size_t bound = 0;    // pods bound within the measurement
  double seconds = 0;  // length of the measurement
  bool ok = false;     // every expected pod was bound
  std::vector<double> latencies_ms;
  // Per pod bound: its creation (ms after the first pod's) and its create-to-bound latency.
  std::vector<std::pair<double, double>> timeline_ms;
};

std::vector<double> LatenciesMs(const std::map<std::string, Clock::time_point>& created,
                                const std::map<std::string, Clock::time_point>& bound) {
  std::vector<double> out;
  for (const auto& [name, t] : bound) {
    out.push_back(std::chrono::duration<double, std::milli>(t - created.at(name)).count());
  }
  return out;
}

std::vector<std::pair<double, double>> TimelineMs(
    const std::map<std::string, Clock::time_point>& created,
    const std::map<std::string, Clock::time_point>& bound) {
  std::vector<std::pair<double, double>> out;
  if (created.empty()) return out;
  Clock::time_point first = Clock::time_point::max();
  for (const auto& [name, t] : created) first = std::min(first, t);
  for (const auto& [name, t] : bound) {
    const Clock::time_point c = created.at(name);
    out.emplace_back(std::chrono::duration<double, std::milli>(c - first).count(),
                     std::chrono::duration<double, std::milli>(t - c).count());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// 5000pods_500nodes: `warmup` pods scheduled, then `measured` pods timed.
Result RunBatch(const Args& a) {
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
  CreatePods(a, a.warmup, a.measured, &created, &mu);
  watch.join();
  std::printf("measured: %zu of %d pods bound\n", bound.size(), a.measured);

  Clock::time_point first = Clock::time_point::max();
  Clock::time_point last = Clock::time_point::min();
  for (const auto& [name, t] : created) first = std::min(first, t);
  for (const auto& [name, t] : bound) last = std::max(last, t);
  Result r;
  r.bound = bound.size();
  r.seconds = bound.empty() ? 0 : std::chrono::duration<double>(last - first).count();
  r.ok = bound.size() == static_cast<size_t>(a.measured);
  r.latencies_ms = LatenciesMs(created, bound);
  r.timeline_ms = TimelineMs(created, bound);
  return r;
}

// steady_*: keeps `steady_pods` pods in existence for `duration` seconds. The watch hands each
// pod it sees bound to a worker, which deletes it and, while the duration lasts, creates the
// next one. Pods created before the end are waited for; the rate counts bindings before it.
Result RunSteady(const Args& a) {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> to_replace;  // "" creates a pod without deleting one
  bool done = false;
  std::map<std::string, Clock::time_point> created;
  std::map<std::string, Clock::time_point> bound;
  int next_pod = 0;

  int64_t rv = PodListRevision(a);
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(a.duration));
  to_replace.assign(a.steady_pods, "");
  std::vector<std::thread> workers;
  for (int w = 0; w < std::min(a.concurrency, a.steady_pods); ++w) {
    workers.emplace_back([&] {
      Connection c(a.client);
      std::string out;
      std::unique_lock<std::mutex> lock(mu);
      while (true) {
        cv.wait(lock, [&] { return done || !to_replace.empty(); });
        if (to_replace.empty()) return;
        const std::string old = to_replace.front();
        to_replace.pop_front();
        lock.unlock();
        if (!old.empty()) {
          Must(c.Request("DELETE", "/api/v1" + NamespacePath("pods/" + old), "", &out), out, 200,
               "pod delete");
        }
        lock.lock();
        // Decided under the lock, so the watch never stops before a pod created before the end.
        if (Clock::now() >= end) continue;
        const std::string name = "steady-pod-" + std::to_string(next_pod++);
        created[name] = Clock::now();
        lock.unlock();
        Must(c.Request("POST", "/api/v1" + NamespacePath("pods"), PodBody(name), &out), out, 201,
             "pod");
        lock.lock();
      }
    });
  }
  cv.notify_all();

  auto on_bound = [&](const std::string& name) {
    std::lock_guard<std::mutex> lock(mu);
    const auto now = Clock::now();
    if (created.contains(name) && !bound.contains(name)) {
      bound[name] = now;
      if (now < end) {
        to_replace.push_back(name);
        cv.notify_one();
      }
    }
    return now < end || bound.size() < created.size();
  };
  // Watches until the end (a pod deleted after the last binding gives no event to stop on),
  // then until every pod created before the end is bound.
  while (true) {
    const double left = std::chrono::duration<double>(end - Clock::now()).count();
    rv = WatchBindings(a, rv, left > 0 ? static_cast<int>(std::ceil(left)) : kWatchSeconds,
                       on_bound);
    std::lock_guard<std::mutex> lock(mu);
    if (left <= 0 || (Clock::now() >= end && bound.size() == created.size())) break;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  for (auto& t : workers) t.join();

  Result r;
  for (const auto& [name, t] : bound) r.bound += t < end ? 1 : 0;
  r.seconds = a.duration;
  r.ok = !bound.empty() && bound.size() == created.size();
  r.latencies_ms = LatenciesMs(created, bound);
  r.timeline_ms = TimelineMs(created, bound);
  std::printf("steady: %zu pods created, %zu bound (%zu after the end)\n", created.size(),
              bound.size(), bound.size() - r.bound);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (ClientConfig::IsFlag(arg)) {
      a.client.Set(arg, next());
    } else if (arg == "--workload") {
      a.workload = next();
    } else if (arg == "--nodes") {
      a.nodes = std::stoi(next());
    } else if (arg == "--devices") {
      a.devices = std::stoi(next());
    } else if (arg == "--warmup") {
      a.warmup = std::stoi(next());
    } else if (arg == "--measured") {
      a.measured = std::stoi(next());
    } else if (arg == "--steady-pods") {
      a.steady_pods = std::stoi(next());
    } else if (arg == "--duration") {
      a.duration = std::stod(next());
    } else if (arg == "--concurrency") {
      a.concurrency = std::stoi(next());
    } else if (arg == "--selector") {
      a.selector = true;
    } else if (arg == "--match") {
      a.match = true;
    } else if (arg == "--latency-file") {
      a.latency_file = next();
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  const bool steady =
      a.workload == "steady_empty" || a.workload == "steady_half" || a.workload == "steady_full";
  if (!steady && a.workload != "5000pods_500nodes") {
    std::fprintf(stderr,
                 "unknown workload %s (5000pods_500nodes, steady_empty, steady_half, "
                 "steady_full)\n",
                 a.workload.c_str());
    return 2;
  }
  if (a.match && a.devices % 2 != 0) {
    std::fprintf(stderr, "--match needs an even --devices (numa pairs)\n");
    return 2;
  }

  auto t0 = Clock::now();
  Setup(a);
  std::printf("setup: %d nodes x %d devices in %.1f s\n", a.nodes, a.devices,
              std::chrono::duration<double>(Clock::now() - t0).count());
  const int preallocated = a.Preallocated();
  if (preallocated > 0) {
    t0 = Clock::now();
    AllocateClaims(a, preallocated);
    std::printf("setup: %d claims allocated without pods in %.1f s\n", preallocated,
                std::chrono::duration<double>(Clock::now() - t0).count());
  }

  Result r = steady ? RunSteady(a) : RunBatch(a);
  const int still = StillAllocated(a, preallocated);
  if (still != preallocated) {
    std::printf("error: only %d of %d claims allocated without pods are still allocated\n", still,
                preallocated);
  }
  if (!a.latency_file.empty()) {
    std::FILE* f = std::fopen(a.latency_file.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", a.latency_file.c_str());
      return 2;
    }
    for (const auto& [at, ms] : r.timeline_ms) std::fprintf(f, "%.1f %.1f\n", at, ms);
    std::fclose(f);
  }
  const std::string name = a.workload + (a.selector ? "+selector" : "") + (a.match ? "+match" : "");
  std::printf(
      "%s (%d nodes x %d devices): %zu pods bound in %.2f s: %.0f pods/s, create-to-bound p50 "
      "%.0f ms, p99 %.0f ms\n",
      name.c_str(), a.nodes, a.devices, r.bound, r.seconds,
      r.seconds > 0 ? static_cast<double>(r.bound) / r.seconds : 0.0,
      Percentile(r.latencies_ms, 0.5), Percentile(r.latencies_ms, 0.99));
  return r.ok && still == preallocated ? 0 : 1;
}
