#pragma once

// Kubernetes' protobuf request encoding (`application/vnd.kubernetes.protobuf`): the "k8s\0"
// magic, a runtime.Unknown envelope (typeMeta, raw), and the generated messages. Typed clients
// (kubectl create namespace / serviceaccount / token, kubectl auth can-i) send it and do not
// fall back to JSON, so the kinds they send are decoded here into the JSON the rest of the
// REST layer reads. Responses stay JSON (clients accept it).

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace qm::api {

inline constexpr char kProtobufContentType[] = "application/vnd.kubernetes.protobuf";

// The object in `body` as JSON (apiVersion, kind and the fields this server reads).
// InvalidArgument for a malformed body; Unimplemented (415) for a kind it does not decode.
absl::StatusOr<nlohmann::json> DecodeKubernetesProtobuf(const std::string& body);

}  // namespace qm::api
