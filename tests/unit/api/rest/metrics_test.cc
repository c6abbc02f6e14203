// Metrics: families kept by other components are sampled at scrape time and rendered as
// Prometheus counters.

#include "api/rest/metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/decode_failures.h"

namespace qm::api {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsTest, SampledCountersAreRenderedAtScrapeTime) {
  Metrics metrics([] { return 1.0; }, [] { return 4.0; }, [] { return 0.0; });
  service::DecodeFailures failures;
  metrics.AddCounters("quartermaster_decode_failures_total", "Objects that do not decode.",
                      "resource", [&failures] { return failures.Counts(); });
  EXPECT_THAT(metrics.Render(), HasSubstr("# TYPE quartermaster_decode_failures_total counter"));
  EXPECT_THAT(metrics.Render(), Not(HasSubstr("quartermaster_decode_failures_total{")));

  model::Object claim;
  claim.resource = "resourceclaims.resource.k8s.io";
  claim.meta.namespace_ = "default";
  claim.meta.name = "broken";
  claim.meta.uid = "u1";
  claim.meta.resource_version = 7;
  EXPECT_TRUE(failures.Note(claim, "status.allocation: expected object"));
  EXPECT_FALSE(failures.Note(claim, "status.allocation: expected object"));
  EXPECT_THAT(metrics.Render(),
              HasSubstr("quartermaster_decode_failures_total{resource=\"resourceclaims.resource."
                        "k8s.io\"} 1"));
  claim.meta.resource_version = 8;  // a new version is counted again
  EXPECT_TRUE(failures.Note(claim, "status.allocation: expected object"));
  EXPECT_THAT(metrics.Render(),
              HasSubstr("quartermaster_decode_failures_total{resource=\"resourceclaims.resource."
                        "k8s.io\"} 2"));
  // The registry's own families are still there.
  EXPECT_THAT(metrics.Render(), HasSubstr("quartermaster_state{name=\"db_pool_size\"} 4"));
}

}  // namespace
}  // namespace qm::api
