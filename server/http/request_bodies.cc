#include "server/http/request_bodies.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "server/http/replies.h"
#include "server/http/request_headers.h"
#include "server/http/transcoding.h"

namespace adapterd::http::gateway_internal {
namespace {

// Sends the body's bytes received so far to the open client stream, in
// messages of at most chunk_bytes (all of them at the end of the body).
absl::Status SendBytes(State* state, Call& call, bool all) {
  const size_t chunk = static_cast<size_t>(state->options.chunk_bytes);
  size_t offset = 0;
  while (call.pending_bytes.size() - offset >= chunk || (all && offset < call.pending_bytes.size())) {
    const std::string piece = call.pending_bytes.substr(offset, chunk);
    offset += piece.size();
    bool written;
    if (call.upload) {
      v1::UploadDatasetRequest m;
      m.set_file_bytes(piece);
      written = call.upload->Write(m);
    } else {
      v1::ImportAdapterRequest m;
      m.set_chunk(piece);
      written = call.import->Write(m);
    }
    if (!written) return call.Broken();
  }
  call.pending_bytes.erase(0, offset);
  return absl::OkStatus();
}

}  // namespace

absl::Status ReserveBody(State* state, Call& call, int64_t bytes) {
  if (bytes <= call.body_hold.amount()) return absl::OkStatus();
  if (call.body_hold.amount() == 0) {
    ASSIGN_OR_RETURN(call.body_hold, state->bodies.Open("", nullptr));
  }
  absl::Status s = call.body_hold.Grow(bytes - call.body_hold.amount(), UsageLedger::kUnlimited);
  if (s.ok()) return s;
  return Busy(
      absl::StrCat("the REST gateway holds too many request bodies now (--http_max_buffered_bytes): ", s.message()));
}

void ReleaseBody(Call& call) {
  std::string().swap(call.body);
  call.body_hold = UsageLedger::Hold();
}

absl::Status OpenStream(State* state, MHD_Connection* c, Call& call) {
  const auto query = QueryParameters(c);
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (call.route->body == BodyKind::kDataset) {
    const auto content_type = Header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
    const std::optional<v1::DatasetFormat> format = DatasetFormatOf(content_type);
    if (!format.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Content-Type '", ToValidUtf8(content_type.value_or("")),
                       "' is not a dataset format: send text/csv, application/x-ndjson (JSON Lines) or "
                       "application/json (a SQuAD document)"));
    }
    v1::UploadDatasetRequest first;
    auto* metadata = first.mutable_metadata();  // the first message is the metadata, even when empty
    for (const auto& [key, value] : query) RETURN_IF_ERROR(SetFieldFromText(*metadata, key, value));
    // The server reads the body (DatasetUpload), in the format its
    // Content-Type names; errors name it "request body".
    metadata->set_file_format(*format);
    if (metadata->file_name().empty()) metadata->set_file_name("request body");
    RETURN_IF_ERROR(PrepareContext(c, "", *ctx));
    call.ctx = std::move(ctx);
    call.grpc_called = true;
    call.upload = state->stub->UploadDataset(call.ctx.get(), &call.dataset);
    if (!call.upload->Write(first)) return call.Broken();
    return absl::OkStatus();
  }
  // ImportAdapter: the task from the path, the size from Content-Length.
  v1::ImportAdapterRequest first;
  auto* metadata = first.mutable_metadata();
  RETURN_IF_ERROR(ApplyPathAndQuery(*metadata, call.variables, query));
  if (const auto length = Header(c, MHD_HTTP_HEADER_CONTENT_LENGTH); length.has_value()) {
    int64_t n = 0;
    if (absl::SimpleAtoi(*length, &n)) metadata->set_total_bytes(n);
  }
  RETURN_IF_ERROR(PrepareContext(c, metadata->task_id(), *ctx));
  call.ctx = std::move(ctx);
  call.grpc_called = true;
  call.import = state->stub->ImportAdapter(call.ctx.get(), &call.task);
  if (!call.import->Write(first)) return call.Broken();
  return absl::OkStatus();
}

absl::Status Receive(State* state, Call& call, std::string_view data) {
  switch (call.route->body) {
    case BodyKind::kNone:
      return absl::InvalidArgumentError(absl::StrCat(call.route->method, " ", call.route->pattern, " takes no body"));
    case BodyKind::kJson:
      if (call.body.size() + data.size() > static_cast<size_t>(state->options.max_body_bytes)) {
        return TooLarge(absl::StrCat("the body is larger than ", state->options.max_body_bytes, " bytes"));
      }
      RETURN_IF_ERROR(ReserveBody(state, call, static_cast<int64_t>(call.body.size() + data.size())));
      call.body.append(data);
      return absl::OkStatus();
    case BodyKind::kDataset:
    case BodyKind::kBytes:
      call.pending_bytes.append(data);
      return SendBytes(state, call, /*all=*/false);
  }
  return absl::OkStatus();
}

MHD_Result FinishStream(State* state, MHD_Connection* c, Call& call) {
  if (absl::Status s = SendBytes(state, call, /*all=*/true); !s.ok()) {
    call.Cancel();
    return Fail(state, c, call, s);
  }
  grpc::Status status;
  if (call.upload) {
    call.upload->WritesDone();
    status = call.upload->Finish();
  } else {
    call.import->WritesDone();
    status = call.import->Finish();
  }
  call.upload.reset();
  call.import.reset();
  call.ctx.reset();
  if (!status.ok()) return Fail(state, c, call, CallStatus(status, state->options.max_body_bytes));
  return ReplyJson(c, MHD_HTTP_OK, call.route->body == BodyKind::kDataset ? ToJson(call.dataset) : ToJson(call.task));
}

}  // namespace adapterd::http::gateway_internal
