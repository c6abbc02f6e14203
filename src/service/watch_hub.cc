#include "service/watch_hub.h"

#include "spdlog/spdlog.h"

namespace qm::service {
namespace {

constexpr int64_t kBatch = 1000;
constexpr auto kIdleWait = std::chrono::milliseconds(1000);
constexpr auto kCompactEvery = std::chrono::seconds(60);
// How long the hub pauses after an exception before it starts over.
constexpr auto kRestartDelay = std::chrono::milliseconds(200);

}  // namespace

WatchHub::WatchHub(store::Store& store, WatchHubOptions options)
    : store_(store), options_(options) {}

WatchHub::~WatchHub() { Stop(); }

void WatchHub::LoadSnapshotLocked() {
  auto all = store_.ListAll();
  cache_.clear();
  cache_ready_ = all.ok();
  if (!all.ok()) {
    spdlog::warn("watch hub: cannot load the object cache ({}); lists read the store",
                 all.status().ToString());
    auto rv = store_.CurrentRevision();
    last_rv_ = rv.ok() ? *rv : 0;
    return;
  }
  for (auto& obj : all->items) {
    model::ResourceKey key = obj.Key();
    cache_.emplace(std::move(key), std::move(obj));
  }
  last_rv_ = all->resource_version;
}

void WatchHub::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    LoadSnapshotLocked();
  }
  running_ = true;
  thread_ = std::thread([this] { Run(); });
}

void WatchHub::Stop() {
  if (!running_.exchange(false)) return;
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  watchers_.clear();
  cache_ready_ = false;
  dispatched_.notify_all();
}

size_t WatchHub::watcher_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return watchers_.size();
}

absl::Status WatchHub::Subscribe(std::shared_ptr<Watcher> watcher, int64_t from_rv) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t dispatched = last_rv_.load();
  if (from_rv < dispatched) {
    // Replay what the hub has already passed; newer changes come through Run().
    int64_t cursor = from_rv;
    while (cursor < dispatched) {
      auto events = store_.ChangesSince(cursor, kBatch);
      if (!events.ok()) return events.status();
      if (events->empty()) break;
      for (const auto& ev : *events) {
        if (ev.object.meta.resource_version > dispatched) {
          cursor = dispatched;
          break;
        }
        if (!watcher->Deliver(ev)) return absl::OkStatus();
        cursor = ev.object.meta.resource_version;
      }
    }
  }
  watchers_.push_back(Entry{std::move(watcher), from_rv});
  return absl::OkStatus();
}

std::optional<model::Object> WatchHub::Find(const model::ResourceKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!cache_ready_) return std::nullopt;
  auto it = cache_.find(key);
  if (it == cache_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<store::ListResult> WatchHub::List(const ListRequest& request, int64_t min_rv) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cache_ready_) return absl::FailedPreconditionError("no object cache");
  if (!dispatched_.wait_for(lock, std::chrono::seconds(1),
                            [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
                              return last_rv_.load() >= min_rv || !cache_ready_;
                            }) ||
      !cache_ready_) {
    return absl::DeadlineExceededError("object cache is behind the store");
  }
  store::ListResult result;
  result.resource_version = last_rv_.load();
  const store::ListOptions& o = request.store;
  auto it = cache_.lower_bound(model::ResourceKey{o.resource, o.after_namespace, o.after_name});
  for (; it != cache_.end() && it->first.resource == o.resource; ++it) {
    if (!o.after_name.empty() && it->first.namespace_ == o.after_namespace &&
        it->first.name == o.after_name) {
      continue;
    }
    if (!request.Matches(it->second)) continue;
    if (o.limit > 0 && static_cast<int64_t>(result.items.size()) == o.limit) {
      result.more = true;
      break;
    }
    result.items.push_back(it->second);
  }
  return result;
}

void WatchHub::DispatchLocked(const model::WatchEvent& event) {
  const int64_t rv = event.object.meta.resource_version;
  if (event.type == model::EventType::kDeleted) {
    cache_.erase(event.object.Key());
  } else {
    cache_[event.object.Key()] = event.object;
  }
  for (size_t i = 0; i < watchers_.size();) {
    Entry& e = watchers_[i];
    if (rv > e.start_rv && !e.watcher->Deliver(event)) {
      watchers_.erase(watchers_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    ++i;
  }
}

void WatchHub::Run() {
  bool restart = false;
  while (running_) {
    std::string failure;
    try {
      if (restart) Restart();
      restart = false;
      Follow();
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "an exception of unknown type";
    }
    if (failure.empty()) continue;
    // Nothing the hub meets (a store that throws, a watcher that throws, memory running out)
    // may end the process. Where it stopped dispatching is not known for sure, so every watch
    // ends with 410 (clients list again) and the cache is reloaded, after a short pause.
    unexpected_errors_.fetch_add(1);
    spdlog::error("watch hub: {}; ending every watch and reloading the cache", failure);
    restart = true;
    std::this_thread::sleep_for(kRestartDelay);
  }
}

void WatchHub::Restart() {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Status expired =
      absl::OutOfRangeError("the watch hub restarted after an internal error; list again");
  for (auto& e : watchers_) e.watcher->Expire(expired);
  watchers_.clear();
  LoadSnapshotLocked();
  dispatched_.notify_all();
}

void WatchHub::Follow() {
  auto last_compact = std::chrono::steady_clock::now();
  auto last_tick = std::chrono::steady_clock::now();
  while (running_) {
    auto events = store_.ChangesSince(last_rv_.load(), kBatch);
    if (absl::IsOutOfRange(events.status())) {
      // Compaction overtook us: end every watch with 410 and continue from the present.
      spdlog::warn("watch hub: fell behind the change log ({}); expiring {} watches",
                   events.status().ToString(), watcher_count());
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& e : watchers_) e.watcher->Expire(events.status());
      watchers_.clear();
      LoadSnapshotLocked();
      dispatched_.notify_all();
      continue;
    }
    if (!events.ok()) {
      spdlog::warn("watch hub: reading the change log failed: {}", events.status().ToString());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    if (!events->empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& ev : *events) {
        DispatchLocked(ev);
        last_rv_ = ev.object.meta.resource_version;
      }
      dispatched_.notify_all();
    }
    auto now = std::chrono::steady_clock::now();
    if (events->empty() || now - last_tick >= kIdleWait) {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < watchers_.size();) {
        if (!watchers_[i].watcher->Tick(last_rv_.load())) {
          watchers_.erase(watchers_.begin() + static_cast<std::ptrdiff_t>(i));
          continue;
        }
        ++i;
      }
      last_tick = now;
    }
    if (now - last_compact >= kCompactEvery) {
      last_compact = now;
      int64_t through = last_rv_.load() - options_.history;
      if (through > 0) {
        if (auto st = store_.Compact(through); !st.ok()) {
          spdlog::warn("watch hub: compaction failed: {}", st.ToString());
        }
      }
    }
    if (events->empty()) store_.WaitForChanges(last_rv_.load(), kIdleWait);
  }
}

}  // namespace qm::service
