#include "server/serving/serving_observer.h"

namespace adapterd::serving {

std::string_view CacheTierName(CacheTier tier) {
  switch (tier) {
    case CacheTier::kHost:
      return "host";
    case CacheTier::kDevice:
      return "device";
  }
  return "unknown";
}

std::string_view ServingFormEventName(ServingFormEvent event) {
  switch (event) {
    case ServingFormEvent::kRead:
      return "read";
    case ServingFormEvent::kStale:
      return "stale";
    case ServingFormEvent::kCorrupt:
      return "corrupt";
    case ServingFormEvent::kWritten:
      return "written";
    case ServingFormEvent::kWriteFailed:
      return "write_failed";
  }
  return "unknown";
}

std::string_view WorkKindName(WorkKind work) {
  switch (work) {
    case WorkKind::kInference:
      return "inference";
    case WorkKind::kTraining:
      return "training";
  }
  return "unknown";
}

std::string_view DropReasonName(DropReason reason) {
  switch (reason) {
    case DropReason::kDeadline:
      return "deadline";
    case DropReason::kShutdown:
      return "shutdown";
  }
  return "unknown";
}

}  // namespace adapterd::serving
