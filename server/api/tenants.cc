#include "server/api/tenants.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>
#include <openssl/crypto.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/json_depth.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "proto/adapterd/config/v1/tenants.pb.h"
#include "server/api/ids.h"

namespace adapterd::api {

TokenBucket::TokenBucket(double rate, double burst, absl::Time now)
    : rate_(rate), burst_(burst), tokens_(burst), last_(now) {}

bool TokenBucket::TryTake(double tokens, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (now > last_) {
    tokens_ = std::min(burst_, tokens_ + rate_ * absl::ToDoubleSeconds(now - last_));
    last_ = now;
  }
  if (tokens_ < tokens) return false;
  tokens_ -= tokens;
  return true;
}

Tenant::Tenant(std::string id, TenantQuotas quotas, absl::Time now) : id_(std::move(id)), quotas_(quotas) {
  if (quotas_.predict_rate_per_second > 0) {
    const double burst =
        quotas_.predict_burst > 0 ? quotas_.predict_burst : std::max(1.0, quotas_.predict_rate_per_second);
    bucket_ = std::make_unique<TokenBucket>(quotas_.predict_rate_per_second, burst, now);
  }
}

absl::Status Tenant::AdmitPredict(absl::Time now) const {
  if (bucket_ == nullptr || bucket_->TryTake(1, now)) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("tenant '", id_, "' exceeded its Predict rate of ", quotas_.predict_rate_per_second, " requests/s"));
}

namespace {

using Json = nlohmann::json;
using config::v1::TenantsFile;

constexpr char kSchema[] = "proto/adapterd/config/v1/tenants.proto";

absl::Status Bad(const std::string& file, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("tenants file ", file, ": ", what));
}

bool IsNumberField(const google::protobuf::FieldDescriptor& field) {
  using google::protobuf::FieldDescriptor;
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      return true;
    default:
      return false;
  }
}

// Brings one JSON object of message `type` (and the messages in it) to what
// proto3's JSON mapping reads with the file's meaning (tenants.proto, its
// header): one value given for a repeated field becomes a list of it, and a
// number field must hold a JSON number. Members the schema does not have
// are left for the parser to refuse. `path` names the object in errors
// ("tenants[0]"; "" for the top level).
absl::Status NormalizeObject(const google::protobuf::Descriptor& type, const std::string& path, Json* object) {
  for (auto& [key, value] : object->items()) {
    const google::protobuf::FieldDescriptor* field = type.FindFieldByName(key);
    for (int i = 0; field == nullptr && i < type.field_count(); ++i) {
      if (type.field(i)->json_name() == key) field = type.field(i);
    }
    if (field == nullptr) continue;
    const std::string at = path.empty() ? key : absl::StrCat(path, ".", key);
    if (field->message_type() != nullptr) {
      // Anything but objects where they belong is left to the parser.
      if (value.is_object()) RETURN_IF_ERROR(NormalizeObject(*field->message_type(), at, &value));
      for (size_t i = 0; value.is_array() && i < value.size(); ++i) {
        if (value[i].is_object()) {
          RETURN_IF_ERROR(NormalizeObject(*field->message_type(), absl::StrCat(at, "[", i, "]"), &value[i]));
        }
      }
      continue;
    }
    if (field->is_repeated() && value.is_primitive() && !value.is_null()) value = Json::array({value});
    if (IsNumberField(*field)) {
      for (const Json& v : field->is_repeated() && value.is_array() ? value : Json::array({value})) {
        if (!v.is_number()) {
          return absl::InvalidArgumentError(absl::StrCat(path.empty() ? "" : absl::StrCat(path, ": "), "'", key,
                                                         "' must be a non-negative number, not ", v.type_name()));
        }
      }
    }
  }
  return absl::OkStatus();
}

// Parses the file's text into the schema's message. INVALID_ARGUMENT naming
// the problem (and, from protobuf's parser, where: "(tenants[0].max_tasks)").
absl::StatusOr<TenantsFile> ParseTenantsFile(const std::string& file, const std::string& text) {
  // nlohmann-json reads the text first, as it always has: what is valid
  // JSON, and which of a key given twice counts (the last), stay as they
  // were. Protobuf's parser then reads that document re-serialised. The
  // schema nests 3 deep: anything deeper is a field it does not have, and
  // is refused before it is parsed (or re-serialised, which recurses).
  if (JsonNestingDepth(text) > kMaxJsonDepth) {
    return Bad(file, absl::StrCat("arrays and objects nested deeper than ", kMaxJsonDepth));
  }
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Bad(file, "not valid JSON");
  if (!doc.is_object() || !doc.contains("tenants") || !doc["tenants"].is_array()) {
    return Bad(file, "expected an object with a \"tenants\" array");
  }
  if (absl::Status s = NormalizeObject(*TenantsFile::descriptor(), "", &doc); !s.ok()) {
    return Bad(file, std::string(s.message()));
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;  // a misspelt quota must not fall back to the default
  TenantsFile parsed;
  const auto status = google::protobuf::util::JsonStringToMessage(
      doc.dump(/*indent=*/-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace), &parsed, options);
  if (!status.ok()) {
    return Bad(file, absl::StrCat(ToValidUtf8(std::string(status.message())), " (the schema: ", kSchema, ")"));
  }
  return parsed;
}

// Sets `*out` to `value` if the file has it, after checking that it is
// non-negative (and, for a double, finite).
template <typename T>
absl::Status ReadQuota(bool has, T value, const char* key, const std::string& where, T* out) {
  if (!has) return absl::OkStatus();
  if (!(value >= 0) || !std::isfinite(static_cast<double>(value))) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": '", key, "' must be a non-negative number no larger than ",
                                                   std::numeric_limits<T>::max()));
  }
  *out = value;
  return absl::OkStatus();
}

bool IsHexSha256(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

absl::StatusOr<std::unique_ptr<TenantRegistry>> TenantRegistry::Create(Options options) {
  if (!options.warn) {
    options.warn = [](const std::string& m) { LOG(WARNING) << m; };
  }
  std::unique_ptr<TenantRegistry> r(new TenantRegistry(std::move(options)));
  if (r->options_.tenants_file.empty()) {
    auto table = std::make_shared<Table>();
    table->tenants.push_back(std::make_shared<Tenant>(kDefaultTenant, r->options_.defaults, r->options_.now()));
    absl::MutexLock lock(&r->mu_);
    r->table_ = std::move(table);
    return r;
  }
  r->single_tenant_ = false;
  ASSIGN_OR_RETURN(std::shared_ptr<const Table> table, r->LoadTable(nullptr));
  absl::MutexLock lock(&r->mu_);
  r->table_ = std::move(table);
  return r;
}

absl::Status TenantRegistry::Reload() {
  if (single_tenant_) return absl::FailedPreconditionError("no tenants file to reload: the server is single-tenant");
  const std::shared_ptr<const Table> previous = table();
  ASSIGN_OR_RETURN(std::shared_ptr<const Table> next, LoadTable(previous.get()));
  absl::MutexLock lock(&mu_);
  table_ = std::move(next);
  return absl::OkStatus();
}

std::shared_ptr<const TenantRegistry::Table> TenantRegistry::table() const {
  absl::MutexLock lock(&mu_);
  return table_;
}

absl::StatusOr<std::shared_ptr<const TenantRegistry::Table>> TenantRegistry::LoadTable(const Table* previous) const {
  const std::string& file = options_.tenants_file;
  // Anyone who could replace the file could add a key; a reader of its
  // hashes could test guessed keys offline.
  std::vector<std::string> warnings;
  RETURN_IF_ERROR(CheckSecretFileAccess(file, "tenants file", &warnings));
  for (const std::string& w : warnings) {
    options_.warn(absl::StrCat(w, ": its key hashes let a reader test guessed keys offline"));
  }
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(file));
  ASSIGN_OR_RETURN(const TenantsFile parsed, ParseTenantsFile(file, text));
  const absl::Time now = options_.now();
  auto table = std::make_shared<Table>();
  std::set<std::string> ids;
  for (int i = 0; i < parsed.tenants_size(); ++i) {
    const config::v1::Tenant& t = parsed.tenants(i);
    const std::string where = absl::StrCat("tenants file ", file, ": tenants[", i, "]");
    if (t.id().empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": missing string \"id\""));
    const std::string& id = t.id();
    if (absl::Status s = ValidateId("tenant id", id); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
    }
    if (!ids.insert(id).second) return absl::InvalidArgumentError(absl::StrCat(where, ": tenant id used twice"));
    TenantQuotas q = options_.defaults;
    RETURN_IF_ERROR(ReadQuota(t.has_max_tasks(), t.max_tasks(), "max_tasks", where, &q.max_tasks));
    RETURN_IF_ERROR(
        ReadQuota(t.has_max_queued_jobs(), t.max_queued_jobs(), "max_queued_jobs", where, &q.max_queued_jobs));
    RETURN_IF_ERROR(ReadQuota(t.has_max_texts_per_predict(), t.max_texts_per_predict(), "max_texts_per_predict", where,
                              &q.max_texts_per_predict));
    RETURN_IF_ERROR(
        ReadQuota(t.has_max_dataset_bytes(), t.max_dataset_bytes(), "max_dataset_bytes", where, &q.max_dataset_bytes));
    RETURN_IF_ERROR(ReadQuota(t.has_predict_rate_per_second(), t.predict_rate_per_second(), "predict_rate_per_second",
                              where, &q.predict_rate_per_second));
    RETURN_IF_ERROR(ReadQuota(t.has_predict_burst(), t.predict_burst(), "predict_burst", where, &q.predict_burst));
    RETURN_IF_ERROR(ReadQuota(t.has_batch_weight(), t.batch_weight(), "batch_weight", where, &q.batch_weight));
    if (q.batch_weight < 1 || q.batch_weight > kMaxBatchWeight) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": 'batch_weight' must be in [1, ", kMaxBatchWeight, "], not ", q.batch_weight));
    }
    std::vector<std::string> hashes(t.api_key_sha256().begin(), t.api_key_sha256().end());
    if (hashes.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": no \"api_key_sha256\""));
    std::shared_ptr<const Tenant> tenant;
    if (previous != nullptr) {
      for (const auto& old : previous->tenants) {
        if (old->id() == id && old->quotas() == q) tenant = old;
      }
    }
    if (tenant == nullptr) tenant = std::make_shared<Tenant>(id, q, now);
    table->tenants.push_back(tenant);
    for (std::string& h : hashes) {
      h = absl::AsciiStrToLower(h);
      if (!IsHexSha256(h)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": api_key_sha256 must be 64 hex digits"));
      }
      for (const auto& [stored, unused] : table->by_key_hash) {
        if (stored == h) return absl::InvalidArgumentError(absl::StrCat(where, ": a key hash is used twice"));
      }
      table->by_key_hash.emplace_back(h, table->tenants.size() - 1);
    }
  }
  return std::shared_ptr<const Table>(std::move(table));
}

absl::StatusOr<std::shared_ptr<const Tenant>> TenantRegistry::Authenticate(const std::string* authorization) const {
  const std::shared_ptr<const Table> table = this->table();
  if (single_tenant_) return table->tenants.front();
  if (authorization == nullptr || authorization->empty()) {
    return absl::UnauthenticatedError("missing API key: send 'authorization: Bearer <key>' metadata");
  }
  constexpr std::string_view kBearer = "Bearer ";
  if (!absl::StartsWithIgnoreCase(*authorization, std::string(kBearer)) || authorization->size() == kBearer.size()) {
    return absl::UnauthenticatedError("malformed authorization metadata: expected 'Bearer <key>'");
  }
  const std::string hash = Sha256Hex(std::string_view(*authorization).substr(kBearer.size()));
  // Every stored hash is compared, each in constant time (CRYPTO_memcmp), so
  // the time taken says nothing about which hash, or how much of one, matched.
  const std::shared_ptr<const Tenant>* found = nullptr;
  for (const auto& [stored, index] : table->by_key_hash) {
    const bool match = stored.size() == hash.size() && CRYPTO_memcmp(stored.data(), hash.data(), hash.size()) == 0;
    if (match) found = &table->tenants[index];
  }
  if (found == nullptr) return absl::UnauthenticatedError("unknown API key");
  return *found;
}

std::vector<std::string> TenantRegistry::TenantIds() const {
  std::vector<std::string> ids;
  for (const auto& t : table()->tenants) ids.push_back(t->id());
  return ids;
}

}  // namespace adapterd::api
