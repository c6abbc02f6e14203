#include "api/rest/metrics.h"

#include <prometheus/client_metric.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace qm::api {

Metrics::Metrics(std::function<double()> pool_in_use, std::function<double()> pool_size,
                 std::function<double()> watchers)
    : registry_(std::make_shared<prometheus::Registry>()),
      pool_in_use_(std::move(pool_in_use)),
      pool_size_(std::move(pool_size)),
      watchers_(std::move(watchers)) {
  requests_ = &prometheus::BuildCounter()
                   .Name("apiserver_request_total")
                   .Help("REST requests by verb, resource and HTTP code.")
                   .Register(*registry_);
  latency_ = &prometheus::BuildHistogram()
                  .Name("apiserver_request_duration_seconds")
                  .Help("REST request latency by verb and resource (watches excluded).")
                  .Register(*registry_);
  gauges_ = &prometheus::BuildGauge()
                 .Name("quartermaster_state")
                 .Help("Sampled state: database pool connections in use and size, open watches.")
                 .Register(*registry_);
}

Metrics::~Metrics() = default;

void Metrics::ObserveRequest(const std::string& verb, const std::string& resource, int code,
                             double seconds) {
  requests_->Add({{"verb", verb}, {"resource", resource}, {"code", std::to_string(code)}})
      .Increment();
  if (verb == "watch") return;
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
  latency_->Add({{"verb", verb}, {"resource", resource}}, kBuckets).Observe(seconds);
}

void Metrics::AddCounters(std::string name, std::string help, std::string label,
                          CounterSample sample) {
  qm::MutexLock lock(&sampled_mu_);
  sampled_.push_back({std::move(name), std::move(help), std::move(label), std::move(sample)});
}

std::string Metrics::Render() {
  gauges_->Add({{"name", "db_pool_in_use"}}).Set(pool_in_use_());
  gauges_->Add({{"name", "db_pool_size"}}).Set(pool_size_());
  gauges_->Add({{"name", "watches_open"}}).Set(watchers_());
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  qm::MutexLock lock(&sampled_mu_);
  for (const auto& s : sampled_) {
    prometheus::MetricFamily family;
    family.name = s.name;
    family.help = s.help;
    family.type = prometheus::MetricType::Counter;
    for (const auto& [value, count] : s.sample()) {
      prometheus::ClientMetric metric;
      metric.label.push_back({s.label, value});
      metric.counter.value = static_cast<double>(count);
      family.metric.push_back(std::move(metric));
    }
    families.push_back(std::move(family));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace qm::api
