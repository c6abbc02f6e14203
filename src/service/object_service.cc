#include "service/object_service.h"

#include <algorithm>
#include <random>
#include <set>
#include <utility>

#include "common/status.h"
#include "model/json/stored.h"
#include "model/resource_types.h"
#include "service/decoded_slices.h"
#include "service/graceful_deletion.h"
#include "service/ledger.h"
#include "service/quota.h"
#include "spdlog/spdlog.h"

namespace qm::service {
namespace {

constexpr int kMaxUpdateAttempts = 16;
constexpr char kClaims[] = "resourceclaims.resource.k8s.io";

bool IsNamespaced(const std::string& resource) {
  const model::ResourceType* t = model::FindResourceTypeByKey(resource);
  return t != nullptr && t->namespaced;
}

}  // namespace

ObjectService::ObjectService(store::Store& store, const Clock& clock, IdGenerator& ids,
                             WatchHub* hub)
    : store_(store), clock_(clock), ids_(ids), hub_(hub) {}

absl::Status ObjectService::CheckNamespace(const std::string& ns) {
  const model::ResourceKey key{"namespaces", "", ns};
  // Like the apiserver's namespace lifecycle check: trust the cache when it knows the
  // namespace, ask the store when it does not (it may have been created a moment ago).
  model::ObjectPtr cached;
  if (hub_ != nullptr) cached = hub_->Find(key);
  if (cached == nullptr) {
    auto got = store_.Get(key);
    if (absl::IsNotFound(got.status())) {
      return absl::NotFoundError("namespaces \"" + ns + "\" not found");
    }
    if (!got.ok()) return got.status();
    cached = std::make_shared<const model::Object>(*std::move(got));
  }
  if (cached->meta.deletion_timestamp.has_value()) {
    return absl::PermissionDeniedError("unable to create new content in namespace " + ns +
                                       " because it is being terminated");
  }
  return absl::OkStatus();
}

absl::StatusOr<model::Object> ObjectService::Create(model::Object obj, bool dry_run) {
  if (IsNamespaced(obj.resource)) QM_RETURN_IF_ERROR(CheckNamespace(obj.meta.namespace_));
  if (obj.meta.name.empty() && !obj.meta.generate_name.empty()) {
    obj.meta.name = obj.meta.generate_name + ids_.NameSuffix(5);
  }
  obj.meta.uid = ids_.NewUid();
  obj.meta.creation_timestamp = std::chrono::time_point_cast<std::chrono::seconds>(clock_.Now());
  obj.meta.generation = 1;
  obj.meta.deletion_timestamp.reset();
  obj.meta.resource_version = 0;
  if (dry_run) {
    auto existing = store_.Get(obj.Key());
    if (existing.ok()) {
      return absl::AlreadyExistsError(obj.resource + " \"" + obj.meta.name + "\" already exists");
    }
    if (!absl::IsNotFound(existing.status())) return existing.status();
    QM_RETURN_IF_ERROR(CheckQuotaNow(store_, obj));
    return obj;
  }
  if (hub_ == nullptr) return CreateWithinQuota(store_, obj);
  return CreateWithinQuota(
      store_, obj, [this](const std::string& ns) -> absl::StatusOr<std::vector<model::ObjectPtr>> {
        ListRequest request;
        request.store.resource = "resourcequotas";
        request.store.namespace_ = ns;
        QM_ASSIGN_OR_RETURN(store::ListResult listed, ListCached(request));
        return std::move(listed.items);
      });
}

absl::StatusOr<std::unique_ptr<SliceDevices>> ObjectService::SlicesOf(
    const model::AllocationResult& allocation) {
  std::set<std::pair<std::string, std::string>> pools;
  for (const auto& r : allocation.results) {
    if (!r.admin_access) pools.insert({r.driver, r.pool});
  }
  std::vector<model::ResourceSlice> slices;
  // One list per pool name, of that pool's slices only (the cache indexes them by pool).
  std::set<std::string> pool_names;
  for (const auto& [driver, pool] : pools) pool_names.insert(pool);
  for (const std::string& pool_name : pool_names) {
    ListRequest request;
    request.store.resource = "resourceslices.resource.k8s.io";
    QM_ASSIGN_OR_RETURN(request.fields, model::FieldSelector::Parse("spec.pool.name=" + pool_name,
                                                                    {"spec.pool.name"}));
    QM_ASSIGN_OR_RETURN(store::ListResult listed, ListCached(request));
    for (const auto& listed_obj : listed.items) {
      const model::Object& obj = *listed_obj;
      auto driver = obj.fields.find("spec.driver");
      if (driver == obj.fields.end() || !pools.contains({driver->second, pool_name})) continue;
      // The scheduler holds this version decoded already (unless it is brand new): shared, not
      // parsed again. A slice that does not decode publishes nothing the allocator would use.
      auto slice =
          DecodedSlices::Shared().Get(obj, [&] { return model::json::DecodeResourceSlice(obj); });
      if (slice.ok()) slices.push_back(**slice);
    }
  }
  return std::make_unique<SliceDevices>(std::move(slices));
}

absl::StatusOr<model::Object> ObjectService::StoreUpdate(const model::Object& current,
                                                         const model::Object& next) {
  if (current.resource != kClaims) return store_.Update(next, current.meta.resource_version);
  const model::StoredAllocation before = model::json::DecodeStoredAllocation(current.body);
  const model::StoredAllocation after = model::json::DecodeStoredAllocation(next.body);
  if (before.present && !before.decoded.has_value()) {
    // Its ledger rows stay as they are while it stays; they go (and the new allocation's
    // come) when it is removed or replaced. The scheduler reports it too (DecodeFailed).
    spdlog::warn(
        "resourceclaim {}/{} (resourceVersion {}): the stored status.allocation does not decode "
        "({}); {}",
        current.meta.namespace_, current.meta.name, current.meta.resource_version, before.error,
        !after.present              ? "it is being removed: its devices are released"
        : after.decoded.has_value() ? "it is being replaced by an allocation that decodes"
                                    : "its devices stay held");
  }
  if (after.present && !after.decoded.has_value() &&
      !(before.present && !before.decoded.has_value())) {
    // Validation keeps this out; were it to get here, its devices would look free.
    return absl::InvalidArgumentError("status.allocation: Invalid value: does not decode: " +
                                      after.error);
  }
  // The ledger rows change only when the allocation does: none before and after, the same
  // undecodable one kept (its rows stay), or the same devices.
  const bool unchanged =
      (!before.present && !after.present) ||
      (before.present && !before.decoded.has_value() && after.present &&
       !after.decoded.has_value()) ||
      (before.decoded.has_value() && after.decoded.has_value() &&
       LedgerRows(*before.decoded, current.meta.uid) == LedgerRows(*after.decoded, next.meta.uid));
  if (unchanged) return store_.Update(next, current.meta.resource_version);
  store::Transaction txn;
  txn.writes.push_back({store::Write::Kind::kUpdate, next, {}, current.meta.resource_version});
  txn.release_claims.push_back(current.meta.uid);
  if (after.decoded.has_value()) {
    // The rows carry what the devices take from capacity and shared counters, as the slices say,
    // so that the store refuses an allocation that does not fit whoever else allocates.
    QM_ASSIGN_OR_RETURN(auto slices, SlicesOf(*after.decoded));
    txn.claim_devices = LedgerRows(*after.decoded, next.meta.uid, slices->Lookup());
  }
  QM_ASSIGN_OR_RETURN(auto committed, store_.Commit(txn));
  return std::move(committed.front());
}

absl::StatusOr<model::Object> ObjectService::Update(
    const model::ResourceKey& key,
    const std::function<absl::StatusOr<model::Object>(const model::Object&)>& mutate,
    bool dry_run) {
  for (int attempt = 0;; ++attempt) {
    QM_ASSIGN_OR_RETURN(model::Object current, store_.Get(key));
    QM_ASSIGN_OR_RETURN(model::Object next, mutate(current));
    const bool conditional = next.meta.resource_version != 0;
    if (conditional && next.meta.resource_version != current.meta.resource_version) {
      return absl::AbortedError("Operation cannot be fulfilled on " + key.resource + " \"" +
                                key.name +
                                "\": the object has been modified; please apply your changes "
                                "to the latest version and try again");
    }
    next.resource = current.resource;
    next.meta.name = current.meta.name;
    next.meta.namespace_ = current.meta.namespace_;
    next.meta.uid = current.meta.uid;
    next.meta.creation_timestamp = current.meta.creation_timestamp;
    next.meta.deletion_timestamp = current.meta.deletion_timestamp;
    next.meta.deletion_grace_period_seconds = current.meta.deletion_grace_period_seconds;
    next.meta.generation =
        current.meta.generation + (model::SameSpec(next.spec_digest, current.spec_digest) ? 0 : 1);
    if (current.meta.deletion_timestamp.has_value()) {
      for (const auto& f : next.meta.finalizers) {
        if (std::find(current.meta.finalizers.begin(), current.meta.finalizers.end(), f) ==
            current.meta.finalizers.end()) {
          return absl::InvalidArgumentError(
              "metadata.finalizers: Forbidden: no new finalizers can be added if the object is "
              "being deleted, found new finalizers [\"" +
              f + "\"]");
        }
      }
    }
    if (dry_run) return next;
    absl::StatusOr<model::Object> result = StoreUpdate(current, next);
    if (absl::IsAborted(result.status()) && !conditional && attempt + 1 < kMaxUpdateAttempts) {
      continue;  // someone wrote in between; recompute from the fresh state
    }
    if (result.ok() && result->meta.deletion_timestamp.has_value() &&
        result->meta.finalizers.empty() && key.resource != "namespaces") {
      // The last finalizer is gone: the object goes away now (watchers see MODIFIED, then
      // DELETED, as with the apiserver).
      auto deleted = store_.Delete(result->Key(), result->meta.resource_version);
      if (!deleted.ok() && !absl::IsNotFound(deleted.status())) return deleted.status();
      if (deleted.ok()) {
        QM_RETURN_IF_ERROR(FinishNamespaceIfEmpty(key, deleted->meta.resource_version));
        return deleted;
      }
    }
    return result;
  }
}

absl::Status ObjectService::DeleteNamespaceContents(const std::string& ns) {
  for (const auto& type : model::AllResourceTypes()) {
    if (!type.namespaced) continue;
    store::ListOptions opts;
    opts.resource = type.GroupResource();
    opts.namespace_ = ns;
    QM_ASSIGN_OR_RETURN(store::ListResult items, store_.List(opts));
    for (const auto& obj : items.items) {
      auto r = Delete(obj->Key(), DeleteOptions{});
      if (!r.ok() && !absl::IsNotFound(r.status())) return r.status();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DeleteResult> ObjectService::Delete(const model::ResourceKey& key,
                                                   const DeleteOptions& options) {
  // The first try takes the object from the cache instead of reading the store: the write that
  // follows is conditional on its resourceVersion, so a stale copy costs one more try, read from
  // the store. An answer that writes nothing (a failed precondition, a dry run, an object already
  // being deleted) is always given from the store's copy. Namespaces are read from the store.
  bool try_cache = hub_ != nullptr && !options.dry_run && key.resource != "namespaces";
  for (int attempt = 0;; ++attempt) {
    model::ObjectPtr cached = try_cache ? hub_->Find(key) : nullptr;
    try_cache = false;
    const bool from_cache = cached != nullptr;
    model::Object current;
    if (from_cache) {
      current = *cached;
    } else {
      QM_ASSIGN_OR_RETURN(current, store_.Get(key));
    }
    if (from_cache &&
        ((options.precondition_uid && *options.precondition_uid != current.meta.uid) ||
         (options.precondition_resource_version &&
          *options.precondition_resource_version != current.meta.resource_version))) {
      continue;  // decided on the store's copy
    }
    if (options.precondition_uid && *options.precondition_uid != current.meta.uid) {
      return absl::FailedPreconditionError(
          "Precondition failed: UID in precondition: " + *options.precondition_uid +
          ", UID in object meta: " + current.meta.uid);
    }
    if (options.precondition_resource_version &&
        *options.precondition_resource_version != current.meta.resource_version) {
      return absl::FailedPreconditionError(
          "Precondition failed: ResourceVersion in precondition: " +
          std::to_string(*options.precondition_resource_version) +
          ", ResourceVersion in object meta: " + std::to_string(current.meta.resource_version));
    }
    const bool is_namespace = key.resource == "namespaces";
    if (options.dry_run) return DeleteResult{current, current.meta.finalizers.empty()};
    if (is_namespace) {
      // A namespace is marked first (no new content may appear), emptied, and removed once
      // nothing is left in it; content held by finalizers keeps it until they are gone.
      if (!current.meta.deletion_timestamp.has_value()) {
        model::Object marked = current;
        marked.meta.deletion_timestamp =
            std::chrono::time_point_cast<std::chrono::seconds>(clock_.Now());
        auto r = store_.Update(marked, current.meta.resource_version);
        if (absl::IsAborted(r.status()) && attempt + 1 < kMaxUpdateAttempts) continue;
        QM_RETURN_IF_ERROR(r.status());
        current = *std::move(r);
      }
      QM_RETURN_IF_ERROR(DeleteNamespaceContents(key.name));
      // Deleting the last content may already have removed the namespace.
      auto still = store_.Get(key);
      if (absl::IsNotFound(still.status())) return DeleteResult{current, true};
      QM_RETURN_IF_ERROR(still.status());
      current = *std::move(still);
      QM_ASSIGN_OR_RETURN(bool empty, NamespaceIsEmpty(key.name));
      if (!empty || !current.meta.finalizers.empty()) return DeleteResult{current, false};
    }
    absl::StatusOr<model::Object> result;
    model::Object marked = current;
    const int64_t grace = options.grace_period_seconds.value_or(DefaultGracePeriodSeconds(current));
    // A forced deletion does not wait for the agent to unprepare (the claim controller still
    // keeps the devices allocated until it has).
    const bool forced = grace == 0 && RemoveFinalizer(marked.meta, kDevicesPreparedFinalizer);
    bool deleted = marked.meta.finalizers.empty();
    if (deleted) {
      result = store_.Delete(current.Key(), current.meta.resource_version);
    } else if (!MarkForDeletion(marked.meta, clock_.Now(), grace) && !forced) {
      if (from_cache) continue;             // decided on the store's copy
      return DeleteResult{current, false};  // already being deleted: nothing changes
    } else {
      result = store_.Update(marked, current.meta.resource_version);
    }
    if (from_cache && (absl::IsAborted(result.status()) || absl::IsNotFound(result.status()))) {
      continue;  // the cached copy was stale
    }
    if (absl::IsAborted(result.status()) && attempt + 1 < kMaxUpdateAttempts) continue;
    if (!result.ok()) return result.status();
    if (deleted && !is_namespace) {
      QM_RETURN_IF_ERROR(FinishNamespaceIfEmpty(key, result->meta.resource_version));
    }
    return DeleteResult{*std::move(result), deleted};
  }
}

absl::StatusOr<bool> ObjectService::NamespaceIsEmpty(const std::string& ns) {
  for (const auto& type : model::AllResourceTypes()) {
    if (!type.namespaced) continue;
    store::ListOptions opts;
    opts.resource = type.GroupResource();
    opts.namespace_ = ns;
    opts.limit = 1;
    QM_ASSIGN_OR_RETURN(store::ListResult items, store_.List(opts));
    if (!items.items.empty()) return false;
  }
  return true;
}

absl::Status ObjectService::FinishNamespaceIfEmpty(const model::ResourceKey& deleted,
                                                   int64_t deleted_rv) {
  if (deleted.namespace_.empty()) return absl::OkStatus();
  const model::ResourceKey ns_key{"namespaces", "", deleted.namespace_};
  // Almost always the namespace is not being deleted; the cache says so without a read of the
  // store once it has applied the delete (a few ms at most). A namespace marked for deletion
  // before the delete is marked there then; one marked after it checks for content itself after
  // its mark (Delete), and finds this object gone.
  if (hub_ != nullptr) {
    auto cached = hub_->FindCurrent(ns_key, deleted_rv, std::chrono::milliseconds(5));
    if (cached.ok() && (*cached == nullptr || !(*cached)->meta.deletion_timestamp.has_value() ||
                        !(*cached)->meta.finalizers.empty())) {
      return absl::OkStatus();
    }
  }
  auto ns = store_.Get(ns_key);
  if (absl::IsNotFound(ns.status())) return absl::OkStatus();
  QM_RETURN_IF_ERROR(ns.status());
  if (!ns->meta.deletion_timestamp.has_value() || !ns->meta.finalizers.empty()) {
    return absl::OkStatus();
  }
  QM_ASSIGN_OR_RETURN(bool empty, NamespaceIsEmpty(deleted.namespace_));
  if (!empty) return absl::OkStatus();
  auto r = store_.Delete(ns->Key(), ns->meta.resource_version);
  // Someone else finished it first, or changed it: either way it is handled.
  if (absl::IsNotFound(r.status()) || absl::IsAborted(r.status())) return absl::OkStatus();
  return r.status();
}

absl::StatusOr<std::vector<model::Object>> ObjectService::CommitBatch(
    std::vector<BatchWrite> writes) {
  store::Transaction txn;
  const store::AuditRecord* audit = store::AuditScope::Current();
  const auto now = std::chrono::time_point_cast<std::chrono::seconds>(clock_.Now());
  for (auto& w : writes) {
    store::Write out;
    switch (w.kind) {
      case BatchWrite::Kind::kCreate: {
        model::Object& obj = w.object;
        if (IsNamespaced(obj.resource)) QM_RETURN_IF_ERROR(CheckNamespace(obj.meta.namespace_));
        if (obj.meta.name.empty() && !obj.meta.generate_name.empty()) {
          obj.meta.name = obj.meta.generate_name + ids_.NameSuffix(5);
        }
        obj.meta.uid = ids_.NewUid();
        obj.meta.creation_timestamp = now;
        obj.meta.generation = 1;
        obj.meta.deletion_timestamp.reset();
        obj.meta.resource_version = 0;
        out = {store::Write::Kind::kCreate, std::move(obj), {}, 0};
        break;
      }
      case BatchWrite::Kind::kUpdate: {
        const model::Object& cur = w.current;
        model::Object next = std::move(w.object);
        next.resource = cur.resource;
        next.meta.name = cur.meta.name;
        next.meta.namespace_ = cur.meta.namespace_;
        next.meta.uid = cur.meta.uid;
        next.meta.creation_timestamp = cur.meta.creation_timestamp;
        next.meta.deletion_timestamp = cur.meta.deletion_timestamp;
        next.meta.deletion_grace_period_seconds = cur.meta.deletion_grace_period_seconds;
        next.meta.generation =
            cur.meta.generation + (model::SameSpec(next.spec_digest, cur.spec_digest) ? 0 : 1);
        out = {store::Write::Kind::kUpdate, std::move(next), {}, cur.meta.resource_version};
        break;
      }
      case BatchWrite::Kind::kDelete: {
        const model::Object& cur = w.current;
        if (cur.meta.finalizers.empty()) {
          out = {store::Write::Kind::kDelete, {}, cur.Key(), cur.meta.resource_version};
        } else {
          model::Object marked = cur;
          MarkForDeletion(marked.meta, now, DefaultGracePeriodSeconds(cur));
          out = {store::Write::Kind::kUpdate, std::move(marked), {}, cur.meta.resource_version};
        }
        break;
      }
    }
    if (audit != nullptr) {
      store::AuditRecord record = *audit;
      record.verb = w.kind == BatchWrite::Kind::kCreate   ? "create"
                    : w.kind == BatchWrite::Kind::kUpdate ? "update"
                                                          : "delete";
      const model::ResourceKey key =
          out.kind == store::Write::Kind::kDelete ? out.key : out.object.Key();
      record.name = key.name;
      record.namespace_ = key.namespace_;
      // A batch may span kinds (a claim and its pods): each record names its own resource.
      const size_t dot = key.resource.find('.');
      record.resource = key.resource.substr(0, dot);
      record.api_group = dot == std::string::npos ? "" : key.resource.substr(dot + 1);
      if (w.kind == BatchWrite::Kind::kCreate) record.code = 201;
      txn.audit.push_back(std::move(record));
    }
    txn.writes.push_back(std::move(out));
  }
  if (txn.writes.empty()) return std::vector<model::Object>{};
  return store_.Commit(txn);
}

absl::StatusOr<model::Object> ObjectService::Get(const model::ResourceKey& key) {
  return store_.Get(key);
}

absl::StatusOr<model::Object> ObjectService::GetForWrite(const model::ResourceKey& key,
                                                         bool* from_cache) {
  model::ObjectPtr cached = hub_ != nullptr ? hub_->Find(key) : nullptr;
  *from_cache = cached != nullptr;
  if (cached != nullptr) return *cached;
  return store_.Get(key);
}

absl::StatusOr<store::ListResult> ObjectService::ListCached(const ListRequest& request) {
  if (hub_ != nullptr) {
    auto cached = hub_->List(request, store_.LastCommittedRevisionOf(request.store.resource));
    if (cached.ok()) return cached;
  }
  return List(request);
}

absl::StatusOr<std::vector<int64_t>> ObjectService::LastChanges(
    const std::vector<std::string>& resources) {
  if (hub_ == nullptr) return absl::FailedPreconditionError("no object cache");
  return hub_->LastChanges(resources, store_.LastCommittedRevision());
}

absl::StatusOr<store::ListResult> ObjectService::List(const ListRequest& request) {
  if (hub_ != nullptr) {
    auto current = store_.CurrentRevision();
    if (current.ok()) {
      auto cached = hub_->List(request, *current);
      if (cached.ok()) return cached;
    }
  }
  const bool filtered = !request.labels.Empty() || !request.fields.Empty();
  if (!filtered) return store_.List(request.store);
  // Filter page by page so `limit` counts matching objects.
  store::ListOptions opts = request.store;
  store::ListResult out;
  const int64_t want = request.store.limit;
  while (true) {
    opts.limit = want > 0 ? std::max<int64_t>(want * 2, 500) : 0;
    QM_ASSIGN_OR_RETURN(store::ListResult page, store_.List(opts));
    if (out.resource_version == 0) out.resource_version = page.resource_version;
    if (page.items.empty()) return out;
    opts.after_namespace = page.items.back()->meta.namespace_;
    opts.after_name = page.items.back()->meta.name;
    for (auto& obj : page.items) {
      if (want > 0 && static_cast<int64_t>(out.items.size()) == want) {
        out.more = true;
        return out;
      }
      if (request.Matches(*obj)) {
        out.items.push_back(std::move(obj));
      }
    }
    if (!page.more) return out;
  }
}

}  // namespace qm::service
