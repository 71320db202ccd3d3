// A REST request's body, internal to server/http, as it arrives
// (libmicrohttpd hands it over in pieces, between the request's first call
// and its last):
//
// - A JSON body (BodyKind::kJson) is buffered in Call::body, up to
//   max_body_bytes (413 past it), its bytes reserved against the
//   server-wide max_buffered_bytes (State::bodies; 503 past it) before they
//   are held, and given back (ReleaseBody) as soon as the answer is queued.
// - A dataset or adapter file (BodyKind::kDataset, kBytes) is a gRPC client
//   stream (UploadDataset, ImportAdapter): OpenStream opens it from the
//   headers, Receive sends the bytes on in messages of chunk_bytes as they
//   arrive, and FinishStream commits it at the body's end and answers. A
//   stream not finished is cancelled (Call::Cancel): nothing is stored.
//
// Thread safety: as Call's: one request's calls, one at a time.
#ifndef ADAPTERD_SERVER_HTTP_REQUEST_BODIES_H_
#define ADAPTERD_SERVER_HTTP_REQUEST_BODIES_H_

#include <microhttpd.h>

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "server/http/gateway_state.h"

namespace adapterd::http::gateway_internal {

// Grows the call's reservation of buffered body bytes to `bytes`: the busy
// RESOURCE_EXHAUSTED when the server-wide budget would pass.
absl::Status ReserveBody(State* state, Call& call, int64_t bytes);

// Frees the call's buffered body and gives its reservation back.
void ReleaseBody(Call& call);

// The first call of a request with a body that streams: opens the gRPC
// client stream and sends its metadata.
absl::Status OpenStream(State* state, MHD_Connection* c, Call& call);

// A piece of the body.
absl::Status Receive(State* state, Call& call, std::string_view data);

// The end of a client stream's body: the rest sent, then commit.
MHD_Result FinishStream(State* state, MHD_Connection* c, Call& call);

}  // namespace adapterd::http::gateway_internal

#endif  // ADAPTERD_SERVER_HTTP_REQUEST_BODIES_H_
