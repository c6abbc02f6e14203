#include "model/field_error.h"

namespace qm::model {

std::string FieldError::Reason() const {
  switch (type) {
    case Type::kRequired:
      return "FieldValueRequired";
    case Type::kInvalid:
      return "FieldValueInvalid";
    case Type::kNotSupported:
      return "FieldValueNotSupported";
    case Type::kDuplicate:
      return "FieldValueDuplicate";
    case Type::kTooLong:
      return "FieldValueTooLong";
    case Type::kTooMany:
      return "FieldValueTooMany";
    case Type::kForbidden:
      return "FieldValueForbidden";
    case Type::kNotFound:
      return "FieldValueNotFound";
  }
  return "FieldValueInvalid";
}

std::string FieldError::Message() const {
  std::string head;
  switch (type) {
    case Type::kRequired:
      head = "Required value";
      break;
    case Type::kInvalid:
      head = "Invalid value";
      break;
    case Type::kNotSupported:
      head = "Unsupported value";
      break;
    case Type::kDuplicate:
      head = "Duplicate value";
      break;
    case Type::kTooLong:
      head = "Too long";
      break;
    case Type::kTooMany:
      head = "Too many";
      break;
    case Type::kForbidden:
      head = "Forbidden";
      break;
    case Type::kNotFound:
      head = "Not found";
      break;
  }
  std::string out = head;
  if (!value.empty() && type != Type::kRequired && type != Type::kForbidden &&
      type != Type::kTooLong) {
    out += ": " + value;
  }
  if (!detail.empty()) out += ": " + detail;
  return out;
}

std::string FieldError::ToString() const {
  return field.empty() ? Message() : field + ": " + Message();
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  out += '"';
  return out;
}

FieldError Required(std::string field, std::string detail) {
  return FieldError{FieldError::Type::kRequired, std::move(field), "", std::move(detail)};
}

FieldError Invalid(std::string field, std::string value, std::string detail) {
  return FieldError{FieldError::Type::kInvalid, std::move(field), std::move(value),
                    std::move(detail)};
}

FieldError NotSupported(std::string field, std::string value,
                        const std::vector<std::string>& valid) {
  std::string detail;
  if (!valid.empty()) {
    detail = "supported values: ";
    for (size_t i = 0; i < valid.size(); ++i) {
      if (i) detail += ", ";
      detail += Quote(valid[i]);
    }
  }
  return FieldError{FieldError::Type::kNotSupported, std::move(field), std::move(value),
                    std::move(detail)};
}

FieldError Duplicate(std::string field, std::string value) {
  return FieldError{FieldError::Type::kDuplicate, std::move(field), std::move(value), ""};
}

FieldError TooLong(std::string field, size_t max) {
  return FieldError{FieldError::Type::kTooLong, std::move(field), "",
                    "may not be more than " + std::to_string(max) + " bytes"};
}

FieldError TooMany(std::string field, size_t actual, size_t max) {
  return FieldError{FieldError::Type::kTooMany, std::move(field), std::to_string(actual),
                    "must have at most " + std::to_string(max) + " items"};
}

FieldError Forbidden(std::string field, std::string detail) {
  return FieldError{FieldError::Type::kForbidden, std::move(field), "", std::move(detail)};
}

FieldError NotFound(std::string field, std::string value, std::string detail) {
  return FieldError{FieldError::Type::kNotFound, std::move(field), std::move(value),
                    std::move(detail)};
}

FieldError Immutable(std::string field) {
  return FieldError{FieldError::Type::kInvalid, std::move(field), "", "field is immutable"};
}

}  // namespace qm::model
