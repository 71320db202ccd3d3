// The REST gateway's shared state, internal to server/http (the gateway's
// .cc files include it; nothing outside server/http does):
//
// - HttpGateway::State: what the daemon's callbacks share, one per gateway.
//   HttpGateway::Start makes it and fills it before the daemon starts; it
//   lives until the gateway is destroyed, after the daemon stopped.
// - gateway_internal::Call: what one request keeps between libmicrohttpd's
//   calls (*con_cls), from the request's first call (its headers) until its
//   completion callback deletes it. A client stream it opened
//   (UploadDataset, ImportAdapter) is committed at the body's end or
//   cancelled (Cancel: nothing stored).
//
// Thread safety: State's options, channel, stubs, hooks and TLS are written
// only by Start, before the daemon runs, and only read after; `bodies` and
// `connections` are thread-safe, `stopping` and `open_streams` atomic;
// `daemon` belongs to the owning thread (Start, Stop). A Call is not
// thread-safe: libmicrohttpd makes one request's calls one at a time, on its
// connection's thread.
#ifndef ADAPTERD_SERVER_HTTP_GATEWAY_STATE_H_
#define ADAPTERD_SERVER_HTTP_GATEWAY_STATE_H_

#include <google/protobuf/message.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <microhttpd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/api_util.h"
#include "common/connection_table.h"
#include "common/tls.h"
#include "common/usage_ledger.h"
#include "proto/adapterd/v1/adapterd_service.grpc.pb.h"
#include "server/http/http_gateway.h"
#include "server/http/transcoding.h"

namespace adapterd::http {

struct HttpGateway::State {
  explicit State(const HttpGatewayOptions& o)
      : options(o),
        bodies("bytes of HTTP request bodies held in memory", o.max_buffered_bytes),
        connections(static_cast<size_t>(std::max(1, o.max_connections))) {}
  HttpGatewayOptions options;
  UsageLedger bodies;  // every connection's buffered body (server-wide: tenant "")
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Adapterd::Stub> stub;
  // The unary routes' calls, by method name (Unary).
  std::unique_ptr<grpc::TemplatedGenericStub<google::protobuf::Message, google::protobuf::Message>> generic_stub;
  Hooks hooks;
  bool require_client_certificate = false;
  TlsPem tls;  // MHD keeps pointers to the PEM text: it lives here
  std::atomic<bool> stopping{false};
  std::atomic<int> open_streams{0};  // event streams not yet freed
  MHD_Daemon* daemon = nullptr;

  // Open connections, for eviction at max_connections (Admit). A connection
  // is `answering` from its request's last call (the body is whole) until
  // the request completes: its call runs, or its response (an event
  // stream, a download) is being sent.
  ConnectionTable connections;
};

// The gateway's internal functions, shared by its .cc files.
namespace gateway_internal {

using State = HttpGateway::State;

// A route's path variables, e.g. {"task_id", "t1"} (RouteMatch::variables).
using Variables = std::vector<std::pair<std::string, std::string>>;

// What a request keeps between libmicrohttpd's calls (*con_cls).
struct Call {
  // An answer decided from the headers alone (an error, the console,
  // /healthz): given on the next call, so that a request without a body
  // keeps its connection alive.
  std::function<MHD_Result(MHD_Connection*, const Call&)> early;
  // A refusal decided while the body arrives: libmicrohttpd can answer only
  // after the whole body, so the rest is read and dropped (up to
  // kMaxDiscardedBytes, http_gateway.cc; past that the connection is closed
  // unanswered).
  std::optional<absl::Status> refusal;
  int64_t discarded = 0;
  const Route* route = nullptr;
  Variables variables;
  bool answered = false;
  // Set just before the request's gRPC call is made: from then on gRPC
  // counts the request (its metrics), whatever the answer.
  bool grpc_called = false;
  absl::Time start = absl::Now();
  std::string body;             // a JSON body, or a SQuAD document
  UsageLedger::Hold body_hold;  // body's reservation in State::bodies
  // Client streams (UploadDataset, ImportAdapter), open from the first call
  // until the body ends: then committed, or cancelled (nothing stored).
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientWriter<v1::UploadDatasetRequest>> upload;
  std::unique_ptr<grpc::ClientWriter<v1::ImportAdapterRequest>> import;
  v1::Dataset dataset;
  v1::Task task;
  std::string pending_bytes;  // bytes of the body (a dataset or adapter file) not sent yet

  bool stream_open() const { return ctx != nullptr; }

  // Ends an open client stream without committing it.
  void Cancel() {
    if (!stream_open()) return;
    ctx->TryCancel();
    if (upload) (void)upload->Finish();
    if (import) (void)import->Finish();
    upload.reset();
    import.reset();
    ctx.reset();
  }

  // The stream's status after a failed Write (the server ended it).
  absl::Status Broken() {
    grpc::Status status = upload ? upload->Finish() : import->Finish();
    upload.reset();
    import.reset();
    ctx.reset();
    if (status.ok()) return absl::InternalError("the stream ended early");
    return FromGrpcStatus(status);
  }
};

}  // namespace gateway_internal
}  // namespace adapterd::http

#endif  // ADAPTERD_SERVER_HTTP_GATEWAY_STATE_H_
