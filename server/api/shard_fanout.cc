#include "server/api/shard_fanout.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <openssl/crypto.h>

#include "absl/strings/str_cat.h"
#include "common/api_util.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "server/api/grpc_status.h"
#include "server/api/page_token.h"

namespace adapterd::api {
namespace {

// One merged response from every replica's response to the same request
// (MergeShardPages over `items`, ordered by `id`).
template <typename Response, typename Item>
Response MergeResponses(std::vector<Response>& responses, int want, std::string_view listing, const std::string& tenant,
                        google::protobuf::RepeatedPtrField<Item>* (Response::*items)(),
                        const std::string& (Item::*id)() const) {
  std::vector<ShardPage<Item>> pages;
  for (Response& r : responses) {
    ShardPage<Item> page;
    auto* field = (r.*items)();
    page.items.assign(std::make_move_iterator(field->begin()), std::make_move_iterator(field->end()));
    page.more = !r.next_page_token().empty();
    pages.push_back(std::move(page));
  }
  std::vector<Item> merged;
  const std::string next = MergeShardPages<Item>(
      std::move(pages), want, [id](const Item& item) -> const std::string& { return (item.*id)(); }, &merged);
  Response out;
  for (Item& item : merged) *(out.*items)()->Add() = std::move(item);
  out.set_next_page_token(EncodePageToken(listing, tenant, next));
  return out;
}

// Fan-out calls are lists (read-only), so an UNAVAILABLE one is retried:
// a connection that fails once (a peer not yet reconnected to, or the first
// connect to it failing under load) would otherwise fail the whole list
// while the channel waits out its reconnect backoff, though the peer is up.
// Five attempts (gRPC's most) with backoffs drawn up to 0.2, 0.4, 0.8 and 1 s
// span the channel's capped reconnect backoff (1 s); a peer that is down
// still fails the list within a few seconds, naming it.
constexpr char kPeerServiceConfig[] = R"json({
  "methodConfig": [{
    "name": [{"service": "adapterd.v1.Adapterd"}],
    "retryPolicy": {
      "maxAttempts": 5,
      "initialBackoff": "0.2s",
      "maxBackoff": "1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
})json";

}  // namespace

ShardFanout::ShardFanout(Options options) : options_(std::move(options)), secret_sha256_(Sha256Hex(options_.secret)) {
  for (const std::string& address : options_.peers) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    // A replica that restarts is back in lists within about a second: gRPC's
    // default reconnect backoff grows to 2 minutes, during which every call
    // on the channel fails fast.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetServiceConfigJSON(kPeerServiceConfig);
    Peer p;
    p.address = address;
    auto credentials = options_.credentials ? options_.credentials : grpc::InsecureChannelCredentials();
    p.stub = v1::Adapterd::NewStub(grpc::CreateCustomChannel(address, credentials, args));
    peers_.push_back(std::move(p));
  }
}

bool ShardFanout::IsShardLocalCall(const grpc::ServerContext& ctx) const {
  const auto& md = ctx.client_metadata();
  auto it = md.find(kShardLocalHeader);
  if (it == md.end()) return false;
  // Compared as SHA-256 digests in constant time: the time taken says
  // nothing about how much of a guess matched.
  const std::string got = Sha256Hex(std::string_view(it->second.data(), it->second.size()));
  return got.size() == secret_sha256_.size() && CRYPTO_memcmp(got.data(), secret_sha256_.data(), got.size()) == 0;
}

absl::Status ShardFanout::ForEachPeer(
    const grpc::ServerContext& ctx,
    const std::function<grpc::Status(const Peer&, grpc::ClientContext&, size_t)>& call) const {
  const auto now = std::chrono::system_clock::now();
  auto deadline = now + std::chrono::microseconds(absl::ToInt64Microseconds(options_.peer_deadline));
  deadline = std::min(deadline, ctx.deadline());
  std::string authorization;
  const auto& md = ctx.client_metadata();
  if (auto it = md.find("authorization"); it != md.end()) authorization.assign(it->second.data(), it->second.size());

  std::vector<grpc::Status> results(peers_.size());
  std::vector<std::thread> threads;
  threads.reserve(peers_.size());
  for (size_t i = 0; i < peers_.size(); ++i) {
    threads.emplace_back([&, i] {
      grpc::ClientContext context;
      context.set_deadline(deadline);
      context.AddMetadata(kShardLocalHeader, options_.secret);
      if (!authorization.empty()) context.AddMetadata("authorization", authorization);
      results[i] = call(peers_[i], context, i);
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < peers_.size(); ++i) {
    const grpc::Status& s = results[i];
    if (s.ok()) continue;
    switch (s.error_code()) {
      case grpc::StatusCode::INVALID_ARGUMENT:
      case grpc::StatusCode::UNAUTHENTICATED:
      case grpc::StatusCode::PERMISSION_DENIED:
      case grpc::StatusCode::RESOURCE_EXHAUSTED:
        return FromGrpcStatus(s);
      default:
        return absl::UnavailableError(absl::StrCat("replica ", peers_[i].address, " did not answer (",
                                                   s.error_message(),
                                                   "); a list without it would be incomplete, retry later"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::ListTasksResponse> ShardFanout::ListTasks(const grpc::ServerContext& ctx, const std::string& tenant,
                                                             const v1::ListTasksRequest& request) const {
  ASSIGN_OR_RETURN(const int want, EffectivePageSize(request.page_size()));
  std::vector<v1::ListTasksResponse> responses(peers_.size());
  RETURN_IF_ERROR(ForEachPeer(ctx, [&](const Peer& p, grpc::ClientContext& c, size_t i) {
    return p.stub->ListTasks(&c, request, &responses[i]);
  }));
  return MergeResponses(responses, want, "tasks", tenant, &v1::ListTasksResponse::mutable_tasks, &v1::Task::task_id);
}

absl::StatusOr<v1::ListTrainingJobsResponse> ShardFanout::ListTrainingJobs(
    const grpc::ServerContext& ctx, const std::string& tenant, const v1::ListTrainingJobsRequest& request) const {
  ASSIGN_OR_RETURN(const int want, EffectivePageSize(request.page_size()));
  std::vector<v1::ListTrainingJobsResponse> responses(peers_.size());
  RETURN_IF_ERROR(ForEachPeer(ctx, [&](const Peer& p, grpc::ClientContext& c, size_t i) {
    return p.stub->ListTrainingJobs(&c, request, &responses[i]);
  }));
  return MergeResponses(responses, want, "jobs", tenant, &v1::ListTrainingJobsResponse::mutable_jobs,
                        &v1::TrainingJob::job_id);
}

absl::StatusOr<v1::ListDatasetsResponse> ShardFanout::ListDatasets(const grpc::ServerContext& ctx,
                                                                   const std::string& tenant,
                                                                   const v1::ListDatasetsRequest& request) const {
  ASSIGN_OR_RETURN(const int want, EffectivePageSize(request.page_size()));
  std::vector<v1::ListDatasetsResponse> responses(peers_.size());
  RETURN_IF_ERROR(ForEachPeer(ctx, [&](const Peer& p, grpc::ClientContext& c, size_t i) {
    return p.stub->ListDatasets(&c, request, &responses[i]);
  }));
  return MergeResponses(responses, want, "datasets", tenant, &v1::ListDatasetsResponse::mutable_datasets,
                        &v1::Dataset::dataset_id);
}

}  // namespace adapterd::api
