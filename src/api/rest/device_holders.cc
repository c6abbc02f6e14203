#include "api/rest/device_holders.h"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/rest/status.h"
#include "common/clock.h"
#include "common/status.h"
#include "model/field_error.h"
#include "model/json/read.h"

namespace qm::api {

using nlohmann::json;

namespace {

constexpr char kClaims[] = "resourceclaims.resource.k8s.io";
constexpr size_t kMaxPools = 1000;
// status.claims lists this many claims of a class unless spec.limit says otherwise, and never more
// than kMaxLimit (DeviceMatchReview's limits): a class that 50,000 claims name answers with the
// first ones and the count, not with every claim.
constexpr size_t kDefaultLimit = 500;
constexpr size_t kMaxLimit = 5000;

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

using Classes = std::shared_ptr<const std::vector<std::string>>;

// The device classes the claim's requests name (exactly, or a firstAvailable subrequest), sorted.
Classes ClassesOf(const json& body) {
  std::set<std::string> names;
  const json spec = body.is_object() ? body.value("spec", json::object()) : json();
  const json devices = spec.is_object() ? spec.value("devices", json::object()) : json();
  const json requests = devices.is_object() ? devices.value("requests", json()) : json();
  if (requests.is_array()) {
    for (const json& r : requests) {
      if (!r.is_object()) continue;
      const json exactly = r.value("exactly", json());
      if (exactly.is_object() && !Str(exactly, "deviceClassName").empty()) {
        names.insert(Str(exactly, "deviceClassName"));
      }
      const json first = r.value("firstAvailable", json());
      if (!first.is_array()) continue;
      for (const json& s : first) {
        if (s.is_object() && !Str(s, "deviceClassName").empty()) {
          names.insert(Str(s, "deviceClassName"));
        }
      }
    }
  }
  return std::make_shared<const std::vector<std::string>>(names.begin(), names.end());
}

// The claim's holds (null when it holds no device: not allocated) from its parsed body.
std::shared_ptr<const ClaimHolds> HoldsOf(const model::Object& claim, const json& body) {
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

// What the index keeps of a claim: its holds, and its classes (`known`, when the index has the
// claim's classes already: a claim's spec does not change, so they are parsed once per claim).
// A change of an unallocated claim whose classes are known is skipped without parsing it.
struct Parsed {
  std::shared_ptr<const ClaimHolds> holds;
  Classes classes;
};
Parsed Parse(const model::Object& claim, Classes known) {
  const bool allocated = claim.body.find("\"allocation\"") != std::string::npos;
  if (!allocated && known != nullptr) return {nullptr, std::move(known)};
  const json body = model::json::Read(claim.body);
  return {allocated ? HoldsOf(claim, body) : nullptr,
          known != nullptr ? std::move(known) : ClassesOf(body)};
}

HttpResponse JsonResponse(int code, const json& body) {
  return HttpResponse{code, "application/json", ResponseText(body), {}};
}

}  // namespace

// The claims: the allocated ones by pool, and every claim by the device classes it names, from
// the hub's change feed. Synchronous (called on the hub's follower thread before a change reaches
// the cache), so once the hub shows a write, it is here.
class HolderIndex final : public service::Watcher {
 public:
  // A claim naming a class, and what it holds (null: not allocated).
  struct ClassClaim {
    std::string namespace_, name, uid;
    std::shared_ptr<const ClaimHolds> holds;
  };

  bool Synchronous() const override { return true; }

  void Load(const std::vector<model::ObjectPtr>& claims) {
    qm::MutexLock lock(&mu_);
    for (const auto& claim : claims) {
      const model::Object& c = *claim;
      Parsed parsed = Parse(c, nullptr);
      Put(Key(c), c.meta.uid, std::move(parsed.classes), std::move(parsed.holds));
    }
  }

  bool Deliver(const model::WatchEvent& ev) override {
    if (ev.object.resource != kClaims) return true;
    const std::string key = Key(ev.object);
    if (ev.type == model::EventType::kDeleted) {
      qm::MutexLock lock(&mu_);
      Put(key, "", nullptr, nullptr);
      return true;
    }
    Classes known;
    {
      qm::MutexLock lock(&mu_);
      auto it = claims_.find(key);
      if (it != claims_.end() && it->second.uid == ev.object.meta.uid) known = it->second.classes;
    }
    Parsed parsed = Parse(ev.object, std::move(known));  // outside the lock
    qm::MutexLock lock(&mu_);
    Put(key, ev.object.meta.uid, std::move(parsed.classes), std::move(parsed.holds));
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
      for (const auto& [key, c] : claims_) {
        if (c.holds != nullptr) out.push_back(c.holds);
      }
      return out;
    }
    std::set<std::string> keys;
    for (const auto& p : pools) {
      auto it = by_pool_.find(p);
      if (it != by_pool_.end()) keys.insert(it->second.begin(), it->second.end());
    }
    for (const auto& k : keys) out.push_back(claims_.at(k).holds);
    return out;
  }

  // The first `limit` claims naming device class `name`, allocated or not, by namespace and
  // name; `*count` is how many claims name it.
  std::vector<ClassClaim> FindClass(const std::string& name, size_t limit, size_t* count) {
    qm::MutexLock lock(&mu_);
    std::vector<ClassClaim> out;
    *count = 0;
    auto it = by_class_.find(name);
    if (it == by_class_.end()) return out;
    *count = it->second.size();
    for (const auto& key : it->second) {
      if (out.size() == limit) break;
      const Claim& c = claims_.at(key);
      const size_t slash = key.find('/');
      out.push_back({key.substr(0, slash), key.substr(slash + 1), c.uid, c.holds});
    }
    return out;
  }

 private:
  struct Claim {
    std::string uid;
    Classes classes;  // never null
    std::shared_ptr<const ClaimHolds> holds;
  };

  static std::string Key(const model::Object& claim) {
    return claim.meta.namespace_ + "/" + claim.meta.name;
  }

  // Replaces what is kept of the claim at `key` (null classes: it is gone).
  void Put(const std::string& key, const std::string& uid, Classes classes,
           std::shared_ptr<const ClaimHolds> holds) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (auto it = claims_.find(key); it != claims_.end()) {
      if (it->second.holds != nullptr) {
        for (const auto& h : it->second.holds->holds)
          Unlink(&by_pool_, PoolKey(h.driver, h.pool), key);
      }
      for (const auto& c : *it->second.classes) Unlink(&by_class_, c, key);
      claims_.erase(it);
    }
    if (classes == nullptr) return;
    if (holds != nullptr) {
      for (const auto& h : holds->holds) by_pool_[PoolKey(h.driver, h.pool)].insert(key);
    }
    for (const auto& c : *classes) by_class_[c].insert(key);
    claims_.emplace(key, Claim{uid, std::move(classes), std::move(holds)});
  }

  static void Unlink(std::map<std::string, std::set<std::string>>* index, const std::string& at,
                     const std::string& key) {
    auto p = index->find(at);
    if (p == index->end()) return;
    p->second.erase(key);
    if (p->second.empty()) index->erase(p);
  }

  qm::Mutex mu_;
  std::map<std::string, Claim> claims_ ABSL_GUARDED_BY(mu_);  // namespace/name -> every claim
  std::map<std::string, std::set<std::string>> by_pool_ ABSL_GUARDED_BY(mu_);   // allocated
  std::map<std::string, std::set<std::string>> by_class_ ABSL_GUARDED_BY(mu_);  // every claim
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
  std::optional<std::string> class_name;
  if (spec.is_object() && spec.contains("deviceClassName")) {
    const json& v = spec["deviceClassName"];
    if (!v.is_string()) {
      errors.push_back(model::Invalid("spec.deviceClassName", v.dump(), "must be a string"));
    } else if (v.get<std::string>().empty()) {
      errors.push_back(model::Required("spec.deviceClassName"));
    } else {
      class_name = v.get<std::string>();
    }
  }
  size_t limit = kDefaultLimit;
  if (spec.is_object() && spec.contains("limit")) {
    const json& v = spec["limit"];
    if (!v.is_number_integer() || v.get<int64_t>() < 1) {
      errors.push_back(model::Invalid("spec.limit", v.dump(), "must be a positive integer"));
    } else if (!spec.contains("deviceClassName")) {
      // The limit bounds status.claims, which only a class review lists.
      errors.push_back(
          model::Forbidden("spec.limit", "may only be set together with spec.deviceClassName"));
    } else {
      limit = std::min<size_t>(v.get<uint64_t>(), kMaxLimit);
    }
  }
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
  // With a class: only the first `limit` claims naming it (each listed, allocated or not) and what
  // they hold; the count says how many name it.
  std::vector<std::shared_ptr<const ClaimHolds>> holding;
  json class_claims = json::array();
  size_t class_count = 0;
  if (class_name.has_value()) {
    for (auto& c : (*index)->FindClass(*class_name, limit, &class_count)) {
      class_claims.push_back({{"namespace", c.namespace_},
                              {"name", c.name},
                              {"uid", c.uid},
                              {"allocated", c.holds != nullptr}});
      if (c.holds != nullptr) holding.push_back(std::move(c.holds));
    }
  } else {
    holding = (*index)->Find(pools);
  }
  // Device -> its holders, in claim order (namespace/name).
  std::map<std::tuple<std::string, std::string, std::string>, json> devices;
  for (const auto& c : holding) {
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
  if (class_name.has_value()) {
    status["claimsTruncated"] = class_claims.size() < class_count;
    status["claims"] = std::move(class_claims);
    status["claimCount"] = class_count;
  }
  return JsonResponse(201, json{{"apiVersion", group_version},
                                {"kind", kDeviceHolderKind},
                                {"metadata", body.value("metadata", json::object())},
                                {"spec", spec},
                                {"status", std::move(status)}});
}

}  // namespace qm::api
