#include "server/http/http_gateway.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <microhttpd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/connection_table.h"
#include "common/listen_address.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "proto/adapterd/v1/adapterd_service.grpc.pb.h"
#include "server/http/console_assets.h"
#include "server/http/gateway_state.h"
#include "server/http/replies.h"
#include "server/http/request_bodies.h"
#include "server/http/request_headers.h"
#include "server/http/response_bodies.h"
#include "server/http/transcoding.h"

namespace adapterd::http {
namespace gateway_internal {
namespace {

// How much of a refused request's body is read (and dropped) to answer it.
constexpr int64_t kMaxDiscardedBytes = 64 << 20;
// The console's pages load only what the gateway serves, and call only it.
constexpr char kContentSecurityPolicy[] =
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

const char* ContentTypeOf(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  if (name.ends_with(".svg")) return "image/svg+xml";
  if (name.ends_with(".png")) return "image/png";
  if (name.ends_with(".json")) return "application/json";
  return "application/octet-stream";
}

// GET / and /console/<name>.
MHD_Result ServeConsole(State* state, MHD_Connection* c, std::string_view path) {
  std::string name = path == "/" ? "index.html" : std::string(path.substr(std::strlen("/console/")));
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') {
    return ReplyStatus(c, absl::NotFoundError("no such console file"));
  }
  std::string content;
  bool found = false;
  if (!state->options.console_dir.empty()) {
    std::ifstream in(state->options.console_dir + "/" + name, std::ios::binary);
    if (in) {
      std::ostringstream s;
      s << in.rdbuf();
      content = s.str();
      found = true;
    }
  } else {
    for (const ConsoleAsset& asset : ConsoleAssets()) {
      if (asset.name == name) {
        content = std::string(asset.content);
        found = true;
        break;
      }
    }
  }
  if (!found) return ReplyStatus(c, absl::NotFoundError("no such console file"));
  MHD_Response* response = BufferResponse(content, ContentTypeOf(name));
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, "Content-Security-Policy", kContentSecurityPolicy);
  MHD_add_response_header(response, "X-Frame-Options", "DENY");
  MHD_add_response_header(response, "Referrer-Policy", "no-referrer");
  return Queue(c, MHD_HTTP_OK, response);
}

// The gRPC method a route calls, as the service's descriptor declares it.
const google::protobuf::MethodDescriptor* MethodOf(const Route& route) {
  static const google::protobuf::ServiceDescriptor* const service =
      v1::PredictRequest::descriptor()->file()->FindServiceByName("Adapterd");
  return service != nullptr ? service->FindMethodByName(route.rpc) : nullptr;
}

// A unary route: its request (the method's input type, from the descriptor)
// from the body, path and query; the call through a generic stub; the
// response as JSON. Every unary route is served here, from the route table
// alone.
MHD_Result Unary(State* state, MHD_Connection* c, Call& call) {
  const google::protobuf::MethodDescriptor* method = MethodOf(*call.route);
  if (method == nullptr || method->client_streaming() || method->server_streaming()) {
    return Fail(state, c, call, absl::InternalError(absl::StrCat("no unary method ", call.route->rpc)));
  }
  google::protobuf::MessageFactory* factory = google::protobuf::MessageFactory::generated_factory();
  std::unique_ptr<google::protobuf::Message> request(factory->GetPrototype(method->input_type())->New());
  std::unique_ptr<google::protobuf::Message> response(factory->GetPrototype(method->output_type())->New());
  absl::Status s;
  if (call.route->body == BodyKind::kJson && !absl::StripAsciiWhitespace(call.body).empty()) {
    s = ParseJsonBody(call.body, *request);
  }
  const auto query = QueryParameters(c);
  if (s.ok() && call.route->body == BodyKind::kJson && !query.empty()) {
    s = absl::InvalidArgumentError(absl::StrCat("parameter '", ToValidUtf8(query.front().first),
                                                "': ", call.route->method, " ", call.route->pattern,
                                                " takes its fields in the JSON body, not the query string"));
  }
  if (s.ok()) s = ApplyPathAndQuery(*request, call.variables, query);
  grpc::ClientContext ctx;
  if (s.ok()) s = PrepareContext(c, RoutingTask(*request), ctx);
  if (!s.ok()) return Fail(state, c, call, s);
  call.grpc_called = true;
  std::promise<grpc::Status> done;
  state->generic_stub->UnaryCall(&ctx, absl::StrCat("/", method->service()->full_name(), "/", method->name()),
                                 grpc::StubOptions(), request.get(), response.get(),
                                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) return Fail(state, c, call, CallStatus(status, state->options.max_body_bytes));
  return ReplyJson(c, MHD_HTTP_OK, ToJson(*response));
}

// A server stream's call, opened, with its first message (so that a call
// that fails at once, e.g. NOT_FOUND, is answered as a JSON error).
template <typename Response>
struct OpenedStream {
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReader<Response>> reader;
  Response first;
};

template <typename Request, typename Response>
absl::StatusOr<OpenedStream<Response>> OpenServerStream(
    State* state, MHD_Connection* c, Call& call, const Request& request,
    std::unique_ptr<grpc::ClientReader<Response>> (v1::Adapterd::Stub::*method)(grpc::ClientContext*, const Request&)) {
  OpenedStream<Response> s;
  s.ctx = std::make_unique<grpc::ClientContext>();
  RETURN_IF_ERROR(PrepareContext(c, RoutingTask(request), *s.ctx));
  call.grpc_called = true;
  s.reader = (state->stub.get()->*method)(s.ctx.get(), request);
  if (!s.reader->Read(&s.first)) {
    const absl::Status status = CallStatus(s.reader->Finish(), state->options.max_body_bytes);
    return status.ok() ? absl::InternalError("the stream ended without a message") : status;
  }
  return s;
}

// A response whose body `body` (an EventStream or a Download) produces;
// libmicrohttpd frees it when the response ends. Null (and `body` freed)
// when the response cannot be made.
template <typename Body>
MHD_Response* StreamedResponse(uint64_t size, size_t block, Body* body) {
  MHD_Response* response = MHD_create_response_from_callback(size, block, &Body::Read, body, &Body::Free);
  if (response == nullptr) delete body;
  return response;
}

MHD_Result Watch(State* state, MHD_Connection* c, Call& call) {
  v1::WatchTrainingJobRequest request;
  absl::Status s = ApplyPathAndQuery(request, call.variables, QueryParameters(c));
  // EventSource's reconnection header resumes after the last event seen.
  if (const auto last = Header(c, "Last-Event-ID"); s.ok() && last.has_value() && request.after_seq() == 0) {
    int64_t seq = 0;
    if (absl::SimpleAtoi(*last, &seq)) request.set_after_seq(seq);
  }
  if (!s.ok()) return Fail(state, c, call, s);
  absl::StatusOr<OpenedStream<v1::WatchTrainingJobResponse>> opened =
      OpenServerStream(state, c, call, request, &v1::Adapterd::Stub::WatchTrainingJob);
  if (!opened.ok()) return Fail(state, c, call, opened.status());
  MHD_Response* response = StreamedResponse(
      MHD_SIZE_UNKNOWN, 4096,
      new EventStream(
          {.open_streams = &state->open_streams, .stopping = &state->stopping, .keepalive = state->options.keepalive},
          std::move(opened->ctx), std::move(opened->reader), opened->first));
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream; charset=utf-8");
  MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  MHD_add_response_header(response, "X-Accel-Buffering", "no");  // nginx: pass events on at once
  return Queue(c, MHD_HTTP_OK, response);
}

MHD_Result Export(State* state, MHD_Connection* c, Call& call) {
  v1::ExportAdapterRequest request;
  if (absl::Status s = ApplyPathAndQuery(request, call.variables, QueryParameters(c)); !s.ok()) {
    return Fail(state, c, call, s);
  }
  absl::StatusOr<OpenedStream<v1::ExportAdapterResponse>> opened =
      OpenServerStream(state, c, call, request, &v1::Adapterd::Stub::ExportAdapter);
  if (!opened.ok()) return Fail(state, c, call, opened.status());
  const int64_t version = opened->first.version();
  const int64_t total = opened->first.total_bytes();
  MHD_Response* response = StreamedResponse(
      total > 0 ? static_cast<uint64_t>(total) : MHD_SIZE_UNKNOWN, size_t{64} * 1024,
      new Download(std::move(opened->ctx), std::move(opened->reader), std::move(*opened->first.mutable_chunk())));
  if (response == nullptr) return MHD_NO;
  // An AdapterHub export is the zip of its directory.
  const bool adapterhub = request.format() == v1::ADAPTER_FORMAT_ADAPTERHUB;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                          adapterhub ? "application/zip" : "application/octet-stream");
  MHD_add_response_header(response, "Content-Disposition",
                          absl::StrCat("attachment; filename=\"", request.task_id(), "-v", version,
                                       adapterhub ? ".adapterhub.zip" : ".adapter", "\"")
                              .c_str());
  MHD_add_response_header(response, "X-Adapterd-Version", absl::StrCat(version).c_str());
  return Queue(c, MHD_HTTP_OK, response);
}

MHD_Result Dispatch(State* state, MHD_Connection* c, Call& call) {
  if (call.stream_open()) return FinishStream(state, c, call);
  switch (call.route->response) {
    case ResponseKind::kEventStream:
      return Watch(state, c, call);
    case ResponseKind::kDownload:
      return Export(state, c, call);
    case ResponseKind::kJson:
      break;
  }
  return Unary(state, c, call);
}

// Answers `status` on the request's next call, its body unread (an answer
// decided from the headers alone).
void RefuseFromHeaders(State* state, Call& call, const absl::Status& status) {
  call.early = [state, status](MHD_Connection* c, const Call& call) { return Fail(state, c, call, status); };
}

// The first call of a request (its headers): answers at once what needs no
// body; opens client streams.
MHD_Result Begin(State* state, MHD_Connection* c, std::string_view path, std::string_view method, Call& call) {
  if (state->require_client_certificate && !ClientCertificateVerified(c)) {
    RefuseFromHeaders(state, call,
                      absl::UnauthenticatedError("a client certificate signed by the server's client CA is required"));
    return MHD_YES;
  }
  const bool get = method == "GET" || method == "HEAD";  // HEAD: GET's answer, without the body
  if (get && (path == "/" || path.starts_with("/console/"))) {
    call.early = [state, path = std::string(path)](MHD_Connection* c, const Call&) {
      return ServeConsole(state, c, path);
    };
    return MHD_YES;
  }
  if (path == "/healthz" && get) {
    call.early = [state](MHD_Connection* c, const Call&) {
      const bool serving = !state->stopping.load() && (!state->hooks.serving || state->hooks.serving());
      return ReplyJson(c, serving ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                       serving ? R"({"status":"SERVING"})" : R"({"status":"NOT_SERVING"})");
    };
    return MHD_YES;
  }
  RouteMatch match = MatchRoute(method, path);
  if (match.route == nullptr) {
    const std::string what = absl::StrCat(ToValidUtf8(std::string(method)), " ", ToValidUtf8(std::string(path)));
    if (!match.allowed_methods.empty()) {
      call.early = [state, what, allowed = match.allowed_methods](MHD_Connection* c, const Call& call) {
        NoteRefusal(state, call, absl::StatusCode::kUnimplemented);
        MHD_Response* response = BufferResponse(StatusJson(absl::UnimplementedError(absl::StrCat(
                                                    what, ": the method is not allowed (allowed: ", allowed, ")"))),
                                                kJsonType);
        if (response == nullptr) return MHD_NO;
        MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, allowed.c_str());
        return Queue(c, MHD_HTTP_METHOD_NOT_ALLOWED, response);
      };
      return MHD_YES;
    }
    RefuseFromHeaders(state, call,
                      absl::NotFoundError(absl::StrCat("no route for ", what, " (docs/API.md, \"REST/JSON\")")));
    return MHD_YES;
  }
  call.route = match.route;
  call.variables = std::move(match.variables);
  if (absl::Status s = CheckCrossSite(state, c, method, *call.route); !s.ok()) {
    RefuseFromHeaders(state, call, s);
    return MHD_YES;
  }
  if (state->hooks.authenticate) {
    const auto auth = Header(c, MHD_HTTP_HEADER_AUTHORIZATION);
    if (absl::Status s = state->hooks.authenticate(auth.has_value() ? &*auth : nullptr); !s.ok()) {
      RefuseFromHeaders(state, call, s);
      return MHD_YES;
    }
  }
  if (call.route->body == BodyKind::kJson) {
    int64_t length = 0;
    const auto header = Header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (header.has_value() && absl::SimpleAtoi(*header, &length) && length > state->options.max_body_bytes) {
      call.answered = true;
      return Fail(state, c, call,
                  TooLarge(absl::StrCat("the body is ", length, " bytes; at most ", state->options.max_body_bytes,
                                        " are accepted")));
    }
    // Reserved before the body is read: a refusal leaves it unread.
    if (header.has_value() && length > 0) {
      if (absl::Status s = ReserveBody(state, call, length); !s.ok()) {
        RefuseFromHeaders(state, call, s);
        return MHD_YES;
      }
    }
  }
  if (call.route->body == BodyKind::kBytes) {
    int64_t length = 0;
    const auto header = Header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (header.has_value() && absl::SimpleAtoi(*header, &length) && length > state->options.max_import_bytes) {
      const absl::Status s = TooLarge(absl::StrCat(
          "the adapter file is ", length, " bytes; this server imports at most ", state->options.max_import_bytes));
      RefuseFromHeaders(state, call, s);
      return MHD_YES;
    }
  }
  if (call.route->body == BodyKind::kDataset || call.route->body == BodyKind::kBytes) {
    if (absl::Status s = OpenStream(state, c, call); !s.ok()) {
      call.answered = true;
      return Fail(state, c, call, s);
    }
  }
  return MHD_YES;
}

MHD_Result Handle(void* cls, MHD_Connection* c, const char* url, const char* method, const char*,
                  const char* upload_data, size_t* upload_data_size, void** con_cls) {
  State* state = static_cast<State*>(cls);
  // libmicrohttpd lets a handler answer after the headers (the first call)
  // or after the whole body (the last), never in between.
  if (*con_cls == nullptr) {
    auto call = std::make_unique<Call>();
    MHD_Result r = Begin(state, c, url, method, *call);
    if (call->early && HasBody(c)) {
      // Answered from the headers; the body is not read (libmicrohttpd
      // closes the connection after the answer).
      call->answered = true;
      r = call->early(c, *call);
      call->early = nullptr;
    }
    if (call->answered) ReleaseBody(*call);
    state->connections.Touch(c, /*answering=*/call->answered);
    *con_cls = call.release();
    return r;
  }
  Call& call = *static_cast<Call*>(*con_cls);
  if (*upload_data_size > 0) {
    // A body trickling in past the deadline: closed unanswered
    // (libmicrohttpd answers only once the body is whole).
    if (absl::Now() - call.start > state->options.body_timeout) {
      LOG(WARNING) << "HTTP: closing a connection whose request body took longer than "
                   << absl::FormatDuration(state->options.body_timeout);
      call.Cancel();
      return MHD_NO;
    }
    state->connections.Touch(c, /*answering=*/false);
    if (!call.answered && !call.early && !call.refusal.has_value()) {
      const absl::Status s = Receive(state, call, std::string_view(upload_data, *upload_data_size));
      if (!s.ok()) {
        call.Cancel();  // nothing stored
        call.refusal = s;
      }
    } else if (call.refusal.has_value()) {
      call.discarded += static_cast<int64_t>(*upload_data_size);
      if (call.discarded > kMaxDiscardedBytes) return MHD_NO;
    }
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (call.answered) return MHD_YES;
  call.answered = true;
  state->connections.Touch(c, /*answering=*/true);
  MHD_Result r;
  if (call.early) {
    r = call.early(c, call);
  } else if (call.refusal.has_value()) {
    const absl::Status& s = *call.refusal;
    r = Fail(state, c, call, s);
  } else {
    r = Dispatch(state, c, call);
  }
  // The answer is queued and owns what it sends: the body and its
  // reservation go back now, before libmicrohttpd sends the answer, so a
  // client that sends its next request on reading this answer finds the
  // budget free (not when the connection's request is completed, later).
  ReleaseBody(call);
  return r;
}

// The request is over: a client stream still open (the client went away
// mid-body) is cancelled, so nothing is stored.
void Completed(void* cls, MHD_Connection* c, void** con_cls, MHD_RequestTerminationCode) {
  static_cast<State*>(cls)->connections.Touch(c, /*answering=*/false);
  auto* call = static_cast<Call*>(*con_cls);
  if (call == nullptr) return;
  call->Cancel();
  delete call;
  *con_cls = nullptr;
}

// libmicrohttpd's decoding of the path and query (%XX), but for %00, which
// stays as written: decoded, a NUL would end the path at it
// (`/v1/tasks/t%00evil` would name task `t`); kept, it fails the id check
// (INVALID_ARGUMENT).
size_t Unescape(void*, MHD_Connection*, char* s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  char* out = s;
  for (const char* in = s; *in != '\0';) {
    if (in[0] == '%' && in[1] != '\0' && in[2] != '\0' && hex(in[1]) >= 0 && hex(in[2]) >= 0) {
      const char decoded = static_cast<char>(hex(in[1]) * 16 + hex(in[2]));
      if (decoded != '\0') {
        *out++ = decoded;
        in += 3;
        continue;
      }
    }
    *out++ = *in++;
  }
  *out = '\0';
  return static_cast<size_t>(out - s);
}

// Keeps State::connections.
void Notify(void* cls, MHD_Connection* c, void**, MHD_ConnectionNotificationCode code) {
  ConnectionTable& table = static_cast<State*>(cls)->connections;
  if (code == MHD_CONNECTION_NOTIFY_CLOSED) return table.Closed(c);
  const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  table.Opened(c, info != nullptr ? info->connect_fd : -1);
}

// A connection was accepted: at max_connections, the one idle longest
// among those not being answered makes room (ConnectionTable::Admit: its
// thread sees the end of its input and closes it).
MHD_Result Admit(void* cls, const sockaddr*, socklen_t) {
  return static_cast<State*>(cls)->connections.Admit() ? MHD_YES : MHD_NO;
}

void Log(void*, const char* format, va_list args) {
  char buf[512];
  std::vsnprintf(buf, sizeof(buf), format, args);
  std::string line(buf);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  LOG(WARNING) << "HTTP: " << line;
}

}  // namespace
}  // namespace gateway_internal

absl::StatusOr<std::unique_ptr<HttpGateway>> HttpGateway::Start(const HttpGatewayOptions& options,
                                                                std::shared_ptr<grpc::Channel> channel, Hooks hooks) {
  ASSIGN_OR_RETURN(sockaddr_in addr, ParseIpv4ListenAddress(options.listen_address, "HTTP"));
  std::unique_ptr<HttpGateway> gateway(new HttpGateway());
  gateway->state_ = std::make_unique<State>(options);
  State* state = gateway->state_.get();
  state->channel = std::move(channel);
  state->stub = v1::Adapterd::NewStub(state->channel);
  state->generic_stub =
      std::make_unique<grpc::TemplatedGenericStub<google::protobuf::Message, google::protobuf::Message>>(
          state->channel);
  state->hooks = std::move(hooks);
  unsigned int flags =
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
  if (!options.tls.cert_chain.empty()) {
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
      return absl::FailedPreconditionError("this libmicrohttpd has no TLS: cannot serve HTTPS on --http_listen");
    }
    state->tls = options.tls;
    flags |= MHD_USE_TLS;
    state->require_client_certificate = !state->tls.ca_certs.empty();
  }
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_SOCK_ADDR, 0, &addr},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&gateway_internal::Completed), state},
      {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&gateway_internal::Notify), state},
      {MHD_OPTION_UNESCAPE_CALLBACK, reinterpret_cast<intptr_t>(&gateway_internal::Unescape), nullptr},
      // Admit() keeps max_connections; libmicrohttpd's own limit sits a
      // little above, so that it accepts the connection that evicts one.
      {MHD_OPTION_CONNECTION_LIMIT, options.max_connections + 16, nullptr},
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, std::max(0, options.max_connections_per_ip), nullptr},
      // Idle connections (keep-alive, a stalled upload) close after this;
      // event streams send keep-alives more often.
      {MHD_OPTION_CONNECTION_TIMEOUT,
       static_cast<intptr_t>(std::max<int64_t>(1, absl::ToInt64Seconds(options.idle_timeout))), nullptr},
  };
  if (flags & MHD_USE_TLS) {
    items.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, state->tls.private_key.data()});
    items.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, state->tls.cert_chain.data()});
    if (state->require_client_certificate) {
      items.push_back({MHD_OPTION_HTTPS_MEM_TRUST, 0, state->tls.ca_certs.data()});
    }
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  // The logger first: libmicrohttpd logs the options that follow through it.
  state->daemon = MHD_start_daemon(flags, 0, &gateway_internal::Admit, state, &gateway_internal::Handle, state,
                                   MHD_OPTION_EXTERNAL_LOGGER, &gateway_internal::Log, nullptr, MHD_OPTION_ARRAY,
                                   items.data(), MHD_OPTION_END);
  if (state->daemon == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve HTTP on ", options.listen_address, " (address in use, or not a valid host:port?)"));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(state->daemon, MHD_DAEMON_INFO_BIND_PORT);
  if (info == nullptr || info->port == 0) return absl::InternalError("the HTTP daemon reports no port");
  gateway->port_ = info->port;
  LOG(INFO) << "HTTP on port " << gateway->port_ << ", "
            << (flags & MHD_USE_TLS ? (state->require_client_certificate ? "mutual TLS" : "TLS") : "plaintext")
            << " (REST/JSON API and console)";
  return gateway;
}

void HttpGateway::Stop() {
  if (state_ == nullptr || state_->daemon == nullptr) return;
  state_->stopping.store(true);
  // Open event streams send their end event within a poll (200 ms) of
  // `stopping`; give them a moment to, before the connections are closed.
  const absl::Time end = absl::Now() + absl::Seconds(2);
  while (state_->open_streams.load() > 0 && absl::Now() < end) absl::SleepFor(absl::Milliseconds(10));
  MHD_stop_daemon(state_->daemon);
  state_->daemon = nullptr;
}

HttpGateway::~HttpGateway() { Stop(); }

const UsageLedger& HttpGateway::buffered_bodies() const { return state_->bodies; }

}  // namespace adapterd::http
