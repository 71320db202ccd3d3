#include "server/serving/inference_engine.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "server/model/tensor_io.h"
#include "server/serving/length_groups.h"
#include "server/serving/predict_checks.h"

namespace adapterd::serving {
namespace {

using model::TaskKind;

// One mixed-task forward of a padded batch.
absl::StatusOr<model::EncoderOutput> ForwardBatch(const model::BertEncoder& encoder, const model::EncoderInput& input,
                                                  const std::vector<std::shared_ptr<const model::AdapterSet>>& sets,
                                                  const std::vector<int64_t>& slots, model::MixedStrategy strategy) {
  c10::InferenceMode inference_mode;
  model::ForwardOptions fo;
  fo.strategy = strategy;
  if (sets.size() == 1) return encoder.Forward(input, *sets[0], fo);
  const int64_t rows = static_cast<int64_t>(slots.size());
  const bool gather = strategy == model::MixedStrategy::kGatherBmm ||
                      (strategy == model::MixedStrategy::kAuto &&
                       model::BertEncoder::ChooseStrategy(rows, static_cast<int64_t>(sets.size()), true,
                                                          encoder.device()) == model::MixedStrategy::kGatherBmm);
  ASSIGN_OR_RETURN(std::shared_ptr<const model::AdapterStack> stack,
                   model::AdapterStack::Create(sets, encoder.config(), encoder.device(), encoder.dtype(), gather));
  return encoder.Forward(input, *stack, slots, fo);
}

// Each row's outputs, as its kind's decoding reads them
// (ServingKind::softmax_outputs): the softmax over its head's K outputs or
// the K raw outputs, per row (pooled kinds) or per position (token-reading
// kinds). Each form is computed once per batch, for the rows that read it.
absl::StatusOr<std::vector<std::vector<float>>> RowOutputs(const model::EncoderOutput& out,
                                                           const std::vector<BatchRow*>& rows) {
  return model::GuardTorch("predict outputs", [&]() -> absl::StatusOr<std::vector<std::vector<float>>> {
    c10::InferenceMode inference_mode;
    at::Tensor forms[2][2];  // [reads tokens][softmax], on the host in fp32
    const auto form = [&](bool tokens, bool softmax) -> const at::Tensor& {
      at::Tensor& t = forms[tokens][softmax];
      if (!t.defined()) {
        t = (tokens ? out.token_logits : out.logits).to(at::kFloat).to(at::kCPU).contiguous();
        if (softmax) t = at::softmax(t, tokens ? 2 : 1);
      }
      return t;
    };
    // Copies out of the contiguous host tensors: no tensor op per row.
    std::vector<std::vector<float>> result(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const model::AdapterConfig& config = rows[i]->adapter->set->config();
      const int64_t k = config.num_outputs();
      const bool tokens = model::ReadsTokens(config.kind);
      const at::Tensor& from = form(tokens, ServingKindOf(config.kind).softmax_outputs());
      const float* row = from.data_ptr<float>() + static_cast<int64_t>(i) * from.stride(0);
      if (!tokens) {
        result[i].assign(row, row + k);
        continue;
      }
      // [L, C'] for this row: the first k outputs of each of its positions.
      const int64_t width = from.size(2);
      result[i].reserve(static_cast<size_t>(rows[i]->length() * k));
      for (int64_t p = 0; p < rows[i]->length(); ++p)
        result[i].insert(result[i].end(), row + p * width, row + p * width + k);
    }
    return result;
  });
}

// An option whose -1 means "the device's": `chosen` when set (>= 0), else
// the encoder's device's default.
int64_t DeviceDefault(int64_t chosen, const model::BertEncoder& encoder, int64_t on_cuda, int64_t on_cpu) {
  if (chosen >= 0) return chosen;
  return encoder.device().is_cuda() ? on_cuda : on_cpu;
}

BatchRow RowOf(std::span<const int32_t> ids, std::span<const int32_t> types) {
  BatchRow row;
  row.input_ids.assign(ids.begin(), ids.end());
  row.token_type_ids.assign(types.begin(), types.end());
  return row;
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
  if (options.max_windows_per_text < 1 || options.max_rows_per_request < 1) {
    return absl::InvalidArgumentError("max_windows_per_text and max_rows_per_request must be at least 1");
  }
  if (options.slab_bottleneck < -1) {
    return absl::InvalidArgumentError("slab_bottleneck must be >= 0 (or -1: the device's default)");
  }
  if (options.split_overhead_tokens < -1) {
    return absl::InvalidArgumentError("split_overhead_tokens must be >= 0 (or -1: the device's default)");
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
  co.slab_bottleneck = DeviceDefault(o.slab_bottleneck, *o.encoder, kCudaSlabBottleneck, 0);
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
                                                                                  const std::function<void()>& done) {
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

InferenceEngine::InferenceEngine(Options options)
    : options_(std::move(options)),
      split_overhead_tokens_(DeviceDefault(options_.split_overhead_tokens, *options_.encoder, kCudaSplitOverheadTokens,
                                           kCpuSplitOverheadTokens)) {}

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
  RETURN_IF_ERROR(CheckPredictInputs(request.texts, request.text_pairs, request.version));
  return CheckPredictOptions(request.threshold, request.top_k_answers);
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
  RETURN_IF_ERROR(ServingKindOf(adapter->set->config().kind).CheckRequest(request));

  // The request's rows: counted (and bounded) before any is queued, then
  // planned and queued a few texts at a time, each text decoded as soon as
  // its rows are done. Planning and decoding allocate per text: out of memory
  // there is this request's RESOURCE_EXHAUSTED (GuardTorch), never an escaped
  // exception.
  ASSIGN_OR_RETURN(const std::vector<size_t> rows_per_text,
                   model::GuardTorch("counting the request's rows", [&] { return CountRows(request, *adapter); }));
  return model::GuardTorch("planning, queueing and decoding the request's rows",
                           [&] { return PlanRunAndDecode(request, adapter, rows_per_text); });
}

int64_t InferenceEngine::rows_in_flight_per_request() const {
  return (int64_t{options_.max_inflight_batches} + 1) * options_.max_batch_size;
}

int64_t InferenceEngine::queued_rows() const { return batcher_->queued_rows(); }

absl::StatusOr<PredictResult> InferenceEngine::PlanRunAndDecode(const PredictRequest& request,
                                                                const std::shared_ptr<const LoadedAdapter>& adapter,
                                                                const std::vector<size_t>& rows_per_text) {
  const model::AdapterConfig& config = adapter->set->config();
  const ServingKind& kind = ServingKindOf(config.kind);
  const size_t n = request.texts.size();
  int64_t total = 0;
  for (size_t r : rows_per_text) total += static_cast<int64_t>(r);
  auto pending = std::make_shared<PendingRequest>(total);
  const int64_t window = rows_in_flight_per_request();

  PredictResult result;
  result.version = adapter->version;
  result.kind = config.kind;
  result.labels = adapter->labels;
  result.texts.reserve(n);
  std::deque<TextRows> planned;  // queued, not yet decoded, in text order
  size_t next = 0;               // the next text to plan
  int64_t queued = 0;            // rows handed to the batcher
  while (result.texts.size() < n) {
    // Plan and queue texts while this request's unfinished rows stay within
    // the window (a text longer than the window goes alone).
    std::vector<BatchRow> rows;
    while (next < n) {
      const int64_t unfinished = queued + static_cast<int64_t>(rows.size()) - pending->finished();
      if (unfinished > 0 && unfinished + static_cast<int64_t>(rows_per_text[next]) > window) break;
      TextRows& text = planned.emplace_back(PlanText(request, config, next));
      if (text.windows.size() != rows_per_text[next]) {
        return absl::InternalError(absl::StrCat("text ", next, " planned as ", text.windows.size(),
                                                " rows after counting ", rows_per_text[next]));
      }
      text.first_row = static_cast<size_t>(queued) + rows.size();
      for (const model::SlidingWindow& w : text.windows) {
        BatchRow& row = rows.emplace_back(RowOf(w.input_ids, w.token_type_ids));
        row.adapter = adapter;
        row.deadline = request.deadline;
        row.request = pending;
        row.index = queued + static_cast<int64_t>(rows.size()) - 1;
        row.tenant_weight = request.tenant_weight;
      }
      ++next;
    }
    if (!rows.empty()) {
      queued += static_cast<int64_t>(rows.size());
      RETURN_IF_ERROR(batcher_->Enqueue(std::move(rows)));
    }
    // Until the oldest queued text's rows are done, or the next text fits.
    const TextRows& oldest = planned.front();
    const int64_t fits_at =
        next < n ? queued + static_cast<int64_t>(rows_per_text[next]) - window : std::numeric_limits<int64_t>::max();
    RETURN_IF_ERROR(pending->WaitForRowsOrFinished(static_cast<int64_t>(oldest.first_row),
                                                   static_cast<int64_t>(oldest.windows.size()), fits_at));
    while (!planned.empty()) {
      const TextRows& text = planned.front();
      std::optional<std::vector<std::vector<float>>> outputs =
          pending->TakeIfDone(static_cast<int64_t>(text.first_row), static_cast<int64_t>(text.windows.size()));
      if (!outputs.has_value()) break;
      const std::vector<std::span<const float>> windows(outputs->begin(), outputs->end());
      result.texts.push_back(kind.Decode(request, config, text, result.texts.size(), windows));
      planned.pop_front();
    }
  }
  return result;
}

bool InferenceEngine::healthy() const {
  absl::MutexLock lock(&mu_);
  return failed_batches_ < kUnhealthyAfterFailedBatches;
}

void InferenceEngine::NoteBatchOutcome(const absl::Status& status) {
  bool changed = false, now_healthy = true;
  {
    absl::MutexLock lock(&mu_);
    if (status.ok()) {
      changed = failed_batches_ >= kUnhealthyAfterFailedBatches;
      failed_batches_ = 0;
    } else if (absl::IsResourceExhausted(status)) {
      changed = ++failed_batches_ == kUnhealthyAfterFailedBatches;
      now_healthy = false;
    }
  }
  if (changed) {
    LOG(WARNING) << "inference is " << (now_healthy ? "serving again" : "failing for lack of memory")
                 << (now_healthy ? ""
                                 : absl::StrCat(" (", kUnhealthyAfterFailedBatches,
                                                " batches in a row): health NOT_SERVING until one succeeds; ",
                                                status.message()));
    if (options_.on_health) options_.on_health(now_healthy);
  }
}

TextRows InferenceEngine::PlanText(const PredictRequest& request, const model::AdapterConfig& config, size_t k) const {
  // The task's trained window, within the server's longest row.
  return ServingKindOf(config.kind)
      .Plan(*tokenizer_, config, request, k, config.window_length(options_.max_seq_len),
            static_cast<size_t>(options_.max_windows_per_text));
}

absl::StatusOr<std::vector<size_t>> InferenceEngine::CountRows(const PredictRequest& request,
                                                               const LoadedAdapter& adapter) const {
  const model::AdapterConfig& config = adapter.set->config();
  const ServingKind& kind = ServingKindOf(config.kind);
  const int32_t len = config.window_length(options_.max_seq_len);
  const auto most_windows = static_cast<size_t>(options_.max_windows_per_text);
  std::vector<size_t> rows_per_text;
  rows_per_text.reserve(request.texts.size());
  size_t total = 0;
  for (size_t k = 0; k < request.texts.size(); ++k) {
    // Planned to be counted, then dropped: the plan is made again when the
    // text's turn to be queued comes (a pure function of its arguments).
    const TextRows text = PlanText(request, config, k);
    if (text.windows.size() > most_windows) {
      return absl::InvalidArgumentError(
          absl::StrCat("text ", k, " (", text.pieces.ids.size(), " word pieces", std::string(kind.windowed_what()),
                       ") needs more than ", most_windows, " windows of ", len,
                       " tokens; the limit is --max_windows_per_text (", most_windows, "): send shorter texts"));
    }
    if (total + text.windows.size() > static_cast<size_t>(options_.max_rows_per_request)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the request needs more than ", options_.max_rows_per_request,
                       " rows (texts and their windows); the limit is --max_rows_per_predict (",
                       options_.max_rows_per_request, "): send fewer or shorter texts"));
    }
    total += text.windows.size();
    rows_per_text.push_back(text.windows.size());
  }
  return rows_per_text;
}

void InferenceEngine::RunBatch(std::vector<BatchRow>& batch) {
  const absl::Time now = absl::Now();
  std::vector<BatchRow*> rows;
  std::vector<BatchRow*> expired;
  for (BatchRow& row : batch) (row.deadline < now ? expired : rows).push_back(&row);
  FailExpiredRows(expired, options_.observer);
  if (rows.empty()) return;

  // Everything that allocates runs guarded: a batch that cannot be computed
  // fails its rows, and the engine serves the next.
  absl::StatusOr<std::vector<std::vector<float>>> outputs =
      model::GuardTorch("predict batch", [&] { return ComputeBatch(rows, now); });
  NoteBatchOutcome(outputs.status());
  if (!outputs.ok()) {
    for (BatchRow* row : rows) row->request->Fail(row->index, outputs.status());
    return;
  }
  for (size_t i = 0; i < rows.size(); ++i) rows[i]->request->Complete(rows[i]->index, std::move((*outputs)[i]));
}

absl::StatusOr<std::vector<std::vector<float>>> InferenceEngine::ComputeBatch(const std::vector<BatchRow*>& rows,
                                                                              absl::Time now) {
  if (options_.before_batch_for_testing) options_.before_batch_for_testing();
  int64_t real = 0;
  absl::Time oldest = now;
  std::vector<int64_t> lengths;
  std::set<const LoadedAdapter*> tasks;
  for (const BatchRow* row : rows) {
    real += row->length();
    oldest = std::min(oldest, row->enqueue_time);
    lengths.push_back(row->length());
    tasks.insert(row->adapter.get());
  }
  // Rows of similar length run together (length_groups.h).
  const std::vector<LengthGroup> groups = PlanLengthGroups(lengths, split_overhead_tokens_);
  if (options_.observer != nullptr) {
    BatchStats stats;
    stats.rows = static_cast<int64_t>(rows.size());
    stats.distinct_tasks = static_cast<int64_t>(tasks.size());
    stats.forwards = static_cast<int64_t>(groups.size());
    stats.padding_ratio = 1.0 - static_cast<double>(real) / static_cast<double>(PaddedTokens(groups));
    stats.max_queue_wait_seconds = absl::ToDoubleSeconds(now - oldest);
    options_.observer->OnBatch(stats);
  }

  std::vector<std::vector<float>> outputs(rows.size());
  for (const LengthGroup& group : groups) {
    std::vector<BatchRow*> part;
    std::vector<std::shared_ptr<const model::AdapterSet>> sets;
    std::vector<int64_t> slots;
    std::map<const LoadedAdapter*, int64_t> slot_of;
    for (size_t i : group.rows) {
      BatchRow* row = rows[i];
      part.push_back(row);
      auto [it, inserted] = slot_of.emplace(row->adapter.get(), static_cast<int64_t>(sets.size()));
      if (inserted) sets.push_back(row->adapter->set);
      slots.push_back(it->second);
    }
    const model::EncodedBatch padded = model::PadRows(
        part.size(), tokenizer_->pad_id(), [&](size_t i) -> const std::vector<int64_t>& { return part[i]->input_ids; },
        [&](size_t i) -> const std::vector<int64_t>& { return part[i]->token_type_ids; });
    ASSIGN_OR_RETURN(model::EncoderOutput out,
                     ForwardBatch(*options_.encoder, model::ToEncoderInput(padded), sets, slots, options_.strategy));
    ASSIGN_OR_RETURN(std::vector<std::vector<float>> part_outputs, RowOutputs(out, part));
    for (size_t k = 0; k < group.rows.size(); ++k) outputs[group.rows[k]] = std::move(part_outputs[k]);
  }
  return outputs;
}

}  // namespace adapterd::serving
