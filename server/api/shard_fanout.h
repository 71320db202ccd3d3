// ShardFanout: list calls that answer for every replica of a task-sharded
// deployment (docs/DEPLOYMENT.md, "Scale-out").
//
// Behind a router that shards by task, each replica stores only its own
// tasks and their jobs. A call that spans tasks (ListTasks, ListTrainingJobs)
// reaches one replica; with --peers set, that replica asks every replica
// (itself included, by address) for the same page, marking those calls with
// `x-adapterd-shard-local: <the replicas' shared secret>` (--peer_secret_file)
// so they answer from their own shard, forwards the caller's
// `authorization`, and merges the pages. A shard-local header without the
// secret (sent by an outside client) is ignored: the call fans out as any
// other, so no client can get a silently partial list.
//   - every replica lists in id order and resumes after the id a page token
//     names (page_token.h), so one token is valid on every replica: the
//     merged page is the smallest `page_size` ids of all replicas' pages, and
//     its next_page_token names the last of them;
//   - the answer is complete or an error: a peer call that fails
//     UNAVAILABLE is retried (gRPC retry policy, 5 attempts over about 2 s:
//     lists are read-only); a replica that still does not answer makes the
//     call UNAVAILABLE (naming the replica), never a silently partial list;
//   - errors a replica gives about the request itself (INVALID_ARGUMENT for a
//     bad token, UNAUTHENTICATED) are returned as they are.
// Replicas must share the tenants file (the same keys authenticate
// everywhere).
//
// ListDatasets, ListTasks and ListTrainingJobs fan out.
//
// Thread safety: thread-safe; peers are asked concurrently. Channels connect
// lazily and are kept.
#ifndef ADAPTERD_SERVER_API_SHARD_FANOUT_H_
#define ADAPTERD_SERVER_API_SHARD_FANOUT_H_

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/adapterd/v1/adapterd_service.grpc.pb.h"

namespace adapterd::api {

// One replica's answer for a merge: its entries in ascending id order, and
// whether it has entries after them.
template <typename T>
struct ShardPage {
  std::vector<T> items;
  bool more = false;
};

// Merges replicas' pages into the first `page_size` entries in id order
// (`id` gives an entry's id). Returns the raw token of the next page: the id
// of the last entry taken when any replica has entries after it, else "".
template <typename T>
std::string MergeShardPages(std::vector<ShardPage<T>> pages, int page_size,
                            const std::function<const std::string&(const T&)>& id, std::vector<T>* out) {
  std::vector<T> all;
  bool more = false;
  for (ShardPage<T>& p : pages) {
    more = more || p.more;
    for (T& item : p.items) all.push_back(std::move(item));
  }
  std::stable_sort(all.begin(), all.end(), [&](const T& a, const T& b) { return id(a) < id(b); });
  if (static_cast<int>(all.size()) > page_size) {
    more = true;
    all.resize(page_size);
  }
  std::string next = more && !all.empty() ? id(all.back()) : std::string();
  for (T& item : all) out->push_back(std::move(item));
  return next;
}

class ShardFanout {
 public:
  // Metadata marking a replica's call to another replica.
  static constexpr char kShardLocalHeader[] = "x-adapterd-shard-local";

  struct Options {
    std::vector<std::string> peers;  // every replica's host:port, this one's included
    // Longest a peer call may take (the caller's deadline, if earlier, wins).
    absl::Duration peer_deadline = absl::Seconds(30);
    // Credentials of the calls to peers; null = plaintext.
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    // The secret every replica shares; marks fan-out calls. Required.
    std::string secret;
  };
  explicit ShardFanout(Options options);

  // True when `ctx` is a replica's fan-out call (answer from this shard
  // only): it carries the shared secret.
  bool IsShardLocalCall(const grpc::ServerContext& ctx) const;

  absl::StatusOr<v1::ListTasksResponse> ListTasks(const grpc::ServerContext& ctx, const std::string& tenant,
                                                  const v1::ListTasksRequest& request) const;
  absl::StatusOr<v1::ListTrainingJobsResponse> ListTrainingJobs(const grpc::ServerContext& ctx,
                                                                const std::string& tenant,
                                                                const v1::ListTrainingJobsRequest& request) const;
  absl::StatusOr<v1::ListDatasetsResponse> ListDatasets(const grpc::ServerContext& ctx, const std::string& tenant,
                                                        const v1::ListDatasetsRequest& request) const;

 private:
  struct Peer {
    std::string address;
    std::unique_ptr<v1::Adapterd::Stub> stub;
  };
  // Runs `call(peer, context)` on every peer at once; the first error wins
  // (an unreachable peer's UNAVAILABLE names it).
  absl::Status ForEachPeer(const grpc::ServerContext& ctx,
                           const std::function<grpc::Status(const Peer&, grpc::ClientContext&, size_t)>& call) const;

  const Options options_;
  const std::string secret_sha256_;
  std::vector<Peer> peers_;
};

}  // namespace adapterd::api

#endif  // ADAPTERD_SERVER_API_SHARD_FANOUT_H_
