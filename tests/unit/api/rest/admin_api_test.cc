// DeviceMatchReview (admin.quartermaster.io/v1alpha1) through RestApi over the in-memory store:
// the exact devices a class and selectors match, which are allocated, and positioned errors.
#include "api/rest/admin_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "common/id_generator.h"
#include "store/memory_store.h"

namespace qm::api {
namespace {

using nlohmann::json;

class FakeClock : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override {
    return std::chrono::system_clock::time_point{std::chrono::seconds(1800000000)};
  }
};

constexpr char kReviews[] = "/apis/admin.quartermaster.io/v1alpha1/devicematchreviews";

std::string Device(const std::string& name, const std::string& product, const std::string& memory) {
  return R"({"name":")" + name + R"(","attributes":{"productName":{"string":")" + product +
         R"("},"index":{"int":)" + name.substr(4) + R"(}},"capacity":{"memory":{"value":")" +
         memory + R"("}}})";
}

std::string Slice(const std::string& node, const std::string& devices, int generation = 1) {
  return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":")" +
         node + "-g" + std::to_string(generation) +
         R"("},"spec":{"driver":"gpu.example.com","nodeName":")" + node + R"(","pool":{"name":")" +
         node + R"(","generation":)" + std::to_string(generation) +
         R"(,"resourceSliceCount":1},"devices":[)" + devices + "]}}";
}

class AdminApiTest : public ::testing::Test {
 protected:
  AdminApiTest()
      : hub_(store_, service::WatchHubOptions{}),
        objects_(store_, clock_, ids_, &hub_),
        api_(objects_, hub_, clock_) {
    hub_.Start();
    EXPECT_TRUE(api_.EnsureDefaultNamespace().ok());
    const std::string slices = "/apis/resource.k8s.io/v1/resourceslices";
    Expect(201, "POST", slices,
           Slice("node-a", Device("gpu-0", "NVIDIA A100-SXM4-80GB", "80Gi") + "," +
                               Device("gpu-1", "NVIDIA L4", "24Gi")));
    Expect(201, "POST", slices, Slice("node-b", Device("gpu-0", "NVIDIA A100-PCIE-40GB", "40Gi")));
    // An obsolete generation of node-b's pool: never matched.
    Expect(201, "POST", slices,
           Slice("node-b", Device("gpu-7", "NVIDIA A100-PCIE-40GB", "40Gi"), 0));
    json cls = {{"metadata", {{"name", "a100"}}}};
    cls["spec"]["selectors"] =
        json::array({{{"cel",
                       {{"expression",
                         "device.attributes['gpu.example.com'].productName.contains('A100')"}}}}});
    Expect(201, "POST", "/apis/resource.k8s.io/v1/deviceclasses", cls.dump());
    // c1 holds node-a's gpu-0.
    const std::string claims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
    json request = {{"name", "gpu"}, {"exactly", {{"deviceClassName", "a100"}}}};
    json c1 = {{"metadata", {{"name", "c1"}}}};
    c1["spec"]["devices"]["requests"] = json::array({request});
    Expect(201, "POST", claims, c1.dump());
    json claim = json::parse(Expect(200, "GET", claims + "/c1").body);
    json result = {
        {"request", "gpu"}, {"driver", "gpu.example.com"}, {"pool", "node-a"}, {"device", "gpu-0"}};
    claim["status"]["allocation"]["devices"]["results"] = json::array({result});
    Expect(200, "PUT", claims + "/c1/status", claim.dump());
  }
  ~AdminApiTest() override { hub_.Stop(); }

  HttpResponse Expect(int code, const std::string& method, const std::string& path,
                      const std::string& body = "") {
    HttpRequest r{method, path, {}, "application/json", "", body};
    HttpResponse out = api_.Handle(r);
    EXPECT_EQ(out.code, code) << method << " " << path << ": " << out.body;
    return out;
  }

  json Review(const json& spec) {
    json body = {{"apiVersion", "admin.quartermaster.io/v1alpha1"},
                 {"kind", "DeviceMatchReview"},
                 {"spec", spec}};
    HttpResponse r = Expect(201, "POST", kReviews, body.dump());
    return json::parse(r.body);
  }

  static std::set<std::string> Ids(const json& review) {
    std::set<std::string> out;
    for (const auto& d : review["status"]["devices"]) {
      out.insert(d.value("nodeName", "") + "/" + d["pool"].get<std::string>() + "/" +
                 d["device"].get<std::string>());
    }
    return out;
  }

  store::MemoryStore store_;
  FakeClock clock_;
  RandomIdGenerator ids_;
  service::WatchHub hub_;
  service::ObjectService objects_;
  RestApi api_;
};

TEST_F(AdminApiTest, ClassMatchesExactlyItsDevicesAndShowsWhoHoldsThem) {
  json review = Review({{"className", "a100"}});
  EXPECT_EQ(review["kind"], "DeviceMatchReview");
  EXPECT_EQ(Ids(review), (std::set<std::string>{"node-a/node-a/gpu-0", "node-b/node-b/gpu-0"}));
  const json& status = review["status"];
  EXPECT_EQ(status["matchedDevices"], 2);
  EXPECT_EQ(status["allocatedDevices"], 1);
  EXPECT_EQ(status["nodes"], 2);
  EXPECT_EQ(status["truncated"], false);
  EXPECT_TRUE(status["errors"].empty());
  for (const auto& d : status["devices"]) {
    EXPECT_EQ(d["driver"], "gpu.example.com");
    if (d["nodeName"] == "node-a") {
      EXPECT_EQ(d["allocatedTo"], json::array({"default/c1"}));
      EXPECT_EQ(d["attributes"]["productName"]["string"], "NVIDIA A100-SXM4-80GB");
      EXPECT_EQ(d["attributes"]["index"]["int"], 0);
      EXPECT_EQ(d["capacity"]["memory"]["value"], "80Gi");
    } else {
      EXPECT_FALSE(d.contains("allocatedTo"));
    }
  }
}

TEST_F(AdminApiTest, SelectorsNarrowTheClassAndWorkWithoutOne) {
  json both = Review({{"className", "a100"},
                      {"selectors",
                       {{{"cel",
                          {{"expression",
                            "device.capacity['gpu.example.com'].memory.compareTo("
                            "quantity('64Gi')) >= 0"}}}}}}});
  EXPECT_EQ(Ids(both), (std::set<std::string>{"node-a/node-a/gpu-0"}));
  json alone =
      Review({{"selectors",
               {{{"cel", {{"expression", "device.attributes['gpu.example.com'].index == 1"}}}}}}});
  EXPECT_EQ(Ids(alone), (std::set<std::string>{"node-a/node-a/gpu-1"}));
  EXPECT_EQ(alone["status"]["allocatedDevices"], 0);
  json limited = Review({{"selectors", {{{"cel", {{"expression", "true"}}}}}}, {"limit", 1}});
  EXPECT_EQ(limited["status"]["matchedDevices"], 3);
  EXPECT_EQ(limited["status"]["devices"].size(), 1u);
  EXPECT_EQ(limited["status"]["truncated"], true);
}

TEST_F(AdminApiTest, ErrorsCarryTheirFieldAndPosition) {
  json review =
      Review({{"className", "a100"},
              {"selectors",
               {{{"cel", {{"expression", "true"}}}},
                {{"cel", {{"expression", "device.driver == 'x' &&\n  device.atributes"}}}},
                {{"cel", {{"expression", "device.driver == "}}}}}}});
  const json& errors = review["status"]["errors"];
  ASSERT_EQ(errors.size(), 2u) << errors.dump();
  EXPECT_EQ(errors[0]["field"], "spec.selectors[1].cel.expression");
  EXPECT_EQ(errors[0]["message"], "undefined field 'atributes'");
  EXPECT_EQ(errors[0]["line"], 2);
  EXPECT_EQ(errors[0]["column"], 9);
  EXPECT_EQ(errors[0]["offset"], 32);
  EXPECT_EQ(errors[1]["field"], "spec.selectors[2].cel.expression");
  EXPECT_EQ(errors[1]["line"], 1);
  EXPECT_TRUE(review["status"]["devices"].empty());
  EXPECT_EQ(review["status"]["matchedDevices"], 0);

  json missing = Review({{"className", "nope"}});
  ASSERT_EQ(missing["status"]["errors"].size(), 1u);
  EXPECT_EQ(missing["status"]["errors"][0]["field"], "spec.className");
  EXPECT_FALSE(missing["status"]["errors"][0].contains("line"));
}

TEST_F(AdminApiTest, MalformedReviewsAreRefusedWithFieldPaths) {
  HttpResponse empty = Expect(422, "POST", kReviews, R"({"spec":{}})");
  json status = json::parse(empty.body);
  EXPECT_EQ(status["reason"], "Invalid");
  EXPECT_EQ(status["details"]["causes"][0]["field"], "spec");
  HttpResponse bad =
      Expect(422, "POST", kReviews, R"({"spec":{"selectors":[{"cel":{}}],"limit":0}})");
  std::set<std::string> fields;
  const json bad_status = json::parse(bad.body);
  for (const auto& c : bad_status["details"]["causes"]) fields.insert(c["field"]);
  EXPECT_EQ(fields, (std::set<std::string>{"spec.selectors[0].cel.expression", "spec.limit"}));
  Expect(400, "POST", kReviews, "not json");
  Expect(405, "GET", kReviews);
  Expect(404, "POST", "/apis/admin.quartermaster.io/v1alpha1/nothing", "{}");
  json resources = json::parse(Expect(200, "GET", "/apis/admin.quartermaster.io/v1alpha1").body);
  EXPECT_EQ(resources["resources"][0]["name"], "devicematchreviews");
  EXPECT_EQ(resources["resources"][0]["verbs"], json::array({"create"}));
}

}  // namespace
}  // namespace qm::api
