// Status-propagation macros for absl::Status / absl::StatusOr.
//
// Abseil 20220623 (Debian bookworm) ships neither ASSIGN_OR_RETURN nor
// RETURN_IF_ERROR; these are the project's single definitions. They evaluate
// their argument exactly once and never throw.
#ifndef ADAPTERD_COMMON_STATUS_MACROS_H_
#define ADAPTERD_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ADAPTERD_STATUS_CONCAT_INNER_(a, b) a##b
#define ADAPTERD_STATUS_CONCAT_(a, b) ADAPTERD_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                            \
  do {                                                   \
    ::absl::Status _adapterd_status = (expr);            \
    if (!_adapterd_status.ok()) return _adapterd_status; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` or `ASSIGN_OR_RETURN(x, MakeX());`
// Evaluates the StatusOr once; on error returns its status, else moves the
// value into `lhs`.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ADAPTERD_ASSIGN_OR_RETURN_IMPL_(ADAPTERD_STATUS_CONCAT_(_adapterd_statusor_, __LINE__), lhs, rexpr)

// `statusor` is a name and `lhs` may be a declaration ("auto x"): neither can
// take the parentheses bugprone-macro-parentheses asks for.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define ADAPTERD_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                    \
  if (!statusor.ok()) return std::move(statusor).status();    \
  lhs = std::move(statusor).value()
// NOLINTEND(bugprone-macro-parentheses)

#endif  // ADAPTERD_COMMON_STATUS_MACROS_H_
