// DeviceMatchReview and UtilizationHistoryReview (admin.quartermaster.io/v1alpha1) through
// RestApi over the in-memory store: the exact devices a class and selectors match, which are
// allocated, and positioned errors; allocations and releases in the right buckets and groups.
#include "api/rest/admin_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/id_generator.h"
#include "store/memory_store.h"

namespace qm::api {
namespace {

using nlohmann::json;

constexpr int64_t kT0 = 1800000000;

class FakeClock : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override { return now_; }
  void Set(int64_t seconds) {
    now_ = std::chrono::system_clock::time_point{std::chrono::seconds(seconds)};
  }

 private:
  std::chrono::system_clock::time_point now_{std::chrono::seconds(kT0)};
};

constexpr char kReviews[] = "/apis/admin.quartermaster.io/v1alpha1/devicematchreviews";
constexpr char kUtilization[] = "/apis/admin.quartermaster.io/v1alpha1/utilizationhistoryreviews";

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

  // The utilization groups of kT0-60 .. kT0+240 in one-minute buckets.
  json History(const std::string& group_by) {
    json spec = {{"start", "2027-01-15T07:59:00Z"},  // kT0 - 60
                 {"end", "2027-01-15T08:04:00Z"},    // kT0 + 240
                 {"step", "1m"},
                 {"groupBy", group_by}};
    json body = {{"apiVersion", "admin.quartermaster.io/v1alpha1"},
                 {"kind", "UtilizationHistoryReview"},
                 {"spec", spec}};
    json review = json::parse(Expect(201, "POST", kUtilization, body.dump()).body);
    EXPECT_EQ(review["kind"], "UtilizationHistoryReview");
    EXPECT_EQ(review["status"]["stepSeconds"], 60);
    EXPECT_EQ(review["status"]["times"],
              json::array({kT0 - 60, kT0, kT0 + 60, kT0 + 120, kT0 + 180}));
    return review["status"]["groups"];
  }

  static std::set<std::string> Ids(const json& review) {
    std::set<std::string> out;
    for (const auto& d : review["status"]["devices"]) {
      out.insert(d.value("nodeName", "") + "/" + d["pool"].get<std::string>() + "/" +
                 d["device"].get<std::string>());
    }
    return out;
  }

  FakeClock clock_;
  store::MemoryStore store_{clock_};  // the allocation history is timed by clock_
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

// DeviceHolderReview: who holds the devices of the pools asked for, from an index of the
// allocated claims that follows allocations, shares and releases after its first list.
TEST_F(AdminApiTest, HolderReviewNamesTheClaimsHoldingThePoolsDevices) {
  constexpr char kHolders[] = "/apis/admin.quartermaster.io/v1alpha1/deviceholderreviews";
  auto holders = [&](const json& spec) {
    json body = {{"apiVersion", "admin.quartermaster.io/v1alpha1"},
                 {"kind", "DeviceHolderReview"},
                 {"spec", spec}};
    return json::parse(Expect(201, "POST", kHolders, body.dump()).body)["status"];
  };
  const json pool_a = {
      {"pools", json::array({{{"driver", "gpu.example.com"}, {"pool", "node-a"}}})}};
  const json pool_b = {
      {"pools", json::array({{{"driver", "gpu.example.com"}, {"pool", "node-b"}}})}};
  json a = holders(pool_a);
  ASSERT_EQ(a["heldDevices"], 1) << a.dump();
  const json& d = a["devices"][0];
  EXPECT_EQ(d["driver"], "gpu.example.com");
  EXPECT_EQ(d["pool"], "node-a");
  EXPECT_EQ(d["device"], "gpu-0");
  ASSERT_EQ(d["holders"].size(), 1u);
  EXPECT_EQ(d["holders"][0]["claim"]["namespace"], "default");
  EXPECT_EQ(d["holders"][0]["claim"]["name"], "c1");
  EXPECT_FALSE(d["holders"][0]["claim"]["uid"].get<std::string>().empty());
  EXPECT_EQ(d["holders"][0]["request"], "gpu");
  EXPECT_EQ(d["holders"][0]["consumers"], json::array());
  EXPECT_EQ(holders(pool_b)["heldDevices"], 0);
  EXPECT_EQ(holders(json::object())["heldDevices"], 1);  // no pools: every held device

  // A second claim on node-b's gpu-0, reserved for a pod; then c1 released: each review sees
  // the change it follows (the index was built by the first review).
  const std::string claims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
  json c2 = {{"metadata", {{"name", "c2"}}}};
  c2["spec"]["devices"]["requests"] =
      json::array({{{"name", "gpu"}, {"exactly", {{"deviceClassName", "a100"}}}}});
  Expect(201, "POST", claims, c2.dump());
  json claim = json::parse(Expect(200, "GET", claims + "/c2").body);
  claim["status"]["allocation"]["devices"]["results"] = json::array({{{"request", "gpu"},
                                                                      {"driver", "gpu.example.com"},
                                                                      {"pool", "node-b"},
                                                                      {"device", "gpu-0"}}});
  claim["status"]["reservedFor"] =
      json::array({{{"resource", "pods"}, {"name", "p1"}, {"uid", "u-p1"}}});
  claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"] = json::array(
      {{{"matchFields",
         json::array({{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"node-b"}}}})}}});
  Expect(200, "PUT", claims + "/c2/status", claim.dump());
  json b = holders(pool_b);
  ASSERT_EQ(b["heldDevices"], 1) << b.dump();
  EXPECT_EQ(b["devices"][0]["holders"][0]["claim"]["name"], "c2");
  EXPECT_EQ(b["devices"][0]["holders"][0]["nodeName"], "node-b");
  EXPECT_FALSE(a["devices"][0]["holders"][0].contains("nodeName"));
  EXPECT_EQ(b["devices"][0]["holders"][0]["consumers"],
            json::array({{{"resource", "pods"}, {"name", "p1"}, {"uid", "u-p1"}}}));
  EXPECT_EQ(holders(json::object())["heldDevices"], 2);

  json c1 = json::parse(Expect(200, "GET", claims + "/c1").body);
  c1["status"].erase("allocation");
  Expect(200, "PUT", claims + "/c1/status", c1.dump());
  EXPECT_EQ(holders(pool_a)["heldDevices"], 0);
  Expect(200, "DELETE", claims + "/c2");
  EXPECT_EQ(holders(json::object())["heldDevices"], 0);

  // Malformed: field paths.
  json bad = {{"kind", "DeviceHolderReview"},
              {"spec", {{"pools", json::array({{{"driver", "gpu.example.com"}}})}}}};
  json refused = json::parse(Expect(422, "POST", kHolders, bad.dump()).body);
  EXPECT_EQ(refused["details"]["causes"][0]["field"], "spec.pools[0].pool");
}

// DeviceHolderReview with spec.deviceClassName: every claim naming the class (exactly or in a
// firstAvailable subrequest), allocated or not, and only the devices they hold; the index follows
// claims created, allocated, deleted and created again under the same name after its first list.
TEST_F(AdminApiTest, HolderReviewForAClassNamesEveryClaimThatNamesIt) {
  constexpr char kHolders[] = "/apis/admin.quartermaster.io/v1alpha1/deviceholderreviews";
  auto review = [&](const json& spec) {
    json body = {{"apiVersion", "admin.quartermaster.io/v1alpha1"},
                 {"kind", "DeviceHolderReview"},
                 {"spec", spec}};
    return json::parse(Expect(201, "POST", kHolders, body.dump()).body)["status"];
  };
  // namespace/name (allocated: "+") of each claim naming `cls`, in the order listed.
  auto claims_of = [&](const std::string& cls) {
    std::vector<std::string> out;
    json spec = json::object();
    spec["deviceClassName"] = cls;
    const json status = review(spec);
    for (const json& c : status["claims"]) {
      EXPECT_FALSE(c["uid"].get<std::string>().empty());
      out.push_back(c["namespace"].get<std::string>() + "/" + c["name"].get<std::string>() +
                    (c["allocated"] == true ? "+" : ""));
    }
    return out;
  };
  const std::string claims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
  auto create = [&](const std::string& name, const json& requests) {
    json c = {{"metadata", {{"name", name}}}};
    c["spec"]["devices"]["requests"] = requests;
    Expect(201, "POST", claims, c.dump());
  };
  auto exactly = [](const std::string& cls) {
    return json::array({{{"name", "gpu"}, {"exactly", {{"deviceClassName", cls}}}}});
  };
  // c3 names a100 and l4 (firstAvailable), unallocated; c4 names l4.
  create("c3", json::array({{{"name", "gpu"},
                             {"firstAvailable",
                              json::array({{{"name", "big"}, {"deviceClassName", "a100"}},
                                           {{"name", "small"}, {"deviceClassName", "l4"}}})}}}));
  create("c4", exactly("l4"));

  json a100 = review({{"deviceClassName", "a100"}});
  ASSERT_EQ(a100["claims"].size(), 2u) << a100.dump();
  EXPECT_EQ(a100["claims"][0]["name"], "c1");
  EXPECT_EQ(a100["claims"][0]["allocated"], true);
  EXPECT_EQ(a100["claims"][1]["name"], "c3");
  EXPECT_EQ(a100["claims"][1]["allocated"], false);
  ASSERT_EQ(a100["heldDevices"], 1);  // only what the class's claims hold
  EXPECT_EQ(a100["devices"][0]["device"], "gpu-0");
  EXPECT_EQ(a100["devices"][0]["holders"][0]["claim"]["name"], "c1");
  EXPECT_EQ(claims_of("l4"), (std::vector<std::string>{"default/c3", "default/c4"}));
  json none = review({{"deviceClassName", "h100"}});
  EXPECT_EQ(none["claims"], json::array());
  EXPECT_EQ(none["heldDevices"], 0);
  EXPECT_FALSE(review(json::object()).contains("claims"));  // without a class: no claim list

  // After the index's first list: c5 (a100) created and allocated, c3 deleted and created again
  // naming l4 only, c4 deleted.
  create("c5", exactly("a100"));
  EXPECT_EQ(claims_of("a100"),
            (std::vector<std::string>{"default/c1+", "default/c3", "default/c5"}));
  json c5 = json::parse(Expect(200, "GET", claims + "/c5").body);
  c5["status"]["allocation"]["devices"]["results"] = json::array({{{"request", "gpu"},
                                                                   {"driver", "gpu.example.com"},
                                                                   {"pool", "node-b"},
                                                                   {"device", "gpu-0"}}});
  Expect(200, "PUT", claims + "/c5/status", c5.dump());
  Expect(200, "DELETE", claims + "/c3");
  create("c3", exactly("l4"));
  Expect(200, "DELETE", claims + "/c4");
  EXPECT_EQ(claims_of("a100"), (std::vector<std::string>{"default/c1+", "default/c5+"}));
  EXPECT_EQ(claims_of("l4"), (std::vector<std::string>{"default/c3"}));
  const json pool_b = {
      {"pools", json::array({{{"driver", "gpu.example.com"}, {"pool", "node-b"}}})},
      {"deviceClassName", "a100"}};
  json b = review(pool_b);  // with pools too: the class's claims' devices in those pools
  ASSERT_EQ(b["heldDevices"], 1) << b.dump();
  EXPECT_EQ(b["devices"][0]["holders"][0]["claim"]["name"], "c5");
  EXPECT_EQ(b["claims"].size(), 2u);

  // Malformed: field paths.
  json bad = {{"kind", "DeviceHolderReview"}, {"spec", {{"deviceClassName", 5}}}};
  json refused = json::parse(Expect(422, "POST", kHolders, bad.dump()).body);
  EXPECT_EQ(refused["details"]["causes"][0]["field"], "spec.deviceClassName");
  bad["spec"]["deviceClassName"] = "";
  refused = json::parse(Expect(422, "POST", kHolders, bad.dump()).body);
  EXPECT_EQ(refused["details"]["causes"][0]["field"], "spec.deviceClassName");
}

// DeviceHolderReview's spec.limit: status.claims lists the first `limit` claims naming the class,
// status.claimCount counts them all, status.claimsTruncated says some were left out, and
// status.devices has only what the listed claims hold; a bad limit is a 422 at spec.limit.
TEST_F(AdminApiTest, HolderReviewForAClassListsTheFirstLimitClaimsAndCountsThemAll) {
  constexpr char kHolders[] = "/apis/admin.quartermaster.io/v1alpha1/deviceholderreviews";
  auto review = [&](const json& spec) {
    json body = {{"apiVersion", "admin.quartermaster.io/v1alpha1"},
                 {"kind", "DeviceHolderReview"},
                 {"spec", spec}};
    return json::parse(Expect(201, "POST", kHolders, body.dump()).body)["status"];
  };
  auto names = [](const json& status) {
    std::vector<std::string> out;
    for (const json& c : status["claims"]) out.push_back(c["name"].get<std::string>());
    return out;
  };
  // c1 (the fixture's, allocated on node-a's gpu-0) and c2..c4 (unallocated) name a100.
  const std::string claims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
  for (const char* name : {"c2", "c3", "c4"}) {
    json c = {{"metadata", {{"name", name}}}};
    c["spec"]["devices"]["requests"] =
        json::array({{{"name", "gpu"}, {"exactly", {{"deviceClassName", "a100"}}}}});
    Expect(201, "POST", claims, c.dump());
  }

  json all = review({{"deviceClassName", "a100"}});  // default limit (500): every one
  EXPECT_EQ(names(all), (std::vector<std::string>{"c1", "c2", "c3", "c4"})) << all.dump();
  EXPECT_EQ(all["claimCount"], 4);
  EXPECT_EQ(all["claimsTruncated"], false);
  EXPECT_EQ(all["heldDevices"], 1);

  json two = review({{"deviceClassName", "a100"}, {"limit", 2}});
  EXPECT_EQ(names(two), (std::vector<std::string>{"c1", "c2"})) << two.dump();
  EXPECT_EQ(two["claimCount"], 4);
  EXPECT_EQ(two["claimsTruncated"], true);
  EXPECT_EQ(two["heldDevices"], 1);  // c1's gpu-0

  // The first claim (c1) left out by a delete: the next ones listed, and no device held by one
  // that is not listed.
  Expect(200, "DELETE", claims + "/c1");
  json one = review({{"deviceClassName", "a100"}, {"limit", 1}});
  EXPECT_EQ(names(one), (std::vector<std::string>{"c2"})) << one.dump();
  EXPECT_EQ(one["claimCount"], 3);
  EXPECT_EQ(one["claimsTruncated"], true);
  EXPECT_EQ(one["heldDevices"], 0);
  json exact = review({{"deviceClassName", "a100"}, {"limit", 3}});
  EXPECT_EQ(exact["claims"].size(), 3u);
  EXPECT_EQ(exact["claimsTruncated"], false);
  // Above the maximum (5000): the maximum, not a refusal.
  EXPECT_EQ(review({{"deviceClassName", "a100"}, {"limit", 1000000}})["claimCount"], 3);
  json none = review({{"deviceClassName", "h100"}, {"limit", 1}});
  EXPECT_EQ(none["claimCount"], 0);
  EXPECT_EQ(none["claimsTruncated"], false);
  EXPECT_FALSE(review(json::object()).contains("claimCount"));  // without a class: no count

  // A limit that is not a positive integer, or without a class: 422 with the field path.
  for (const json& bad_limit : {json(0), json(-3), json("2"), json(1.5), json(nullptr)}) {
    json bad = {{"kind", "DeviceHolderReview"},
                {"spec", {{"deviceClassName", "a100"}, {"limit", bad_limit}}}};
    json refused = json::parse(Expect(422, "POST", kHolders, bad.dump()).body);
    EXPECT_EQ(refused["reason"], "Invalid") << bad_limit.dump();
    ASSERT_EQ(refused["details"]["causes"].size(), 1u) << refused.dump();
    EXPECT_EQ(refused["details"]["causes"][0]["field"], "spec.limit") << bad_limit.dump();
  }
  json no_class = {{"kind", "DeviceHolderReview"}, {"spec", {{"limit", 5}}}};
  json refused = json::parse(Expect(422, "POST", kHolders, no_class.dump()).body);
  EXPECT_EQ(refused["details"]["causes"][0]["field"], "spec.limit") << refused.dump();
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
  // Unknown fields: a warning by default, 400 with fieldValidation=Strict, nothing with Ignore.
  const std::string extra = R"({"spec":{"className":"a100","colour":"red"}})";
  EXPECT_EQ(Expect(201, "POST", kReviews, extra).warnings,
            std::vector<std::string>{"unknown field \"spec.colour\""});
  HttpRequest strict{"POST", kReviews, {{"fieldValidation", "Strict"}}, "application/json",
                     "",     extra};
  HttpResponse refused = api_.Handle(strict);
  EXPECT_EQ(refused.code, 400) << refused.body;
  EXPECT_EQ(json::parse(refused.body)["message"],
            "strict decoding error: unknown field \"spec.colour\"");
  strict.query["fieldValidation"] = "Ignore";
  HttpResponse ignored = api_.Handle(strict);
  EXPECT_EQ(ignored.code, 201);
  EXPECT_TRUE(ignored.warnings.empty());
  json resources = json::parse(Expect(200, "GET", "/apis/admin.quartermaster.io/v1alpha1").body);
  EXPECT_EQ(resources["resources"][0]["name"], "devicematchreviews");
  EXPECT_EQ(resources["resources"][0]["verbs"], json::array({"create"}));
  EXPECT_EQ(resources["resources"][1]["name"], "utilizationhistoryreviews");
  EXPECT_EQ(resources["resources"][1]["kind"], "UtilizationHistoryReview");
}

// A DeviceTaintRule that does not decode (stored straight into the store) shows in the admin
// views as the scheduler treats it: its fail-safe NoSchedule taint on the devices it may select.
TEST_F(AdminApiTest, AnUndecodableTaintRuleShowsItsFailSafeTaint) {
  model::Object rule;
  rule.resource = "devicetaintrules.resource.k8s.io";
  rule.meta.name = "broken";
  rule.body = R"({"spec":{"deviceSelector":{"driver":"gpu.example.com","pool":"node-a",)"
              R"("device":7},"taint":{"key":"k","effect":"Sideways"}}})";
  ASSERT_TRUE(store_.Create(rule).ok());
  std::map<std::string, std::string> taints;
  const json review = Review({{"className", "a100"}});
  for (const auto& d : review["status"]["devices"]) {
    for (const auto& t : d.value("taints", json::array())) {
      taints[d["nodeName"].get<std::string>() + "/" + d["device"].get<std::string>()] =
          t["key"].get<std::string>() + "=" + t["value"].get<std::string>() + ":" +
          t["effect"].get<std::string>();
    }
  }
  // The unreadable device field selects every device of node-a's pool; node-b's are untouched.
  EXPECT_EQ(taints,
            (std::map<std::string, std::string>{
                {"node-a/gpu-0", "quartermaster.io/undecodable-taint-rule=broken:NoSchedule"}}));
}

// The fixture's c1 took node-a/gpu-0 at kT0. Then, with an unhealthy L4 on node-c:
//   kT0+90  team/c2 takes node-b/gpu-0        kT0+170 team/c3 takes node-a/gpu-1 (an L4)
//   kT0+150 default/c1 is deleted (released)  kT0+175 team/c3 is deleted
//   kT0+200 team/c4 takes node-c/gpu-0 (the unhealthy L4), and the review runs at kT0+240
// over five one-minute buckets from kT0-60: [-60,0) [0,60) [60,120) [120,180) [180,240).
class UtilizationTest : public AdminApiTest {
 protected:
  UtilizationTest() {
    json taint = {{"key", "quartermaster.io/unhealthy"}, {"effect", "NoSchedule"}};
    json device = json::parse(Device("gpu-0", "NVIDIA L4", "24Gi"));
    device["taints"] = json::array({taint});
    // Unhealthy since before the range the reviews show.
    clock_.Set(kT0 - 120);
    Expect(201, "POST", "/apis/resource.k8s.io/v1/resourceslices", Slice("node-c", device.dump()));
    Expect(201, "POST", "/api/v1/namespaces", R"({"metadata":{"name":"team"}})");
    clock_.Set(kT0 + 90);
    Allocate("team", "c2", "node-b", "gpu-0");
    clock_.Set(kT0 + 150);
    Expect(200, "DELETE", Claims("default") + "/c1");
    clock_.Set(kT0 + 170);
    Allocate("team", "c3", "node-a", "gpu-1");
    clock_.Set(kT0 + 175);
    Expect(200, "DELETE", Claims("team") + "/c3");
    clock_.Set(kT0 + 200);
    Allocate("team", "c4", "node-c", "gpu-0");
    clock_.Set(kT0 + 240);
  }

  static std::string Claims(const std::string& ns) {
    return "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims";
  }

  // Creates claim ns/name and writes an allocation of node/device to its status.
  void Allocate(const std::string& ns, const std::string& name, const std::string& pool,
                const std::string& device) {
    json request = {{"name", "gpu"}, {"exactly", {{"deviceClassName", "a100"}}}};
    json claim = {{"metadata", {{"name", name}}}};
    claim["spec"]["devices"]["requests"] = json::array({request});
    Expect(201, "POST", Claims(ns), claim.dump());
    claim = json::parse(Expect(200, "GET", Claims(ns) + "/" + name).body);
    json result = {
        {"request", "gpu"}, {"driver", "gpu.example.com"}, {"pool", pool}, {"device", device}};
    claim["status"]["allocation"]["devices"]["results"] = json::array({result});
    Expect(200, "PUT", Claims(ns) + "/" + name + "/status", claim.dump());
  }

  static json Find(const json& groups, const std::string& name) {
    for (const auto& g : groups) {
      if (g["name"] == name) return g;
    }
    ADD_FAILURE() << "no group " << name << " in " << groups.dump();
    return json::object();
  }

  using V = std::vector<int64_t>;
  static void ExpectSeries(const json& g, int64_t devices, const V& allocated, const V& peak,
                           const V& unhealthy, const V& free) {
    EXPECT_EQ(g["devices"], devices) << g.dump();
    EXPECT_EQ(g["allocated"].get<V>(), allocated) << g.dump();
    EXPECT_EQ(g["peakAllocated"].get<V>(), peak) << g.dump();
    EXPECT_EQ(g["unhealthy"].get<V>(), unhealthy) << g.dump();
    EXPECT_EQ(g["free"].get<V>(), free) << g.dump();
  }
};

TEST_F(UtilizationTest, AllocationsAndReleasesLandInTheirBuckets) {
  ASSERT_EQ(std::string(FormatRfc3339(
                std::chrono::system_clock::time_point{std::chrono::seconds(kT0 - 60)})),
            "2027-01-15T07:59:00Z");
  json groups = History("");
  ASSERT_EQ(groups.size(), 1u) << groups.dump();
  EXPECT_EQ(groups[0]["name"], "");
  ExpectSeries(groups[0], 4, {0, 1, 2, 1, 2}, {0, 1, 2, 2, 2}, {1, 1, 1, 1, 0}, {3, 2, 1, 2, 2});
}

TEST_F(UtilizationTest, GroupsByClassModelNodeAndNamespace) {
  json classes = History("class");
  ASSERT_EQ(classes.size(), 1u) << classes.dump();
  ExpectSeries(Find(classes, "a100"), 2, {0, 1, 2, 1, 1}, {0, 1, 2, 2, 1}, {0, 0, 0, 0, 0},
               {2, 1, 0, 1, 1});

  json models = History("model");
  ASSERT_EQ(models.size(), 3u) << models.dump();
  ExpectSeries(Find(models, "NVIDIA A100-SXM4-80GB"), 1, {0, 1, 1, 0, 0}, {0, 1, 1, 1, 0},
               {0, 0, 0, 0, 0}, {1, 0, 0, 1, 1});
  ExpectSeries(Find(models, "NVIDIA A100-PCIE-40GB"), 1, {0, 0, 1, 1, 1}, {0, 0, 1, 1, 1},
               {0, 0, 0, 0, 0}, {1, 1, 0, 0, 0});
  ExpectSeries(Find(models, "NVIDIA L4"), 2, {0, 0, 0, 0, 1}, {0, 0, 0, 1, 1}, {1, 1, 1, 1, 0},
               {1, 1, 1, 1, 1});

  json nodes = History("node");
  ASSERT_EQ(nodes.size(), 3u) << nodes.dump();
  ExpectSeries(Find(nodes, "node-a"), 2, {0, 1, 1, 0, 0}, {0, 1, 1, 1, 0}, {0, 0, 0, 0, 0},
               {2, 1, 1, 2, 2});
  ExpectSeries(Find(nodes, "node-b"), 1, {0, 0, 1, 1, 1}, {0, 0, 1, 1, 1}, {0, 0, 0, 0, 0},
               {1, 1, 0, 0, 0});
  ExpectSeries(Find(nodes, "node-c"), 1, {0, 0, 0, 0, 1}, {0, 0, 0, 0, 1}, {1, 1, 1, 1, 0},
               {0, 0, 0, 0, 0});
  EXPECT_EQ(Find(nodes, "node-c")["tainted"], 1);
  EXPECT_EQ(Find(nodes, "node-a")["tainted"], 0);
  EXPECT_EQ(Find(models, "NVIDIA L4")["tainted"], 1);

  json namespaces = History("namespace");
  ASSERT_EQ(namespaces.size(), 2u) << namespaces.dump();
  json def = Find(namespaces, "default");
  EXPECT_EQ(def["allocated"].get<V>(), (V{0, 1, 1, 0, 0}));
  EXPECT_EQ(def["peakAllocated"].get<V>(), (V{0, 1, 1, 1, 0}));
  EXPECT_FALSE(def.contains("free"));
  json team = Find(namespaces, "team");
  EXPECT_EQ(team["allocated"].get<V>(), (V{0, 0, 1, 1, 2}));
  EXPECT_EQ(team["peakAllocated"].get<V>(), (V{0, 0, 1, 2, 2}));
}

// Health over time: each bucket counts the devices unhealthy at its end, from the slices' own
// taints and from DeviceTaintRules (one naming a device, one covering a whole pool), replayed
// back from now; an unhealthy device that is allocated counts as allocated. The fixture's c1
// took node-a/gpu-0 at kT0.
//   kT0+30  rule "sick": node-b/gpu-0            kT0+150 rule "sick" deleted (own taint stays)
//   kT0+70  rule "pool-a": all of node-a's pool  kT0+190 rule "pool-a" deleted
//   kT0+130 node-b/gpu-0 gets a taint of its own (still there when the review runs at kT0+240)
TEST_F(AdminApiTest, UtilizationCountsUnhealthyDevicesAsTheyWereThen) {
  const std::string rules = "/apis/resource.k8s.io/v1/devicetaintrules";
  auto rule = [](const std::string& name, const std::string& pool, const std::string& device) {
    json selector = {{"driver", "gpu.example.com"}, {"pool", pool}};
    if (!device.empty()) selector["device"] = device;
    json r = {{"apiVersion", "resource.k8s.io/v1"},
              {"kind", "DeviceTaintRule"},
              {"metadata", {{"name", name}}},
              {"spec",
               {{"deviceSelector", selector},
                {"taint", {{"key", "quartermaster.io/unhealthy"}, {"effect", "NoSchedule"}}}}}};
    return r.dump();
  };
  const std::string slice_b = "/apis/resource.k8s.io/v1/resourceslices/node-b-g1";
  auto taint_node_b = [&] {
    json slice = json::parse(Expect(200, "GET", slice_b).body);
    slice["spec"]["devices"][0]["taints"] = json::array(
        {{{"key", "quartermaster.io/unhealthy"}, {"value", "XID-79"}, {"effect", "NoExecute"}}});
    Expect(200, "PUT", slice_b, slice.dump());
  };
  clock_.Set(kT0 + 30);
  Expect(201, "POST", rules, rule("sick", "node-b", "gpu-0"));
  clock_.Set(kT0 + 70);
  Expect(201, "POST", rules, rule("pool-a", "node-a", ""));
  clock_.Set(kT0 + 130);
  taint_node_b();
  clock_.Set(kT0 + 150);
  Expect(200, "DELETE", rules + "/sick");
  clock_.Set(kT0 + 190);
  Expect(200, "DELETE", rules + "/pool-a");
  clock_.Set(kT0 + 240);

  using V = std::vector<int64_t>;
  json all = History("");
  ASSERT_EQ(all.size(), 1u) << all.dump();
  EXPECT_EQ(all[0]["devices"], 3);
  EXPECT_EQ(all[0]["allocated"].get<V>(), (V{0, 1, 1, 1, 1})) << all.dump();
  EXPECT_EQ(all[0]["unhealthy"].get<V>(), (V{0, 1, 2, 2, 1})) << all.dump();
  EXPECT_EQ(all[0]["free"].get<V>(), (V{3, 1, 0, 0, 1})) << all.dump();
  EXPECT_EQ(all[0]["tainted"], 1);  // node-b/gpu-0, now

  json nodes = History("node");
  ASSERT_EQ(nodes.size(), 2u) << nodes.dump();
  EXPECT_EQ(nodes[0]["name"], "node-a");
  EXPECT_EQ(nodes[0]["unhealthy"].get<V>(), (V{0, 0, 1, 1, 0})) << nodes.dump();
  EXPECT_EQ(nodes[1]["name"], "node-b");
  EXPECT_EQ(nodes[1]["unhealthy"].get<V>(), (V{0, 1, 1, 1, 1})) << nodes.dump();

  // The store recorded one change per source, in order.
  auto recorded = store_.ReadAllocationHistory(std::chrono::system_clock::time_point{});
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  std::vector<std::string> changes;
  for (const auto& e : recorded->health) {
    changes.push_back(absl::StrCat(
        std::chrono::duration_cast<std::chrono::seconds>(e.time.time_since_epoch()).count() - kT0,
        " ", e.pool, "/", e.device, " ", e.delta));
  }
  EXPECT_EQ(changes,
            (std::vector<std::string>{"30 node-b/gpu-0 1", "70 node-a/ 1", "130 node-b/gpu-0 1",
                                      "150 node-b/gpu-0 -1", "190 node-a/ -1"}));
}

TEST_F(UtilizationTest, RangeEndsNowAndDefaultsToSixtyBuckets) {
  json body = {{"spec", {{"range", "1h"}}}};
  json review = json::parse(Expect(201, "POST", kUtilization, body.dump()).body);
  const json& status = review["status"];
  EXPECT_EQ(status["end"], "2027-01-15T08:04:00Z");
  EXPECT_EQ(status["start"], "2027-01-15T07:04:00Z");
  EXPECT_EQ(status["stepSeconds"], 60);
  ASSERT_EQ(status["times"].size(), 60u);
  const json& all = status["groups"][0];
  // The last four minutes are the fixture's; everything before had nothing allocated.
  EXPECT_EQ(all["allocated"][55], 0);
  EXPECT_EQ(all["allocated"][56], 1);
  EXPECT_EQ(all["allocated"][59], 2);
  json week = json::parse(
      Expect(201, "POST", kUtilization, json({{"spec", {{"range", "7d"}}}}).dump()).body);
  EXPECT_EQ(week["status"]["stepSeconds"], 7 * 24 * 60);
  EXPECT_EQ(week["status"]["groups"][0]["peakAllocated"][59], 2);
  EXPECT_EQ(week["status"]["groups"][0]["peakAllocated"][58], 0);
}

TEST_F(UtilizationTest, MalformedReviewsAreRefusedWithFieldPaths) {
  auto fields = [&](const json& spec) {
    HttpResponse r = Expect(422, "POST", kUtilization, json({{"spec", spec}}).dump());
    std::set<std::string> out;
    const json status = json::parse(r.body);
    for (const auto& c : status["details"]["causes"]) out.insert(c["field"]);
    return out;
  };
  EXPECT_EQ(fields({{"groupBy", "pool"}}), (std::set<std::string>{"spec.groupBy"}));
  EXPECT_EQ(fields({{"range", "an hour"}}), (std::set<std::string>{"spec.range"}));
  EXPECT_EQ(fields({{"range", "1h"}, {"step", "1s"}}), (std::set<std::string>{"spec.step"}));
  EXPECT_EQ(fields({{"range", "1h"}, {"start", "2027-01-15T07:04:00Z"}}),
            (std::set<std::string>{"spec.range"}));
  EXPECT_EQ(fields({{"start", "2027-01-15T09:00:00Z"}}), (std::set<std::string>{"spec.end"}));
  EXPECT_EQ(fields({{"start", "yesterday"}}), (std::set<std::string>{"spec.start"}));
  Expect(422, "POST", kUtilization, R"({"kind":"DeviceMatchReview","spec":{}})");
  Expect(400, "POST", kUtilization, "[]");
  Expect(405, "GET", kUtilization);
}

}  // namespace
}  // namespace qm::api
