// Early-return helpers for absl::Status / absl::StatusOr (Debian's abseil has none).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DTRAIN_CONCAT_INNER_(a, b) a##b
#define DTRAIN_CONCAT_(a, b) DTRAIN_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define DTRAIN_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status dtrain_status_ = (expr);          \
    if (!dtrain_status_.ok()) return dtrain_status_; \
  } while (0)

// `lhs = value of expr` (an absl::StatusOr<T>), or returns its error.
#define DTRAIN_ASSIGN_OR_RETURN(lhs, expr) \
  DTRAIN_ASSIGN_OR_RETURN_IMPL_(DTRAIN_CONCAT_(dtrain_statusor_, __LINE__), lhs, expr)
#define DTRAIN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
