#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Propagates a non-OK absl::Status to the caller.
#define QM_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status qm_status_ = (expr);      \
    if (!qm_status_.ok()) return qm_status_; \
  } while (0)

#define QM_CONCAT_INNER_(a, b) a##b
#define QM_CONCAT_(a, b) QM_CONCAT_INNER_(a, b)

// Evaluates an absl::StatusOr<T> expression; on error returns its status, otherwise moves the
// value into `lhs` (which may be a declaration such as `auto x`).
#define QM_ASSIGN_OR_RETURN(lhs, expr) \
  QM_ASSIGN_OR_RETURN_IMPL_(QM_CONCAT_(qm_statusor_, __LINE__), lhs, expr)
#define QM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
