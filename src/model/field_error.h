#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace qm::model {

// A validation problem at a field path, shaped like Kubernetes' field.Error so it renders the
// same way (`spec.devices.requests[0].name: Required value`).
struct FieldError {
  enum class Type {
    kRequired,
    kInvalid,
    kNotSupported,
    kDuplicate,
    kTooLong,
    kTooMany,
    kForbidden,
    kNotFound
  };

  Type type = Type::kInvalid;
  std::string field;  // "spec.devices.requests[0].name"
  std::string value;  // the bad value, already quoted when it is a string; may be empty
  std::string detail;

  // "FieldValueRequired", "FieldValueInvalid", ... (the Status cause reason).
  std::string Reason() const;
  // The message without the field path: `Invalid value: "Bad_Name": a lowercase ...`.
  std::string Message() const;
  // "field: message".
  std::string ToString() const;
};

using FieldErrors = std::vector<FieldError>;

FieldError Required(std::string field, std::string detail = "");
FieldError Invalid(std::string field, std::string value, std::string detail);
FieldError NotSupported(std::string field, std::string value,
                        const std::vector<std::string>& valid);
FieldError Duplicate(std::string field, std::string value);
FieldError TooLong(std::string field, size_t max);
FieldError TooMany(std::string field, size_t actual, size_t max);
FieldError Forbidden(std::string field, std::string detail);
// `value` (already quoted) was looked for and not found; `detail` may say where it should be.
FieldError NotFound(std::string field, std::string value, std::string detail = "");

// Quotes a string value the way Kubernetes prints it in messages: "abc".
std::string Quote(const std::string& s);

// Maps an immutable-field violation to Kubernetes' wording.
FieldError Immutable(std::string field);

}  // namespace qm::model
