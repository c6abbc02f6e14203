// PgStore's change log as watchers read it: the changes this process committed, kept in memory,
// the log read after them, and the wait for a notification (pg_store.h).

#include "store/pg/pg_store.h"

#include <algorithm>
#include <limits>
#include <map>
#include <thread>

#include <pqxx/pqxx>

#include "store/pg/pg_store_internal.h"
#include "store/pg/with_connection.h"

namespace qm::store::pg {

using namespace pg_internal;  // NOLINT(google-build-using-namespace)

void PgStore::RememberOwnChanges(const std::vector<PendingWrite*>& batch,
                                 const std::vector<absl::StatusOr<model::Object>>& results,
                                 int64_t before) {
  auto type_of = [](bool create, bool remove) {
    return create   ? model::EventType::kAdded
           : remove ? model::EventType::kDeleted
                    : model::EventType::kModified;
  };
  // The object as its change_log row holds it: timestamps in whole seconds.
  auto as_logged = [](model::Object obj) {
    auto& meta = obj.meta;
    meta.creation_timestamp =
        std::chrono::time_point_cast<std::chrono::seconds>(meta.creation_timestamp);
    if (meta.deletion_timestamp.has_value()) {
      meta.deletion_timestamp =
          std::chrono::time_point_cast<std::chrono::seconds>(*meta.deletion_timestamp);
    }
    return obj;
  };
  std::vector<model::WatchEvent> changes;
  bool complete = results.size() == batch.size();  // every change the batch logged is in changes
  for (size_t i = 0; i < batch.size() && i < results.size(); ++i) {
    if (!results[i].ok()) continue;
    const PendingWrite& w = *batch[i];
    if (w.kind != WriteKind::kTransaction) {
      changes.push_back({type_of(w.kind == WriteKind::kCreate, w.kind == WriteKind::kDelete),
                         as_logged(*results[i]), nullptr});
      continue;
    }
    if (w.txn_results.size() != w.txn->writes.size()) {
      complete = false;
      continue;
    }
    for (size_t n = 0; n < w.txn_results.size(); ++n) {
      const Write::Kind kind = w.txn->writes[n].kind;
      changes.push_back({type_of(kind == Write::Kind::kCreate, kind == Write::Kind::kDelete),
                         as_logged(w.txn_results[n]), nullptr});
    }
  }
  {
    // Before the writes are acknowledged: a reader that waits for the cache to show its own
    // writes of a resource asks LastCommittedRevisionOf.
    qm::MutexLock lock(&resource_rv_mu_);
    for (const auto& ev : changes) {
      int64_t& rv = resource_rv_[ev.object.resource];
      rv = std::max(rv, ev.object.meta.resource_version);
    }
  }
  int64_t newest = 0;
  qm::MutexLock lock(&own_mu_);
  for (auto& ev : changes) {
    const int64_t rv = ev.object.meta.resource_version;
    complete &= rv > before;
    newest = std::max(newest, rv);
    if (rv > 0) own_changes_.insert_or_assign(rv, std::move(ev));
    own_newest_ = std::max(own_newest_, rv);
  }
  // The change log holds nothing in (before, newest] but this batch's changes: the batch drew
  // its revisions under the write lock it took at `before`, and one drawn for a write that
  // failed has no row.
  if (complete && newest > before) own_spans_.insert_or_assign(before, newest);
  while (own_changes_.size() > kMaxOwnChanges) own_changes_.erase(own_changes_.begin());
  // A span whose changes are not all kept any more cannot be answered from memory.
  const int64_t oldest = own_changes_.empty() ? newest + 1 : own_changes_.begin()->first;
  while (!own_spans_.empty() && own_spans_.begin()->first + 1 < oldest) {
    own_spans_.erase(own_spans_.begin());
  }
}

int64_t PgStore::LastCommittedRevisionOf(const std::string& resource) {
  qm::MutexLock lock(&resource_rv_mu_);
  auto it = resource_rv_.find(resource);
  return it == resource_rv_.end() ? 0 : it->second;
}

std::optional<std::vector<model::WatchEvent>> PgStore::OwnChangesSince(int64_t after_rv,
                                                                       int64_t max_rows) {
  qm::MutexLock lock(&own_mu_);
  // A notification can overtake the writer's own bookkeeping: while it commits, a newer
  // revision than it has kept may be its own. A short wait spares reading the log for it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  while (committing_ && notified_rv_.load() > own_newest_ &&
         own_cv_.WaitUntil(&own_mu_, deadline)) {
  }
  own_changes_.erase(own_changes_.begin(), own_changes_.upper_bound(after_rv));
  own_spans_.erase(own_spans_.begin(), own_spans_.lower_bound(after_rv));
  std::vector<model::WatchEvent> out;
  int64_t from = after_rv;
  for (auto span = own_spans_.find(from); span != own_spans_.end() && span->first == from;
       span = own_spans_.find(from)) {
    const auto first = own_changes_.upper_bound(span->first);
    const auto last = own_changes_.upper_bound(span->second);
    if (static_cast<int64_t>(out.size() + std::distance(first, last)) > max_rows) break;
    // The follower reads on from here, so the changes are handed over (moved, not copied); a
    // reader that asks for them again reads them from the log.
    for (auto it = first; it != last; ++it) out.push_back(std::move(it->second));
    own_changes_.erase(first, last);
    from = span->second;
  }
  own_spans_.erase(own_spans_.begin(), own_spans_.lower_bound(from));
  if (out.empty()) return std::nullopt;
  return out;
}

absl::StatusOr<std::vector<model::WatchEvent>> PgStore::FollowChanges(int64_t after_rv,
                                                                      int64_t limit) {
  // The changes right after `after_rv` are this process's last batches: no need to ask. Those
  // of other replicas after them are left to the next call; their notifications (or this
  // process's own later changes) end the caller's next WaitForChanges at once.
  const int64_t max_rows = limit > 0 ? limit : std::numeric_limits<int64_t>::max();
  if (auto own = OwnChangesSince(after_rv, max_rows); own.has_value()) return *std::move(own);
  return ChangesSince(after_rv, limit);
}

absl::StatusOr<std::vector<model::WatchEvent>> PgStore::ChangesSince(int64_t after_rv,
                                                                     int64_t limit) {
  using Result = absl::StatusOr<std::vector<model::WatchEvent>>;
  const int64_t max_rows = limit > 0 ? limit : std::numeric_limits<int64_t>::max();
  // This process's own changes after `after_rv` (copies: the writer may add more meanwhile);
  // those a reader has read past are dropped.
  std::map<int64_t, model::WatchEvent> own;
  {
    qm::MutexLock lock(&own_mu_);
    own_changes_.erase(own_changes_.begin(), own_changes_.upper_bound(after_rv));
    for (auto it = own_changes_.begin();
         it != own_changes_.end() && static_cast<int64_t>(own.size()) < max_rows; ++it) {
      own.emplace_hint(own.end(), it->first, it->second);
    }
  }
  std::string known = "{";
  for (const auto& [rv, ev] : own) {
    if (known.size() > 1) known += ',';
    known += std::to_string(rv);
  }
  known += '}';
  log_reads_.fetch_add(1);
  return WithConnection(*pool_, [&](pqxx::connection& c) -> Result {
    // One statement (one round trip, one snapshot) for the compaction point and the changes.
    pqxx::nontransaction tx(c);
    auto rows = tx.exec_prepared("changes_since", after_rv, max_rows, known);
    const int64_t compacted = rows.at(0)[0].as<int64_t>();
    if (after_rv < compacted) {
      return absl::OutOfRangeError("too old resource version: " + std::to_string(after_rv) + " (" +
                                   std::to_string(compacted + 1) + ")");
    }
    std::vector<model::WatchEvent> out;
    out.reserve(rows.size());
    for (const auto& row : rows) {
      if (row[1].is_null()) continue;  // no change after after_rv
      if (row[13].is_null()) {
        // One of this process's changes: its columns were left out.
        auto it = own.find(row[5].as<int64_t>());
        if (it == own.end())
          return absl::InternalError("change_log left out a change it must send");
        out.push_back(it->second);
        continue;
      }
      std::string type = row[14].as<std::string>();
      model::WatchEvent ev;
      ev.type = type == "ADDED"     ? model::EventType::kAdded
                : type == "DELETED" ? model::EventType::kDeleted
                                    : model::EventType::kModified;
      ev.object = DecodeRow(row, 1);
      out.push_back(std::move(ev));
    }
    auto by_rv = [](const model::WatchEvent& a, const model::WatchEvent& b) {
      return a.object.meta.resource_version < b.object.meta.resource_version;
    };
    if (!std::is_sorted(out.begin(), out.end(), by_rv)) std::sort(out.begin(), out.end(), by_rv);
    return out;
  });
}

void PgStore::WaitForChanges(int64_t after_rv, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  qm::MutexLock lock(&listen_mu_);
  // A change is known to exist when this process committed it or a notification named it (a
  // batch's newest revision, which has a row). The same notification ends no second wait from
  // the same revision: the caller read and found nothing (the database was replaced, say), and
  // returning at once again would spin.
  auto known = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(listen_mu_) {
    const int64_t notified = notified_rv_.load();
    if (notified > after_rv && std::make_pair(after_rv, notified) != answered_) {
      answered_ = {after_rv, notified};
      return true;
    }
    qm::MutexLock own(&own_mu_);
    return own_newest_ > after_rv;
  };
  try {
    if (listener_ == nullptr) {
      listener_ = std::make_unique<Listener>(url_, &notified_rv_);
      // Anything committed before LISTEN took effect is found by the caller's next read.
      return;
    }
    // Notifications of changes the caller has read already (its own batches, which it may
    // have taken from memory before their notification came) do not end the wait.
    listener_->conn.get_notifs();
    while (!known()) {
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return;
      listener_->conn.await_notification(left.count() / 1000000, left.count() % 1000000);
    }
  } catch (const std::exception&) {
    // Connection trouble: drop the listener and let the caller poll; it reconnects next time.
    listener_.reset();
    std::this_thread::sleep_for(std::min(timeout, std::chrono::milliseconds(200)));
  }
}

}  // namespace qm::store::pg
