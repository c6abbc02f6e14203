// The node-agent gRPC API on a real PostgreSQL, through a real gRPC channel: the server as
// quartermaster wires it (object service, watch hub, RBAC authorizer, scheduler, assignment
// router, NodeAgentApi, GrpcServer on 127.0.0.1:0) with static tokens for two node identities,
// an admin and an unprivileged user. Checks registration with merged labels, atomic slice
// publication with REST validation and pool generations, node restriction and RBAC, the
// assignment stream with its resumption, reports into claim and pod status, health, heartbeats,
// the audit trail and UNAVAILABLE at shutdown.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "api/grpc/assignments.h"
#include "api/grpc/grpc_server.h"
#include "api/grpc/node_agent_api.h"
#include "api/rest/rest_api.h"
#include "auth/authenticator.h"
#include "common/clock.h"
#include "common/id_generator.h"
#include "pg_test_env.h"
#include "qm/agent/v1/agent.grpc.pb.h"
#include "service/authorizer.h"
#include "service/object_service.h"
#include "service/scheduler.h"
#include "service/watch_hub.h"
#include "store/pg/pg_store.h"
#include "test_objects.h"

namespace qm {
namespace {

using nlohmann::json;
namespace v1 = ::qm::agent::v1;

constexpr char kV1[] = "/apis/resource.k8s.io/v1";
constexpr char kDriver[] = "gpu.nvidia.com";

auth::UserInfo Node(const std::string& name) {
  return auth::WithAuthenticatedGroup({"system:node:" + name, "", {auth::kGroupNodes}});
}

class NodeAgentApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::PgTestEnv::Get().Reset();
    auto store = store::pg::PgStore::Open(testing::PgTestEnv::Get().url(), 4);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    hub_ = std::make_unique<service::WatchHub>(*store_, service::WatchHubOptions{});
    hub_->Start();
    objects_ = std::make_unique<service::ObjectService>(*store_, clock_, ids_, hub_.get());
    rest_ = std::make_unique<api::RestApi>(*objects_, *hub_, clock_);
    ASSERT_TRUE(rest_->EnsureDefaultNamespace().ok());
    ASSERT_TRUE(authorizer_.Follow(*hub_).ok());
    service::SchedulerOptions sched;
    sched.initial_backoff = std::chrono::milliseconds(100);
    sched.max_backoff = std::chrono::milliseconds(400);
    scheduler_ = std::make_unique<service::Scheduler>(*store_, *hub_, clock_, ids_, sched);
    scheduler_->Start();
    api::nodeapi::AssignmentRouterOptions router_options;
    router_options.bookmark_interval = std::chrono::milliseconds(200);
    router_options.catch_up_timeout = std::chrono::milliseconds(300);
    router_ = std::make_unique<api::nodeapi::AssignmentRouter>(*objects_, *hub_, router_options);
    ASSERT_TRUE(router_->Start().ok());
    agent_api_ = std::make_unique<api::nodeapi::NodeAgentApi>(*objects_, *hub_, *router_,
                                                              authorizer_, clock_);
    std::map<std::string, auth::UserInfo> tokens = {
        {"node-a", Node("gpu-node-a")},
        {"node-b", Node("gpu-node-b")},
        {"admin", auth::WithAuthenticatedGroup({"admin", "", {auth::kGroupMasters}})},
        {"nobody", auth::WithAuthenticatedGroup({"nobody", "", {}})}};
    authn_ = std::make_unique<auth::UnionAuthenticator>(tokens, std::vector<auth::TokenVerifier>{});
    api::nodeapi::GrpcServerOptions options;
    options.address = "127.0.0.1:0";
    server_ = std::make_unique<api::nodeapi::GrpcServer>(*agent_api_, *authn_, options);
    ASSERT_TRUE(server_->Start().ok());
    stub_ = v1::NodeAgent::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    router_->Stop();
    server_->Shutdown();
    scheduler_.reset();
    hub_->Stop();
  }

  // A unary call as `token` (empty: no credentials).
  template <typename Req, typename Resp>
  grpc::Status Call(grpc::Status (v1::NodeAgent::Stub::*method)(grpc::ClientContext*, const Req&,
                                                                Resp*),
                    const std::string& token, const Req& req, Resp* resp = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    Resp local;
    return (stub_.get()->*method)(&ctx, req, resp != nullptr ? resp : &local);
  }

  // REST, as an in-process client without a user (no authorization).
  api::HttpResponse Rest(const std::string& method, const std::string& path,
                         const json& body = nullptr,
                         const std::string& content_type = "application/json") {
    api::HttpRequest r{method, path, {}, content_type, "", body.is_null() ? "" : body.dump()};
    return rest_->Handle(r);
  }
  json Get(const std::string& path) {
    auto r = Rest("GET", path);
    return r.code == 200 ? json::parse(r.body) : json();
  }
  void Create(const std::string& path, const json& body) {
    auto r = Rest("POST", path, body);
    ASSERT_EQ(r.code, 201) << path << ": " << r.body;
  }
  bool Eventually(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return done();
  }

  static v1::Slice Gpus(int n, const std::string& prefix = "gpu-") {
    v1::Slice s;
    for (int i = 0; i < n; ++i) {
      v1::Device* d = s.add_devices();
      d->set_name(prefix + std::to_string(i));
      (*d->mutable_attributes())["type"].set_string_value("gpu");
      (*d->mutable_attributes())["index"].set_int_value(i);
      (*d->mutable_capacity())["memory"].set_value("80Gi");
    }
    return s;
  }
  static v1::PublishResourcesRequest Publish(const std::string& node, int devices,
                                             int64_t generation = 0) {
    v1::PublishResourcesRequest req;
    req.set_node_name(node);
    req.set_driver(kDriver);
    v1::Pool* pool = req.add_pools();
    pool->set_name(node);
    pool->set_generation(generation);
    *pool->add_slices() = Gpus(devices);
    return req;
  }
  void RegisterNode(const std::string& node, const std::string& token) {
    v1::RegisterRequest req;
    req.set_node_name(node);
    (*req.mutable_labels())["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB";
    ASSERT_TRUE(Call(&v1::NodeAgent::Stub::Register, token, req).ok());
  }
  json Slices(const std::string& node) {
    api::HttpRequest r{
        "GET", std::string(kV1) + "/resourceslices", {{"fieldSelector", "spec.nodeName=" + node}}};
    auto resp = rest_->Handle(r);
    return resp.code == 200 ? json::parse(resp.body)["items"] : json::array();
  }

  // A class for the driver, a claim and a pod using it in namespace default.
  void Workload(const std::string& claim, const std::string& pod) {
    if (Get(std::string(kV1) + "/deviceclasses/gpu").is_null()) {
      Create(std::string(kV1) + "/deviceclasses", testing::DriverClass("gpu", "gpu.nvidia.com"));
    }
    Create(std::string(kV1) + "/namespaces/default/resourceclaims",
           {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaim"},
            {"metadata", {{"name", claim}}},
            {"spec",
             {{"devices",
               {{"requests", {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu"}}}}}}}}}}});
    Create("/api/v1/namespaces/default/pods",
           {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", pod}}},
            {"spec",
             {{"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", claim}}}},
              {"containers",
               {{{"name", "c"},
                 {"image", "busybox"},
                 {"resources", {{"claims", {{{"name", "gpu"}}}}}}}}}}}});
  }
  json Claim(const std::string& name) {
    return Get(std::string(kV1) + "/namespaces/default/resourceclaims/" + name);
  }

  // One WatchAssignments stream, read with a deadline so a missing message fails the test.
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<v1::WatchAssignmentsResponse>> reader;
    bool finished = false;
    ~Stream() {
      if (finished) return;
      ctx.TryCancel();
      v1::WatchAssignmentsResponse ignored;
      while (reader->Read(&ignored)) {
      }
      reader->Finish();
    }
    grpc::Status Finish() {
      finished = true;
      return reader->Finish();
    }
    // Reads until a message satisfies `want`; false when the stream ends first.
    bool ReadUntil(const std::function<bool(const v1::WatchAssignmentsResponse&)>& want,
                   v1::WatchAssignmentsResponse* out) {
      while (reader->Read(out)) {
        if (want(*out)) return true;
      }
      return false;
    }
  };
  std::unique_ptr<Stream> Watch(const std::string& token, v1::WatchAssignmentsRequest req) {
    auto s = std::make_unique<Stream>();
    s->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    s->ctx.AddMetadata("authorization", "Bearer " + token);
    s->reader = stub_->WatchAssignments(&s->ctx, req);
    return s;
  }
  static v1::WatchAssignmentsRequest WatchRequest(const std::string& node) {
    v1::WatchAssignmentsRequest req;
    req.set_node_name(node);
    req.add_drivers(kDriver);
    return req;
  }

  SystemClock clock_;
  RandomIdGenerator ids_;
  std::unique_ptr<store::pg::PgStore> store_;
  std::unique_ptr<service::WatchHub> hub_;
  std::unique_ptr<service::ObjectService> objects_;
  std::unique_ptr<api::RestApi> rest_;
  service::Authorizer authorizer_;
  std::unique_ptr<service::Scheduler> scheduler_;
  std::unique_ptr<api::nodeapi::AssignmentRouter> router_;
  std::unique_ptr<api::nodeapi::NodeAgentApi> agent_api_;
  std::unique_ptr<auth::UnionAuthenticator> authn_;
  std::unique_ptr<api::nodeapi::GrpcServer> server_;
  std::unique_ptr<v1::NodeAgent::Stub> stub_;
};

TEST_F(NodeAgentApiTest, RegisterCreatesTheNodeAndMergesLabels) {
  v1::RegisterRequest req;
  req.set_node_name("gpu-node-a");
  req.set_agent_version("0.1.0");
  (*req.mutable_labels())["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB";
  (*req.mutable_labels())["nvidia.com/gpu.count"] = "4";
  (*req.mutable_capacity())["nvidia.com/gpu"] = "4";
  v1::RegisterResponse resp;
  ASSERT_TRUE(Call(&v1::NodeAgent::Stub::Register, "node-a", req, &resp).ok());
  EXPECT_GT(resp.heartbeat_interval_seconds(), 0);
  json node = Get("/api/v1/nodes/gpu-node-a");
  ASSERT_TRUE(node.is_object());
  EXPECT_EQ(node["metadata"]["uid"], resp.node_uid());
  EXPECT_EQ(node["metadata"]["labels"]["kubernetes.io/hostname"], "gpu-node-a");
  EXPECT_EQ(node["metadata"]["labels"]["nvidia.com/gpu.count"], "4");
  EXPECT_EQ(node["status"]["capacity"]["nvidia.com/gpu"], "4");
  EXPECT_EQ(node["status"]["conditions"][0]["type"], "Ready");
  EXPECT_EQ(node["status"]["conditions"][0]["status"], "True");

  // An admin's label stays; a label the agent no longer reports goes.
  auto patched =
      Rest("PATCH", "/api/v1/nodes/gpu-node-a", {{"metadata", {{"labels", {{"team", "ml"}}}}}},
           "application/merge-patch+json");
  ASSERT_EQ(patched.code, 200) << patched.body;
  req.mutable_labels()->erase("nvidia.com/gpu.count");
  (*req.mutable_labels())["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3";
  ASSERT_TRUE(Call(&v1::NodeAgent::Stub::Register, "node-a", req).ok());
  node = Get("/api/v1/nodes/gpu-node-a");
  EXPECT_EQ(node["metadata"]["labels"]["team"], "ml");
  EXPECT_EQ(node["metadata"]["labels"]["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
  EXPECT_FALSE(node["metadata"]["labels"].contains("nvidia.com/gpu.count"));

  // Labels are validated as REST validates them; the stored node is unchanged.
  (*req.mutable_labels())["bad key!"] = "x";
  grpc::Status bad = Call(&v1::NodeAgent::Stub::Register, "node-a", req);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("metadata.labels"), std::string::npos) << bad.error_message();
  EXPECT_EQ(Get("/api/v1/nodes/gpu-node-a")["metadata"]["labels"]["nvidia.com/gpu.product"],
            "NVIDIA-H100-80GB-HBM3");
}

TEST_F(NodeAgentApiTest, PublishReplacesTheNodesSlicesAtomically) {
  v1::PublishResourcesResponse resp;
  ASSERT_TRUE(
      Call(&v1::NodeAgent::Stub::PublishResources, "node-a", Publish("gpu-node-a", 2), &resp).ok());
  EXPECT_TRUE(resp.changed());
  ASSERT_EQ(resp.pools_size(), 1);
  EXPECT_EQ(resp.pools(0).generation(), 1);
  json slices = Slices("gpu-node-a");
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["metadata"]["name"], "gpu-node-a-gpu.nvidia.com");
  EXPECT_EQ(slices[0]["spec"]["devices"].size(), 2u);
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 1);

  // The same content again changes nothing; new content bumps the generation.
  ASSERT_TRUE(
      Call(&v1::NodeAgent::Stub::PublishResources, "node-a", Publish("gpu-node-a", 2), &resp).ok());
  EXPECT_FALSE(resp.changed());
  EXPECT_EQ(resp.pools(0).generation(), 1);
  ASSERT_TRUE(
      Call(&v1::NodeAgent::Stub::PublishResources, "node-a", Publish("gpu-node-a", 3), &resp).ok());
  EXPECT_EQ(resp.pools(0).generation(), 2);
  EXPECT_EQ(Slices("gpu-node-a")[0]["spec"]["devices"].size(), 3u);

  // Stale generations.
  grpc::Status stale =
      Call(&v1::NodeAgent::Stub::PublishResources, "node-a", Publish("gpu-node-a", 3, 1));
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(stale.error_message().find("pools[0].generation: stale"), std::string::npos);
  grpc::Status same =
      Call(&v1::NodeAgent::Stub::PublishResources, "node-a", Publish("gpu-node-a", 4, 2));
  EXPECT_EQ(same.error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  // A bad device in a second pool: INVALID_ARGUMENT with the field path, nothing written.
  v1::PublishResourcesRequest two = Publish("gpu-node-a", 1);
  v1::Pool* extra = two.add_pools();
  extra->set_name("extra");
  *extra->add_slices() = Gpus(1, "Bad_");
  grpc::Status invalid = Call(&v1::NodeAgent::Stub::PublishResources, "node-a", two);
  EXPECT_EQ(invalid.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(invalid.error_message().find("pools[1].slices[0].spec.devices[0].name"),
            std::string::npos)
      << invalid.error_message();
  slices = Slices("gpu-node-a");
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["spec"]["devices"].size(), 3u);
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 2);

  // Publishing other pools removes the ones no longer listed, in the same transaction.
  v1::PublishResourcesRequest other;
  other.set_node_name("gpu-node-a");
  other.set_driver(kDriver);
  v1::Pool* p = other.add_pools();
  p->set_name("gpu-node-a/rack-1");
  *p->add_slices() = Gpus(1);
  *p->add_slices() = Gpus(1, "more-");
  ASSERT_TRUE(Call(&v1::NodeAgent::Stub::PublishResources, "node-a", other, &resp).ok());
  slices = Slices("gpu-node-a");
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0]["metadata"]["name"], "gpu-node-a-gpu.nvidia.com-gpu-node-a-rack-1-0");
  EXPECT_EQ(slices[0]["spec"]["pool"]["resourceSliceCount"], 2);

  // Every write is in the audit trail under the node's name.
  store::AuditQuery q;
  q.user = "system:node:gpu-node-a";
  q.resource = "resourceslices";
  auto audit = store_->QueryAudit(q);
  ASSERT_TRUE(audit.ok()) << audit.status();
  std::set<std::string> verbs;
  for (const auto& r : *audit) verbs.insert(r.verb);
  EXPECT_EQ(verbs, (std::set<std::string>{"create", "update", "delete"}));
}

TEST_F(NodeAgentApiTest, NodeRestrictionAndRbac) {
  ASSERT_TRUE(
      Call(&v1::NodeAgent::Stub::PublishResources, "node-b", Publish("gpu-node-b", 2)).ok());
  const json before = Slices("gpu-node-b");
  grpc::Status st =
      Call(&v1::NodeAgent::Stub::PublishResources, "node-a", Publish("gpu-node-b", 1));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("may only act for itself"), std::string::npos);
  EXPECT_EQ(Slices("gpu-node-b"), before);
  v1::RegisterRequest reg;
  reg.set_node_name("gpu-node-b");
  EXPECT_EQ(Call(&v1::NodeAgent::Stub::Register, "node-a", reg).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::HeartbeatRequest hb;
  hb.set_node_name("gpu-node-b");
  EXPECT_EQ(Call(&v1::NodeAgent::Stub::Heartbeat, "node-a", hb).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // RBAC: an authenticated user without a grant; no credentials at all; a wrong token.
  EXPECT_EQ(
      Call(&v1::NodeAgent::Stub::PublishResources, "nobody", Publish("gpu-node-b", 1)).error_code(),
      grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Call(&v1::NodeAgent::Stub::PublishResources, "", Publish("gpu-node-b", 1)).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(
      Call(&v1::NodeAgent::Stub::PublishResources, "forged", Publish("gpu-node-b", 1)).error_code(),
      grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Slices("gpu-node-b"), before);
  // An admin may act for any node.
  EXPECT_TRUE(Call(&v1::NodeAgent::Stub::PublishResources, "admin", Publish("gpu-node-b", 1)).ok());
  EXPECT_EQ(Slices("gpu-node-b")[0]["spec"]["devices"].size(), 1u);
}

TEST_F(NodeAgentApiTest, AssignmentsArePreparedReportedAndUnprepared) {
  RegisterNode("gpu-node-a", "node-a");
  ASSERT_TRUE(
      Call(&v1::NodeAgent::Stub::PublishResources, "node-a", Publish("gpu-node-a", 2)).ok());
  auto stream = Watch("node-a", WatchRequest("gpu-node-a"));
  v1::WatchAssignmentsResponse msg;
  ASSERT_TRUE(stream->reader->Read(&msg));  // the initial state: nothing assigned yet
  EXPECT_EQ(msg.prepare_size(), 0);
  EXPECT_GT(msg.resource_version(), 0);
  Workload("c1", "p1");
  ASSERT_TRUE(stream->ReadUntil([](const auto& m) { return m.prepare_size() > 0; }, &msg));
  ASSERT_EQ(msg.prepare_size(), 1);
  const v1::Assignment a = msg.prepare(0);
  json claim = Claim("c1");
  EXPECT_EQ(a.claim().name(), "c1");
  EXPECT_EQ(a.claim().uid(), claim["metadata"]["uid"]);
  ASSERT_EQ(a.devices_size(), 1);
  EXPECT_EQ(a.devices(0).driver(), kDriver);
  EXPECT_EQ(a.devices(0).pool(), "gpu-node-a");
  EXPECT_EQ(a.devices(0).device(),
            claim["status"]["allocation"]["devices"]["results"][0]["device"]);
  ASSERT_EQ(a.consumers_size(), 1);
  EXPECT_EQ(a.consumers(0).name(), "p1");

  v1::ReportPreparedRequest report;
  report.set_node_name("gpu-node-a");
  report.set_driver(kDriver);
  *report.mutable_claim() = a.claim();
  report.set_allocation_id(a.allocation_id());
  v1::PreparedDevice* d = report.add_devices();
  d->set_request("gpu");
  d->set_pool("gpu-node-a");
  d->set_device(a.devices(0).device());
  d->add_cdi_device_ids("k8s.gpu.nvidia.com/claim=" + a.claim().uid() + "-" + d->device());

  // Another node may not report on it; a stale allocation or a device not allocated is refused.
  v1::ReportPreparedRequest foreign = report;
  foreign.set_node_name("gpu-node-b");
  EXPECT_EQ(Call(&v1::NodeAgent::Stub::ReportPrepared, "node-b", foreign).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::ReportPreparedRequest stale = report;
  stale.set_allocation_id("0000000000000000");
  EXPECT_EQ(Call(&v1::NodeAgent::Stub::ReportPrepared, "node-a", stale).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  v1::ReportPreparedRequest wrong = report;
  wrong.mutable_devices(0)->set_device("gpu-7");
  grpc::Status wrong_st = Call(&v1::NodeAgent::Stub::ReportPrepared, "node-a", wrong);
  EXPECT_EQ(wrong_st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(wrong_st.error_message().find("devices[0]"), std::string::npos);
  EXPECT_FALSE(Claim("c1")["status"].contains("devices"));

  ASSERT_TRUE(Call(&v1::NodeAgent::Stub::ReportPrepared, "node-a", report).ok());
  claim = Claim("c1");
  ASSERT_EQ(claim["status"]["devices"].size(), 1u);
  const json& dev = claim["status"]["devices"][0];
  EXPECT_EQ(dev["driver"], kDriver);
  EXPECT_EQ(dev["device"], a.devices(0).device());
  EXPECT_EQ(dev["conditions"][0]["type"], "Ready");
  EXPECT_EQ(dev["conditions"][0]["status"], "True");
  EXPECT_EQ(dev["data"]["cdiDeviceIDs"][0], d->cdi_device_ids(0));
  json pod = Get("/api/v1/namespaces/default/pods/p1");
  bool prepared = false;
  for (const auto& c : pod["status"]["conditions"]) {
    if (c["type"] == "quartermaster.io/DevicesPrepared") prepared = c["status"] == "True";
  }
  EXPECT_TRUE(prepared) << pod["status"].dump();
  // Its deletion now waits for the agent (graceful deletion).
  EXPECT_EQ(pod["metadata"]["finalizers"], json::array({"quartermaster.io/devices-prepared"}));
  // Claim and pod were written in one transaction, each audited as what it is.
  store::AuditQuery query;
  query.user = "system:node:gpu-node-a";
  auto audited = store_->QueryAudit(query);
  ASSERT_TRUE(audited.ok()) << audited.status();
  std::set<std::string> writes;
  for (const auto& r : *audited) {
    if (r.verb == "update" && r.subresource == "status" && r.name != "gpu-node-a") {
      writes.insert(r.api_group + "/" + r.resource + " " + r.name);
    }
  }
  EXPECT_EQ(writes, (std::set<std::string>{"resource.k8s.io/resourceclaims c1", "/pods p1"}));

  // The pod is deleted: Terminating, the agent told to unprepare, the device still allocated.
  ASSERT_EQ(Rest("DELETE", "/api/v1/namespaces/default/pods/p1").code, 200);
  ASSERT_TRUE(stream->ReadUntil([](const auto& m) { return m.unprepare_size() > 0; }, &msg));
  EXPECT_EQ(msg.unprepare(0).uid(), a.claim().uid());
  pod = Get("/api/v1/namespaces/default/pods/p1");
  EXPECT_TRUE(pod["metadata"].contains("deletionTimestamp")) << pod["metadata"].dump();
  EXPECT_EQ(pod["metadata"]["deletionGracePeriodSeconds"], 30);
  EXPECT_TRUE(Claim("c1")["status"].contains("allocation"));
  v1::ReportUnpreparedRequest done;
  done.set_node_name("gpu-node-a");
  done.set_driver(kDriver);
  *done.mutable_claim() = a.claim();
  EXPECT_TRUE(Call(&v1::NodeAgent::Stub::ReportUnprepared, "node-a", done).ok());
  EXPECT_FALSE(Claim("c1")["status"].contains("devices"));
  // Unprepared: the pod goes and the claim is released.
  EXPECT_TRUE(Eventually([&] {
    return Rest("GET", "/api/v1/namespaces/default/pods/p1").code == 404 &&
           !Claim("c1")["status"].contains("allocation");
  }));
}

// A change of a claim whose allocation stays (a report, a consumer) changes no assignment; one
// whose allocation changed under the same consumers is offered again, with its new id. (The API
// refuses to change an allocation in place; the store takes whatever it is given.)
TEST_F(NodeAgentApiTest, AnAllocationChangedUnderItsConsumersIsOfferedAgain) {
  RegisterNode("gpu-node-a", "node-a");
  ASSERT_TRUE(
      Call(&v1::NodeAgent::Stub::PublishResources, "node-a", Publish("gpu-node-a", 2)).ok());
  auto stream = Watch("node-a", WatchRequest("gpu-node-a"));
  v1::WatchAssignmentsResponse msg;
  Workload("c1", "p1");
  ASSERT_TRUE(stream->ReadUntil([](const auto& m) { return m.prepare_size() > 0; }, &msg));
  const v1::Assignment a = msg.prepare(0);
  ASSERT_EQ(a.devices_size(), 1);
  const std::string other = a.devices(0).device() == "gpu-0" ? "gpu-1" : "gpu-0";
  auto stored = store_->Get(model::ResourceKey{"resourceclaims.resource.k8s.io", "default", "c1"});
  ASSERT_TRUE(stored.ok()) << stored.status();
  json body = json::parse(stored->body);
  body["status"]["allocation"]["devices"]["results"][0]["device"] = other;
  model::Object moved = *stored;
  moved.body = body.dump();
  ASSERT_TRUE(store_->Update(moved, stored->meta.resource_version).ok());
  ASSERT_TRUE(stream->ReadUntil([](const auto& m) { return m.prepare_size() > 0; }, &msg));
  ASSERT_EQ(msg.prepare(0).devices_size(), 1);
  EXPECT_EQ(msg.prepare(0).devices(0).device(), other);
  EXPECT_NE(msg.prepare(0).allocation_id(), a.allocation_id());
  EXPECT_EQ(msg.prepare(0).consumers(0).name(), "p1");
}

TEST_F(NodeAgentApiTest, AReconnectGetsOnlyTheDifferences) {
  RegisterNode("gpu-node-a", "node-a");
  ASSERT_TRUE(
      Call(&v1::NodeAgent::Stub::PublishResources, "node-a", Publish("gpu-node-a", 2)).ok());
  Workload("c1", "p1");
  v1::WatchAssignmentsResponse msg;
  v1::Assignment a;
  {
    auto first = Watch("node-a", WatchRequest("gpu-node-a"));
    ASSERT_TRUE(first->ReadUntil([](const auto& m) { return m.prepare_size() > 0; }, &msg));
    a = msg.prepare(0);
  }
  // Holding it with the current allocation: nothing to do, only the revision.
  v1::WatchAssignmentsRequest req = WatchRequest("gpu-node-a");
  v1::PreparedRef* held = req.add_prepared();
  *held->mutable_claim() = a.claim();
  held->set_allocation_id(a.allocation_id());
  req.set_resource_version(msg.resource_version());
  {
    auto again = Watch("node-a", req);
    ASSERT_TRUE(again->reader->Read(&msg));
    EXPECT_EQ(msg.prepare_size(), 0);
    EXPECT_EQ(msg.unprepare_size(), 0);
    EXPECT_GT(msg.resource_version(), 0);
    // Idle streams get bookmarks.
    const int64_t rv = msg.resource_version();
    Create("/api/v1/namespaces",
           {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "bump"}}}});
    ASSERT_TRUE(again->ReadUntil([&](const auto& m) { return m.resource_version() > rv; }, &msg));
    EXPECT_EQ(msg.prepare_size(), 0);
  }
  // Held for an older allocation, and a claim that no longer exists: undo both, prepare anew.
  held->set_allocation_id("0123456789abcdef");
  v1::PreparedRef* ghost = req.add_prepared();
  ghost->mutable_claim()->set_namespace_("default");
  ghost->mutable_claim()->set_name("gone");
  ghost->mutable_claim()->set_uid("00000000-0000-4000-8000-000000000000");
  {
    auto third = Watch("node-a", req);
    ASSERT_TRUE(third->reader->Read(&msg));
    ASSERT_EQ(msg.unprepare_size(), 2);
    ASSERT_EQ(msg.prepare_size(), 1);
    EXPECT_EQ(msg.prepare(0).allocation_id(), a.allocation_id());
  }
  // A revision this server has not reached: UNAVAILABLE (retry), never older state.
  req.set_resource_version(router_->revision() + 1000000);
  auto ahead = Watch("node-a", req);
  EXPECT_FALSE(ahead->reader->Read(&msg));
  EXPECT_EQ(ahead->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  // Another node's credential cannot watch this node.
  auto foreign = Watch("node-b", WatchRequest("gpu-node-a"));
  EXPECT_FALSE(foreign->reader->Read(&msg));
  EXPECT_EQ(foreign->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

// A watch for a revision the router has not reached waits for it: the change that brings the
// router there wakes the waiting Open (long before its catch-up timeout).
TEST_F(NodeAgentApiTest, AnOpenWaitingForARevisionWakesWhenItArrives) {
  api::nodeapi::AssignmentRouterOptions patient;
  patient.catch_up_timeout = std::chrono::seconds(20);
  api::nodeapi::AssignmentRouter router(*objects_, *hub_, patient);
  ASSERT_TRUE(router.Start().ok());
  const int64_t next = router.revision() + 1;
  const auto start = std::chrono::steady_clock::now();
  auto opened = std::async(std::launch::async,
                           [&] { return router.Open("gpu-node-a", {kDriver}, {}, next); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // Open is waiting by now
  Create("/api/v1/namespaces", json{{"metadata", {{"name", "wake-up"}}}});
  auto feed = opened.get();
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(feed.ok()) << feed.status();
  EXPECT_GE(router.revision(), next);
  EXPECT_LT(waited, std::chrono::seconds(10));
  router.Stop();
}

TEST_F(NodeAgentApiTest, HealthAndHeartbeats) {
  v1::HeartbeatRequest hb;
  hb.set_node_name("gpu-node-a");
  EXPECT_EQ(Call(&v1::NodeAgent::Stub::Heartbeat, "node-a", hb).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);  // not registered yet
  RegisterNode("gpu-node-a", "node-a");
  EXPECT_TRUE(Call(&v1::NodeAgent::Stub::Heartbeat, "node-a", hb).ok());

  v1::ReportHealthRequest health;
  health.set_node_name("gpu-node-a");
  health.set_driver(kDriver);
  v1::DeviceHealth* h = health.add_devices();
  h->set_pool("gpu-node-a");
  h->set_device("gpu-1");
  h->set_health(v1::HEALTH_UNHEALTHY);
  h->set_reason("XidCriticalError");
  h->set_message("Xid 79: GPU has fallen off the bus");
  v1::ReportHealthResponse resp;
  ASSERT_TRUE(Call(&v1::NodeAgent::Stub::ReportHealth, "node-a", health, &resp).ok());
  EXPECT_EQ(resp.unhealthy(), 1);
  json node = Get("/api/v1/nodes/gpu-node-a");
  json stored = json::parse(
      node["metadata"]["annotations"]["quartermaster.io/device-health"].get<std::string>());
  EXPECT_EQ(stored[kDriver]["gpu-node-a/gpu-1"]["health"], "Unhealthy");
  EXPECT_EQ(stored[kDriver]["gpu-node-a/gpu-1"]["reason"], "XidCriticalError");
  std::string condition;
  for (const auto& c : node["status"]["conditions"]) {
    if (c["type"] == "quartermaster.io/DevicesHealthy") condition = c["status"];
  }
  EXPECT_EQ(condition, "False");

  h->set_health(v1::HEALTH_HEALTHY);
  ASSERT_TRUE(Call(&v1::NodeAgent::Stub::ReportHealth, "node-a", health, &resp).ok());
  node = Get("/api/v1/nodes/gpu-node-a");
  EXPECT_FALSE(node["metadata"]
                   .value("annotations", json::object())
                   .contains("quartermaster.io/device-health"));
  for (const auto& c : node["status"]["conditions"]) {
    if (c["type"] == "quartermaster.io/DevicesHealthy") condition = c["status"];
  }
  EXPECT_EQ(condition, "True");
  h->set_device("");
  EXPECT_EQ(Call(&v1::NodeAgent::Stub::ReportHealth, "node-a", health).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// The Heartbeats stream: answered once, each beat renews the node's lease, a Ready that someone
// else changed is written back, and the stream ends with the status of the first refused beat.
TEST_F(NodeAgentApiTest, HeartbeatStreamKeepsTheNodeReady) {
  using Stream = grpc::ClientReaderWriter<v1::HeartbeatRequest, v1::HeartbeatResponse>;
  struct Open {
    grpc::ClientContext ctx;
    std::unique_ptr<Stream> stream;
  };
  auto open = [&](const std::string& token) {
    auto o = std::make_unique<Open>();
    o->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    o->ctx.AddMetadata("authorization", "Bearer " + token);
    o->stream = stub_->Heartbeats(&o->ctx);
    return o;
  };
  auto beat = [](const std::string& node) {
    v1::HeartbeatRequest hb;
    hb.set_node_name(node);
    return hb;
  };
  auto ended = [](Open& o) {
    v1::HeartbeatResponse ignored;
    while (o.stream->Read(&ignored)) {
    }
    return o.stream->Finish().error_code();
  };
  auto ready = [&] {
    const json node = Get("/api/v1/nodes/gpu-node-a");
    for (const auto& c : node["status"]["conditions"]) {
      if (c["type"] == "Ready") return c["status"].get<std::string>();
    }
    return std::string();
  };

  auto unregistered = open("node-a");
  ASSERT_TRUE(unregistered->stream->Write(beat("gpu-node-a")));
  EXPECT_EQ(ended(*unregistered), grpc::StatusCode::FAILED_PRECONDITION);
  auto foreign = open("node-a");
  foreign->stream->Write(beat("gpu-node-b"));
  EXPECT_EQ(ended(*foreign), grpc::StatusCode::PERMISSION_DENIED);
  auto anonymous = open("nobody");
  anonymous->stream->Write(beat("gpu-node-a"));
  EXPECT_EQ(ended(*anonymous), grpc::StatusCode::PERMISSION_DENIED);

  RegisterNode("gpu-node-a", "node-a");
  auto o = open("node-a");
  ASSERT_TRUE(o->stream->Write(beat("gpu-node-a")));
  v1::HeartbeatResponse resp;
  ASSERT_TRUE(o->stream->Read(&resp));
  EXPECT_EQ(resp.heartbeat_interval_seconds(), 10);
  ASSERT_TRUE(o->stream->Write(beat("gpu-node-a")));
  ASSERT_TRUE(Eventually([&] {
    EXPECT_TRUE(agent_api_->FlushHeartbeats().ok());
    auto leases = store_->NodeLeases();
    return leases.ok() && leases->contains("gpu-node-a");
  }));

  ASSERT_TRUE(Eventually([&] { return ready() == "True"; }));
  // Someone else sets Ready=Unknown: the next beat on the stream writes it back. A beat's Ready
  // write may still be in flight (it is written apart from the lease), so the PUT is a
  // read-modify-write retried on 409, as Kubernetes clients do, and what it wrote is checked in
  // its own response (a beat may turn it back at once, which is what is tested below).
  api::HttpResponse put;
  for (int attempt = 0; attempt < 20; ++attempt) {
    json node = Get("/api/v1/nodes/gpu-node-a");
    for (auto& c : node["status"]["conditions"]) {
      if (c["type"] == "Ready") c["status"] = "Unknown";
    }
    put = Rest("PUT", "/api/v1/nodes/gpu-node-a/status", node);
    if (put.code != 409) break;
  }
  ASSERT_EQ(put.code, 200) << put.body;
  std::string written;
  const json put_body = json::parse(put.body);
  for (const auto& c : put_body["status"]["conditions"]) {
    if (c["type"] == "Ready") written = c["status"].get<std::string>();
  }
  ASSERT_EQ(written, "Unknown") << put.body;
  ASSERT_TRUE(Eventually([&] {
    o->stream->Write(beat("gpu-node-a"));
    return ready() == "True";
  }));

  // A beat for another node ends the stream.
  o->stream->Write(beat("gpu-node-b"));
  EXPECT_EQ(ended(*o), grpc::StatusCode::INVALID_ARGUMENT);
}

// Two replicas on one database: the agent heartbeats to the first only. The second's node
// monitor sees those heartbeats through the node leases and leaves the node alone; once the
// heartbeats stop, it marks the node unreachable.
TEST_F(NodeAgentApiTest, ReplicasSeeEachOthersHeartbeats) {
  api::nodeapi::NodeAgentApiOptions quick;
  quick.node_monitor_grace_period = std::chrono::milliseconds(800);
  api::nodeapi::NodeAgentApi other(*objects_, *hub_, *router_, authorizer_, clock_, nullptr, quick);
  RegisterNode("gpu-node-a", "node-a");
  v1::HeartbeatRequest hb;
  hb.set_node_name("gpu-node-a");
  auto node_state = [&] {
    json node = Get("/api/v1/nodes/gpu-node-a");
    std::string ready;
    for (const auto& c : node["status"]["conditions"]) {
      if (c["type"] == "Ready") ready = c["status"];
    }
    int taints = 0;
    for (const auto& t : node["spec"].value("taints", json::array())) {
      if (t["key"] == api::nodeapi::kUnreachableTaint) ++taints;
    }
    return ready + " " + std::to_string(taints);
  };
  ASSERT_EQ(node_state(), "True 0");
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(Call(&v1::NodeAgent::Stub::Heartbeat, "node-a", hb).ok());
    ASSERT_TRUE(agent_api_->FlushHeartbeats().ok());  // the first replica's monitor pass
    auto changed = other.MonitorNodesOnce();
    ASSERT_TRUE(changed.ok()) << changed.status();
    EXPECT_EQ(*changed, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(node_state(), "True 0");
  // Quiet for longer than the grace period: the second replica marks it.
  std::this_thread::sleep_for(std::chrono::milliseconds(900));
  auto changed = other.MonitorNodesOnce();
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(*changed, 1);
  EXPECT_EQ(node_state(), "Unknown 2");
  // Heartbeats to the first replica, and the second takes the taints off again. (A heartbeat
  // that comes before the first replica's cache shows Ready=Unknown does not write Ready; the
  // next one does.)
  EXPECT_TRUE(Eventually([&] {
    EXPECT_TRUE(Call(&v1::NodeAgent::Stub::Heartbeat, "node-a", hb).ok());
    EXPECT_TRUE(agent_api_->FlushHeartbeats().ok());
    EXPECT_TRUE(other.MonitorNodesOnce().ok());
    return node_state() == "True 0";
  })) << node_state();
  // Deleting the Node drops its lease.
  ASSERT_EQ(Rest("DELETE", "/api/v1/nodes/gpu-node-a").code, 200);
  auto leases = store_->NodeLeases();
  ASSERT_TRUE(leases.ok()) << leases.status();
  EXPECT_FALSE(leases->contains("gpu-node-a"));
}

TEST_F(NodeAgentApiTest, OversizedMessagesAreRefused) {
  v1::PublishResourcesRequest req = Publish("gpu-node-a", 1);
  (*req.mutable_pools(0)->mutable_slices(0)->mutable_devices(0)->mutable_attributes())["big"]
      .set_string_value(std::string(17 * 1024 * 1024, 'x'));
  EXPECT_EQ(Call(&v1::NodeAgent::Stub::PublishResources, "node-a", req).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(Slices("gpu-node-a").size(), 0u);
}

// Server reflection (what grpcurl uses) lists the service. The reflection protocol is spoken
// by hand: a ServerReflectionRequest with list_services set (field 7, empty string).
TEST_F(NodeAgentApiTest, ServerReflectionListsTheService) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto wait = [&cq](intptr_t want) {
    void* tag = nullptr;
    bool ok = false;
    return cq.Next(&tag, &ok) && ok && reinterpret_cast<intptr_t>(tag) == want;
  };
  auto call = generic.PrepareCall(
      &ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(wait(1));
  grpc::Slice request_bytes(std::string("\x3a\x00", 2));
  grpc::ByteBuffer request(&request_bytes, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  ASSERT_TRUE(wait(2));
  call->WritesDone(reinterpret_cast<void*>(3));
  ASSERT_TRUE(wait(3));
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(4));
  ASSERT_TRUE(wait(4));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  EXPECT_NE(bytes.find("qm.agent.v1.NodeAgent"), std::string::npos);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  EXPECT_TRUE(wait(5));
  EXPECT_TRUE(status.ok()) << status.error_message();
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
}

TEST_F(NodeAgentApiTest, ShutdownEndsStreamsWithUnavailable) {
  RegisterNode("gpu-node-a", "node-a");
  auto stream = Watch("node-a", WatchRequest("gpu-node-a"));
  v1::WatchAssignmentsResponse msg;
  ASSERT_TRUE(stream->reader->Read(&msg));
  router_->Stop();
  while (stream->reader->Read(&msg)) {
  }
  grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  // An open heartbeat stream is ended by the shutdown, with UNAVAILABLE.
  grpc::ClientContext beats_ctx;
  beats_ctx.AddMetadata("authorization", "Bearer node-a");
  auto beats = stub_->Heartbeats(&beats_ctx);
  v1::HeartbeatRequest beat;
  beat.set_node_name("gpu-node-a");
  ASSERT_TRUE(beats->Write(beat));
  v1::HeartbeatResponse answer;
  ASSERT_TRUE(beats->Read(&answer));
  server_->Shutdown();
  while (beats->Read(&answer)) {
  }
  EXPECT_EQ(beats->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  v1::HeartbeatRequest hb;
  hb.set_node_name("gpu-node-a");
  EXPECT_EQ(Call(&v1::NodeAgent::Stub::Heartbeat, "node-a", hb).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace qm
