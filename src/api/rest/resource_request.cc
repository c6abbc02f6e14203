// The verbs on one resource or collection of the Kubernetes-style API (RestApi::ResourceRequest):
// get and list, create, update, patch, delete and delete-collection. Each decodes the client's
// object, has it validated and admitted, calls the object service and encodes the answer; the
// policy lives in the service layer and in validation.

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "api/rest/codec.h"
#include "api/rest/patch.h"
#include "api/rest/request_gate.h"
#include "api/rest/rest_internal.h"
#include "api/rest/schema.h"
#include "api/rest/table.h"
#include "api/rest/validation.h"
#include "common/status.h"
#include "model/json/read.h"
#include "model/json/stored.h"
#include "service/node_restriction.h"

namespace qm::api {

using namespace rest_internal;  // NOLINT(google-build-using-namespace)

namespace {

bool DryRun(const HttpRequest& r) { return QueryParam(r, "dryRun") == "All"; }

// dryRun may only be absent or "All".
absl::Status CheckDryRun(const HttpRequest& r) {
  auto it = r.query.find("dryRun");
  if (it == r.query.end() || it->second == "All") return absl::OkStatus();
  return absl::InvalidArgumentError("dryRun: Unsupported value: \"" + it->second +
                                    "\": supported values: \"All\"");
}

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
    json j = model::json::Read(body);
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

}  // namespace

// One request on a resource or collection: the target and what the answer carries along
// (warnings), with a method per verb.
class RestApi::ResourceRequest {
 public:
  ResourceRequest(RestApi& api, const HttpRequest& req, const Target& t)
      : api_(api),
        req_(req),
        t_(t),
        type_(*t.type),
        version_(t.version),
        key_{t.type->GroupResource(), t.namespace_, t.name},
        collection_(t.name.empty()),
        dry_run_(DryRun(req)),
        status_only_(t.subresource == "status") {}

  HttpResponse Run();

 private:
  HttpResponse Fail(const absl::Status& st);
  HttpResponse Ok(int code, const json& body);
  HttpResponse OkObject(int code, const model::Object& obj);
  HttpResponse Invalid(const std::string& name, model::FieldErrors errors);
  HttpResponse NotAllowed();

  // Turns a client object (in the request's version) into a validated, admitted stored object.
  // `old` is the stored object (hub JSON) on update. The errors for a 422 go to `errors`.
  absl::StatusOr<model::Object> Prepare(json obj, const json* old, model::FieldErrors* errors);
  // Admission of an object about to be stored by an authenticated user: node restriction, and
  // RBAC escalation prevention.
  absl::Status Admit(const json* old, const json& hub);
  // The request body, parsed; duplicate fields become warnings (or the error of Strict).
  absl::StatusOr<json> Body();

  HttpResponse List();
  HttpResponse Get();
  // Create from a client object; used by POST and by apply on a missing object.
  HttpResponse Create(json body);
  HttpResponse Put();
  HttpResponse Patch();
  HttpResponse Delete();
  absl::StatusOr<service::DeleteOptions> DeleteOptionsOf();
  // A node identity deletes only what node restriction lets it (checked on the stored object).
  absl::Status AdmitDelete(const model::Object& o);

  RestApi& api_;
  const HttpRequest& req_;
  const Target& t_;
  const model::ResourceType& type_;
  const std::string& version_;
  const model::ResourceKey key_;
  const bool collection_;
  const bool dry_run_;
  const bool status_only_;
  std::vector<std::string> warnings_;
};

HttpResponse RestApi::ResourceRequest::Run() {
  if (!type_.namespaced && !t_.namespace_.empty()) return NotFoundPath();
  if (auto st = CheckDryRun(req_); !st.ok()) return Fail(st);
  const std::string& method = req_.method;
  if (method == "GET") return collection_ ? List() : Get();
  if (method == "POST" && collection_ && t_.subresource.empty()) {
    auto body = Body();
    if (!body.ok()) return Fail(body.status());
    return Create(*std::move(body));
  }
  if (method == "PUT" && !collection_) return Put();
  if (method == "PATCH" && !collection_) return Patch();
  if (method == "DELETE") return Delete();
  return NotAllowed();
}

HttpResponse RestApi::ResourceRequest::Fail(const absl::Status& st) {
  HttpResponse r = ErrorResponse(ToHttpError(st, Details(type_, t_.name)));
  r.warnings = warnings_;
  return r;
}

HttpResponse RestApi::ResourceRequest::Ok(int code, const json& body) {
  HttpResponse r = JsonResponse(code, body);
  r.warnings = warnings_;
  return r;
}

HttpResponse RestApi::ResourceRequest::OkObject(int code, const model::Object& obj) {
  HttpResponse r = TextResponse(code, EncodeObjectText(type_, version_, obj));
  r.warnings = warnings_;
  return r;
}

HttpResponse RestApi::ResourceRequest::Invalid(const std::string& name, model::FieldErrors errors) {
  ToClientPaths(type_, version_, &errors);
  HttpResponse r = ErrorResponse(InvalidError(type_.kind, type_.group, name, errors));
  r.warnings = warnings_;
  return r;
}

HttpResponse RestApi::ResourceRequest::NotAllowed() {
  HttpResponse r = ErrorResponse(MakeError(405, "MethodNotAllowed",
                                           "the server does not allow this method on the "
                                           "requested resource"));
  r.warnings = warnings_;
  return r;
}

absl::StatusOr<json> RestApi::ResourceRequest::Body() {
  std::vector<std::string> duplicates;
  QM_ASSIGN_OR_RETURN(json body, ParseBody(req_.body, &duplicates));
  QM_RETURN_IF_ERROR(CheckDuplicateFields(duplicates, req_, &warnings_));
  return body;
}

absl::StatusOr<model::Object> RestApi::ResourceRequest::Prepare(json obj, const json* old,
                                                                model::FieldErrors* errors) {
  QM_RETURN_IF_ERROR(CheckTypeMeta(type_, version_, obj));
  QM_RETURN_IF_ERROR(CheckUnknownFields(type_, version_, obj, req_, &warnings_));
  json& meta = obj["metadata"];
  if (meta.is_null()) meta = json::object();
  if (!meta.is_object()) return absl::InvalidArgumentError("metadata must be an object");
  if (type_.namespaced) {
    std::string ns = StringAt(meta, "namespace");
    if (t_.namespace_.empty()) {
      return absl::InvalidArgumentError("the namespace of the object must be given in the URL");
    }
    if (!ns.empty() && ns != t_.namespace_) {
      return absl::InvalidArgumentError(
          "the namespace of the provided object does not match the namespace sent on the "
          "request");
    }
    meta["namespace"] = t_.namespace_;
  } else {
    meta.erase("namespace");
  }
  if (!t_.name.empty()) {
    std::string name = StringAt(meta, "name");
    if (name.empty()) meta["name"] = t_.name;
    if (!name.empty() && name != t_.name) {
      return absl::InvalidArgumentError("the name of the object (" + name +
                                        ") does not match the name on the URL (" + t_.name + ")");
    }
  }
  json hub = ToHub(type_, version_, std::move(obj), api_.clock_);
  if (old != nullptr) {
    // Fields the client may not change through this endpoint keep their stored values.
    if (status_only_) {
      json next = *old;
      if (hub.contains("status")) {
        next["status"] = hub["status"];
      } else {
        next.erase("status");
      }
      next["metadata"]["resourceVersion"] = StringAt(hub["metadata"], "resourceVersion");
      if (next["metadata"]["resourceVersion"] == "") next["metadata"].erase("resourceVersion");
      hub = std::move(next);
    } else if (type_.has_status) {
      if (old->contains("status")) {
        hub["status"] = (*old)["status"];
      } else {
        hub.erase("status");
      }
    }
    *errors =
        status_only_ ? ValidateStatusUpdate(type_, hub, *old) : ValidateObject(type_, hub, old);
  } else {
    // As in Kubernetes, controllers own these statuses: a status sent on create is dropped.
    if (type_.kind == "ResourceClaim" || type_.kind == "DeviceTaintRule" ||
        type_.kind == "ResourceQuota") {
      hub.erase("status");
    }
    *errors = ValidateObject(type_, hub, nullptr);
  }
  if (errors->empty() && !status_only_) api_.CheckAdminAccess(type_, hub, errors);
  if (!errors->empty()) return absl::InvalidArgumentError("invalid");
  QM_RETURN_IF_ERROR(Admit(old, hub));
  return ToObject(type_, std::move(hub));
}

absl::Status RestApi::ResourceRequest::Admit(const json* old, const json& hub) {
  if (!req_.user.has_value()) return absl::OkStatus();
  // Admission refusals read as Kubernetes' NewForbidden: `<resource> "<name>" is forbidden: `.
  auto forbidden = [&](absl::Status st) {
    if (!absl::IsPermissionDenied(st)) return st;
    const std::string name = hub.contains("metadata") ? StringAt(hub["metadata"], "name") : "";
    return absl::PermissionDeniedError(type_.GroupResource() + " \"" + name +
                                       "\" is forbidden: " + std::string(st.message()));
  };
  QM_RETURN_IF_ERROR(forbidden(service::AdmitNodeWrite(
      *req_.user, type_.kind, status_only_ ? "status" : "", model::json::NodeRelationsOf(old),
      model::json::NodeRelationsOf(hub))));
  if (!status_only_) QM_RETURN_IF_ERROR(forbidden(api_.AdmitRbac(type_, hub, req_)));
  return absl::OkStatus();
}

HttpResponse RestApi::ResourceRequest::List() {
  auto lr = ListRequestFor(t_, req_);
  if (!lr.ok()) return Fail(lr.status());
  auto list = api_.objects_.List(*lr);
  if (!list.ok()) return Fail(list.status());
  std::string cont;
  if (list->more && !list->items.empty()) {
    cont = EncodeContinue(list->items.back()->meta.namespace_, list->items.back()->meta.name);
  }
  const std::string rv = std::to_string(list->resource_version);
  if (WantsTable(req_)) {
    json rows = json::array();
    auto now = api_.clock_.Now();
    for (const auto& o : list->items) {
      rows.push_back(TableRow(type_, EncodeFor(type_, version_, *o), now));
    }
    return Ok(200, MakeTable(type_, std::move(rows), rv, cont, true));
  }
  json meta = {{"resourceVersion", rv}};
  if (!cont.empty()) meta["continue"] = cont;
  std::string text = R"({"kind":)" + json(type_.kind + "List").dump() + R"(,"apiVersion":)" +
                     json(type_.ApiVersion(version_)).dump() + R"(,"metadata":)" + meta.dump() +
                     R"(,"items":[)";
  for (size_t i = 0; i < list->items.size(); ++i) {
    if (i) text += ',';
    text += EncodeObjectText(type_, version_, *list->items[i]);
  }
  text += "]}";
  HttpResponse r = TextResponse(200, std::move(text));
  r.warnings = warnings_;
  return r;
}

HttpResponse RestApi::ResourceRequest::Get() {
  auto got = api_.objects_.Get(key_);
  if (!got.ok()) return Fail(got.status());
  if (req_.user.has_value()) {
    if (auto st = service::AdmitNodeGet(*req_.user, type_.kind, model::json::NodeRelationsOf(*got));
        !st.ok()) {
      return Fail(absl::PermissionDeniedError(
          service::ForbiddenMessage(*req_.user, RequestAttributes(req_)) + ": " +
          std::string(st.message())));
    }
  }
  json obj = EncodeFor(type_, version_, *got);
  if (WantsTable(req_)) {
    json rows = json::array({TableRow(type_, obj, api_.clock_.Now())});
    return Ok(200, MakeTable(type_, std::move(rows), obj["metadata"]["resourceVersion"], "", true));
  }
  return Ok(200, obj);
}

HttpResponse RestApi::ResourceRequest::Create(json body) {
  model::FieldErrors errors;
  std::string body_name;
  if (body.is_object() && body.contains("metadata") && body["metadata"].is_object()) {
    body_name = StringAt(body["metadata"], "name");
  }
  auto obj = Prepare(std::move(body), nullptr, &errors);
  if (!errors.empty()) return Invalid(body_name, errors);
  if (!obj.ok()) return Fail(obj.status());
  if (obj->meta.name.empty() && obj->meta.generate_name.empty()) {
    return Invalid("", {model::Required("metadata.name", "name or generateName is required")});
  }
  const std::string name = obj->meta.name;
  // ResourceQuota admission happens in the object service, in the create's own transaction.
  auto created = api_.objects_.Create(*std::move(obj), dry_run_);
  if (!created.ok()) {
    HttpResponse r = ErrorResponse(ToHttpError(created.status(), Details(type_, name)));
    r.warnings = warnings_;
    return r;
  }
  return OkObject(201, *created);
}

HttpResponse RestApi::ResourceRequest::Put() {
  auto body = Body();
  if (!body.ok()) return Fail(body.status());
  model::FieldErrors errors;
  auto updated = api_.objects_.Update(
      key_,
      [&](const model::Object& cur) -> absl::StatusOr<model::Object> {
        json old = FromObject(type_, cur);
        return Prepare(*body, &old, &errors);
      },
      dry_run_);
  if (!errors.empty()) return Invalid(t_.name, errors);
  if (!updated.ok()) return Fail(updated.status());
  return OkObject(200, *updated);
}

HttpResponse RestApi::ResourceRequest::Patch() {
  auto patch_type = PatchTypeFromContentType(req_.content_type);
  if (!patch_type.ok()) return Fail(patch_type.status());
  auto patch = Body();
  if (!patch.ok()) return Fail(patch.status());
  if (*patch_type == PatchType::kApply && !status_only_) {
    auto existing = api_.objects_.Get(key_);
    if (absl::IsNotFound(existing.status())) return Create(*patch);
    if (!existing.ok()) return Fail(existing.status());
  }
  model::FieldErrors errors;
  auto updated = api_.objects_.Update(
      key_,
      [&](const model::Object& cur) -> absl::StatusOr<model::Object> {
        json old = FromObject(type_, cur);
        json current = FromHub(type_, version_, old);
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
        return Prepare(std::move(patched), &old, &errors);
      },
      dry_run_);
  if (!errors.empty()) return Invalid(t_.name, errors);
  if (!updated.ok()) return Fail(updated.status());
  return OkObject(200, *updated);
}

absl::StatusOr<service::DeleteOptions> RestApi::ResourceRequest::DeleteOptionsOf() {
  service::DeleteOptions options;
  options.dry_run = dry_run_;
  if (std::string grace = QueryParam(req_, "gracePeriodSeconds"); !grace.empty()) {
    int64_t seconds = 0;
    if (!absl::SimpleAtoi(grace, &seconds)) {
      return absl::InvalidArgumentError("gracePeriodSeconds: Invalid value: \"" + grace +
                                        "\": must be an integer");
    }
    options.grace_period_seconds = seconds;
  }
  if (req_.body.empty()) return options;
  QM_ASSIGN_OR_RETURN(json body, ParseBody(req_.body));
  if (!body.is_object()) return options;
  if (body.contains("dryRun") && body["dryRun"].is_array() && !body["dryRun"].empty() &&
      body["dryRun"][0] == "All") {
    options.dry_run = true;
  }
  if (body.contains("gracePeriodSeconds") && body["gracePeriodSeconds"].is_number_integer()) {
    options.grace_period_seconds = body["gracePeriodSeconds"].get<int64_t>();
  }
  if (body.contains("preconditions") && body["preconditions"].is_object()) {
    const json& pre = body["preconditions"];
    if (pre.contains("uid") && pre["uid"].is_string()) options.precondition_uid = pre["uid"];
    if (pre.contains("resourceVersion") && pre["resourceVersion"].is_string()) {
      options.precondition_resource_version =
          std::atoll(pre["resourceVersion"].get<std::string>().c_str());
    }
  }
  return options;
}

absl::Status RestApi::ResourceRequest::AdmitDelete(const model::Object& o) {
  if (!req_.user.has_value() || !service::NodeNameOf(*req_.user)) return absl::OkStatus();
  auto st = service::AdmitNodeWrite(*req_.user, type_.kind, "", model::json::NodeRelationsOf(o),
                                    std::nullopt);
  if (st.ok()) return st;
  return absl::PermissionDeniedError(type_.GroupResource() + " \"" + o.meta.name +
                                     "\" is forbidden: " + std::string(st.message()));
}

HttpResponse RestApi::ResourceRequest::Delete() {
  if (collection_ && type_.namespaced && t_.namespace_.empty()) {
    // Like the apiserver: the all-namespaces path serves list and watch only.
    return ErrorResponse(MakeError(405, "MethodNotAllowed",
                                   "the server does not allow this method on the requested "
                                   "resource"));
  }
  auto options = DeleteOptionsOf();
  if (!options.ok()) return Fail(options.status());
  if (!collection_ && t_.subresource.empty()) {
    if (req_.user.has_value() && service::NodeNameOf(*req_.user)) {
      auto existing = api_.objects_.Get(key_);
      if (!existing.ok()) return Fail(existing.status());
      if (auto st = AdmitDelete(*existing); !st.ok()) return Fail(st);
    }
    auto result = api_.objects_.Delete(key_, *options);
    if (!result.ok()) return Fail(result.status());
    return OkObject(200, result->object);
  }
  if (!collection_) return NotAllowed();
  auto lr = ListRequestFor(t_, req_);
  if (!lr.ok()) return Fail(lr.status());
  lr->store.limit = 0;
  auto list = api_.objects_.List(*lr);
  if (!list.ok()) return Fail(list.status());
  for (const auto& o : list->items) {
    if (auto st = AdmitDelete(*o); !st.ok()) return Fail(st);
  }
  json items = json::array();
  for (const auto& o : list->items) {
    auto result = api_.objects_.Delete(o->Key(), *options);
    if (absl::IsNotFound(result.status())) continue;
    if (!result.ok()) return Fail(result.status());
    items.push_back(EncodeFor(type_, version_, result->object));
  }
  return Ok(200, json{{"kind", type_.kind + "List"},
                      {"apiVersion", type_.ApiVersion(version_)},
                      {"metadata", {{"resourceVersion", std::to_string(list->resource_version)}}},
                      {"items", std::move(items)}});
}

HttpResponse RestApi::HandleResource(const HttpRequest& req, const Target& t) {
  return ResourceRequest(*this, req, t).Run();
}

}  // namespace qm::api
