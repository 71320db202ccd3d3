#include "server/http/transcoding.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_depth.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace adapterd::http {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr std::array<Route, 15> kRoutes = {{
    {"POST", "/v1/datasets", "UploadDataset", BodyKind::kDataset, ResponseKind::kJson},
    {"GET", "/v1/datasets", "ListDatasets", BodyKind::kNone, ResponseKind::kJson},
    {"GET", "/v1/datasets/{dataset_id}", "GetDataset", BodyKind::kNone, ResponseKind::kJson},
    {"DELETE", "/v1/datasets/{dataset_id}", "DeleteDataset", BodyKind::kNone, ResponseKind::kJson},
    {"POST", "/v1/trainingJobs", "CreateTrainingJob", BodyKind::kJson, ResponseKind::kJson},
    {"GET", "/v1/trainingJobs", "ListTrainingJobs", BodyKind::kNone, ResponseKind::kJson},
    {"GET", "/v1/trainingJobs/{job_id}", "GetTrainingJob", BodyKind::kNone, ResponseKind::kJson},
    {"POST", "/v1/trainingJobs/{job_id}:cancel", "CancelTrainingJob", BodyKind::kJson, ResponseKind::kJson},
    {"GET", "/v1/trainingJobs/{job_id}:watch", "WatchTrainingJob", BodyKind::kNone, ResponseKind::kEventStream},
    {"GET", "/v1/tasks", "ListTasks", BodyKind::kNone, ResponseKind::kJson},
    {"GET", "/v1/tasks/{task_id}", "GetTask", BodyKind::kNone, ResponseKind::kJson},
    {"DELETE", "/v1/tasks/{task_id}", "DeleteTask", BodyKind::kNone, ResponseKind::kJson},
    {"GET", "/v1/tasks/{task_id}:export", "ExportAdapter", BodyKind::kNone, ResponseKind::kDownload},
    {"POST", "/v1/tasks/{task_id}:import", "ImportAdapter", BodyKind::kBytes, ResponseKind::kJson},
    {"POST", "/v1/tasks/{task_id}:predict", "Predict", BodyKind::kJson, ResponseKind::kJson},
}};

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t at = s.find(sep);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

// Matches `path` against `pattern`; fills `variables` on success.
bool MatchPattern(std::string_view pattern, std::string_view path,
                  std::vector<std::pair<std::string, std::string>>& variables) {
  variables.clear();
  // The custom verb: the pattern's last segment's ":verb" must end the path.
  std::string_view verb;
  const size_t last_slash = pattern.rfind('/');
  const size_t colon = pattern.find(':', last_slash);
  if (colon != std::string_view::npos) {
    verb = pattern.substr(colon);
    pattern = pattern.substr(0, colon);
    if (path.size() <= verb.size() || path.substr(path.size() - verb.size()) != verb) return false;
    path = path.substr(0, path.size() - verb.size());
  }
  const std::vector<std::string_view> want = Split(pattern, '/');
  const std::vector<std::string_view> got = Split(path, '/');
  if (want.size() != got.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i].size() > 2 && want[i].front() == '{' && want[i].back() == '}') {
      // A variable: one non-empty segment; ids never hold ':' (which would
      // be a custom method this route does not have).
      if (got[i].empty() || got[i].find(':') != std::string_view::npos) return false;
      variables.emplace_back(std::string(want[i].substr(1, want[i].size() - 2)), std::string(got[i]));
    } else if (want[i] != got[i]) {
      return false;
    }
  }
  return true;
}

const FieldDescriptor* FindField(const google::protobuf::Descriptor& d, std::string_view name) {
  const std::string n(name);
  if (const FieldDescriptor* f = d.FindFieldByName(n)) return f;
  for (int i = 0; i < d.field_count(); ++i) {
    if (d.field(i)->json_name() == n) return d.field(i);
  }
  return nullptr;
}

absl::Status BadValue(std::string_view field, std::string_view value, std::string_view type) {
  return absl::InvalidArgumentError(
      absl::StrCat("parameter '", ToValidUtf8(field), "': '", ToValidUtf8(value), "' is not ", std::string(type)));
}

// An integer field of type T, set (or, repeated, added) from its decimal text.
template <typename T>
absl::Status SetInteger(Message& m, const FieldDescriptor& f, std::string_view name, std::string_view value,
                        const char* type, void (Reflection::*set)(Message*, const FieldDescriptor*, T) const,
                        void (Reflection::*add)(Message*, const FieldDescriptor*, T) const) {
  T v = 0;
  if (!absl::SimpleAtoi(std::string(value), &v)) return BadValue(name, value, type);
  const Reflection& r = *m.GetReflection();
  (r.*(f.is_repeated() ? add : set))(&m, &f, v);
  return absl::OkStatus();
}

absl::Status SetScalar(Message& m, const FieldDescriptor& f, std::string_view name, std::string_view value) {
  const Reflection& r = *m.GetReflection();
  const bool repeated = f.is_repeated();
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING: {
      if (f.type() == FieldDescriptor::TYPE_STRING && !IsValidUtf8(value)) return BadValue(name, value, "UTF-8");
      repeated ? r.AddString(&m, &f, std::string(value)) : r.SetString(&m, &f, std::string(value));
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT32:
      return SetInteger<int32_t>(m, f, name, value, "a 32-bit integer", &Reflection::SetInt32, &Reflection::AddInt32);
    case FieldDescriptor::CPPTYPE_INT64:
      return SetInteger<int64_t>(m, f, name, value, "a 64-bit integer", &Reflection::SetInt64, &Reflection::AddInt64);
    case FieldDescriptor::CPPTYPE_UINT32:
      return SetInteger<uint32_t>(m, f, name, value, "an unsigned 32-bit integer", &Reflection::SetUInt32,
                                  &Reflection::AddUInt32);
    case FieldDescriptor::CPPTYPE_UINT64:
      return SetInteger<uint64_t>(m, f, name, value, "an unsigned 64-bit integer", &Reflection::SetUInt64,
                                  &Reflection::AddUInt64);
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
      double v = 0;
      if (!absl::SimpleAtod(std::string(value), &v)) return BadValue(name, value, "a number");
      if (f.cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) {
        repeated ? r.AddFloat(&m, &f, static_cast<float>(v)) : r.SetFloat(&m, &f, static_cast<float>(v));
      } else {
        repeated ? r.AddDouble(&m, &f, v) : r.SetDouble(&m, &f, v);
      }
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool v = false;
      if (value == "true" || value == "1") {
        v = true;
      } else if (value != "false" && value != "0") {
        return BadValue(name, value, "true or false");
      }
      repeated ? r.AddBool(&m, &f, v) : r.SetBool(&m, &f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* e = f.enum_type()->FindValueByName(std::string(value));
      int number = 0;
      if (e == nullptr && absl::SimpleAtoi(std::string(value), &number)) e = f.enum_type()->FindValueByNumber(number);
      if (e == nullptr) return BadValue(name, value, absl::StrCat("a value of ", f.enum_type()->name()));
      repeated ? r.AddEnum(&m, &f, e) : r.SetEnum(&m, &f, e);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("parameter '", ToValidUtf8(name), "' names a message; name one of its fields (a.b)"));
}

}  // namespace

std::span<const Route> Routes() { return kRoutes; }

RouteMatch MatchRoute(std::string_view method, std::string_view path) {
  RouteMatch match;
  std::vector<std::string> allowed;
  std::vector<std::pair<std::string, std::string>> variables;
  for (const Route& route : kRoutes) {
    if (!MatchPattern(route.pattern, path, variables)) continue;
    const bool get = std::string_view(route.method) == "GET";
    if (method == route.method || (get && method == "HEAD")) {
      match.route = &route;
      match.variables = std::move(variables);
      return match;
    }
    allowed.emplace_back(route.method);
    if (get) allowed.emplace_back("HEAD");
  }
  match.allowed_methods = absl::StrJoin(allowed, ", ");
  return match;
}

absl::Status SetFieldFromText(Message& message, std::string_view field, std::string_view value) {
  Message* m = &message;
  const std::vector<std::string_view> parts = Split(field, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    const FieldDescriptor* f = FindField(*m->GetDescriptor(), parts[i]);
    if (f == nullptr || f->is_map()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown parameter '", ToValidUtf8(field), "' (", m->GetTypeName(),
                                                     " has no field '", ToValidUtf8(parts[i]), "')"));
    }
    if (i + 1 == parts.size()) return SetScalar(*m, *f, field, value);
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || f->is_repeated()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", ToValidUtf8(field), "': '", f->name(), "' is not a message field"));
    }
    m = m->GetReflection()->MutableMessage(m, f);
  }
  return absl::OkStatus();
}

namespace {

// What protobuf's JSON parser lets through and the API does not: a scalar
// where a repeated field needs an array ({"texts": "x"} read as ["x"]).
absl::Status CheckJsonShape(const nlohmann::json& value, const google::protobuf::Descriptor& type,
                            const std::string& path) {
  if (!value.is_object()) return absl::OkStatus();  // protobuf's parser reports the rest
  for (const auto& [key, item] : value.items()) {
    const FieldDescriptor* field = type.FindFieldByName(key);
    for (int i = 0; field == nullptr && i < type.field_count(); ++i) {
      if (type.field(i)->json_name() == key) field = type.field(i);
    }
    if (field == nullptr || item.is_null()) continue;
    const std::string where = path.empty() ? key : absl::StrCat(path, ".", key);
    if (field->is_repeated() && !field->is_map()) {
      if (!item.is_array()) {
        return absl::InvalidArgumentError(
            absl::StrCat("invalid JSON body: '", ToValidUtf8(where), "' must be an array"));
      }
      if (field->message_type() != nullptr) {
        for (const nlohmann::json& element : item)
          RETURN_IF_ERROR(CheckJsonShape(element, *field->message_type(), where));
      }
    } else if (field->message_type() != nullptr && !field->is_map()) {
      RETURN_IF_ERROR(CheckJsonShape(item, *field->message_type(), where));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseJsonBody(std::string_view json, Message& message) {
  if (!IsValidUtf8(json)) return absl::InvalidArgumentError("the JSON body is not valid UTF-8");
  if (JsonNestingDepth(json) > kMaxJsonDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid JSON body: arrays and objects nested deeper than ", kMaxJsonDepth));
  }
  const nlohmann::json parsed = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_discarded()) RETURN_IF_ERROR(CheckJsonShape(parsed, *message.GetDescriptor(), ""));
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("invalid JSON body for ", message.GetTypeName(), ": ",
                                                   ToValidUtf8(std::string(status.message()))));
  }
  return absl::OkStatus();
}

std::string ToJson(const Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string json;
  // Printing a valid message cannot fail (no Any with unknown types here).
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

absl::StatusOr<absl::Duration> ParseGrpcTimeout(std::string_view value) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat("Grpc-Timeout '", ToValidUtf8(std::string(value)),
                                                   "' is not 1 to 8 digits and a unit (H, M, S, m, u, n), e.g. 30S"));
  };
  if (value.size() < 2 || value.size() > 9) return bad();
  int64_t n = 0;
  for (const char c : value.substr(0, value.size() - 1)) {
    if (c < '0' || c > '9') return bad();
    n = n * 10 + (c - '0');
  }
  switch (value.back()) {
    case 'H':
      return absl::Hours(n);
    case 'M':
      return absl::Minutes(n);
    case 'S':
      return absl::Seconds(n);
    case 'm':
      return absl::Milliseconds(n);
    case 'u':
      return absl::Microseconds(n);
    case 'n':
      return absl::Nanoseconds(n);
    default:
      return bad();
  }
}

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
    default:
      return 500;
  }
}

std::string StatusJson(const absl::Status& status) {
  nlohmann::json j = {{"code", static_cast<int>(status.code())},
                      {"message", ToValidUtf8(std::string(status.message()))},
                      {"details", nlohmann::json::array()}};
  return j.dump();
}

}  // namespace adapterd::http
