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

// What a resource path names.
struct RestApi::Target {
  const model::ResourceType* type = nullptr;
  std::string version;
  std::string namespace_;  // from /namespaces/<ns>/ in the path
  std::string name;
  std::string subresource;
};

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

// The string member `key` of `obj`, or "" when `obj` is not an object or the member is missing
// or not a string (client input may have any shape).
std::string StringAt(const json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

HttpResponse JsonResponse(int code, const json& body) {
  HttpResponse r;
  r.code = code;
  r.body = ResponseText(body);
  return r;
}

HttpResponse TextResponse(int code, std::string body) {
  HttpResponse r;
  r.code = code;
  r.body = std::move(body);
  return r;
}

HttpResponse ErrorResponse(const HttpError& err) { return JsonResponse(err.code, err.status); }

HttpResponse NotFoundPath() {
  return ErrorResponse(
      MakeError(404, "NotFound", "the server could not find the requested resource"));
}

std::string QueryParam(const HttpRequest& r, const std::string& name) {
  auto it = r.query.find(name);
  return it == r.query.end() ? "" : it->second;
}

bool WantsTable(const HttpRequest& r) { return r.accept.find("as=Table") != std::string::npos; }

bool DryRun(const HttpRequest& r) { return QueryParam(r, "dryRun") == "All"; }

// dryRun may only be absent or "All".
absl::Status CheckDryRun(const HttpRequest& r) {
  auto it = r.query.find("dryRun");
  if (it == r.query.end() || it->second == "All") return absl::OkStatus();
  return absl::InvalidArgumentError("dryRun: Unsupported value: \"" + it->second +
                                    "\": supported values: \"All\"");
}

std::string DeprecationWarning(const model::ResourceType& type, const std::string& version) {
  std::string removal = version == "v1beta1" ? "v1.38" : "v1.39";
  std::string since = version == "v1beta1" ? "v1.35" : "v1.36";
  return type.ApiVersion(version) + " " + type.kind + " is deprecated in " + since +
         "+, unavailable in " + removal + "+; use " + type.ApiVersion("v1") + " " + type.kind;
}

StatusDetails Details(const model::ResourceType& type, const std::string& name) {
  return StatusDetails{name, type.group, type.plural};
}

// Parses /api/v1/... and /apis/<group>/<version>/... resource paths. Returns false when the
// path is not a resource path at all.
bool ParseTarget(const std::vector<std::string>& seg, size_t start, const std::string& group,
                 const std::string& version, RestApi::Target* t);

// Kubernetes rewrites v1beta1 error paths back into the client's shape.
void ToClientPaths(const model::ResourceType& type, const std::string& version,
                   model::FieldErrors* errors) {
  if (version != "v1beta1") return;
  constexpr std::string_view kExactly = ".exactly.";
  constexpr std::string_view kDevices = "spec.devices[";
  for (auto& e : *errors) {
    std::string& f = e.field;
    // "...requests[3].exactly.count" -> "...requests[3].count"
    for (size_t pos = f.find(kExactly); pos != std::string::npos; pos = f.find(kExactly, pos)) {
      if (pos > 0 && f[pos - 1] == ']' && f.rfind("requests[", pos) != std::string::npos) {
        f.erase(pos + 1, kExactly.size() - 1);
      } else {
        pos += kExactly.size();
      }
    }
    // "spec.devices[2].attributes[...]" -> "spec.devices[2].basic.attributes[...]"
    if (type.kind == "ResourceSlice" && f.rfind(kDevices, 0) == 0) {
      size_t close = f.find(']', kDevices.size());
      if (close == std::string::npos || close + 1 >= f.size() || f[close + 1] != '.') continue;
      std::string_view rest(f.c_str() + close + 2);
      if (rest.rfind("name", 0) == 0 || rest.rfind("basic", 0) == 0) continue;
      f.insert(close + 2, "basic.");
    }
  }
}

// Checks apiVersion/kind of a body against the URL and fills them when absent.
absl::Status CheckTypeMeta(const model::ResourceType& type, const std::string& version, json& obj) {
  if (!obj.is_object()) return absl::InvalidArgumentError("the request body must be a JSON object");
  const std::string want = type.ApiVersion(version);
  if (obj.contains("apiVersion") && obj["apiVersion"] != want) {
    return absl::InvalidArgumentError("the API version in the data (" + obj["apiVersion"].dump() +
                                      ") does not match the expected API version (" + want + ")");
  }
  if (obj.contains("kind") && obj["kind"] != type.kind) {
    return absl::InvalidArgumentError("the kind in the data (" + obj["kind"].dump() +
                                      ") does not match the expected kind (" + type.kind + ")");
  }
  obj["apiVersion"] = want;
  obj["kind"] = type.kind;
  return absl::OkStatus();
}

// fieldValidation: Strict rejects unknown fields, Warn (the default) reports them.
absl::Status CheckUnknownFields(const model::ResourceType& type, const std::string& version,
                                const json& obj, const HttpRequest& req,
                                std::vector<std::string>* warnings) {
  const std::string mode = QueryParam(req, "fieldValidation");
  if (mode == "Ignore") return absl::OkStatus();
  return ApplyFieldValidation(mode, UnknownFields(type, version, obj), warnings);
}

// Nesting deeper than this is refused before parsing: the JSON library recurses on copy, dump
// and merge, and a deep enough document would overflow the stack.
constexpr int kMaxJsonDepth = 1000;

// The members of every object in `j`.
size_t CountMembers(const json& j) {
  if (!j.is_structured()) return 0;
  size_t n = j.is_object() ? j.size() : 0;
  for (const auto& v : j) n += CountMembers(v);  // an object's values, an array's elements
  return n;
}

absl::StatusOr<json> ParseBody(const std::string& body,
                               std::vector<std::string>* duplicates = nullptr) {
  int depth = 0;
  bool in_string = false;
  size_t keys = 0;  // ':' outside strings: one per member written
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (in_string) {
      if (c == '\\') {
        // PostgreSQL's jsonb cannot hold NUL characters; refuse them up front.
        if (i + 5 < body.size() && body[i + 1] == 'u' && body.compare(i + 2, 4, "0000") == 0) {
          return absl::InvalidArgumentError("JSON strings must not contain NUL (\\u0000)");
        }
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth) {
        return absl::InvalidArgumentError("the request body nests deeper than " +
                                          std::to_string(kMaxJsonDepth) + " levels");
      }
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == ':') {
      ++keys;
    }
  }
  {
    json j = json::parse(body, nullptr, false);
    if (j.is_discarded()) return absl::InvalidArgumentError("the request body is not valid JSON");
    // As many members as were written: no key repeats, and the plain parse is the answer.
    if (duplicates == nullptr || CountMembers(j) == keys) return j;
  }
  // Duplicate keys: the last one wins (as Kubernetes' decoder), and each is reported so the
  // caller can warn or, with fieldValidation=Strict, refuse.
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;
  };
  std::vector<Frame> frames;
  json::parser_callback_t cb = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        frames.push_back({true, {}, ""});
        break;
      case json::parse_event_t::array_start:
        frames.push_back({false, {}, ""});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!frames.empty()) frames.pop_back();
        break;
      case json::parse_event_t::key:
        if (!frames.empty() && parsed.is_string()) {
          Frame& top = frames.back();
          top.key = parsed.get<std::string>();
          if (!top.keys.insert(top.key).second && duplicates != nullptr) {
            std::string path;
            for (const auto& f : frames) {
              if (!f.object) continue;
              path += (path.empty() ? "" : ".") + f.key;
            }
            duplicates->push_back(path);
          }
        }
        break;
      default:
        break;
    }
    return true;
  };
  json j = json::parse(body, cb, false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError("the request body is not valid JSON");
  }
  return j;
}

// Duplicate fields in a request body: a warning each, or with fieldValidation=Strict a 400.
absl::Status CheckDuplicateFields(const std::vector<std::string>& duplicates,
                                  const HttpRequest& req, std::vector<std::string>* warnings) {
  if (duplicates.empty() || QueryParam(req, "fieldValidation") == "Ignore") {
    return absl::OkStatus();
  }
  if (QueryParam(req, "fieldValidation") == "Strict") {
    std::string msg = "strict decoding error: ";
    for (size_t i = 0; i < duplicates.size(); ++i) {
      msg += (i ? ", " : "") + std::string("json: duplicate field \"") + duplicates[i] + "\"";
    }
    return absl::InvalidArgumentError(msg);
  }
  for (const auto& d : duplicates) warnings->push_back("duplicate field \"" + d + "\"");
  return absl::OkStatus();
}

std::string EncodeContinue(const std::string& ns, const std::string& name) {
  return absl::WebSafeBase64Escape(json{{"ns", ns}, {"name", name}}.dump());
}

bool DecodeContinue(const std::string& token, std::string* ns, std::string* name) {
  std::string raw;
  if (!absl::WebSafeBase64Unescape(token, &raw)) return false;
  json j = json::parse(raw, nullptr, false);
  if (!j.is_object() || !j.contains("ns") || !j.contains("name") || !j["ns"].is_string() ||
      !j["name"].is_string()) {
    return false;
  }
  *ns = j["ns"];
  *name = j["name"];
  return true;
}

json EncodeFor(const model::ResourceType& type, const std::string& version,
               const model::Object& obj) {
  return FromHub(type, version, FromObject(type, obj));
}

// Builds the request for a list or watch from its query parameters.
absl::StatusOr<service::ListRequest> ListRequestFor(const RestApi::Target& t,
                                                    const HttpRequest& req) {
  service::ListRequest lr;
  lr.store.resource = t.type->GroupResource();
  lr.store.namespace_ = t.namespace_;
  QM_ASSIGN_OR_RETURN(lr.labels, model::LabelSelector::Parse(QueryParam(req, "labelSelector")));
  QM_ASSIGN_OR_RETURN(lr.fields, model::FieldSelector::Parse(QueryParam(req, "fieldSelector"),
                                                             t.type->field_selectors));
  std::string limit = QueryParam(req, "limit");
  if (!limit.empty()) lr.store.limit = std::max(0LL, std::atoll(limit.c_str()));
  std::string cont = QueryParam(req, "continue");
  if (!cont.empty() && !DecodeContinue(cont, &lr.store.after_namespace, &lr.store.after_name)) {
    return absl::InvalidArgumentError("invalid continue token");
  }
  return lr;
}

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

HttpResponse RestApi::HandleResource(const HttpRequest& req, const Target& t) {
  const model::ResourceType& type = *t.type;
  const std::string& version = t.version;
  const bool collection = t.name.empty();
  const bool dry_run = DryRun(req);
  std::vector<std::string> warnings;
  auto fail = [&](const absl::Status& st) {
    HttpResponse r = ErrorResponse(ToHttpError(st, Details(type, t.name)));
    r.warnings = warnings;
    return r;
  };
  auto ok = [&](int code, const json& body) {
    HttpResponse r = JsonResponse(code, body);
    r.warnings = warnings;
    return r;
  };
  auto ok_object = [&](int code, const model::Object& obj) {
    HttpResponse r = TextResponse(code, EncodeObjectText(type, version, obj));
    r.warnings = warnings;
    return r;
  };
  auto invalid = [&](const std::string& name, model::FieldErrors errors) {
    ToClientPaths(type, version, &errors);
    HttpResponse r = ErrorResponse(InvalidError(type.kind, type.group, name, errors));
    r.warnings = warnings;
    return r;
  };
  if (!type.namespaced && !t.namespace_.empty()) return NotFoundPath();
  if (auto st = CheckDryRun(req); !st.ok()) return fail(st);
  if (req.method == "DELETE" && collection && type.namespaced && t.namespace_.empty()) {
    // Like the apiserver: the all-namespaces path serves list and watch only.
    return ErrorResponse(MakeError(405, "MethodNotAllowed",
                                   "the server does not allow this method on the requested "
                                   "resource"));
  }

  // Turns a client object (in `version`) into a validated stored object. `old` is the stored
  // object (hub JSON) on update. Returns the errors for a 422 through `errors`.
  auto prepare = [&](json obj, const json* old, bool status_only,
                     model::FieldErrors* errors) -> absl::StatusOr<model::Object> {
    QM_RETURN_IF_ERROR(CheckTypeMeta(type, version, obj));
    QM_RETURN_IF_ERROR(CheckUnknownFields(type, version, obj, req, &warnings));
    json& meta = obj["metadata"];
    if (meta.is_null()) meta = json::object();
    if (!meta.is_object()) return absl::InvalidArgumentError("metadata must be an object");
    if (type.namespaced) {
      std::string ns = StringAt(meta, "namespace");
      if (t.namespace_.empty()) {
        return absl::InvalidArgumentError("the namespace of the object must be given in the URL");
      }
      if (!ns.empty() && ns != t.namespace_) {
        return absl::InvalidArgumentError(
            "the namespace of the provided object does not match the namespace sent on the "
            "request");
      }
      meta["namespace"] = t.namespace_;
    } else {
      meta.erase("namespace");
    }
    if (!t.name.empty()) {
      std::string name = StringAt(meta, "name");
      if (name.empty()) meta["name"] = t.name;
      if (!name.empty() && name != t.name) {
        return absl::InvalidArgumentError("the name of the object (" + name +
                                          ") does not match the name on the URL (" + t.name + ")");
      }
    }
    json hub = ToHub(type, version, std::move(obj), clock_);
    if (old != nullptr) {
      // Fields the client may not change through this endpoint keep their stored values.
      if (status_only) {
        json next = *old;
        if (hub.contains("status")) {
          next["status"] = hub["status"];
        } else {
          next.erase("status");
        }
        next["metadata"]["resourceVersion"] = StringAt(hub["metadata"], "resourceVersion");
        if (next["metadata"]["resourceVersion"] == "") next["metadata"].erase("resourceVersion");
        hub = std::move(next);
      } else if (type.has_status) {
        if (old->contains("status")) {
          hub["status"] = (*old)["status"];
        } else {
          hub.erase("status");
        }
      }
      *errors =
          status_only ? ValidateStatusUpdate(type, hub, *old) : ValidateObject(type, hub, old);
    } else {
      // As in Kubernetes, controllers own these statuses: a status sent on create is dropped.
      if (type.kind == "ResourceClaim" || type.kind == "DeviceTaintRule" ||
          type.kind == "ResourceQuota") {
        hub.erase("status");
      }
      *errors = ValidateObject(type, hub, nullptr);
    }
    if (errors->empty() && !status_only) CheckAdminAccess(type, hub, errors);
    if (!errors->empty()) return absl::InvalidArgumentError("invalid");
    if (req.user.has_value()) {
      // Admission refusals read as Kubernetes' NewForbidden: `<resource> "<name>" is forbidden: `.
      auto forbidden = [&](absl::Status st) {
        if (!absl::IsPermissionDenied(st)) return st;
        return absl::PermissionDeniedError(type.GroupResource() + " \"" +
                                           StringAt(hub["metadata"], "name") +
                                           "\" is forbidden: " + std::string(st.message()));
      };
      QM_RETURN_IF_ERROR(forbidden(service::AdmitNodeWrite(
          *req.user, type.kind, status_only ? "status" : "", model::json::NodeRelationsOf(old),
          model::json::NodeRelationsOf(hub))));
      if (!status_only) QM_RETURN_IF_ERROR(forbidden(AdmitRbac(type, hub, req)));
    }
    return ToObject(type, std::move(hub));
  };

  // Create from a client object; used by POST and by apply on a missing object.
  auto create = [&](json body) -> HttpResponse {
    model::FieldErrors errors;
    std::string body_name;
    if (body.is_object() && body.contains("metadata") && body["metadata"].is_object()) {
      body_name = StringAt(body["metadata"], "name");
    }
    auto obj = prepare(std::move(body), nullptr, false, &errors);
    if (!errors.empty()) return invalid(body_name, errors);
    if (!obj.ok()) return fail(obj.status());
    if (obj->meta.name.empty() && obj->meta.generate_name.empty()) {
      return invalid("", {model::Required("metadata.name", "name or generateName is required")});
    }
    const std::string name = obj->meta.name;
    // ResourceQuota admission happens in the object service, in the create's own transaction.
    auto created = objects_.Create(*std::move(obj), dry_run);
    if (!created.ok()) {
      HttpResponse r = ErrorResponse(ToHttpError(created.status(), Details(type, name)));
      r.warnings = warnings;
      return r;
    }
    return ok_object(201, *created);
  };

  const model::ResourceKey key{type.GroupResource(), t.namespace_, t.name};
  const bool status_only = t.subresource == "status";

  if (req.method == "GET" && collection) {
    auto lr = ListRequestFor(t, req);
    if (!lr.ok()) return fail(lr.status());
    auto list = objects_.List(*lr);
    if (!list.ok()) return fail(list.status());
    std::string cont;
    if (list->more && !list->items.empty()) {
      cont = EncodeContinue(list->items.back().meta.namespace_, list->items.back().meta.name);
    }
    const std::string rv = std::to_string(list->resource_version);
    if (WantsTable(req)) {
      json rows = json::array();
      auto now = clock_.Now();
      for (const auto& o : list->items) {
        rows.push_back(TableRow(type, EncodeFor(type, version, o), now));
      }
      return ok(200, MakeTable(type, std::move(rows), rv, cont, true));
    }
    json meta = {{"resourceVersion", rv}};
    if (!cont.empty()) meta["continue"] = cont;
    std::string text = R"({"kind":)" + json(type.kind + "List").dump() + R"(,"apiVersion":)" +
                       json(type.ApiVersion(version)).dump() + R"(,"metadata":)" + meta.dump() +
                       R"(,"items":[)";
    for (size_t i = 0; i < list->items.size(); ++i) {
      if (i) text += ',';
      text += EncodeObjectText(type, version, list->items[i]);
    }
    text += "]}";
    HttpResponse r = TextResponse(200, std::move(text));
    r.warnings = warnings;
    return r;
  }
  if (req.method == "GET") {
    auto got = objects_.Get(key);
    if (!got.ok()) return fail(got.status());
    if (req.user.has_value()) {
      if (auto st = service::AdmitNodeGet(*req.user, type.kind, model::json::NodeRelationsOf(*got));
          !st.ok()) {
        return fail(absl::PermissionDeniedError(
            service::ForbiddenMessage(*req.user, RequestAttributes(req)) + ": " +
            std::string(st.message())));
      }
    }
    json obj = EncodeFor(type, version, *got);
    if (WantsTable(req)) {
      json rows = json::array({TableRow(type, obj, clock_.Now())});
      return ok(200,
                MakeTable(type, std::move(rows), obj["metadata"]["resourceVersion"], "", true));
    }
    return ok(200, obj);
  }
  std::vector<std::string> duplicates;
  if (req.method == "POST" && collection && t.subresource.empty()) {
    auto body = ParseBody(req.body, &duplicates);
    if (!body.ok()) return fail(body.status());
    if (auto st = CheckDuplicateFields(duplicates, req, &warnings); !st.ok()) return fail(st);
    return create(*std::move(body));
  }
  if (req.method == "PUT" && !collection) {
    auto body = ParseBody(req.body, &duplicates);
    if (!body.ok()) return fail(body.status());
    if (auto st = CheckDuplicateFields(duplicates, req, &warnings); !st.ok()) return fail(st);
    model::FieldErrors errors;
    auto updated = objects_.Update(
        key,
        [&](const model::Object& cur) -> absl::StatusOr<model::Object> {
          json old = FromObject(type, cur);
          return prepare(*body, &old, status_only, &errors);
        },
        dry_run);
    if (!errors.empty()) return invalid(t.name, errors);
    if (!updated.ok()) return fail(updated.status());
    return ok_object(200, *updated);
  }
  if (req.method == "PATCH" && !collection) {
    auto patch_type = PatchTypeFromContentType(req.content_type);
    if (!patch_type.ok()) return fail(patch_type.status());
    auto patch = ParseBody(req.body, &duplicates);
    if (!patch.ok()) return fail(patch.status());
    if (auto st = CheckDuplicateFields(duplicates, req, &warnings); !st.ok()) return fail(st);
    if (*patch_type == PatchType::kApply && !status_only) {
      auto existing = objects_.Get(key);
      if (absl::IsNotFound(existing.status())) return create(*patch);
      if (!existing.ok()) return fail(existing.status());
    }
    model::FieldErrors errors;
    auto updated = objects_.Update(
        key,
        [&](const model::Object& cur) -> absl::StatusOr<model::Object> {
          json old = FromObject(type, cur);
          json current = FromHub(type, version, old);
          json patched;
          switch (*patch_type) {
            case PatchType::kJsonPatch: {
              QM_ASSIGN_OR_RETURN(patched, ApplyJsonPatch(current, *patch));
              break;
            }
            case PatchType::kMergePatch:
            case PatchType::kApply:
              if (!patch->is_object()) {
                return absl::InvalidArgumentError("a merge patch must be a JSON object");
              }
              patched = ApplyMergePatch(current, *patch);
              break;
            case PatchType::kStrategicMergePatch: {
              QM_ASSIGN_OR_RETURN(patched, ApplyStrategicMergePatch(current, *patch));
              break;
            }
          }
          // Only a resourceVersion the patch itself carries is a precondition.
          std::string patch_rv;
          if (patched.is_object() && patched.contains("metadata") &&
              patched["metadata"].is_object()) {
            bool patch_sets_rv = patch->is_object() && patch->contains("metadata") &&
                                 (*patch)["metadata"].is_object() &&
                                 (*patch)["metadata"].contains("resourceVersion");
            if (*patch_type == PatchType::kJsonPatch) {
              patch_sets_rv = StringAt(patched["metadata"], "resourceVersion") !=
                              StringAt(current["metadata"], "resourceVersion");
            }
            if (!patch_sets_rv) patched["metadata"].erase("resourceVersion");
          }
          return prepare(std::move(patched), &old, status_only, &errors);
        },
        dry_run);
    if (!errors.empty()) return invalid(t.name, errors);
    if (!updated.ok()) return fail(updated.status());
    return ok_object(200, *updated);
  }
  if (req.method == "DELETE") {
    service::DeleteOptions options;
    options.dry_run = dry_run;
    if (std::string grace = QueryParam(req, "gracePeriodSeconds"); !grace.empty()) {
      int64_t seconds = 0;
      if (!absl::SimpleAtoi(grace, &seconds)) {
        return fail(absl::InvalidArgumentError("gracePeriodSeconds: Invalid value: \"" + grace +
                                               "\": must be an integer"));
      }
      options.grace_period_seconds = seconds;
    }
    if (!req.body.empty()) {
      auto body = ParseBody(req.body);
      if (!body.ok()) return fail(body.status());
      if (body->is_object()) {
        if (body->contains("dryRun") && (*body)["dryRun"].is_array() &&
            !(*body)["dryRun"].empty() && (*body)["dryRun"][0] == "All") {
          options.dry_run = true;
        }
        if (body->contains("gracePeriodSeconds") &&
            (*body)["gracePeriodSeconds"].is_number_integer()) {
          options.grace_period_seconds = (*body)["gracePeriodSeconds"].get<int64_t>();
        }
        if (body->contains("preconditions") && (*body)["preconditions"].is_object()) {
          const json& pre = (*body)["preconditions"];
          if (pre.contains("uid") && pre["uid"].is_string()) options.precondition_uid = pre["uid"];
          if (pre.contains("resourceVersion") && pre["resourceVersion"].is_string()) {
            options.precondition_resource_version =
                std::atoll(pre["resourceVersion"].get<std::string>().c_str());
          }
        }
      }
    }
    // A node identity deletes only what node restriction lets it (checked on the stored object).
    auto admit_delete = [&](const model::Object& o) -> absl::Status {
      if (!req.user.has_value() || !service::NodeNameOf(*req.user)) return absl::OkStatus();
      auto st = service::AdmitNodeWrite(*req.user, type.kind, "", model::json::NodeRelationsOf(o),
                                        std::nullopt);
      if (st.ok()) return st;
      return absl::PermissionDeniedError(type.GroupResource() + " \"" + o.meta.name +
                                         "\" is forbidden: " + std::string(st.message()));
    };
    if (!collection && t.subresource.empty()) {
      if (req.user.has_value() && service::NodeNameOf(*req.user)) {
        auto existing = objects_.Get(key);
        if (!existing.ok()) return fail(existing.status());
        if (auto st = admit_delete(*existing); !st.ok()) return fail(st);
      }
      auto result = objects_.Delete(key, options);
      if (!result.ok()) return fail(result.status());
      return ok_object(200, result->object);
    }
    if (collection) {
      auto lr = ListRequestFor(t, req);
      if (!lr.ok()) return fail(lr.status());
      lr->store.limit = 0;
      auto list = objects_.List(*lr);
      if (!list.ok()) return fail(list.status());
      json items = json::array();
      for (const auto& o : list->items) {
        if (auto st = admit_delete(o); !st.ok()) return fail(st);
      }
      for (const auto& o : list->items) {
        auto result = objects_.Delete(o.Key(), options);
        if (absl::IsNotFound(result.status())) continue;
        if (!result.ok()) return fail(result.status());
        items.push_back(EncodeFor(type, version, result->object));
      }
      return ok(200,
                json{{"kind", type.kind + "List"},
                     {"apiVersion", type.ApiVersion(version)},
                     {"metadata", {{"resourceVersion", std::to_string(list->resource_version)}}},
                     {"items", std::move(items)}});
    }
  }
  HttpResponse r = ErrorResponse(MakeError(405, "MethodNotAllowed",
                                           "the server does not allow this method on the "
                                           "requested resource"));
  r.warnings = warnings;
  return r;
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
      if (!watcher->Send("ADDED", EncodeFor(type, t.version, o))) return std::nullopt;
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
