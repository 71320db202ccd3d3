#include "server/serving/inference_engine.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "server/model/tensor_io.h"
#include "server/serving/predict_checks.h"

namespace adapterd::serving {
namespace {

// Softmax probabilities [rows, max_labels] (float, CPU) of one padded batch.
absl::StatusOr<at::Tensor> ForwardProbabilities(const model::BertEncoder& encoder, const model::EncoderInput& input,
                                                const std::vector<std::shared_ptr<const model::AdapterSet>>& sets,
                                                const std::vector<int64_t>& slots, model::MixedStrategy strategy) {
  c10::InferenceMode inference_mode;
  model::ForwardOptions fo;
  fo.strategy = strategy;
  absl::StatusOr<model::EncoderOutput> out;
  if (sets.size() == 1) {
    out = encoder.Forward(input, *sets[0], fo);
  } else {
    const int64_t rows = static_cast<int64_t>(slots.size());
    const bool gather = strategy == model::MixedStrategy::kGatherBmm ||
                        (strategy == model::MixedStrategy::kAuto &&
                         model::BertEncoder::ChooseStrategy(rows, static_cast<int64_t>(sets.size()), true,
                                                            encoder.device()) == model::MixedStrategy::kGatherBmm);
    ASSIGN_OR_RETURN(std::shared_ptr<const model::AdapterStack> stack,
                     model::AdapterStack::Create(sets, encoder.config(), encoder.device(), encoder.dtype(), gather));
    out = encoder.Forward(input, *stack, slots, fo);
  }
  if (!out.ok()) return out.status();
  return model::GuardTorch("batch softmax", [&]() -> absl::StatusOr<at::Tensor> {
    return at::softmax(out->logits.to(at::kFloat), 1).to(at::kCPU).contiguous();
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<InferenceEngine>> InferenceEngine::Create(Options options) {
  if (options.encoder == nullptr || options.tokenizer == nullptr || options.db == nullptr) {
    return absl::InvalidArgumentError("InferenceEngine needs an encoder, a tokenizer and a database");
  }
  if (options.max_seq_len == 0) options.max_seq_len = options.tokenizer->options().max_seq_len;
  if (options.max_seq_len < 3 || options.max_seq_len > options.encoder->config().max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat("max_seq_len must be in [3, ",
                                                   options.encoder->config().max_position_embeddings, "], got ",
                                                   options.max_seq_len));
  }
  auto engine = std::unique_ptr<InferenceEngine>(new InferenceEngine(std::move(options)));
  const Options& o = engine->options_;
  if (o.max_seq_len != o.tokenizer->options().max_seq_len) {
    model::TokenizerOptions to = o.tokenizer->options();
    to.max_seq_len = o.max_seq_len;
    ASSIGN_OR_RETURN(engine->own_tokenizer_, model::BertTokenizer::FromTokens(o.tokenizer->tokens(), to));
    engine->tokenizer_ = engine->own_tokenizer_.get();
  } else {
    engine->tokenizer_ = o.tokenizer;
  }

  AdapterCache::Options co;
  co.encoder = o.encoder;
  co.db = o.db;
  co.host_budget_bytes = o.host_cache_bytes;
  co.device_budget_bytes = o.device_cache_bytes;
  co.observer = o.observer;
  ASSIGN_OR_RETURN(engine->cache_, AdapterCache::Create(std::move(co)));

  DeviceExecutor::Options eo;
  eo.min_training_share = o.min_training_share;
  eo.observer = o.observer;
  eo.clock = o.executor_clock;
  ASSIGN_OR_RETURN(engine->executor_, DeviceExecutor::Create(std::move(eo)));

  DynamicBatcher::Options bo;
  bo.max_batch_size = o.max_batch_size;
  bo.max_queue_delay_us = o.max_queue_delay_us;
  bo.max_inflight_batches = o.max_inflight_batches;
  bo.observer = o.observer;
  InferenceEngine* self = engine.get();
  ASSIGN_OR_RETURN(engine->batcher_, DynamicBatcher::Create(std::move(bo), [self](std::vector<BatchRow> rows,
                                                                                  std::function<void()> done) {
                     auto batch = std::make_shared<std::vector<BatchRow>>(std::move(rows));
                     absl::Status s = self->executor_->SubmitInference([self, batch, done] {
                       self->RunBatch(*batch);
                       done();
                     });
                     if (s.ok()) return;
                     for (BatchRow& row : *batch) row.request->Fail(row.index, s);
                     if (self->options_.observer != nullptr) {
                       self->options_.observer->OnDropped(DropReason::kShutdown, static_cast<int64_t>(batch->size()));
                     }
                     done();
                   }));
  return engine;
}

InferenceEngine::InferenceEngine(Options options) : options_(std::move(options)) {}

InferenceEngine::~InferenceEngine() { Shutdown(); }

bool InferenceEngine::accepting() const {
  absl::MutexLock lock(&mu_);
  return accepting_;
}

void InferenceEngine::Drain() {
  {
    absl::MutexLock lock(&mu_);
    accepting_ = false;
    mu_.Await(absl::Condition(
        +[](int64_t* n) { return *n == 0; }, &in_flight_));
  }
  if (batcher_ != nullptr) batcher_->Shutdown();
}

void InferenceEngine::Shutdown() {
  Drain();
  if (executor_ != nullptr) executor_->Shutdown();
}

absl::Status InferenceEngine::Validate(const PredictRequest& request) const {
  if (request.tenant.empty()) return absl::InvalidArgumentError("tenant is empty");
  if (request.task_id.empty()) return absl::InvalidArgumentError("task_id is empty");
  return CheckPredictInputs(request.texts, request.text_pairs, request.version);
}

absl::StatusOr<PredictResult> InferenceEngine::Predict(const PredictRequest& request) {
  RETURN_IF_ERROR(Validate(request));
  {
    absl::MutexLock lock(&mu_);
    if (!accepting_) return absl::UnavailableError("the inference engine is draining");
    ++in_flight_;
  }
  struct InFlight {
    InferenceEngine* engine;
    ~InFlight() {
      absl::MutexLock lock(&engine->mu_);
      --engine->in_flight_;
    }
  } in_flight{this};

  const int64_t n = static_cast<int64_t>(request.texts.size());
  if (request.deadline <= absl::Now()) {
    if (options_.observer != nullptr) options_.observer->OnDropped(DropReason::kDeadline, n);
    return absl::DeadlineExceededError("deadline passed before the request was queued");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const LoadedAdapter> adapter,
                   cache_->Get(request.tenant, request.task_id, request.version));

  auto pending = std::make_shared<PendingRequest>(n);
  std::vector<BatchRow> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    std::optional<std::string_view> pair;
    if (!request.text_pairs.empty()) pair = request.text_pairs[k];
    model::Encoding enc = tokenizer_->Encode(request.texts[k], pair);
    BatchRow& row = rows[k];
    row.input_ids.assign(enc.input_ids.begin(), enc.input_ids.end());
    row.token_type_ids.assign(enc.token_type_ids.begin(), enc.token_type_ids.end());
    row.adapter = adapter;
    row.deadline = request.deadline;
    row.request = pending;
    row.index = i;
  }
  RETURN_IF_ERROR(batcher_->Enqueue(std::move(rows)));
  ASSIGN_OR_RETURN(std::vector<std::vector<float>> probabilities, pending->Wait());
  PredictResult result;
  result.version = adapter->version;
  result.labels = adapter->labels;
  result.probabilities = std::move(probabilities);
  return result;
}

void InferenceEngine::RunBatch(std::vector<BatchRow>& batch) {
  const absl::Time now = absl::Now();
  std::vector<BatchRow*> rows;
  std::vector<BatchRow*> expired;
  for (BatchRow& row : batch) (row.deadline < now ? expired : rows).push_back(&row);
  FailExpiredRows(expired, options_.observer);
  if (rows.empty()) return;

  const int64_t b = static_cast<int64_t>(rows.size());
  int64_t len = 0, real = 0;
  absl::Time oldest = now;
  std::vector<std::shared_ptr<const model::AdapterSet>> sets;
  std::vector<int64_t> slots;
  std::map<const LoadedAdapter*, int64_t> slot_of;
  for (const BatchRow* row : rows) {
    len = std::max(len, row->length());
    real += row->length();
    oldest = std::min(oldest, row->enqueue_time);
    auto [it, inserted] = slot_of.emplace(row->adapter.get(), static_cast<int64_t>(sets.size()));
    if (inserted) sets.push_back(row->adapter->set);
    slots.push_back(it->second);
  }
  const model::EncodedBatch padded = model::PadRows(
      rows.size(), tokenizer_->pad_id(), [&](size_t i) -> const std::vector<int64_t>& { return rows[i]->input_ids; },
      [&](size_t i) -> const std::vector<int64_t>& { return rows[i]->token_type_ids; });
  if (options_.observer != nullptr) {
    BatchStats stats;
    stats.rows = b;
    stats.distinct_tasks = static_cast<int64_t>(sets.size());
    stats.padding_ratio = 1.0 - static_cast<double>(real) / static_cast<double>(b * len);
    stats.max_queue_wait_seconds = absl::ToDoubleSeconds(now - oldest);
    options_.observer->OnBatch(stats);
  }

  absl::StatusOr<at::Tensor> probs = model::GuardTorch("predict batch", [&]() -> absl::StatusOr<at::Tensor> {
    return ForwardProbabilities(*options_.encoder, model::ToEncoderInput(padded), sets, slots, options_.strategy);
  });
  if (!probs.ok()) {
    for (BatchRow* row : rows) row->request->Fail(row->index, probs.status());
    return;
  }
  const int64_t width = probs->size(1);
  const float* p = probs->data_ptr<float>();
  for (int64_t i = 0; i < b; ++i) {
    BatchRow& row = *rows[static_cast<size_t>(i)];
    const int64_t labels = static_cast<int64_t>(row.adapter->labels.size());
    const float* begin = p + i * width;
    row.request->Complete(row.index, std::vector<float>(begin, begin + std::min(labels, width)));
  }
}

}  // namespace adapterd::serving
