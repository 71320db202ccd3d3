// What one finished RPC reports to the process around the API (metrics and
// logs): a plain record, so that its consumers (server/metrics_bridge.h) need
// neither gRPC nor the service's headers.
//
// Thread safety: plain data.
#ifndef ADAPTERD_SERVER_API_RPC_RECORD_H_
#define ADAPTERD_SERVER_API_RPC_RECORD_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace adapterd::api {

struct RpcRecord {
  const char* method = "";  // the RPC's name, e.g. "Predict" (static storage)
  // "grpc", or "http" for a call the HTTP gateway made on a client's behalf
  // (common/api_util.h, kProtocolMetadata). Static storage.
  const char* protocol = "grpc";
  std::string tenant;  // "" when authentication failed
  absl::StatusCode code = absl::StatusCode::kOk;
  double seconds = 0;
  int64_t texts = 0;  // Predict only
};

}  // namespace adapterd::api

#endif  // ADAPTERD_SERVER_API_RPC_RECORD_H_
