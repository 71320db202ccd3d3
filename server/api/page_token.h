// Page tokens of the list calls (ListTasks, ListTrainingJobs).
//
// A token is opaque to clients: "<base64url(raw)>.<check>", where raw is the
// id of the last entry of the previous page (the store resumes after it) and
// check = the first 16 hex digits of SHA-256(listing, tenant, raw). The check
// is not a secret (the store bounds every scan by the tenant's key prefix, so
// a forged token cannot reach other tenants' data); it makes a token that
// this listing did not issue to this tenant INVALID_ARGUMENT instead of
// silently starting somewhere. Because raw is an id, and every replica lists
// in id order, a token is valid on every replica: that is what lets
// ShardFanout merge replicas' pages (shard_fanout.h).
//
// Thread safety: pure functions.
#ifndef ADAPTERD_SERVER_API_PAGE_TOKEN_H_
#define ADAPTERD_SERVER_API_PAGE_TOKEN_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace adapterd::api {

// "" for the last page (raw == "").
std::string EncodePageToken(std::string_view listing, const std::string& tenant, const std::string& raw);
// The raw id; "" for "" (the first page). INVALID_ARGUMENT for a token this
// listing did not issue to this tenant.
absl::StatusOr<std::string> DecodePageToken(std::string_view listing, const std::string& tenant,
                                            const std::string& token);
// The page size a request asks for: 0 = 50, capped at the store's maximum;
// INVALID_ARGUMENT for a negative one.
absl::StatusOr<int> EffectivePageSize(int requested);

}  // namespace adapterd::api

#endif  // ADAPTERD_SERVER_API_PAGE_TOKEN_H_
