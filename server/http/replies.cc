#include "server/http/replies.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/api_util.h"
#include "server/http/transcoding.h"

namespace adapterd::http::gateway_internal {
namespace {

constexpr unsigned int kHttpContentTooLarge = 413;
constexpr char kTooLargePayload[] = "adapterd.http/too-large";
constexpr char kBusyPayload[] = "adapterd.http/busy";
constexpr unsigned int kHttpServiceUnavailable = 503;
constexpr unsigned int kHttpUnsupportedMediaType = 415;
constexpr char kMediaTypePayload[] = "adapterd.http/media-type";

// `s`, marked with the payload `key` (the kind of refusal it is, for
// HttpCodeFor).
absl::Status WithPayload(absl::Status s, const char* key) {
  s.SetPayload(key, absl::Cord("1"));
  return s;
}

bool IsTooLarge(const absl::Status& s) { return s.GetPayload(kTooLargePayload).has_value(); }
bool IsBusy(const absl::Status& s) { return s.GetPayload(kBusyPayload).has_value(); }

}  // namespace

MHD_Result Queue(MHD_Connection* c, unsigned int code, MHD_Response* response) {
  if (response == nullptr) return MHD_NO;
  const MHD_Result r = MHD_queue_response(c, code, response);
  MHD_destroy_response(response);
  return r;
}

MHD_Response* BufferResponse(std::string_view body, const char* content_type) {
  MHD_Response* response =
      MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response != nullptr) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  }
  return response;
}

MHD_Result ReplyJson(MHD_Connection* c, unsigned int code, std::string_view json) {
  return Queue(c, code, BufferResponse(json, kJsonType));
}

MHD_Result ReplyStatus(MHD_Connection* c, const absl::Status& status, unsigned int http_code) {
  return ReplyJson(c, http_code != 0 ? http_code : static_cast<unsigned int>(HttpStatusFor(status.code())),
                   StatusJson(status));
}

absl::Status TooLarge(const std::string& message) {
  return WithPayload(absl::ResourceExhaustedError(message), kTooLargePayload);
}

absl::Status Busy(const std::string& message) {
  return WithPayload(absl::ResourceExhaustedError(message), kBusyPayload);
}

absl::Status UnsupportedMediaType(const std::string& message) {
  return WithPayload(absl::InvalidArgumentError(message), kMediaTypePayload);
}

absl::Status CallStatus(const grpc::Status& status, int64_t max_message_bytes) {
  absl::Status s = FromGrpcStatus(status);
  if (absl::IsResourceExhausted(s) && absl::StrContains(s.message(), "message larger than max")) {
    return TooLarge(absl::StrCat(s.message(), ": a request or response is at most --max_message_bytes (",
                                 max_message_bytes, " bytes); send fewer or shorter texts"));
  }
  return s;
}

unsigned int HttpCodeFor(const absl::Status& s) {
  if (IsTooLarge(s)) return kHttpContentTooLarge;
  if (s.GetPayload(kMediaTypePayload).has_value()) return kHttpUnsupportedMediaType;
  if (IsBusy(s)) return kHttpServiceUnavailable;
  return 0;
}

void NoteRefusal(State* state, const Call& call, absl::StatusCode code) {
  if (call.grpc_called || !state->hooks.on_refusal) return;
  state->hooks.on_refusal(call.route != nullptr ? call.route->rpc : "none", code, absl::Now() - call.start);
}

MHD_Result Fail(State* state, MHD_Connection* c, const Call& call, const absl::Status& status) {
  NoteRefusal(state, call, status.code());
  return ReplyStatus(c, status, HttpCodeFor(status));
}

}  // namespace adapterd::http::gateway_internal
