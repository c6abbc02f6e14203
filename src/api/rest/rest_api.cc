#include "api/rest/rest_api.h"

#include "api/rest/admin_api.h"
#include "api/rest/auth_endpoints.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api/rest/codec.h"
#include "api/rest/discovery.h"
#include "api/rest/patch.h"
#include "api/rest/protobuf.h"
#include "api/rest/request_gate.h"
#include "api/rest/rest_internal.h"
#include "api/rest/schema.h"
#include "api/rest/status.h"
#include "api/rest/table.h"
#include "api/rest/validation.h"
#include "common/quantity.h"
#include "common/status.h"
#include "model/json/stored.h"
#include "service/node_restriction.h"

namespace qm::api {

using nlohmann::json;
using namespace rest_internal;  // NOLINT(google-build-using-namespace)

namespace {

constexpr char kAdminAccessLabel[] = "resource.kubernetes.io/admin-access";

// Paths of the requests of a claim spec (`prefix` is "spec" or "spec.spec") that ask for admin
// access.
std::vector<std::string> AdminAccessRequests(const json& claim_spec, const std::string& prefix) {
  std::vector<std::string> out;
  if (!claim_spec.is_object() || !claim_spec.contains("devices")) return out;
  const json& requests = claim_spec["devices"].value("requests", json::array());
  for (size_t i = 0; i < requests.size(); ++i) {
    const json& exactly = requests[i].value("exactly", json::object());
    if (exactly.is_object() && exactly.value("adminAccess", false)) {
      out.push_back(prefix + ".devices.requests[" + std::to_string(i) + "].exactly.adminAccess");
    }
  }
  return out;
}

std::string DeprecationWarning(const model::ResourceType& type, const std::string& version) {
  std::string removal = version == "v1beta1" ? "v1.38" : "v1.39";
  std::string since = version == "v1beta1" ? "v1.35" : "v1.36";
  return type.ApiVersion(version) + " " + type.kind + " is deprecated in " + since +
         "+, unavailable in " + removal + "+; use " + type.ApiVersion("v1") + " " + type.kind;
}

// Parses /api/v1/... and /apis/<group>/<version>/... resource paths. Returns false when the
// path is not a resource path at all.
bool ParseTarget(const std::vector<std::string>& seg, size_t start, const std::string& group,
                 const std::string& version, RestApi::Target* t);

class StreamingWatcher final : public service::Watcher {
 public:
  StreamingWatcher(const model::ResourceType& type, std::string version, std::string ns,
                   model::LabelSelector labels, model::FieldSelector fields, bool table,
                   bool bookmarks, std::chrono::steady_clock::time_point deadline,
                   std::shared_ptr<WatchSink> sink, const Clock& clock)
      : type_(type),
        version_(std::move(version)),
        ns_(std::move(ns)),
        labels_(std::move(labels)),
        fields_(std::move(fields)),
        table_(table),
        bookmarks_(bookmarks),
        deadline_(deadline),
        sink_(std::move(sink)),
        clock_(clock) {}

  bool WantsPrevious() const override { return !labels_.Empty() || !fields_.Empty(); }

  bool Deliver(const model::WatchEvent& ev) override {
    if (closed_) return false;
    const model::Object& obj = ev.object;
    if (obj.resource != type_.GroupResource()) return true;
    if (!ns_.empty() && obj.meta.namespace_ != ns_) return true;
    // As Kubernetes' watch cache: a change that makes an object match the selectors is ADDED,
    // one that makes it stop matching is DELETED with the object as it last matched (at this
    // change's resourceVersion). Without the previous state (a change replayed from the log), a
    // matching change keeps its type and others are skipped.
    model::EventType type = ev.type;
    const model::Object* shown = &obj;
    model::Object last_matching;
    const bool matches = Passes(obj);
    if (ev.type == model::EventType::kModified && ev.previous != nullptr) {
      const bool matched = Passes(*ev.previous);
      if (!matches && !matched) return true;
      if (matches && !matched) type = model::EventType::kAdded;
      if (!matches && matched) {
        type = model::EventType::kDeleted;
        last_matching = *ev.previous;
        last_matching.meta.resource_version = obj.meta.resource_version;
        shown = &last_matching;
      }
    } else if (!matches) {
      return true;
    }
    last_rv_ = obj.meta.resource_version;
    if (!table_) {
      return WriteText(std::string(R"({"type":")") + model::EventTypeName(type) + R"(","object":)" +
                       EncodeObjectText(type_, version_, *shown) + "}");
    }
    return Send(model::EventTypeName(type), EncodeFor(type_, version_, *shown));
  }

  bool Passes(const model::Object& o) const {
    return labels_.Matches(o.meta.labels) &&
           fields_.Matches(o.meta.name, o.meta.namespace_, o.fields);
  }

  bool Tick(int64_t rv) override {
    if (closed_) return false;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline_) {
      Close();
      return false;
    }
    if (bookmarks_ && rv > last_rv_ && now - last_bookmark_ >= std::chrono::seconds(5)) {
      last_bookmark_ = now;
      last_rv_ = rv;
      json obj = {{"kind", type_.kind},
                  {"apiVersion", type_.ApiVersion(version_)},
                  {"metadata", {{"resourceVersion", std::to_string(rv)}}}};
      return Write(json{{"type", "BOOKMARK"}, {"object", obj}});
    }
    // A zero-length write would end the chunked stream; probe liveness with nothing.
    return true;
  }

  bool Send(const char* type, const json& obj) {
    if (!table_) return Write(json{{"type", type}, {"object", obj}});
    json rows = json::array({TableRow(type_, obj, clock_.Now())});
    std::string rv = StringAt(obj["metadata"], "resourceVersion");
    json table = MakeTable(type_, std::move(rows), rv, "", !sent_columns_);
    sent_columns_ = true;
    return Write(json{{"type", type}, {"object", table}});
  }

  bool Write(const json& event) { return WriteText(ResponseText(event)); }

  bool WriteText(const std::string& event) {
    if (!sink_->Write(event + "\n")) {
      closed_ = true;
      return false;
    }
    return true;
  }

  void Close() {
    if (!closed_) sink_->End();
    closed_ = true;
  }

  void Expire(const absl::Status& status) override {
    if (closed_) return;
    Write(json{{"type", "ERROR"}, {"object", ToHttpError(status, StatusDetails{}).status}});
    Close();
  }

  void set_last_rv(int64_t rv) { last_rv_ = rv; }

 private:
  const model::ResourceType& type_;
  const std::string version_;
  const std::string ns_;
  const model::LabelSelector labels_;
  const model::FieldSelector fields_;
  const bool table_;
  const bool bookmarks_;
  const std::chrono::steady_clock::time_point deadline_;
  std::shared_ptr<WatchSink> sink_;
  const Clock& clock_;
  bool closed_ = false;
  bool sent_columns_ = false;
  int64_t last_rv_ = 0;
  std::chrono::steady_clock::time_point last_bookmark_ = std::chrono::steady_clock::now();
};

bool ParseTarget(const std::vector<std::string>& seg, size_t i, const std::string& group,
                 const std::string& version, RestApi::Target* t) {
  t->version = version;
  // /namespaces/<ns>/<resource>... for namespaced resources.
  if (seg.size() >= i + 3 && seg[i] == "namespaces") {
    const model::ResourceType* rt = model::FindResourceType(group, seg[i + 2]);
    if (rt != nullptr && rt->namespaced) {
      t->type = rt;
      t->namespace_ = seg[i + 1];
      if (seg.size() > i + 3) t->name = seg[i + 3];
      if (seg.size() > i + 4) t->subresource = seg[i + 4];
      return seg.size() <= i + 5;
    }
  }
  if (seg.size() <= i) return false;
  t->type = model::FindResourceType(group, seg[i]);
  if (t->type == nullptr) return false;
  if (seg.size() > i + 1) t->name = seg[i + 1];
  if (seg.size() > i + 2) t->subresource = seg[i + 2];
  return seg.size() <= i + 3;
}

// Splits the path into segments and finds the resource it names (nullptr type when none).
bool ResolvePath(const std::string& path, RestApi::Target* t) {
  std::vector<std::string> seg;
  for (auto s : absl::StrSplit(path, '/', absl::SkipEmpty())) seg.emplace_back(s);
  if (seg.size() >= 3 && seg[0] == "api" && seg[1] == "v1") {
    return ParseTarget(seg, 2, "", "v1", t);
  }
  if (seg.size() >= 4 && seg[0] == "apis") {
    return ParseTarget(seg, 3, seg[1], seg[2], t) && t->type->ServesVersion(seg[2]);
  }
  return false;
}

}  // namespace

RestApi::RestApi(service::ObjectService& objects, service::WatchHub& hub, const Clock& clock)
    : objects_(objects),
      hub_(hub),
      clock_(clock),
      admin_(std::make_unique<AdminApi>(objects, clock, &hub)) {}

RestApi::~RestApi() = default;

void RestApi::PrewarmAdminViews() {
  // Settled: unchanged for two seconds. In use: a view asked within ten minutes.
  admin_->inventories().StartPrewarming(std::chrono::seconds(2), std::chrono::minutes(10));
}

bool RestApi::IsWatch(const HttpRequest& request) {
  auto it = request.query.find("watch");
  return request.method == "GET" && it != request.query.end() &&
         (it->second == "true" || it->second == "1");
}

std::pair<std::string, std::string> RestApi::Describe(const HttpRequest& r) {
  Target t;
  if (!ResolvePath(r.path, &t)) return {r.method == "GET" ? "get" : "other", ""};
  std::string resource = t.type->plural + (t.subresource.empty() ? "" : "/" + t.subresource);
  std::string verb;
  if (r.method == "GET") {
    verb = IsWatch(r) ? "watch" : (t.name.empty() ? "list" : "get");
  } else if (r.method == "POST") {
    verb = "create";
  } else if (r.method == "PUT") {
    verb = "update";
  } else if (r.method == "PATCH") {
    verb = "patch";
  } else if (r.method == "DELETE") {
    verb = t.name.empty() ? "deletecollection" : "delete";
  } else {
    verb = "other";
  }
  return {verb, resource};
}

HttpResponse RestApi::Handle(const HttpRequest& req) {
  const std::string& p = req.path;
  // Typed Kubernetes clients (kubectl create namespace/serviceaccount/token, auth can-i) send
  // protobuf and do not fall back to JSON: decode the kinds they send.
  if ((req.method == "POST" || req.method == "PUT") &&
      req.content_type.rfind(kProtobufContentType, 0) == 0) {
    auto decoded = DecodeKubernetesProtobuf(req.body);
    if (!decoded.ok()) return ErrorResponse(ToHttpError(decoded.status(), StatusDetails{}));
    HttpRequest as_json = req;
    as_json.content_type = "application/json";
    as_json.body = decoded->dump();
    return Handle(as_json);
  }
  if (auth_endpoints_ != nullptr && AuthEndpoints::Serves(p)) return auth_endpoints_->Handle(req);
  if (IsAdminApiPath(p)) return admin_->Handle(req);
  if (req.method == "GET") {
    if (p == "/version" || p == "/version/") return JsonResponse(200, VersionInfo());
    if (p == "/api" || p == "/apis") {
      if (req.accept.find("as=APIGroupDiscoveryList") != std::string::npos) {
        HttpResponse r =
            JsonResponse(200, p == "/api" ? AggregatedCoreDiscovery() : AggregatedGroupDiscovery());
        r.content_type = kAggregatedDiscoveryContentType;
        return r;
      }
      return JsonResponse(200, p == "/api" ? LegacyCoreVersions() : LegacyGroupList());
    }
    if (p == "/api/v1") return JsonResponse(200, LegacyResourceList("", "v1"));
    if (p.rfind("/apis/", 0) == 0) {
      std::vector<std::string> seg = absl::StrSplit(p.substr(6), '/', absl::SkipEmpty());
      if (seg.size() == 1) {
        json g = LegacyGroup(seg[0]);
        return g.is_null() ? NotFoundPath() : JsonResponse(200, g);
      }
      if (seg.size() == 2) {
        json l = LegacyResourceList(seg[0], seg[1]);
        return l.is_null() ? NotFoundPath() : JsonResponse(200, l);
      }
    }
    if (p == "/openapi/v3" || p == "/openapi/v3/") return JsonResponse(200, OpenApiIndex());
    if (p.rfind("/openapi/v3/", 0) == 0) {
      std::string gv = p.substr(std::string("/openapi/v3/").size());
      if (gv.rfind("api/", 0) == 0) {
        gv = gv.substr(4);
      } else if (gv.rfind("apis/", 0) == 0) {
        gv = gv.substr(5);
      }
      const json& doc = OpenApiDocument(gv);
      if (doc.is_null()) return NotFoundPath();
      HttpResponse r = JsonResponse(200, doc);
      return r;
    }
  }
  Target t;
  if (!ResolvePath(p, &t)) return NotFoundPath();
  if (!t.subresource.empty() && (t.subresource != "status" || !t.type->has_status)) {
    return NotFoundPath();
  }
  HttpResponse r = HandleResource(req, t);
  if (t.type->IsDeprecated(t.version)) r.warnings.push_back(DeprecationWarning(*t.type, t.version));
  return r;
}

void RestApi::CheckAdminAccess(const model::ResourceType& type, const json& hub,
                               model::FieldErrors* errors) {
  std::vector<std::string> paths;
  if (type.kind == "ResourceClaim") {
    paths = AdminAccessRequests(hub.value("spec", json::object()), "spec");
  } else if (type.kind == "ResourceClaimTemplate") {
    paths = AdminAccessRequests(hub.value("spec", json::object()).value("spec", json::object()),
                                "spec.spec");
  }
  if (paths.empty()) return;
  const std::string ns = StringAt(hub.value("metadata", json::object()), "namespace");
  auto namespace_object = objects_.Get(model::ResourceKey{"namespaces", "", ns});
  const bool allowed = namespace_object.ok() &&
                       namespace_object->meta.labels.contains(kAdminAccessLabel) &&
                       namespace_object->meta.labels.at(kAdminAccessLabel) == "true";
  if (allowed) return;
  for (const auto& path : paths) {
    errors->push_back(model::Forbidden(
        path,
        "admin access to devices requires the `resource.kubernetes.io/admin-access: true` "
        "label on the containing namespace"));
  }
}

std::optional<HttpResponse> RestApi::StartWatch(const HttpRequest& req,
                                                std::shared_ptr<WatchSink> sink) {
  if (IsAdminApiPath(req.path)) return admin_->StartWatch(req, std::move(sink));
  Target t;
  if (!ResolvePath(req.path, &t) || !t.subresource.empty()) return NotFoundPath();
  const model::ResourceType& type = *t.type;
  auto lr = ListRequestFor(t, req);
  if (!lr.ok()) return ErrorResponse(ToHttpError(lr.status(), Details(type, "")));
  if (!t.name.empty()) {
    // GET .../name?watch=true is the legacy form of a name field selector.
    auto fs = model::FieldSelector::Parse("metadata.name=" + t.name, {});
    lr->fields = *fs;
  }
  // timeoutSeconds: absent or 0 means the server default; larger values are capped.
  constexpr int64_t kDefaultWatchSeconds = 3600, kMaxWatchSeconds = 86400;
  int64_t timeout_s = std::atoll(QueryParam(req, "timeoutSeconds").c_str());
  if (timeout_s <= 0) timeout_s = kDefaultWatchSeconds;
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::seconds(std::min(timeout_s, kMaxWatchSeconds));
  std::string rv_text = QueryParam(req, "resourceVersion");
  int64_t from_rv = 0;
  if (!rv_text.empty() && rv_text != "0") {
    char* end = nullptr;
    from_rv = std::strtoll(rv_text.c_str(), &end, 10);
    if (*end != '\0' || from_rv < 0) {
      return ErrorResponse(MakeError(400, "BadRequest", "invalid resource version: " + rv_text));
    }
  }
  auto watcher = std::make_shared<StreamingWatcher>(
      type, t.version, t.namespace_, lr->labels, lr->fields, WantsTable(req),
      QueryParam(req, "allowWatchBookmarks") == "true", deadline, sink, clock_);
  std::vector<std::string> warnings;
  if (type.IsDeprecated(t.version)) warnings.push_back(DeprecationWarning(type, t.version));

  if (rv_text.empty() || rv_text == "0") {
    // Synthetic ADDED events for the current state, then changes after it.
    lr->store.limit = 0;
    auto list = objects_.List(*lr);
    if (!list.ok()) return ErrorResponse(ToHttpError(list.status(), Details(type, "")));
    sink->Begin(warnings);
    for (const auto& o : list->items) {
      if (!watcher->Send("ADDED", EncodeFor(type, t.version, *o))) return std::nullopt;
    }
    from_rv = list->resource_version;
  } else {
    sink->Begin(warnings);
  }
  watcher->set_last_rv(from_rv);
  absl::Status st = hub_.Subscribe(watcher, from_rv);
  if (!st.ok()) watcher->Expire(st);
  return std::nullopt;
}

absl::Status RestApi::EnsureDefaultNamespace() {
  const model::ResourceType* ns = model::FindResourceType("", "namespaces");
  auto existing = objects_.Get(model::ResourceKey{"namespaces", "", "default"});
  if (existing.ok()) return absl::OkStatus();
  if (!absl::IsNotFound(existing.status())) return existing.status();
  json obj = ToHub(*ns, "v1", json{{"metadata", {{"name", "default"}}}}, clock_);
  QM_ASSIGN_OR_RETURN(model::Object o, ToObject(*ns, obj));
  auto created = objects_.Create(std::move(o), false);
  if (absl::IsAlreadyExists(created.status())) return absl::OkStatus();
  return created.status();
}

absl::Status RestApi::ApplyManifests(const std::string& json_array) {
  json docs = json::parse(json_array, nullptr, false);
  if (!docs.is_array()) return absl::InvalidArgumentError("manifests must be a JSON array");
  for (const auto& doc : docs) {
    if (!doc.is_object() || !doc.contains("metadata") || !doc["metadata"].is_object()) {
      return absl::InvalidArgumentError("every manifest needs an object with metadata");
    }
    std::string api_version = StringAt(doc, "apiVersion");
    std::string group, version = api_version;
    if (auto slash = api_version.find('/'); slash != std::string::npos) {
      group = api_version.substr(0, slash);
      version = api_version.substr(slash + 1);
    }
    const model::ResourceType* type = model::FindResourceTypeByKind(group, StringAt(doc, "kind"));
    if (type == nullptr || !type->ServesVersion(version)) {
      return absl::InvalidArgumentError("unsupported manifest kind " + api_version + " " +
                                        StringAt(doc, "kind"));
    }
    HttpRequest req;
    req.method = "PATCH";
    req.content_type = "application/apply-patch+yaml";
    std::string name = StringAt(doc["metadata"], "name");
    std::string ns = StringAt(doc["metadata"], "namespace");
    if (ns.empty() && type->namespaced) ns = "default";
    req.path = (group.empty() ? "/api/" + version : "/apis/" + group + "/" + version) +
               (type->namespaced ? "/namespaces/" + ns : "") + "/" + type->plural + "/" + name;
    // Record the manifest as `kubectl apply` would, so a later `kubectl apply` of the same file
    // diffs against it instead of warning about a missing annotation.
    json applied = doc;
    if (!applied["metadata"].contains("annotations"))
      applied["metadata"]["annotations"] = json::object();
    json body = doc;
    body["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
        applied.dump() + "\n";
    req.body = body.dump();
    HttpResponse r = Handle(req);
    if (r.code >= 300) {
      return absl::InvalidArgumentError("loading " + type->kind + " " + name + ": " + r.body);
    }
  }
  return absl::OkStatus();
}

}  // namespace qm::api
