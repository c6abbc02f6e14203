#include "api/rest/cluster_summary.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/rest/status.h"
#include "common/clock.h"
#include "common/status.h"
#include "model/json/read.h"
#include "nlohmann/json.hpp"

namespace qm::api {

using nlohmann::json;

namespace {

// The kinds whose last change the summary reports (hub resource names), and their plurals.
const std::vector<std::pair<std::string, std::string>>& Followed() {
  static const auto* kinds = new std::vector<std::pair<std::string, std::string>>{
      {"nodes", "nodes"},
      {"resourceslices.resource.k8s.io", "resourceslices"},
      {"resourceclaims.resource.k8s.io", "resourceclaims"},
      {"devicetaintrules.resource.k8s.io", "devicetaintrules"},
      {"deviceclasses.resource.k8s.io", "deviceclasses"},
  };
  return *kinds;
}

const std::string* PluralOf(const std::string& resource) {
  for (const auto& [r, plural] : Followed()) {
    if (r == resource) return &plural;
  }
  return nullptr;
}

// What the summary keeps of a Node.
struct NodeState {
  enum Ready : uint8_t { kReady, kNotReady, kUnknown };
  Ready ready = kUnknown;
  bool unschedulable = false;
};

NodeState StateOf(const model::Object& node) {
  NodeState s;
  auto it = node.fields.find("spec.unschedulable");
  s.unschedulable = it != node.fields.end() && it->second == "true";
  // The Ready condition, as the UI and kubectl read it (no condition: unknown).
  const json body = model::json::Read(node.body);
  if (!body.is_object()) return s;
  auto status = body.find("status");
  if (status == body.end() || !status->is_object()) return s;
  auto conditions = status->find("conditions");
  if (conditions == status->end() || !conditions->is_array()) return s;
  for (const json& c : *conditions) {
    if (!c.is_object() || c.value("type", json()) != "Ready") continue;
    const json st = c.value("status", json());
    s.ready = st == "True"    ? NodeState::kReady
              : st == "False" ? NodeState::kNotReady
                              : NodeState::kUnknown;
    break;
  }
  return s;
}

}  // namespace

// Counts the Nodes by state and notes each followed kind's last change, from the hub's change
// feed. Synchronous (called on the hub's follower thread before a change reaches the cache and
// the other watchers), so a summary watch that sees a change finds it counted here.
class NodeTally final : public service::Watcher {
 public:
  bool Synchronous() const override { return true; }

  // From a list of the nodes at `rv` and the kinds' last changes then.
  void Load(const std::vector<model::ObjectPtr>& nodes, int64_t rv,
            const std::map<std::string, int64_t>& last_changes) {
    qm::MutexLock lock(&mu_);
    for (const auto& n : nodes) Add(n->meta.name, StateOf(*n));
    state_.last_changes = last_changes;
    state_.resource_version = rv;
    for (const auto& [plural, v] : last_changes) {
      state_.resource_version = std::max(state_.resource_version, v);
    }
  }

  bool Deliver(const model::WatchEvent& ev) override {
    const std::string* plural = PluralOf(ev.object.resource);
    if (plural == nullptr) return true;
    const int64_t rv = ev.object.meta.resource_version;
    // Parsed outside the lock.
    std::optional<NodeState> next;
    if (ev.object.resource == "nodes" && ev.type != model::EventType::kDeleted) {
      next = StateOf(ev.object);
    }
    qm::MutexLock lock(&mu_);
    int64_t& last = state_.last_changes[*plural];
    last = std::max(last, rv);
    state_.resource_version = std::max(state_.resource_version, rv);
    if (ev.object.resource == "nodes") {
      Remove(ev.object.meta.name);
      if (next) Add(ev.object.meta.name, *next);
    }
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

  ClusterSummaryState Snapshot() {
    qm::MutexLock lock(&mu_);
    return state_;
  }

 private:
  void Add(const std::string& name, NodeState s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    nodes_[name] = s;
    Count(s, +1);
  }
  void Remove(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = nodes_.find(name);
    if (it == nodes_.end()) return;
    Count(it->second, -1);
    nodes_.erase(it);
  }
  void Count(NodeState s, int delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    state_.nodes += delta;
    (s.ready == NodeState::kReady      ? state_.ready
     : s.ready == NodeState::kNotReady ? state_.not_ready
                                       : state_.unknown) += delta;
    if (s.unschedulable) state_.unschedulable += delta;
  }

  qm::Mutex mu_;
  std::map<std::string, NodeState> nodes_ ABSL_GUARDED_BY(mu_);
  ClusterSummaryState state_ ABSL_GUARDED_BY(mu_);
  bool expired_ ABSL_GUARDED_BY(mu_) = false;
};

namespace {

constexpr auto kMinInterval = std::chrono::milliseconds(100);

// The object as a Table of one row (`kubectl get clustersummaries`); `with_columns` false leaves
// the column definitions out (a watch's events after the first, as Kubernetes sends them).
json SummaryTable(const json& object, const ClusterSummaryState& s,
                  std::chrono::system_clock::time_point created,
                  std::chrono::system_clock::time_point now, bool with_columns = true) {
  auto column = [](const char* name, const char* type, const char* format,
                   const char* description) {
    return json{{"name", name},
                {"type", type},
                {"format", format},
                {"description", description},
                {"priority", 0}};
  };
  json columns = json::array(
      {column("Name", "string", "name", "The object's name: always cluster."),
       column("Nodes", "integer", "", "Nodes in all."),
       column("Ready", "integer", "", "Nodes whose Ready condition is True."),
       column("Not Ready", "integer", "", "Nodes whose Ready condition is False."),
       column("Unknown", "integer", "", "Nodes without a Ready condition that is True or False."),
       column("Cordoned", "integer", "", "Nodes marked unschedulable."),
       column("Age", "string", "", "Since the server started.")});
  json row = {{"cells",
               {kClusterSummaryName, s.nodes, s.ready, s.not_ready, s.unknown, s.unschedulable,
                ShortHumanDuration(now - created)}},
              {"object",
               {{"kind", "PartialObjectMetadata"},
                {"apiVersion", "meta.k8s.io/v1"},
                {"metadata", object["metadata"]}}}};
  json table = {{"kind", "Table"},
                {"apiVersion", "meta.k8s.io/v1"},
                {"metadata", {{"resourceVersion", std::to_string(s.resource_version)}}}};
  if (with_columns) table["columnDefinitions"] = std::move(columns);
  table["rows"] = json::array({std::move(row)});
  return table;
}

// One watch of the summary: sends the tally's state when a followed kind changed, at most every
// kMinInterval (a change held back goes out with a later change or the next Tick).
class SummaryWatcher final : public service::Watcher {
 public:
  SummaryWatcher(std::shared_ptr<NodeTally> tally, std::shared_ptr<WatchSink> sink, int64_t sent_rv,
                 std::chrono::steady_clock::time_point deadline,
                 std::chrono::system_clock::time_point created, const Clock* table_clock)
      : tally_(std::move(tally)),
        sink_(std::move(sink)),
        sent_rv_(sent_rv),
        deadline_(deadline),
        created_(created),
        table_clock_(table_clock) {}

  bool Deliver(const model::WatchEvent& ev) override {
    if (closed_) return false;
    if (PluralOf(ev.object.resource) != nullptr) pending_ = true;
    if (pending_ && std::chrono::steady_clock::now() - last_sent_ >= kMinInterval) return Flush();
    return true;
  }

  bool Tick(int64_t) override {
    if (closed_) return false;
    if (std::chrono::steady_clock::now() >= deadline_) {
      Close();
      return false;
    }
    return !pending_ || Flush();
  }

  void Expire(const absl::Status& status) override {
    if (closed_) return;
    Write(json{{"type", "ERROR"}, {"object", ToHttpError(status, StatusDetails{}).status}});
    Close();
  }

  // Sends the current state if it is newer than what the client has ("ADDED" for the first
  // event of a watch from no resourceVersion).
  bool Flush(const char* type = "MODIFIED") {
    pending_ = false;
    last_sent_ = std::chrono::steady_clock::now();
    ClusterSummaryState s = tally_->Snapshot();
    if (s.resource_version <= sent_rv_ && sent_rv_ != 0) return true;
    sent_rv_ = s.resource_version;
    json object = ClusterSummary::Encode(s, created_);
    if (table_clock_ != nullptr) {
      object = SummaryTable(object, s, created_, table_clock_->Now(), !columns_sent_);
      columns_sent_ = true;
    }
    return Write(json{{"type", type}, {"object", std::move(object)}});
  }

 private:
  bool Write(const json& event) {
    if (!sink_->Write(ResponseText(event) + "\n")) {
      closed_ = true;
      return false;
    }
    return true;
  }

  void Close() {
    if (!closed_) sink_->End();
    closed_ = true;
  }

  std::shared_ptr<NodeTally> tally_;
  std::shared_ptr<WatchSink> sink_;
  int64_t sent_rv_;
  const std::chrono::steady_clock::time_point deadline_;
  const std::chrono::system_clock::time_point created_;
  const Clock* const table_clock_;  // non-null: the events' objects are Tables (as=Table)
  bool columns_sent_ = false;
  std::chrono::steady_clock::time_point last_sent_{};
  bool pending_ = false;
  bool closed_ = false;
};

HttpResponse JsonResponse(int code, const json& body) {
  return HttpResponse{code, "application/json", ResponseText(body), {}};
}

HttpResponse ErrorOf(const HttpError& e) { return JsonResponse(e.code, e.status); }

}  // namespace

ClusterSummary::~ClusterSummary() = default;

absl::StatusOr<std::shared_ptr<NodeTally>> ClusterSummary::Tally() {
  // Waits until the hub shows this process's committed writes: the tally, called before the hub
  // moves past a change, has then counted them. Should the hub lag more than its wait (a second),
  // the counts are served as the hub has them.
  (void)objects_.LastChanges({"nodes"});
  qm::MutexLock lock(&mu_);
  if (tally_ != nullptr && !tally_->expired()) return tally_;
  // First use, or the hub ended the last tally (it lost its place): one list of the Nodes, then
  // the changes after it.
  auto tally = std::make_shared<NodeTally>();
  service::ListRequest request;
  request.store.resource = "nodes";
  auto nodes = hub_.List(request, hub_.last_dispatched());
  if (!nodes.ok()) return nodes.status();
  std::vector<std::string> resources;
  for (const auto& [r, plural] : Followed()) resources.push_back(r);
  auto changes = hub_.LastChanges(resources, nodes->resource_version);
  if (!changes.ok()) return changes.status();
  std::map<std::string, int64_t> last;
  for (size_t i = 0; i < resources.size(); ++i) last[Followed()[i].second] = (*changes)[i];
  tally->Load(nodes->items, nodes->resource_version, last);
  QM_RETURN_IF_ERROR(hub_.Subscribe(tally, nodes->resource_version));
  tally_ = tally;
  return tally;
}

absl::StatusOr<ClusterSummaryState> ClusterSummary::State() {
  QM_ASSIGN_OR_RETURN(auto tally, Tally());
  return tally->Snapshot();
}

json ClusterSummary::Encode(const ClusterSummaryState& s,
                            std::chrono::system_clock::time_point created) {
  json changes = json::object();
  for (const auto& [plural, rv] : s.last_changes) changes[plural] = std::to_string(rv);
  return json{{"apiVersion", "admin.quartermaster.io/v1alpha1"},
              {"kind", kClusterSummaryKind},
              {"metadata",
               {{"name", kClusterSummaryName},
                {"resourceVersion", std::to_string(s.resource_version)},
                {"creationTimestamp", FormatRfc3339(created)}}},
              {"status",
               {{"nodes",
                 {{"total", s.nodes},
                  {"ready", s.ready},
                  {"notReady", s.not_ready},
                  {"unknown", s.unknown},
                  {"unschedulable", s.unschedulable}}},
                {"lastChanges", std::move(changes)}}}};
}

HttpResponse ClusterSummary::Get(const std::string& name, bool table) {
  if (!name.empty() && name != kClusterSummaryName) {
    HttpError e = MakeError(
        404, "NotFound",
        absl::StrCat(kClusterSummaryResource, ".admin.quartermaster.io \"", name, "\" not found"));
    e.status["details"] = {
        {"name", name}, {"group", "admin.quartermaster.io"}, {"kind", kClusterSummaryResource}};
    return ErrorOf(e);
  }
  auto state = State();
  if (!state.ok()) return ErrorOf(ToHttpError(state.status(), StatusDetails{}));
  json object = Encode(*state, created_);
  if (table) return JsonResponse(200, SummaryTable(object, *state, created_, clock_.Now()));
  if (!name.empty()) return JsonResponse(200, object);
  return JsonResponse(
      200, json{{"apiVersion", "admin.quartermaster.io/v1alpha1"},
                {"kind", absl::StrCat(kClusterSummaryKind, "List")},
                {"metadata", {{"resourceVersion", std::to_string(state->resource_version)}}},
                {"items", json::array({std::move(object)})}});
}

std::optional<HttpResponse> ClusterSummary::StartWatch(const HttpRequest& req,
                                                       std::shared_ptr<WatchSink> sink) {
  auto query = [&](const char* key) {
    auto it = req.query.find(key);
    return it == req.query.end() ? std::string() : it->second;
  };
  // A field selector may name the one object (kubectl get -w, client-go's informers of one).
  const std::string fields = query("fieldSelector");
  if (!fields.empty() && fields != absl::StrCat("metadata.name=", kClusterSummaryName)) {
    return ErrorOf(MakeError(
        400, "BadRequest",
        absl::StrCat("field selector \"", fields, "\": only metadata.name=cluster is supported")));
  }
  const std::string rv_text = query("resourceVersion");
  int64_t from_rv = 0;
  if (!rv_text.empty()) {
    char* end = nullptr;
    from_rv = std::strtoll(rv_text.c_str(), &end, 10);
    if (*end != '\0' || from_rv < 0) {
      return ErrorOf(MakeError(400, "BadRequest", "invalid resource version: " + rv_text));
    }
  }
  constexpr int64_t kDefaultWatchSeconds = 3600, kMaxWatchSeconds = 86400;
  int64_t timeout_s = std::atoll(query("timeoutSeconds").c_str());
  if (timeout_s <= 0) timeout_s = kDefaultWatchSeconds;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(std::min(timeout_s, kMaxWatchSeconds));
  auto tally = Tally();
  if (!tally.ok()) return ErrorOf(ToHttpError(tally.status(), StatusDetails{}));
  // Read before the state is sent: every change after it reaches the watcher, and the tally
  // (called before the hub moves past a change) already counts every change up to it.
  const int64_t subscribe_from = hub_.last_dispatched();
  auto watcher = std::make_shared<SummaryWatcher>(
      *tally, sink, from_rv, deadline, created_,
      req.accept.find("as=Table") != std::string::npos ? &clock_ : nullptr);
  sink->Begin({});
  // The state now: ADDED for a watch from nothing, MODIFIED when it changed since from_rv.
  if (!watcher->Flush(from_rv == 0 ? "ADDED" : "MODIFIED")) return std::nullopt;
  absl::Status st = hub_.Subscribe(watcher, subscribe_from);
  if (!st.ok()) watcher->Expire(st);
  return std::nullopt;
}

}  // namespace qm::api
