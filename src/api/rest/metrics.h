#pragma once

#include <functional>
#include <memory>
#include <string>

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
  // The text exposition format for GET /metrics.
  std::string Render();

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* latency_;
  prometheus::Family<prometheus::Gauge>* gauges_;
  std::function<double()> pool_in_use_, pool_size_, watchers_;
};

}  // namespace qm::api
