#include "server/http/request_headers.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/api_util.h"
#include "common/routing.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "server/http/replies.h"

namespace adapterd::http::gateway_internal {
namespace {

bool PrintableAscii(std::string_view s) {
  for (const char ch : s) {
    if (ch < 0x20 || ch > 0x7e) return false;
  }
  return true;
}

// A Content-Type's media type, parameters aside, in lower case ("" if none).
std::string MediaType(const std::optional<std::string>& content_type) {
  if (!content_type.has_value()) return "";
  return absl::AsciiStrToLower(
      std::string(absl::StripAsciiWhitespace(content_type->substr(0, content_type->find(';')))));
}

// The host part of a Host header or an origin's authority ("h:8080" -> "h",
// "[::1]:80" -> "[::1]"), lower case.
std::string HostName(std::string_view authority) {
  if (authority.starts_with("[")) {
    const size_t end = authority.find(']');
    return absl::AsciiStrToLower(
        std::string(authority.substr(0, end == std::string_view::npos ? authority.size() : end + 1)));
  }
  return absl::AsciiStrToLower(std::string(authority.substr(0, authority.find(':'))));
}

}  // namespace

std::optional<std::string> Header(MHD_Connection* c, const char* name) {
  const char* value = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::vector<std::pair<std::string, std::string>> QueryParameters(MHD_Connection* c) {
  std::vector<std::pair<std::string, std::string>> params;
  MHD_get_connection_values(
      c, MHD_GET_ARGUMENT_KIND,
      [](void* cls, MHD_ValueKind, const char* key, const char* value) -> MHD_Result {
        static_cast<std::vector<std::pair<std::string, std::string>>*>(cls)->emplace_back(
            key, value != nullptr ? value : "");
        return MHD_YES;
      },
      &params);
  return params;
}

absl::Status ApplyPathAndQuery(google::protobuf::Message& message, const Variables& variables,
                               const std::vector<std::pair<std::string, std::string>>& query) {
  for (const auto& [name, value] : variables) {
    const auto* field = message.GetDescriptor()->FindFieldByName(name);
    if (field != nullptr) {
      const std::string in_body = message.GetReflection()->GetString(message, field);
      if (!in_body.empty() && in_body != value) {
        return absl::InvalidArgumentError(absl::StrCat(name, " is '", ToValidUtf8(in_body), "' in the body but '",
                                                       ToValidUtf8(value), "' in the path"));
      }
    }
    RETURN_IF_ERROR(SetFieldFromText(message, name, value));
  }
  for (const auto& [key, value] : query) {
    for (const auto& [name, unused] : variables) {
      const auto* field = message.GetDescriptor()->FindFieldByName(name);
      if (key == name || (field != nullptr && key == field->json_name())) {
        return absl::InvalidArgumentError(absl::StrCat("parameter '", key, "' is given by the path"));
      }
    }
    RETURN_IF_ERROR(SetFieldFromText(message, key, value));
  }
  return absl::OkStatus();
}

std::string RoutingTask(const google::protobuf::Message& message) {
  const auto* d = message.GetDescriptor();
  const auto* r = message.GetReflection();
  if (const auto* f = d->FindFieldByName("task_id"); f != nullptr && f->type() == f->TYPE_STRING) {
    if (std::string task = r->GetString(message, f); !task.empty()) return task;
  }
  for (const char* name : {"job_id", "dataset_id"}) {
    if (const auto* f = d->FindFieldByName(name); f != nullptr && f->type() == f->TYPE_STRING) {
      return std::string(RoutingTaskOf(r->GetString(message, f)));
    }
  }
  return "";
}

absl::Status PrepareContext(MHD_Connection* c, const std::string& task, grpc::ClientContext& ctx) {
  if (const auto auth = Header(c, MHD_HTTP_HEADER_AUTHORIZATION); auth.has_value()) {
    if (!PrintableAscii(*auth)) {
      return absl::UnauthenticatedError("the Authorization header is not printable ASCII");
    }
    ctx.AddMetadata("authorization", *auth);
  }
  const auto header = Header(c, "X-Task-Id");
  if (header.has_value() && !header->empty()) {
    if (!PrintableAscii(*header)) return absl::InvalidArgumentError("the X-Task-Id header is not printable ASCII");
    ctx.AddMetadata(std::string(kTaskRoutingHeader), *header);
  } else if (!task.empty() && PrintableAscii(task)) {
    ctx.AddMetadata(std::string(kTaskRoutingHeader), task);
  }
  ctx.AddMetadata(std::string(kProtocolMetadata), "http");
  // A deadline, as grpc-gateway takes it (none by default, as in gRPC).
  if (const auto timeout = Header(c, "Grpc-Timeout"); timeout.has_value()) {
    ASSIGN_OR_RETURN(const absl::Duration d, ParseGrpcTimeout(*timeout));
    const absl::Time deadline = absl::Now() + d;
    // Past already (a timeout of nanoseconds): refused here, as gRPC would,
    // rather than left to race the call.
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("the Grpc-Timeout (", *timeout, ") passed before the call was made"));
    }
    ctx.set_deadline(absl::ToChronoTime(deadline));
  }
  return absl::OkStatus();
}

bool HasBody(MHD_Connection* c) {
  if (Header(c, MHD_HTTP_HEADER_TRANSFER_ENCODING).has_value()) return true;
  const auto length = Header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
  int64_t n = 0;
  return length.has_value() && absl::SimpleAtoi(*length, &n) && n > 0;
}

bool ClientCertificateVerified(MHD_Connection* c) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (info == nullptr || info->tls_session == nullptr) return false;
  auto session = static_cast<gnutls_session_t>(info->tls_session);
  unsigned int count = 0;
  if (gnutls_certificate_get_peers(session, &count) == nullptr || count == 0) return false;
  // Verified for a client's purpose: a certificate whose extended key usage
  // excludes clientAuth (one for servers only) is refused, as gRPC refuses it.
  gnutls_typed_vdata_st purpose{};
  purpose.type = GNUTLS_DT_KEY_PURPOSE_OID;
  purpose.data = reinterpret_cast<unsigned char*>(const_cast<char*>(GNUTLS_KP_TLS_WWW_CLIENT));
  unsigned int verify = 0;
  return gnutls_certificate_verify_peers(session, &purpose, 1, &verify) == GNUTLS_E_SUCCESS && verify == 0;
}

std::optional<v1::DatasetFormat> DatasetFormatOf(const std::optional<std::string>& content_type) {
  if (!content_type.has_value()) return std::nullopt;
  const std::string type = MediaType(content_type);
  if (type == "text/csv") return v1::DATASET_FORMAT_CSV;
  if (type == "application/x-ndjson" || type == "application/jsonl" || type == "application/x-jsonlines" ||
      type == "application/json-lines") {
    return v1::DATASET_FORMAT_JSONL;
  }
  if (type == "application/json") return v1::DATASET_FORMAT_SQUAD;
  return std::nullopt;
}

absl::Status CheckCrossSite(State* state, MHD_Connection* c, std::string_view method, const Route& route) {
  const std::string host = Header(c, MHD_HTTP_HEADER_HOST).value_or("");
  const std::vector<std::string>& allowed = state->options.allowed_hosts;
  if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), HostName(host)) == allowed.end()) {
    return absl::PermissionDeniedError(
        absl::StrCat("Host '", ToValidUtf8(host), "' is not a name this server answers to (--http_allowed_hosts)"));
  }
  if (method != "GET" && method != "HEAD") {
    if (const auto origin = Header(c, "Origin"); origin.has_value()) {
      const size_t scheme = origin->find("://");
      const std::string authority = scheme == std::string::npos ? "" : origin->substr(scheme + 3);
      if (authority.empty() || absl::AsciiStrToLower(authority) != absl::AsciiStrToLower(host)) {
        return absl::PermissionDeniedError(
            absl::StrCat("a ", std::string(method), " from origin '", ToValidUtf8(*origin),
                         "' (another site than this server's) is refused: cross-site requests cannot change state"));
      }
    }
  }
  if (!HasBody(c)) return absl::OkStatus();
  const auto content_type = Header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
  const char* want = route.body == BodyKind::kJson    ? "application/json"
                     : route.body == BodyKind::kBytes ? "application/octet-stream"
                                                      : nullptr;  // datasets: OpenStream checks their formats
  if (want != nullptr && MediaType(content_type) != want) {
    return UnsupportedMediaType(absl::StrCat(route.method, " ", route.pattern, " takes a ", want,
                                             " body, not Content-Type '", ToValidUtf8(content_type.value_or("")), "'"));
  }
  return absl::OkStatus();
}

}  // namespace adapterd::http::gateway_internal
