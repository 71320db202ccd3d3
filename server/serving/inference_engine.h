// InferenceEngine: Predict for many tasks over one frozen encoder
// (docs/ARCHITECTURE.md, "server/serving"). It owns the adapter cache, the dynamic batcher and
// the device executor:
//
//   Predict -> validate -> AdapterCache::Get -> count the kind's rows (the
//           limits) -> plan a few texts' rows -> DynamicBatcher
//           -> DeviceExecutor (one mixed-task forward per batch) -> each row's
//              outputs -> the kind's decoding per text, as its rows finish
//           -> plan the next texts (rows_in_flight_per_request() bounds
//              the request's rows queued or computing at once)
//
// Rows per text, by the task's kind (docs/ARCHITECTURE.md, "Task kinds"):
// one (truncated to max_seq_len) for the kinds that read the pooled vector;
// token classification cuts a long text into windows TaggingStride apart,
// extractive QA a long context into the task's run_squad windows. A text's
// windows may run in different batches, beside other tasks' rows. Decoding
// (window_decoding.h) takes each word's tags from the window where it has
// the most context, and each answer from the best span over all windows.
//
// A batch's rows may belong to different tasks: the engine builds an
// AdapterStack of the batch's distinct tasks and runs
// BertEncoder::Forward(input, stack, row_slots) under c10::InferenceMode (a
// batch of one task runs the single-task forward). A row's result does not
// depend on the batch it ran in (up to float reassociation).
//
// Predict errors:
//   INVALID_ARGUMENT  empty tenant or task_id; empty `texts`; an empty text or
//                     text pair, invalid UTF-8, or a text_pairs count that
//                     differs from texts (the message names the index, e.g.
//                     "texts[2] is not valid UTF-8"); a threshold or
//                     top_k_answers out of range (predict_checks.h); an
//                     extractive QA request without contexts (text_pairs), or
//                     a token classification request with them;
//   NOT_FOUND / FAILED_PRECONDITION  from AdapterCache::Get (unknown task or
//                     version, task not ready, adapter of another encoder);
//   DEADLINE_EXCEEDED the deadline passed before a row was computed (rows are
//                     dropped, never computed);
//   UNAVAILABLE       after Drain() or Shutdown() began.
// For the pooled kinds, texts longer than max_seq_len word pieces are
// truncated (pairs with longest_first), as the tokenizer does; the
// token-reading kinds window them instead.
//
// Drain(): new Predicts fail with UNAVAILABLE; returns when every Predict in
// flight has completed; the executor keeps running training work. Shutdown():
// Drain(), then the executor stops (pending training work fails with
// UNAVAILABLE). Both are idempotent; the destructor calls Shutdown().
//
// Thread safety: Predict may be called from many threads at once; all
// methods are thread-safe.
//
// Ownership: the encoder, tokenizer, database and observer are borrowed and
// must outlive the engine (the tokenizer only until Create returns when
// max_seq_len differs from its own, since the engine then keeps a copy).
#ifndef ADAPTERD_SERVER_SERVING_INFERENCE_ENGINE_H_
#define ADAPTERD_SERVER_SERVING_INFERENCE_ENGINE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/model/bert_encoder.h"
#include "server/model/task_kinds.h"
#include "server/model/tokenizer.h"
#include "server/model/window_decoding.h"
#include "server/serving/adapter_cache.h"
#include "server/serving/device_executor.h"
#include "server/serving/dynamic_batcher.h"
#include "server/serving/kind_serving.h"
#include "server/serving/serving_observer.h"

namespace adapterd::storage {
class Database;
}

namespace adapterd::serving {

class InferenceEngine {
 public:
  struct Options {
    // Required, borrowed (see the header comment).
    const model::BertEncoder* encoder = nullptr;
    const model::BertTokenizer* tokenizer = nullptr;
    storage::Database* db = nullptr;
    // AdapterCache budgets.
    int64_t host_cache_bytes = int64_t{256} << 20;
    int64_t device_cache_bytes = int64_t{256} << 20;
    // The device tier's resident slab: the widest bottleneck it holds
    // (AdapterCache::Options::slab_bottleneck; 0: no slab). -1: the
    // device's, kCudaSlabBottleneck on CUDA, where mixed batches gather
    // from it, and none on a CPU, whose mixed batches run by segments and
    // gain nothing from it while a cold load pays its slot write
    // (docs/PERFORMANCE.md, "The resident slab and shape buckets").
    int64_t slab_bottleneck = -1;
    // DynamicBatcher settings.
    int64_t max_batch_size = 32;
    int64_t max_queue_delay_us = 2000;
    int max_inflight_batches = 2;
    // Longest encoded row, specials included (>= 3, <= the encoder's
    // max_position_embeddings). 0 = the tokenizer's own max_seq_len.
    int max_seq_len = 128;
    // Admission of one Predict (docs/API.md, "Limits"): the windows one
    // text of a token tagging or QA task may need, and the rows of the
    // whole request; past either, INVALID_ARGUMENT naming it, before any
    // row is queued (rows are counted first, then planned in turn).
    int max_windows_per_text = 64;
    int64_t max_rows_per_request = 2048;
    // DeviceExecutor settings.
    double min_training_share = 0.25;
    std::function<absl::Time()> executor_clock;  // null = absl::Now
    // How mixed-task batches apply adapters (kAuto: BertEncoder's rule).
    model::MixedStrategy strategy = model::MixedStrategy::kAuto;
    // A batch runs as forwards of similar-length rows (length_groups.h):
    // the price of one more forward, in padded token positions. -1: the
    // device's (kCpuSplitOverheadTokens, kCudaSplitOverheadTokens); a large
    // value keeps every batch one forward.
    int64_t split_overhead_tokens = -1;
    // Optional metrics hook, shared by the cache, batcher and executor.
    ServingObserver* observer = nullptr;
    // Called (from the device executor's thread) when inference stops
    // being able to serve, after kUnhealthyAfterFailedBatches batches in a
    // row failed for lack of memory (false), and when a batch succeeds
    // again (true). The server sets its health from it.
    std::function<void(bool healthy)> on_health;
    // Fault injection for tests: runs inside the batch's guard before it is
    // computed; what it throws is what an allocation failing there throws.
    std::function<void()> before_batch_for_testing;
  };
  static constexpr int kUnhealthyAfterFailedBatches = 3;
  // What one more forward costs beyond its tokens, in tokens
  // (docs/PERFORMANCE.md, "Shape buckets"): on a CPU a few operator
  // wake-ups, on a GPU about a thousand kernel launches.
  static constexpr int64_t kCpuSplitOverheadTokens = 64;
  static constexpr int64_t kCudaSplitOverheadTokens = 4096;
  // The slab's width on CUDA: the default bottleneck of a training job.
  static constexpr int64_t kCudaSlabBottleneck = 64;

  // INVALID_ARGUMENT for missing dependencies or out-of-range options.
  static absl::StatusOr<std::unique_ptr<InferenceEngine>> Create(Options options);
  ~InferenceEngine();
  InferenceEngine(const InferenceEngine&) = delete;
  InferenceEngine& operator=(const InferenceEngine&) = delete;

  // Blocks until every row is computed or dropped. See the header comment.
  absl::StatusOr<PredictResult> Predict(const PredictRequest& request);

  void Drain();
  void Shutdown();
  // False once Drain() or Shutdown() began.
  bool accepting() const;
  // False while the last kUnhealthyAfterFailedBatches batches or more failed
  // for lack of memory (RESOURCE_EXHAUSTED); Predicts are still taken, and
  // the first batch that succeeds makes it true again.
  bool healthy() const;

  // The most rows of one Predict that are queued or computing at once:
  // (max_inflight_batches + 1) * max_batch_size, enough to fill every batch
  // in flight and the next. A request's rows are planned and queued within
  // it, a text at a time (a text of more rows goes alone), and each text is
  // decoded once its rows are done, so a request holds its planned rows and
  // outputs for about this many rows, not for all of them.
  int64_t rows_in_flight_per_request() const;
  // Rows waiting in the batcher (for metrics and tests).
  int64_t queued_rows() const;

  // For the JobRunner's run_on_device and for metrics.
  DeviceExecutor& executor() { return *executor_; }
  // For Invalidate after promotions and deletes, and Pin/Unpin.
  AdapterCache& cache() { return *cache_; }

 private:
  explicit InferenceEngine(Options options);
  absl::Status Validate(const PredictRequest& request) const;
  // Runs on the executor thread.
  void RunBatch(std::vector<BatchRow>& rows);
  // The rows' outputs (RunBatch's work, run under GuardTorch).
  absl::StatusOr<std::vector<std::vector<float>>> ComputeBatch(const std::vector<BatchRow*>& rows, absl::Time now);
  // Counts batches failed for lack of memory (health, on_health).
  void NoteBatchOutcome(const absl::Status& status);
  // Text `k`'s rows for a task of `config`: windows of the task's trained
  // length within max_seq_len, at most max_windows_per_text + 1 of them.
  TextRows PlanText(const PredictRequest& request, const model::AdapterConfig& config, size_t k) const;
  // Each text's rows for `adapter`'s kind, in text order: INVALID_ARGUMENT
  // past max_windows_per_text or max_rows_per_request.
  absl::StatusOr<std::vector<size_t>> CountRows(const PredictRequest& request, const LoadedAdapter& adapter) const;
  // Plans the texts' rows, queues them within rows_in_flight_per_request(),
  // and decodes each text once its rows are done (Predict's work, run under
  // GuardTorch).
  absl::StatusOr<PredictResult> PlanRunAndDecode(const PredictRequest& request,
                                                 const std::shared_ptr<const LoadedAdapter>& adapter,
                                                 const std::vector<size_t>& rows_per_text);

  const Options options_;
  const int64_t split_overhead_tokens_;
  // The engine's own copy when max_seq_len differs from the given tokenizer's.
  std::unique_ptr<model::BertTokenizer> own_tokenizer_;
  const model::BertTokenizer* tokenizer_ = nullptr;
  std::unique_ptr<AdapterCache> cache_;
  std::unique_ptr<DeviceExecutor> executor_;
  std::unique_ptr<DynamicBatcher> batcher_;

  // Protects the accepting flag and the count of Predicts in flight.
  mutable absl::Mutex mu_;
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  int failed_batches_ ABSL_GUARDED_BY(mu_) = 0;  // in a row, RESOURCE_EXHAUSTED
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace adapterd::serving

#endif  // ADAPTERD_SERVER_SERVING_INFERENCE_ENGINE_H_
