#include "service/object_service.h"

#include <gtest/gtest.h>

#include <atomic>

#include "forwarding_store.h"
#include "service/graceful_deletion.h"
#include "service/watch_hub.h"
#include "store/memory_store.h"

namespace qm::service {
namespace {

class FakeClock : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override { return now; }
  std::chrono::system_clock::time_point now{std::chrono::seconds(1800000000)};
};

class SequentialIds : public IdGenerator {
 public:
  std::string NewUid() override { return "uid-" + std::to_string(++n_); }

 private:
  int n_ = 0;
};

model::Object Obj(const std::string& resource, const std::string& ns, const std::string& name,
                  const std::string& spec = "{}") {
  model::Object o;
  o.resource = resource;
  o.meta.name = name;
  o.meta.namespace_ = ns;
  o.body = R"({"spec":)" + spec + "}";
  o.spec_digest = spec;
  return o;
}

// Removes every finalizer of the object at `key` with an unconditional update.
absl::StatusOr<model::Object> ClearFinalizersOf(ObjectService& service,
                                                const model::ResourceKey& key) {
  return service.Update(
      key,
      [](const model::Object& cur) -> absl::StatusOr<model::Object> {
        model::Object next = cur;
        next.meta.finalizers.clear();
        next.meta.resource_version = 0;
        return next;
      },
      false);
}

class ObjectServiceTest : public ::testing::Test {
 protected:
  ObjectServiceTest() : service_(store_, clock_, ids_) {
    EXPECT_TRUE(service_.Create(Obj("namespaces", "", "team"), false).ok());
  }
  absl::StatusOr<model::Object> ClearFinalizers(const model::ResourceKey& key) {
    return ClearFinalizersOf(service_, key);
  }

  store::MemoryStore store_;
  FakeClock clock_;
  SequentialIds ids_;
  ObjectService service_;
};

TEST_F(ObjectServiceTest, CreateFillsServerOwnedMetadata) {
  model::Object in = Obj("resourceclaims.resource.k8s.io", "team", "c");
  in.meta.uid = "client-chosen";
  in.meta.generation = 42;
  in.meta.deletion_timestamp = clock_.now;
  auto out = service_.Create(in, false);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->meta.uid, "uid-2");
  EXPECT_EQ(out->meta.generation, 1);
  EXPECT_EQ(out->meta.creation_timestamp, clock_.now);
  EXPECT_FALSE(out->meta.deletion_timestamp.has_value());
  EXPECT_GT(out->meta.resource_version, 0);
}

TEST_F(ObjectServiceTest, NamespacedObjectsNeedTheirNamespace) {
  auto out = service_.Create(Obj("resourceclaims.resource.k8s.io", "nowhere", "c"), false);
  EXPECT_TRUE(absl::IsNotFound(out.status()));
  EXPECT_EQ(out.status().message(), "namespaces \"nowhere\" not found");
  // Cluster-scoped objects do not.
  EXPECT_TRUE(service_.Create(Obj("deviceclasses.resource.k8s.io", "", "gpu"), false).ok());
}

TEST_F(ObjectServiceTest, GenerateNameGetsASuffix) {
  model::Object in = Obj("deviceclasses.resource.k8s.io", "", "");
  in.meta.generate_name = "gpu-";
  auto out = service_.Create(in, false);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->meta.name.rfind("gpu-", 0), 0u);
  EXPECT_EQ(out->meta.name.size(), 9u);
}

TEST_F(ObjectServiceTest, DryRunWritesNothing) {
  auto out = service_.Create(Obj("deviceclasses.resource.k8s.io", "", "gpu"), true);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(absl::IsNotFound(service_.Get(out->Key()).status()));
}

TEST_F(ObjectServiceTest, GenerationBumpsOnlyOnSpecChange) {
  auto c = service_.Create(Obj("deviceclasses.resource.k8s.io", "", "gpu", "1"), false);
  ASSERT_TRUE(c.ok());
  auto labelled = service_.Update(
      c->Key(),
      [](const model::Object& cur) -> absl::StatusOr<model::Object> {
        model::Object next = cur;
        next.meta.labels["x"] = "y";
        next.meta.resource_version = 0;
        return next;
      },
      false);
  ASSERT_TRUE(labelled.ok());
  EXPECT_EQ(labelled->meta.generation, 1);
  auto changed = service_.Update(
      c->Key(),
      [](const model::Object& cur) -> absl::StatusOr<model::Object> {
        model::Object next = cur;
        next.spec_digest = "2";
        next.meta.resource_version = 0;
        return next;
      },
      false);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(changed->meta.generation, 2);
  EXPECT_EQ(changed->meta.uid, c->meta.uid);
}

TEST_F(ObjectServiceTest, AStoredSpecTextDigestEqualsItsHashOnUpdate) {
  // A row written before spec digests were hashed holds the spec's canonical text: updating it
  // with the same spec (now hashed) keeps the generation; a different spec bumps it.
  auto c = service_.Create(Obj("deviceclasses.resource.k8s.io", "", "legacy", R"({"a":1})"), false);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->meta.generation, 1);
  auto same = service_.Update(
      c->Key(),
      [](const model::Object& cur) -> absl::StatusOr<model::Object> {
        model::Object next = cur;
        next.spec_digest = model::SpecDigest(R"({"a":1})");
        next.meta.resource_version = 0;
        return next;
      },
      false);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->meta.generation, 1);
  auto other = service_.Update(
      c->Key(),
      [](const model::Object& cur) -> absl::StatusOr<model::Object> {
        model::Object next = cur;
        next.spec_digest = model::SpecDigest(R"({"a":2})");
        next.meta.resource_version = 0;
        return next;
      },
      false);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->meta.generation, 2);
}

TEST_F(ObjectServiceTest, StaleResourceVersionIsConflict) {
  auto c = service_.Create(Obj("deviceclasses.resource.k8s.io", "", "gpu"), false);
  auto stale = c->meta.resource_version;
  ASSERT_TRUE(service_
                  .Update(
                      c->Key(),
                      [](const model::Object& cur) -> absl::StatusOr<model::Object> { return cur; },
                      false)
                  .ok());
  auto out = service_.Update(
      c->Key(),
      [stale](const model::Object& cur) -> absl::StatusOr<model::Object> {
        model::Object next = cur;
        next.meta.resource_version = stale;
        return next;
      },
      false);
  EXPECT_TRUE(absl::IsAborted(out.status())) << out.status();
  EXPECT_NE(out.status().message().find("the object has been modified"), absl::string_view::npos);
}

TEST_F(ObjectServiceTest, FinalizersDelayDeletionUntilRemoved) {
  model::Object in = Obj("deviceclasses.resource.k8s.io", "", "held");
  in.meta.finalizers = {"example.com/hold"};
  auto c = service_.Create(in, false);
  ASSERT_TRUE(c.ok());
  auto del = service_.Delete(c->Key(), DeleteOptions{});
  ASSERT_TRUE(del.ok());
  EXPECT_FALSE(del->deleted);
  ASSERT_TRUE(del->object.meta.deletion_timestamp.has_value());
  EXPECT_EQ(*del->object.meta.deletion_timestamp, clock_.now);
  // New finalizers may not be added while deleting.
  auto add = service_.Update(
      c->Key(),
      [](const model::Object& cur) -> absl::StatusOr<model::Object> {
        model::Object next = cur;
        next.meta.finalizers.push_back("example.com/other");
        next.meta.resource_version = 0;
        return next;
      },
      false);
  EXPECT_TRUE(absl::IsInvalidArgument(add.status())) << add.status();
  auto cleared = ClearFinalizers(c->Key());
  ASSERT_TRUE(cleared.ok()) << cleared.status();
  EXPECT_TRUE(absl::IsNotFound(service_.Get(c->Key()).status()));
}

TEST_F(ObjectServiceTest, PodsWithPreparedDevicesAreDeletedGracefully) {
  // A pod whose devices an agent prepared: deletionTimestamp lies the pod's grace period ahead.
  model::Object in = Obj("pods", "team", "p", R"({"terminationGracePeriodSeconds":7})");
  in.meta.finalizers = {kDevicesPreparedFinalizer};
  auto c = service_.Create(in, false);
  ASSERT_TRUE(c.ok()) << c.status();
  auto del = service_.Delete(c->Key(), DeleteOptions{});
  ASSERT_TRUE(del.ok()) << del.status();
  EXPECT_FALSE(del->deleted);
  ASSERT_TRUE(del->object.meta.deletion_timestamp.has_value());
  EXPECT_EQ(*del->object.meta.deletion_timestamp, clock_.now + std::chrono::seconds(7));
  EXPECT_EQ(del->object.meta.deletion_grace_period_seconds, 7);
  // A later delete with a longer grace period changes nothing; a shorter one moves it closer.
  clock_.now += std::chrono::seconds(1);
  DeleteOptions longer;
  longer.grace_period_seconds = 60;
  del = service_.Delete(c->Key(), longer);
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(*del->object.meta.deletion_timestamp, clock_.now + std::chrono::seconds(6));
  DeleteOptions shorter;
  shorter.grace_period_seconds = 2;
  del = service_.Delete(c->Key(), shorter);
  ASSERT_TRUE(del.ok());
  EXPECT_FALSE(del->deleted);
  EXPECT_EQ(*del->object.meta.deletion_timestamp, clock_.now + std::chrono::seconds(2));
  EXPECT_EQ(del->object.meta.deletion_grace_period_seconds, 2);
  // Updates keep the mark.
  auto updated = service_.Update(
      c->Key(),
      [](const model::Object& cur) -> absl::StatusOr<model::Object> {
        model::Object next = cur;
        next.meta.labels["x"] = "y";
        next.meta.deletion_grace_period_seconds.reset();
        return next;
      },
      false);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->meta.deletion_grace_period_seconds, 2);
  // The finalizer's removal (the controller, once the agent unprepared) deletes it.
  ASSERT_TRUE(ClearFinalizers(c->Key()).ok());
  EXPECT_TRUE(absl::IsNotFound(service_.Get(c->Key()).status()));
}

TEST_F(ObjectServiceTest, PodsDefaultToThirtySecondsOfGrace) {
  model::Object in = Obj("pods", "team", "p");
  in.meta.finalizers = {kDevicesPreparedFinalizer};
  auto c = service_.Create(in, false);
  ASSERT_TRUE(c.ok());
  auto del = service_.Delete(c->Key(), DeleteOptions{});
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(*del->object.meta.deletion_timestamp, clock_.now + std::chrono::seconds(30));
  EXPECT_EQ(del->object.meta.deletion_grace_period_seconds, 30);
}

TEST_F(ObjectServiceTest, AZeroGracePeriodDoesNotWaitForTheAgent) {
  // Forced at once: only the devices-prepared finalizer held it.
  model::Object in = Obj("pods", "team", "forced");
  in.meta.finalizers = {kDevicesPreparedFinalizer};
  auto c = service_.Create(in, false);
  ASSERT_TRUE(c.ok());
  DeleteOptions force;
  force.grace_period_seconds = 0;
  auto del = service_.Delete(c->Key(), force);
  ASSERT_TRUE(del.ok()) << del.status();
  EXPECT_TRUE(del->deleted);
  EXPECT_TRUE(absl::IsNotFound(service_.Get(c->Key()).status()));

  // Forcing a pod that is already terminating finishes it.
  in.meta.name = "terminating";
  c = service_.Create(in, false);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(service_.Delete(c->Key(), DeleteOptions{}).ok());
  ASSERT_TRUE(service_.Get(c->Key()).ok());
  del = service_.Delete(c->Key(), force);
  ASSERT_TRUE(del.ok());
  EXPECT_TRUE(del->deleted);
  EXPECT_TRUE(absl::IsNotFound(service_.Get(c->Key()).status()));

  // Other finalizers still hold it, as in Kubernetes; ours is gone.
  in.meta.name = "held";
  in.meta.finalizers = {"example.com/hold", kDevicesPreparedFinalizer};
  c = service_.Create(in, false);
  ASSERT_TRUE(c.ok());
  del = service_.Delete(c->Key(), force);
  ASSERT_TRUE(del.ok());
  EXPECT_FALSE(del->deleted);
  EXPECT_EQ(del->object.meta.finalizers, std::vector<std::string>{"example.com/hold"});
  EXPECT_EQ(*del->object.meta.deletion_timestamp, clock_.now);
  EXPECT_EQ(del->object.meta.deletion_grace_period_seconds, 0);
}

TEST_F(ObjectServiceTest, DeletePreconditionsAreChecked) {
  auto c = service_.Create(Obj("deviceclasses.resource.k8s.io", "", "gpu"), false);
  DeleteOptions wrong_uid;
  wrong_uid.precondition_uid = "someone-else";
  EXPECT_TRUE(absl::IsFailedPrecondition(service_.Delete(c->Key(), wrong_uid).status()));
  DeleteOptions right;
  right.precondition_uid = c->meta.uid;
  auto d = service_.Delete(c->Key(), right);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->deleted);
}

TEST_F(ObjectServiceTest, DeletingANamespaceDeletesItsContents) {
  ASSERT_TRUE(service_.Create(Obj("resourceclaims.resource.k8s.io", "team", "a"), false).ok());
  ASSERT_TRUE(
      service_.Create(Obj("resourceclaimtemplates.resource.k8s.io", "team", "t"), false).ok());
  ASSERT_TRUE(service_.Create(Obj("namespaces", "", "other"), false).ok());
  ASSERT_TRUE(service_.Create(Obj("resourceclaims.resource.k8s.io", "other", "b"), false).ok());
  auto d = service_.Delete(model::ResourceKey{"namespaces", "", "team"}, DeleteOptions{});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(absl::IsNotFound(
      service_.Get(model::ResourceKey{"resourceclaims.resource.k8s.io", "team", "a"}).status()));
  EXPECT_TRUE(absl::IsNotFound(
      service_.Get(model::ResourceKey{"resourceclaimtemplates.resource.k8s.io", "team", "t"})
          .status()));
  EXPECT_TRUE(
      service_.Get(model::ResourceKey{"resourceclaims.resource.k8s.io", "other", "b"}).ok());
}

TEST_F(ObjectServiceTest, ListAppliesSelectorsAndCountsLimitOnMatches) {
  for (int i = 0; i < 10; ++i) {
    model::Object o = Obj("deviceclasses.resource.k8s.io", "", "c" + std::to_string(i));
    o.meta.labels["parity"] = i % 2 ? "odd" : "even";
    ASSERT_TRUE(service_.Create(o, false).ok());
  }
  ListRequest req;
  req.store.resource = "deviceclasses.resource.k8s.io";
  req.labels = *model::LabelSelector::Parse("parity=odd");
  req.store.limit = 3;
  auto page = service_.List(req);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->items.size(), 3u);
  EXPECT_TRUE(page->more);
  for (const auto& o : page->items) EXPECT_EQ(o->meta.labels.at("parity"), "odd");
  req.store.after_name = page->items.back()->meta.name;
  auto rest = service_.List(req);
  ASSERT_EQ(rest->items.size(), 2u);
  EXPECT_FALSE(rest->more);
}

}  // namespace
}  // namespace qm::service

namespace qm::service {
namespace {

TEST_F(ObjectServiceTest, NamespaceWaitsForContentHeldByFinalizers) {
  model::Object held = Obj("resourceclaims.resource.k8s.io", "team", "held");
  held.meta.finalizers = {"example.com/hold"};
  ASSERT_TRUE(service_.Create(held, false).ok());
  auto d = service_.Delete(model::ResourceKey{"namespaces", "", "team"}, DeleteOptions{});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->deleted);
  EXPECT_TRUE(d->object.meta.deletion_timestamp.has_value());
  // No new content while it terminates.
  auto late = service_.Create(Obj("resourceclaims.resource.k8s.io", "team", "late"), false);
  EXPECT_TRUE(absl::IsPermissionDenied(late.status())) << late.status();
  // Releasing the finalizer deletes the claim and then the namespace.
  auto cleared = ClearFinalizers(held.Key());
  ASSERT_TRUE(cleared.ok()) << cleared.status();
  EXPECT_TRUE(cleared->meta.finalizers.empty());
  EXPECT_TRUE(absl::IsNotFound(service_.Get(held.Key()).status()));
  EXPECT_TRUE(
      absl::IsNotFound(service_.Get(model::ResourceKey{"namespaces", "", "team"}).status()));
}

// A claim body with one allocated device (or none).
std::string ClaimBody(const std::string& device) {
  std::string body =
      R"({"spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"gpu"}}]}})";
  if (device.empty()) return body + "}";
  return body +
         R"(,"status":{"allocation":{"devices":{"results":[{"request":"r",)"
         R"("driver":"gpu.example.com","pool":"node-a","device":")" +
         device + R"("}]}}}})";
}

TEST_F(ObjectServiceTest, AllocationsWrittenByClientsKeepTheDeviceLedger) {
  const std::string claims = "resourceclaims.resource.k8s.io";
  auto c1 = service_.Create(Obj(claims, "team", "c1"), false);
  auto c2 = service_.Create(Obj(claims, "team", "c2"), false);
  ASSERT_TRUE(c1.ok() && c2.ok());
  auto set_allocation = [&](const model::Object& claim, const std::string& device) {
    return service_.Update(
        claim.Key(),
        [&](const model::Object& cur) -> absl::StatusOr<model::Object> {
          model::Object next = cur;
          next.body = ClaimBody(device);
          next.meta.resource_version = 0;
          return next;
        },
        false);
  };
  // An allocation written through the API takes the device in the ledger...
  ASSERT_TRUE(set_allocation(*c1, "gpu-0").ok());
  auto ledger = store_.ListDeviceClaims();
  ASSERT_EQ(ledger->size(), 1u);
  EXPECT_EQ((*ledger)[0].device, "gpu-0");
  EXPECT_EQ((*ledger)[0].claim_uid, c1->meta.uid);
  // ...so a second claim cannot take the same device, and nothing of that write lands.
  auto taken = set_allocation(*c2, "gpu-0");
  EXPECT_TRUE(absl::IsAborted(taken.status())) << taken.status();
  EXPECT_EQ(store_.Get(c2->Key())->body.find("allocation"), std::string::npos);
  // Moving and removing allocations moves and frees the rows.
  ASSERT_TRUE(set_allocation(*c1, "gpu-1").ok());
  ASSERT_TRUE(set_allocation(*c2, "gpu-0").ok());
  EXPECT_EQ(store_.ListDeviceClaims()->size(), 2u);
  ASSERT_TRUE(set_allocation(*c1, "").ok());
  ledger = store_.ListDeviceClaims();
  ASSERT_EQ(ledger->size(), 1u);
  EXPECT_EQ((*ledger)[0].claim_uid, c2->meta.uid);
  // Deleting an allocated claim releases its device.
  ASSERT_TRUE(service_.Delete(c2->Key(), DeleteOptions{}).ok());
  EXPECT_TRUE(store_.ListDeviceClaims()->empty());
}

// A claim whose stored allocation does not decode (written straight into the database, say)
// keeps its devices while the allocation stays, and frees them once it is removed; a write
// that would store such an allocation over a readable one is refused.
TEST_F(ObjectServiceTest, AnUndecodableAllocationHoldsItsDevicesUntilRemoved) {
  const std::string claims = "resourceclaims.resource.k8s.io";
  auto c1 = service_.Create(Obj(claims, "team", "c1"), false);
  ASSERT_TRUE(c1.ok());
  auto write = [&](const std::string& body) {
    return service_.Update(
        c1->Key(),
        [&](const model::Object& cur) -> absl::StatusOr<model::Object> {
          model::Object next = cur;
          next.body = body;
          next.meta.resource_version = 0;
          return next;
        },
        false);
  };
  ASSERT_TRUE(write(ClaimBody("gpu-0")).ok());
  ASSERT_EQ(store_.ListDeviceClaims()->size(), 1u);
  const std::string broken =
      R"({"spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"gpu"}}]}},)"
      R"("status":{"allocation":{"devices":{"results":[{"request":"r","driver":7}]}}}})";
  EXPECT_TRUE(absl::IsInvalidArgument(write(broken).status()));
  EXPECT_EQ(store_.ListDeviceClaims()->size(), 1u);
  // Straight into the store, bypassing the service: the ledger still holds gpu-0.
  model::Object stored = *store_.Get(c1->Key());
  stored.body = broken;
  ASSERT_TRUE(store_.Update(stored, stored.meta.resource_version).ok());
  // A label changes: the allocation stays as it is, and so does the ledger.
  auto labelled = service_.Update(
      c1->Key(),
      [&](const model::Object& cur) -> absl::StatusOr<model::Object> {
        model::Object next = cur;
        next.meta.labels["team"] = "a";
        next.meta.resource_version = 0;
        return next;
      },
      false);
  ASSERT_TRUE(labelled.ok()) << labelled.status();
  ASSERT_EQ(store_.ListDeviceClaims()->size(), 1u);
  EXPECT_EQ((*store_.ListDeviceClaims())[0].device, "gpu-0");
  // The allocation is removed: the device is free again.
  ASSERT_TRUE(write(ClaimBody("")).ok());
  EXPECT_TRUE(store_.ListDeviceClaims()->empty());
}

// A node's slice: a consumable GPU (80Gi of memory) and two MIG slices of another GPU whose
// memory (80Gi) is a shared counter.
model::Object Slice() {
  model::Object o = Obj("resourceslices.resource.k8s.io", "", "node-a");
  o.body = R"({"spec":{"driver":"gpu.example.com","nodeName":"node-a",
      "pool":{"name":"node-a","generation":1,"resourceSliceCount":1},
      "sharedCounters":[{"name":"gpu-1","counters":{"memory":{"value":"80Gi"}}}],
      "devices":[{"name":"gpu-0","allowMultipleAllocations":true,
                  "capacity":{"memory":{"value":"80Gi"}}},
                 {"name":"gpu-1","consumesCounters":[{"counterSet":"gpu-1",
                     "counters":{"memory":{"value":"80Gi"}}}]},
                 {"name":"gpu-1-mig-0","consumesCounters":[{"counterSet":"gpu-1",
                     "counters":{"memory":{"value":"40Gi"}}}]}]}})";
  o.fields = {{"spec.driver", "gpu.example.com"}, {"spec.pool.name", "node-a"}};
  return o;
}

// A claim body allocated a share of gpu-0 taking `memory`, or the whole device `device`.
std::string AllocatedBody(const std::string& device, const std::string& memory = "") {
  std::string result =
      R"({"request":"r","driver":"gpu.example.com","pool":"node-a","device":")" + device + R"(")";
  if (!memory.empty()) {
    result += R"(,"shareID":"00000000-0000-4000-8000-00000000000)" + memory.substr(0, 1) +
              R"(","consumedCapacity":{"memory":")" + memory + R"("})";
  }
  result += "}";
  return R"({"spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"gpu"}}]}},)"
         R"("status":{"allocation":{"devices":{"results":[)" +
         result + "]}}}}";
}

TEST_F(ObjectServiceTest, AllocationsWrittenByClientsStayWithinCapacityAndCounters) {
  ASSERT_TRUE(service_.Create(Slice(), false).ok());
  const std::string claims = "resourceclaims.resource.k8s.io";
  auto allocate = [&](const std::string& name, const std::string& body) {
    auto created = service_.Create(Obj(claims, "team", name), false);
    EXPECT_TRUE(created.ok()) << created.status();
    return service_.Update(
        created->Key(),
        [&](const model::Object& cur) -> absl::StatusOr<model::Object> {
          model::Object next = cur;
          next.body = body;
          return next;
        },
        false);
  };
  EXPECT_TRUE(allocate("a", AllocatedBody("gpu-0", "60Gi")).ok());
  auto over = allocate("b", AllocatedBody("gpu-0", "30Gi"));
  EXPECT_TRUE(absl::IsAborted(over.status())) << over.status();
  EXPECT_TRUE(allocate("c", AllocatedBody("gpu-0", "20Gi")).ok());
  // The MIG slice and its whole GPU draw on one counter.
  EXPECT_TRUE(allocate("d", AllocatedBody("gpu-1-mig-0")).ok());
  over = allocate("e", AllocatedBody("gpu-1"));
  EXPECT_TRUE(absl::IsAborted(over.status())) << over.status();
  EXPECT_EQ(store_.ListDeviceClaims()->size(), 3u);
  // Deleting the slice's holder gives the counter back.
  ASSERT_TRUE(service_.Delete(model::ResourceKey{claims, "team", "d"}, DeleteOptions{}).ok());
  EXPECT_TRUE(allocate("f", AllocatedBody("gpu-1")).ok());
}

model::Object GpuClaim(const std::string& name) {
  return Obj("resourceclaims.resource.k8s.io", "team", name,
             R"({"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"gpu"}}]}})");
}

model::Object GpuQuota(const std::string& hard) {
  return Obj("resourcequotas", "team", "gpus",
             R"({"hard":{"gpu.deviceclass.resource.k8s.io/devices":")" + hard + R"("}})");
}

TEST_F(ObjectServiceTest, CreatesPassResourceQuotaAdmission) {
  ASSERT_TRUE(service_.Create(GpuQuota("2"), false).ok());
  ASSERT_TRUE(service_.Create(GpuClaim("a"), false).ok());
  ASSERT_TRUE(service_.Create(GpuClaim("b"), false).ok());
  auto refused = service_.Create(GpuClaim("c"), false);
  EXPECT_TRUE(absl::IsPermissionDenied(refused.status())) << refused.status();
  EXPECT_EQ(refused.status().message(),
            "resourceclaims.resource.k8s.io \"c\" is forbidden: exceeded quota: gpus, requested: "
            "gpu.deviceclass.resource.k8s.io/devices=1, used: "
            "gpu.deviceclass.resource.k8s.io/devices=2, limited: "
            "gpu.deviceclass.resource.k8s.io/devices=2");
  EXPECT_TRUE(absl::IsPermissionDenied(service_.Create(GpuClaim("c"), true).status()));
  // Objects the quota does not count pass; a deleted claim gives its device back.
  EXPECT_TRUE(service_.Create(Obj("pods", "team", "p"), false).ok());
  ASSERT_TRUE(service_.Delete(GpuClaim("a").Key(), DeleteOptions{}).ok());
  EXPECT_TRUE(service_.Create(GpuClaim("c"), true).ok());
  EXPECT_TRUE(service_.Create(GpuClaim("c"), false).ok());
}

// A store whose quota state cannot be read: the quotas, or (`usage_fails`) the usage.
class QuotaBlindStore final : public fakes::ForwardingStore {
 public:
  absl::StatusOr<store::ListResult> List(const store::ListOptions& o) override {
    if (o.resource == "resourcequotas" && !usage_fails) {
      return absl::UnavailableError("database is away");
    }
    return ForwardingStore::List(o);
  }
  absl::StatusOr<std::map<std::string, int64_t>> QuotaUsed(const std::string&) override {
    return absl::UnavailableError("database is away");
  }
  bool usage_fails = false;
};

TEST(ObjectServiceQuotaTest, AdmissionFailsClosedWhenQuotaStateCannotBeRead) {
  QuotaBlindStore store;
  FakeClock clock;
  SequentialIds ids;
  ObjectService service(store, clock, ids);
  ASSERT_TRUE(service.Create(Obj("namespaces", "", "team"), false).ok());
  auto created = service.Create(GpuClaim("a"), false);
  EXPECT_TRUE(absl::IsUnavailable(created.status())) << created.status();
  EXPECT_TRUE(absl::IsUnavailable(service.Create(GpuClaim("a"), true).status()));
  EXPECT_TRUE(absl::IsNotFound(store.Get(GpuClaim("a").Key()).status()));
  // What no quota counts is not held up.
  EXPECT_TRUE(service.Create(Obj("deviceclasses.resource.k8s.io", "", "gpu"), false).ok());

  // The quotas read, the usage not: a create the store's check refuses is not reported as
  // anything but the failure to read, and a dry run cannot decide.
  store.usage_fails = true;
  ASSERT_TRUE(service.Create(GpuQuota("0"), false).ok());
  created = service.Create(GpuClaim("a"), false);
  EXPECT_TRUE(absl::IsUnavailable(created.status())) << created.status();
  EXPECT_TRUE(absl::IsUnavailable(service.Create(GpuClaim("a"), true).status()));
  EXPECT_TRUE(absl::IsNotFound(store.Get(GpuClaim("a").Key()).status()));
}

// A store whose change log the hub stops reading while `frozen`: its cache then lags.
class FreezableStore : public fakes::ForwardingStore {
 public:
  absl::StatusOr<std::vector<model::WatchEvent>> ChangesSince(int64_t rv, int64_t limit) override {
    if (frozen.load()) return std::vector<model::WatchEvent>{};
    return ForwardingStore::ChangesSince(rv, limit);
  }
  absl::StatusOr<model::Object> Get(const model::ResourceKey& key) override {
    ++gets;
    return ForwardingStore::Get(key);
  }
  std::atomic<bool> frozen{false};
  std::atomic<int64_t> gets{0};  // reads of single objects
};

// An object service over a store whose cache can be made to lag (FreezableStore).
class ObjectServiceCacheTest : public ::testing::Test {
 protected:
  ObjectServiceCacheTest() { hub.Start(); }

  FreezableStore store;
  FakeClock clock;
  SequentialIds ids;
  WatchHub hub{store, WatchHubOptions{}};
  ObjectService service{store, clock, ids, &hub};
};

// After a delete, whether its namespace is to be finished is read from the cache once that has
// applied the delete (no read of the store); a cache that lags still finishes it, from the
// store's copy.
TEST_F(ObjectServiceCacheTest, DeletesFinishTheirNamespaceWhetherTheCacheKeepsUpOrNot) {
  const std::string claims = "resourceclaims.resource.k8s.io";
  const model::ResourceKey team{"namespaces", "", "team"};
  ASSERT_TRUE(service.Create(Obj("namespaces", "", "team"), false).ok());
  auto held = [&](const std::string& name) {
    model::Object o = Obj(claims, "team", name);
    o.meta.finalizers = {"example.com/hold"};
    auto created = service.Create(o, false);
    EXPECT_TRUE(created.ok()) << created.status();
    return o.Key();
  };
  auto release = [&](const model::ResourceKey& key) {
    auto cleared = ClearFinalizersOf(service, key);
    EXPECT_TRUE(cleared.ok()) << cleared.status();
  };
  ListRequest namespaces;
  namespaces.store.resource = "namespaces";
  // Once the cache shows every write so far (lookups that miss it read the store).
  auto caught_up = [&] { return hub.List(namespaces, store.LastCommittedRevision()).ok(); };
  // A namespace that is not being deleted: the cache says so, the store is not asked.
  ASSERT_TRUE(service.Create(Obj(claims, "team", "plain"), false).ok());
  ASSERT_TRUE(caught_up());
  const int64_t gets = store.gets.load();
  auto plain = service.Delete(model::ResourceKey{claims, "team", "plain"}, DeleteOptions{});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(store.gets.load(), gets);

  // Marked for deletion, with two claims held by a finalizer: releasing the first leaves it;
  // releasing the second finishes it, the cache showing the mark.
  const model::ResourceKey first = held("first");
  const model::ResourceKey second = held("second");
  auto marked = service.Delete(team, DeleteOptions{});
  ASSERT_TRUE(marked.ok()) << marked.status();
  EXPECT_FALSE(marked->deleted);
  release(first);
  ASSERT_TRUE(store.Get(team).ok());
  release(second);
  EXPECT_TRUE(absl::IsNotFound(store.Get(team).status()));

  // The same with a cache that never sees the namespace marked: the store's copy decides.
  ASSERT_TRUE(service.Create(Obj("namespaces", "", "team"), false).ok());
  ASSERT_TRUE(caught_up());
  const model::ResourceKey last = held("last");
  ASSERT_TRUE(caught_up());
  store.frozen = true;
  marked = service.Delete(team, DeleteOptions{});
  ASSERT_TRUE(marked.ok()) << marked.status();
  EXPECT_FALSE(marked->deleted);
  ASSERT_FALSE(hub.Find(team)->meta.deletion_timestamp.has_value());
  release(last);
  EXPECT_TRUE(absl::IsNotFound(store.Get(team).status()));
  hub.Stop();
}

// Delete takes its first copy of the object from the cache. Here the cache stops following the
// store before writes it never sees; each delete still answers from the store's copy: a stale
// version costs a retry, and answers that write nothing are not decided on the cached copy.
TEST_F(ObjectServiceCacheTest, DeleteAnswersFromTheStoresCopyWhenTheCacheIsStale) {
  const std::string claims = "resourceclaims.resource.k8s.io";
  ASSERT_TRUE(service.Create(Obj("namespaces", "", "team"), false).ok());
  auto a = service.Create(Obj(claims, "team", "a"), false);
  model::Object kept = Obj(claims, "team", "b");
  kept.meta.finalizers = {"example.com/keep"};
  auto b = service.Create(kept, false);
  auto c = service.Create(Obj(claims, "team", "c"), false);
  auto d = service.Create(Obj(claims, "team", "d"), false);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  ListRequest all;
  all.store.resource = claims;
  ASSERT_TRUE(hub.List(all, store.LastCommittedRevision()).ok());  // the cache shows all four
  store.frozen = true;

  // Writes the cache does not see: a changes, b is marked for deletion, c is deleted.
  model::Object a2 = *a;
  a2.body = R"({"spec":{"changed":true}})";
  auto a_now = store.Update(a2, a->meta.resource_version);
  ASSERT_TRUE(a_now.ok());
  model::Object b2 = *b;
  ASSERT_TRUE(MarkForDeletion(b2.meta, clock.now, 30));
  auto b_now = store.Update(b2, b->meta.resource_version);
  ASSERT_TRUE(b_now.ok());
  ASSERT_TRUE(store.Delete(c->Key(), c->meta.resource_version).ok());
  ASSERT_EQ(hub.Find(a->Key())->meta.resource_version, a->meta.resource_version);
  ASSERT_NE(hub.Find(c->Key()), nullptr);

  // GetForWrite: the cache's (stale) copy while it has one, the store's on a miss.
  bool from_cache = false;
  auto a_cached = service.GetForWrite(a->Key(), &from_cache);
  ASSERT_TRUE(a_cached.ok());
  EXPECT_TRUE(from_cache);
  EXPECT_EQ(a_cached->meta.resource_version, a->meta.resource_version);
  EXPECT_TRUE(absl::IsNotFound(
      service.GetForWrite(model::ResourceKey{claims, "team", "never"}, &from_cache).status()));
  EXPECT_FALSE(from_cache);

  // a: a precondition on the store's version holds, and the delete goes through.
  DeleteOptions on_version;
  on_version.precondition_resource_version = a_now->meta.resource_version;
  auto deleted_a = service.Delete(a->Key(), on_version);
  ASSERT_TRUE(deleted_a.ok()) << deleted_a.status();
  EXPECT_TRUE(deleted_a->deleted);
  EXPECT_TRUE(absl::IsNotFound(store.Get(a->Key()).status()));
  // b: already being deleted in the store, sooner than a grace period of an hour would make it,
  // so nothing changes.
  clock.now += std::chrono::seconds(5);
  DeleteOptions in_an_hour;
  in_an_hour.grace_period_seconds = 3600;
  auto deleted_b = service.Delete(b->Key(), in_an_hour);
  ASSERT_TRUE(deleted_b.ok()) << deleted_b.status();
  EXPECT_FALSE(deleted_b->deleted);
  EXPECT_EQ(deleted_b->object.meta.resource_version, b_now->meta.resource_version);
  EXPECT_EQ(store.Get(b->Key())->meta.resource_version, b_now->meta.resource_version);
  // c: gone from the store, though the cache still has it.
  EXPECT_TRUE(absl::IsNotFound(service.Delete(c->Key(), {}).status()));
  // d: a precondition the cached copy meets but the store's copy would too: deleted.
  DeleteOptions on_uid;
  on_uid.precondition_uid = d->meta.uid;
  auto deleted_d = service.Delete(d->Key(), on_uid);
  ASSERT_TRUE(deleted_d.ok()) << deleted_d.status();
  EXPECT_TRUE(deleted_d->deleted);
  // A precondition that fails is reported against the store's copy.
  DeleteOptions stale;
  stale.precondition_resource_version = b->meta.resource_version;  // the cached copy's version
  auto refused = service.Delete(b->Key(), stale);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find(std::to_string(b_now->meta.resource_version)),
            std::string::npos)
      << refused.status();
  hub.Stop();
}

}  // namespace
}  // namespace qm::service
