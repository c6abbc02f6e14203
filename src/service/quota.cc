#include "service/quota.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_join.h"
#include "common/quantity.h"
#include "common/status.h"
#include "model/json/quota_usage.h"
#include "model/json/stored.h"

namespace qm::service {
namespace {

// How often a create refused by the store's quota check is tried again because the usage went
// down in between (deletes): a bound, not a number a caller depends on.
constexpr int kMaxQuotaAttempts = 8;

// A quota's hard limit of `key` as a quantity, if it has one.
std::optional<Quantity> HardLimit(const model::QuotaHard& hard, const std::string& key) {
  auto it = hard.find(key);
  return it == hard.end() ? std::nullopt : it->second;
}

}  // namespace

QuotaAmounts QuotaUsage(const model::Object& obj) { return model::json::QuotaUsage(obj); }

QuotaAmounts QuotaHard(const model::Object& quota) {
  QuotaAmounts out;
  for (const auto& [key, q] : model::json::DecodeQuotaHard(quota)) {
    if (q.has_value()) out[key] = q->Value();
  }
  return out;
}

absl::Status CheckQuota(const model::Object& obj, const std::vector<model::ObjectPtr>& quotas,
                        const QuotaAmounts& used) {
  const QuotaAmounts requested = QuotaUsage(obj);
  for (const auto& quota : quotas) {
    const model::QuotaHard hard = model::json::DecodeQuotaHard(*quota);
    std::vector<std::string> requested_s, used_s, limited_s;
    bool exceeded = false;
    for (const auto& [key, amount] : requested) {
      if (amount == 0) continue;
      auto limit = HardLimit(hard, key);
      if (!limit.has_value()) continue;
      auto u = used.find(key);
      const int64_t in_use = u == used.end() ? 0 : u->second;
      requested_s.push_back(key + "=" + std::to_string(amount));
      used_s.push_back(key + "=" + std::to_string(in_use));
      limited_s.push_back(key + "=" + limit->String());
      if (Quantity::FromInt(in_use + amount) > *limit) exceeded = true;
    }
    if (exceeded) {
      return absl::PermissionDeniedError(obj.resource + " \"" + obj.meta.name +
                                         "\" is forbidden: exceeded quota: " + quota->meta.name +
                                         ", requested: " + absl::StrJoin(requested_s, ",") +
                                         ", used: " + absl::StrJoin(used_s, ",") +
                                         ", limited: " + absl::StrJoin(limited_s, ","));
    }
  }
  return absl::OkStatus();
}

std::string QuotaStatusBody(const model::Object& quota, const QuotaAmounts& used) {
  return model::json::QuotaBodyWithStatus(quota, used);
}

namespace {

// QuotaChecks of an object that counts `requested`.
std::vector<store::QuotaCheck> ChecksOf(const model::Object& obj, const QuotaAmounts& requested,
                                        const std::vector<model::ObjectPtr>& quotas) {
  std::vector<store::QuotaCheck> out;
  for (const auto& quota : quotas) {
    const model::QuotaHard hard = model::json::DecodeQuotaHard(*quota);
    for (const auto& [key, amount] : requested) {
      if (amount <= 0) continue;
      auto limit = HardLimit(hard, key);
      if (!limit.has_value()) continue;
      // Whole units, rounded down (toward minus infinity for a negative limit, which nothing
      // fits).
      absl::int128 units = limit->nanos() / Quantity::kNanosPerUnit;
      if (limit->nanos() < 0 && limit->nanos() % Quantity::kNanosPerUnit != 0) --units;
      const absl::int128 max = std::numeric_limits<int64_t>::max();
      const absl::int128 min = std::numeric_limits<int64_t>::min();
      const int64_t hard_units = static_cast<int64_t>(std::clamp(units, min, max));
      out.push_back(store::QuotaCheck{obj.meta.namespace_, key, hard_units});
    }
  }
  return out;
}

}  // namespace

std::vector<store::QuotaCheck> QuotaChecks(const model::Object& obj,
                                           const std::vector<model::ObjectPtr>& quotas) {
  if (quotas.empty()) return {};
  return ChecksOf(obj, QuotaUsage(obj), quotas);
}

namespace {

// The quotas of `ns`, read from the store: admission must not pass because a cache lags.
absl::StatusOr<std::vector<model::ObjectPtr>> QuotasOf(store::Store& store, const std::string& ns) {
  store::ListOptions options;
  options.resource = "resourcequotas";
  options.namespace_ = ns;
  QM_ASSIGN_OR_RETURN(store::ListResult listed, store.List(options));
  return std::move(listed.items);
}

bool Counted(const QuotaAmounts& usage) {
  for (const auto& [key, n] : usage) {
    if (n > 0) return true;
  }
  return false;
}

// What the transaction saw of the quotas of `ns`.
store::QuotaSetCheck SetOf(const std::string& ns, const std::vector<model::ObjectPtr>& quotas) {
  store::QuotaSetCheck set{ns, static_cast<int64_t>(quotas.size()), 0};
  for (const auto& q : quotas) set.newest = std::max(set.newest, q->meta.resource_version);
  return set;
}

}  // namespace

absl::Status CheckQuotaNow(store::Store& store, const model::Object& obj) {
  if (!Counted(QuotaUsage(obj))) return absl::OkStatus();
  QM_ASSIGN_OR_RETURN(auto quotas, QuotasOf(store, obj.meta.namespace_));
  if (QuotaChecks(obj, quotas).empty()) return absl::OkStatus();
  QM_ASSIGN_OR_RETURN(auto used, store.QuotaUsed(obj.meta.namespace_));
  return CheckQuota(obj, quotas, used);
}

absl::StatusOr<model::Object> CreateWithinQuota(store::Store& store, const model::Object& obj,
                                                const CachedQuotas& cached) {
  const QuotaAmounts usage = QuotaUsage(obj);
  if (!Counted(usage)) return store.Create(obj);
  const std::string& ns = obj.meta.namespace_;
  bool from_cache = cached != nullptr;
  std::vector<model::ObjectPtr> quotas;
  store::Transaction txn;
  // Reads the quotas (again) and computes what the transaction checks; false when nothing is
  // to be checked (read from the store, no quota limits `obj`): a plain create then.
  auto read = [&]() -> absl::StatusOr<bool> {
    if (from_cache) {
      QM_ASSIGN_OR_RETURN(quotas, cached(ns));
    } else {
      QM_ASSIGN_OR_RETURN(quotas, QuotasOf(store, ns));
    }
    txn.quota_checks = ChecksOf(obj, usage, quotas);
    txn.quota_sets.clear();
    if (from_cache) txn.quota_sets.push_back(SetOf(ns, quotas));
    return from_cache || !txn.quota_checks.empty();
  };
  QM_ASSIGN_OR_RETURN(bool checked, read());
  if (!checked) return store.Create(obj);
  txn.writes.push_back({store::Write::Kind::kCreate, obj, {}, 0});
  // Store::Create records the caller's AuditScope itself; a transaction carries its records.
  if (const store::AuditRecord* audit = store::AuditScope::Current()) {
    store::AuditRecord record = *audit;
    if (record.name.empty()) {
      record.name = obj.meta.name;
      record.namespace_ = ns;
    }
    txn.audit.push_back(std::move(record));
  }
  for (int attempt = 1;; ++attempt) {
    auto committed = store.Commit(txn);
    if (committed.ok()) return std::move(committed->front());
    if (store::IsQuotaSetChanged(committed.status()) && from_cache) {
      // The cache lags behind the store's quotas: the store's own from now on (no quota-set
      // check; with no quota check either, the transaction is a plain create).
      from_cache = false;
      QM_RETURN_IF_ERROR(read().status());
      continue;
    }
    if (!absl::IsResourceExhausted(committed.status())) return committed.status();
    // Refused: word it as Kubernetes does, with the usage the store holds now.
    QM_ASSIGN_OR_RETURN(auto used, store.QuotaUsed(ns));
    QM_RETURN_IF_ERROR(CheckQuota(obj, quotas, used));
    // Something was deleted in between and the create would fit now: try again.
    if (attempt == kMaxQuotaAttempts) {
      return absl::AbortedError("Operation cannot be fulfilled on resourcequotas in namespace " +
                                ns + ": the usage kept changing; please try again");
    }
  }
}

}  // namespace qm::service
