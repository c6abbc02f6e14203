// REST load driver: measures creates/s, gets/s, request latency, the time to list 10,000
// objects, and watch delivery lag with many concurrent watchers, against a running server.
//
//   rest_load --url https://127.0.0.1:PORT --token-file DATA/admin.token --ca-file DATA/pki/ca.crt
//             [--objects 10000] [--concurrency 8] [--watchers 100] [--watch-events 200]
//
// --token TOKEN instead of --token-file; with an http:// URL the connections are plain TCP.
//
// Uses raw HTTP/1.1 keep-alive connections (no client library) so the numbers are the server's.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "http_client.h"

namespace {

using qm::bench::ClientConfig;
using qm::bench::Connection;
using qm::bench::Percentile;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ClaimBody(const std::string& name, int64_t stamp = 0) {
  json c = {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaim"},
            {"metadata", {{"name", name}, {"labels", {{"bench", "yes"}}}}},
            {"spec",
             {{"devices",
               {{"requests",
                 {{{"name", "gpu"},
                   {"exactly", {{"deviceClassName", "gpu.nvidia.com"}, {"count", 1}}}}}}}}}}};
  if (stamp != 0) c["metadata"]["annotations"] = {{"bench/sent-ns", std::to_string(stamp)}};
  return c.dump();
}

struct Args {
  ClientConfig client;  // --url, --token-file / --token, --ca-file
  int objects = 10000;
  int concurrency = 8;
  int watchers = 100;
  int watch_events = 200;
  bool keep = false;  // leave the objects behind (for inspecting the database)
};

struct PhaseResult {
  int requests = 0;
  int errors = 0;
  double seconds = 0;
  std::vector<double> latencies_ms;

  void Print(const char* name, const char* unit) const {
    std::printf("%-9s %d requests, %d errors, %.0f %s, p50 %.2f ms, p99 %.2f ms\n",
                (std::string(name) + ":").c_str(), requests, errors, requests / seconds, unit,
                Percentile(latencies_ms, 0.5), Percentile(latencies_ms, 0.99));
  }
};

// Runs `a.objects` requests over `a.concurrency` keep-alive connections; `one` sends request i
// and says whether it succeeded.
template <typename Fn>
PhaseResult RunPhase(const Args& a, Fn one) {
  std::vector<std::vector<double>> lat(static_cast<size_t>(a.concurrency));
  std::atomic<int> next{0}, errors{0};
  auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int w = 0; w < a.concurrency; ++w) {
    ts.emplace_back([&, w] {
      Connection c(a.client);
      std::string out;
      for (int i; (i = next++) < a.objects;) {
        auto s = Clock::now();
        if (!one(c, i, &out)) errors++;
        lat[static_cast<size_t>(w)].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - s).count());
      }
    });
  }
  for (auto& t : ts) t.join();
  PhaseResult r;
  r.requests = a.objects;
  r.errors = errors.load();
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& l : lat) r.latencies_ms.insert(r.latencies_ms.end(), l.begin(), l.end());
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (ClientConfig::IsFlag(k)) {
      a.client.Set(k, v);
    } else if (k == "--objects") {
      a.objects = std::atoi(v.c_str());
    } else if (k == "--concurrency") {
      a.concurrency = std::atoi(v.c_str());
    } else if (k == "--watchers") {
      a.watchers = std::atoi(v.c_str());
    } else if (k == "--watch-events") {
      a.watch_events = std::atoi(v.c_str());
    } else if (k == "--keep") {
      a.keep = v == "true";
    }
  }
  const std::string ns = "bench-" + std::to_string(NowNs() % 1000000);
  const std::string base = "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims";
  {
    Connection c(a.client);
    std::string out;
    int code = c.Request(
        "POST", "/api/v1/namespaces",
        json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}}.dump(),
        &out);
    if (code != 201) {
      std::fprintf(stderr, "cannot create namespace: %d %s\n", code, out.c_str());
      return 1;
    }
  }

  // Phases 1 and 2: creates, then gets of random objects.
  auto create = RunPhase(a, [&](Connection& c, int i, std::string* out) {
    return c.Request("POST", base, ClaimBody("claim-" + std::to_string(i)), out) == 201;
  });
  create.Print("creates", "creates/s");
  auto get = RunPhase(a, [&](Connection& c, int i, std::string* out) {
    return c.Request("GET", base + "/claim-" + std::to_string((i * 7919) % a.objects), "", out) ==
           200;
  });
  get.Print("gets", "gets/s");

  // Phase 3: list everything.
  {
    Connection c(a.client);
    std::vector<double> times;
    size_t bytes = 0;
    for (int i = 0; i < 5; ++i) {
      std::string out;
      auto s = Clock::now();
      c.Request("GET", base, "", &out);
      times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
      bytes = out.size();
    }
    std::printf("list:     %d objects (%.1f MB), median %.1f ms, best %.1f ms\n", a.objects,
                static_cast<double>(bytes) / 1e6, Percentile(times, 0.5),
                *std::min_element(times.begin(), times.end()));
  }

  // Phase 4: watch delivery lag.
  std::string rv;
  {
    Connection c(a.client);
    std::string out;
    c.Request("GET", base + "?limit=1", "", &out);
    rv = json::parse(out)["metadata"]["resourceVersion"];
  }
  std::mutex mu;
  std::vector<double> lags;
  std::atomic<int> ready{0};
  std::vector<std::thread> watchers;
  for (int w = 0; w < a.watchers; ++w) {
    watchers.emplace_back([&] {
      Connection c(a.client);
      c.StartStream(base + "?watch=true&resourceVersion=" + rv);
      ready++;
      std::string chunk;
      int seen = 0;
      std::vector<double> mine;
      while (seen < a.watch_events && c.NextChunk(&chunk)) {
        int64_t now = NowNs();
        json ev = json::parse(chunk, nullptr, false);
        if (!ev.is_object() || ev["type"] != "ADDED") continue;
        auto& ann = ev["object"]["metadata"]["annotations"];
        if (!ann.is_object() || !ann.contains("bench/sent-ns")) continue;
        int64_t sent = std::stoll(ann["bench/sent-ns"].get<std::string>());
        mine.push_back(static_cast<double>(now - sent) / 1e6);
        ++seen;
      }
      std::lock_guard<std::mutex> lock(mu);
      lags.insert(lags.end(), mine.begin(), mine.end());
    });
  }
  while (ready.load() < a.watchers) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  {
    Connection c(a.client);
    std::string out;
    for (int i = 0; i < a.watch_events; ++i) {
      c.Request("POST", base, ClaimBody("watched-" + std::to_string(i), NowNs()), &out);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  for (auto& t : watchers) t.join();
  std::printf("watch:    %d watchers x %d events, lag p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
              a.watchers, a.watch_events, Percentile(lags, 0.5), Percentile(lags, 0.99),
              lags.empty() ? 0.0 : *std::max_element(lags.begin(), lags.end()));

  // Clean up: deleting the namespace deletes its claims.
  if (!a.keep) {
    Connection c(a.client);
    std::string out;
    c.Request("DELETE", "/api/v1/namespaces/" + ns, "", &out);
  }
  return 0;
}
