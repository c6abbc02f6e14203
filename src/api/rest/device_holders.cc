#include "api/rest/device_holders.h"

#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/rest/status.h"
#include "common/clock.h"
#include "common/status.h"
#include "model/field_error.h"

namespace qm::api {

using nlohmann::json;

namespace {

constexpr char kClaims[] = "resourceclaims.resource.k8s.io";
constexpr size_t kMaxPools = 1000;

// One device result of a claim's allocation.
struct Hold {
  std::string driver, pool, device, request, share_id;
  json consumed;  // consumedCapacity, or null
  bool admin_access = false;
};

// What the index keeps of an allocated claim.
struct ClaimHolds {
  std::string namespace_, name, uid, created;
  std::string node;  // the one node the allocation's node selector names, if it names one
  json consumers = json::array();  // status.reservedFor
  std::vector<Hold> holds;
};

std::string PoolKey(const std::string& driver, const std::string& pool) {
  return absl::StrCat(driver, "/", pool);
}

std::string Str(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The claim's holds; null when it holds no device (not allocated).
std::shared_ptr<const ClaimHolds> HoldsOf(const model::Object& claim) {
  // Most changes of an unallocated claim are skipped without parsing it.
  if (claim.body.find("\"allocation\"") == std::string::npos) return nullptr;
  const json body = json::parse(claim.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object()) return nullptr;
  const json status = body.value("status", json::object());
  if (!status.is_object()) return nullptr;
  const json allocation = status.value("allocation", json());
  if (!allocation.is_object()) return nullptr;
  const json devices = allocation.value("devices", json::object());
  const json results = devices.is_object() ? devices.value("results", json()) : json();
  if (!results.is_array() || results.empty()) return nullptr;
  auto out = std::make_shared<ClaimHolds>();
  out->namespace_ = claim.meta.namespace_;
  out->name = claim.meta.name;
  out->uid = claim.meta.uid;
  if (claim.meta.creation_timestamp.time_since_epoch().count() != 0) {
    out->created = FormatRfc3339(claim.meta.creation_timestamp);
  }
  // A node-local allocation's node selector names its node (matchFields metadata.name).
  const json selector = allocation.value("nodeSelector", json());
  const json terms = selector.is_object() ? selector.value("nodeSelectorTerms", json()) : json();
  if (terms.is_array()) {
    for (const json& t : terms) {
      const json fields = t.is_object() ? t.value("matchFields", json()) : json();
      if (!fields.is_array()) continue;
      for (const json& f : fields) {
        const json values = f.is_object() ? f.value("values", json()) : json();
        if (Str(f, "key") == "metadata.name" && values.is_array() && values.size() == 1 &&
            values[0].is_string()) {
          out->node = values[0].get<std::string>();
        }
      }
    }
  }
  const json reserved = status.value("reservedFor", json());
  if (reserved.is_array()) {
    for (const json& r : reserved) {
      if (!r.is_object()) continue;
      json consumer = {{"resource", Str(r, "resource")}, {"name", Str(r, "name")}};
      if (!Str(r, "uid").empty()) consumer["uid"] = Str(r, "uid");
      out->consumers.push_back(std::move(consumer));
    }
  }
  for (const json& r : results) {
    if (!r.is_object()) continue;
    Hold h;
    h.driver = Str(r, "driver");
    h.pool = Str(r, "pool");
    h.device = Str(r, "device");
    h.request = Str(r, "request");
    h.share_id = Str(r, "shareID");
    if (auto c = r.find("consumedCapacity"); c != r.end() && c->is_object()) h.consumed = *c;
    h.admin_access = r.value("adminAccess", json(false)) == json(true);
    out->holds.push_back(std::move(h));
  }
  return out->holds.empty() ? nullptr : out;
}

HttpResponse JsonResponse(int code, const json& body) {
  return HttpResponse{code, "application/json", ResponseText(body), {}};
}

}  // namespace

// The allocated claims by pool, from the hub's change feed. Synchronous (called on the hub's
// follower thread before a change reaches the cache), so once the hub shows a write, it is here.
class HolderIndex final : public service::Watcher {
 public:
  bool Synchronous() const override { return true; }

  void Load(const std::vector<model::Object>& claims) {
    qm::MutexLock lock(&mu_);
    for (const auto& c : claims) Put(c.meta.namespace_ + "/" + c.meta.name, HoldsOf(c));
  }

  bool Deliver(const model::WatchEvent& ev) override {
    if (ev.object.resource != kClaims) return true;
    std::shared_ptr<const ClaimHolds> holds;
    if (ev.type != model::EventType::kDeleted) holds = HoldsOf(ev.object);  // outside the lock
    qm::MutexLock lock(&mu_);
    Put(ev.object.meta.namespace_ + "/" + ev.object.meta.name, std::move(holds));
    return true;
  }

  bool Tick(int64_t) override { return true; }

  void Expire(const absl::Status&) override {
    qm::MutexLock lock(&mu_);
    expired_ = true;
  }

  bool expired() {
    qm::MutexLock lock(&mu_);
    return expired_;
  }

  // The allocated claims holding a device of one of `pools` ("driver/pool"; empty: every pool).
  std::vector<std::shared_ptr<const ClaimHolds>> Find(const std::set<std::string>& pools) {
    qm::MutexLock lock(&mu_);
    std::vector<std::shared_ptr<const ClaimHolds>> out;
    if (pools.empty()) {
      for (const auto& [key, c] : claims_) out.push_back(c);
      return out;
    }
    std::set<std::string> keys;
    for (const auto& p : pools) {
      auto it = by_pool_.find(p);
      if (it != by_pool_.end()) keys.insert(it->second.begin(), it->second.end());
    }
    for (const auto& k : keys) out.push_back(claims_.at(k));
    return out;
  }

 private:
  // Replaces what is kept of the claim at `key` (null: it holds nothing).
  void Put(const std::string& key, std::shared_ptr<const ClaimHolds> holds)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (auto it = claims_.find(key); it != claims_.end()) {
      for (const auto& h : it->second->holds) {
        auto p = by_pool_.find(PoolKey(h.driver, h.pool));
        if (p == by_pool_.end()) continue;
        p->second.erase(key);
        if (p->second.empty()) by_pool_.erase(p);
      }
      claims_.erase(it);
    }
    if (holds == nullptr) return;
    for (const auto& h : holds->holds) by_pool_[PoolKey(h.driver, h.pool)].insert(key);
    claims_.emplace(key, std::move(holds));
  }

  qm::Mutex mu_;
  std::map<std::string, std::shared_ptr<const ClaimHolds>> claims_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<std::string>> by_pool_ ABSL_GUARDED_BY(mu_);
  bool expired_ ABSL_GUARDED_BY(mu_) = false;
};

DeviceHolders::~DeviceHolders() = default;

absl::StatusOr<std::shared_ptr<HolderIndex>> DeviceHolders::Index() {
  // This process's committed writes first (the index has them once the hub shows them); should
  // the hub lag more than a second, the index is read as the hub has it.
  (void)objects_.LastChanges({kClaims});
  qm::MutexLock lock(&mu_);
  if (index_ != nullptr && !index_->expired()) return index_;
  auto index = std::make_shared<HolderIndex>();
  service::ListRequest request;
  request.store.resource = kClaims;
  auto claims = hub_.List(request, hub_.last_dispatched());
  if (!claims.ok()) return claims.status();
  index->Load(claims->items);
  QM_RETURN_IF_ERROR(hub_.Subscribe(index, claims->resource_version));
  index_ = index;
  return index;
}

HttpResponse DeviceHolders::Review(const json& body) {
  model::FieldErrors errors;
  const std::string group_version = "admin.quartermaster.io/v1alpha1";
  if (body.contains("kind") && body["kind"] != kDeviceHolderKind) {
    errors.push_back(
        model::Invalid("kind", body["kind"].dump(), absl::StrCat("must be ", kDeviceHolderKind)));
  }
  if (body.contains("apiVersion") && body["apiVersion"] != group_version) {
    errors.push_back(model::Invalid("apiVersion", body["apiVersion"].dump(),
                                    absl::StrCat("must be ", group_version)));
  }
  const json spec = body.value("spec", json::object());
  std::set<std::string> pools;
  if (!spec.is_object()) {
    errors.push_back(model::Invalid("spec", "", "must be an object"));
  } else if (spec.contains("pools")) {
    const json& list = spec["pools"];
    if (!list.is_array()) {
      errors.push_back(model::Invalid("spec.pools", "", "must be a list"));
    } else if (list.size() > kMaxPools) {
      errors.push_back(model::TooMany("spec.pools", list.size(), kMaxPools));
    } else {
      for (size_t i = 0; i < list.size(); ++i) {
        const json& p = list[i];
        const std::string driver = p.is_object() ? Str(p, "driver") : "";
        const std::string pool = p.is_object() ? Str(p, "pool") : "";
        if (driver.empty())
          errors.push_back(model::Required(absl::StrCat("spec.pools[", i, "].driver")));
        if (pool.empty())
          errors.push_back(model::Required(absl::StrCat("spec.pools[", i, "].pool")));
        pools.insert(PoolKey(driver, pool));
      }
    }
  }
  if (!errors.empty()) {
    const HttpError e = InvalidError(kDeviceHolderKind, "admin.quartermaster.io", "", errors);
    return JsonResponse(e.code, e.status);
  }
  auto index = Index();
  if (!index.ok()) {
    const HttpError e = ToHttpError(index.status(), StatusDetails{});
    return JsonResponse(e.code, e.status);
  }
  // Device -> its holders, in claim order (namespace/name).
  std::map<std::tuple<std::string, std::string, std::string>, json> devices;
  for (const auto& c : (*index)->Find(pools)) {
    for (const auto& h : c->holds) {
      if (!pools.empty() && pools.count(PoolKey(h.driver, h.pool)) == 0) continue;
      json holder = {{"claim", {{"namespace", c->namespace_}, {"name", c->name}, {"uid", c->uid}}},
                     {"request", h.request},
                     {"consumers", c->consumers}};
      if (!h.share_id.empty()) holder["shareID"] = h.share_id;
      if (!h.consumed.is_null()) holder["consumedCapacity"] = h.consumed;
      if (h.admin_access) holder["adminAccess"] = true;
      if (!c->created.empty()) holder["claimCreationTimestamp"] = c->created;
      if (!c->node.empty()) holder["nodeName"] = c->node;
      json& list = devices[{h.driver, h.pool, h.device}];
      if (list.is_null()) list = json::array();
      list.push_back(std::move(holder));
    }
  }
  json out_devices = json::array();
  for (auto& [id, holders] : devices) {
    out_devices.push_back({{"driver", std::get<0>(id)},
                           {"pool", std::get<1>(id)},
                           {"device", std::get<2>(id)},
                           {"holders", std::move(holders)}});
  }
  json status = {{"heldDevices", out_devices.size()}, {"devices", std::move(out_devices)}};
  return JsonResponse(201, json{{"apiVersion", group_version},
                                {"kind", kDeviceHolderKind},
                                {"metadata", body.value("metadata", json::object())},
                                {"spec", spec},
                                {"status", std::move(status)}});
}

}  // namespace qm::api
