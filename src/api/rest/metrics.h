#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"

namespace prometheus {
class Registry;
template <typename T>
class Family;
class Counter;
class Histogram;
class Gauge;
}  // namespace prometheus

namespace qm::api {

// Prometheus metrics of the REST server: requests by verb, resource and code, a latency
// histogram, database pool use and open watches. Thread-safe.
class Metrics {
 public:
  // `pool_in_use` and `watchers` are sampled at scrape time.
  Metrics(std::function<double()> pool_in_use, std::function<double()> pool_size,
          std::function<double()> watchers);
  ~Metrics();

  void ObserveRequest(const std::string& verb, const std::string& resource, int code,
                      double seconds);
  // A counter family kept elsewhere (a component's own atomic counts), sampled at scrape time:
  // `sample` returns the count per value of the one label `label`. Call before serving.
  using CounterSample = std::function<std::map<std::string, uint64_t>()>;
  void AddCounters(std::string name, std::string help, std::string label, CounterSample sample);
  // The text exposition format for GET /metrics.
  std::string Render();

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* latency_;
  prometheus::Family<prometheus::Gauge>* gauges_;
  std::function<double()> pool_in_use_, pool_size_, watchers_;
  struct SampledCounters {
    std::string name, help, label;
    CounterSample sample;
  };
  qm::Mutex sampled_mu_;
  std::vector<SampledCounters> sampled_ ABSL_GUARDED_BY(sampled_mu_);
};

}  // namespace qm::api
