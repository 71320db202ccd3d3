#include "tools/pretrain/pretrainer.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <torch/types.h>
#include <torch/version.h>

#include <torch/optim/adamw.h>
#include <torch/serialize.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/cpu_features.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/model/checkpoint_writer.h"
#include "server/model/model_loader.h"
#include "server/model/tensor_io.h"
#include "server/model/training_support.h"

namespace adapterd::pretrain {
namespace {

namespace fs = std::filesystem;
using model::GuardTorch;

constexpr char kCheckpoint[] = "checkpoint";

// The encoder (fp32, on `device`, owning its memory) and MLM head of the
// HuggingFace BERT directory `dir` (a checkpoint or an ExportHf output, any
// dtype), which must hold exactly `config` and `vocab`: FAILED_PRECONDITION
// naming the difference otherwise.
absl::StatusOr<std::pair<model::EncoderWeights, MlmHead>> LoadPretrained(const fs::path& dir,
                                                                         const model::BertConfig& config,
                                                                         const std::vector<std::string>& vocab,
                                                                         c10::Device device) {
  const std::string config_path = (dir / "config.json").string();
  ASSIGN_OR_RETURN(const std::string config_json, ReadFileToString(config_path));
  absl::StatusOr<model::BertConfig> parsed = model::BertConfig::FromJson(config_json);
  if (!parsed.ok()) {
    return absl::Status(parsed.status().code(), absl::StrCat(config_path, ": ", parsed.status().message()));
  }
  const model::BertConfig& saved = *parsed;
  if (saved.ToJson() != config.ToJson()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the model in ", dir.string(), " is for another model config: ", saved.ToJson(), " vs ", config.ToJson()));
  }
  ASSIGN_OR_RETURN(const std::string vocab_txt, ReadFileToString((dir / "vocab.txt").string()));
  if (vocab_txt != absl::StrJoin(vocab, "\n") + "\n") {
    return absl::FailedPreconditionError(absl::StrCat("the model in ", dir.string(), " has another vocabulary"));
  }
  ASSIGN_OR_RETURN(model::SafetensorsFile file, model::SafetensorsFile::Open((dir / "model.safetensors").string()));
  ASSIGN_OR_RETURN(model::ResolvedWeights resolved, model::ResolveEncoderWeights(file, config, device, at::kFloat));
  ASSIGN_OR_RETURN(MlmHead head, MlmHead::FromSafetensors(file, config, device));
  RETURN_IF_ERROR(GuardTorch("copy the head", [&]() {
    // Never train mapped file bytes (a trainable BertEncoder copies the
    // encoder's weights itself).
    for (at::Tensor* t : {&head.dense_weight, &head.dense_bias, &head.ln_weight, &head.ln_bias, &head.decoder_bias}) {
      *t = t->clone();
    }
  }));
  return std::make_pair(std::move(resolved.weights), std::move(head));
}

// Turns autocast on for the scope (bf16 matmuls), off and cache-cleared after.
// LibTorch 2.4 replaced the per-backend setters by device-typed ones (the old
// ones are deprecated there); Debian's 1.13 has only the old ones.
class AutocastScope {
 public:
  AutocastScope(bool on, c10::Device device) : on_(on), cuda_(device.is_cuda()) {
    if (on_) Set(true);
  }
  ~AutocastScope() {
    if (!on_) return;
    Set(false);
    at::autocast::clear_cache();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  void Set(bool enabled) const {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    const c10::DeviceType type = cuda_ ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
    if (enabled) at::autocast::set_autocast_dtype(type, at::kBFloat16);
    at::autocast::set_autocast_enabled(type, enabled);
#else
    if (cuda_) {
      if (enabled) at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
      at::autocast::set_enabled(enabled);
    } else {
      if (enabled) at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      at::autocast::set_cpu_enabled(enabled);
    }
#endif
  }

  bool on_;
  bool cuda_;
};

std::vector<size_t> Shuffled(size_t n, uint64_t seed, int64_t epoch) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) + 1);
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[static_cast<size_t>(rng() % i)]);
  return order;
}

// Input ids and attention mask [rows, longest] for the given sequences.
std::pair<at::Tensor, at::Tensor> Pad(const std::vector<const std::vector<int32_t>*>& rows, int64_t pad_id) {
  const model::EncoderInput input = model::ToEncoderInput(model::PadRows(
      rows.size(), pad_id, [&](size_t i) -> const std::vector<int32_t>& { return *rows[i]; },
      [](size_t) { return std::span<const int32_t>(); }));
  return {input.input_ids, input.attention_mask};
}

// The seed of the masks of batch `index` (a training step or an evaluation
// batch), decorrelated from neighbouring indices.
uint64_t MaskSeed(uint64_t seed, int64_t index) {
  return seed * 0xD1B54A32D192ED03ull ^ (static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull);
}

struct LossAndAccuracy {
  at::Tensor loss;     // scalar, mean over masked positions (undefined when none)
  at::Tensor correct;  // scalar int64 on the device: masked positions predicted right
  int64_t masked = 0;
};

// Copies a host tensor to `device`, asynchronously from pinned memory on CUDA
// (the host keeps preparing the next step while the device works).
at::Tensor ToDevice(const at::Tensor& host, c10::Device device) {
  if (!device.is_cuda()) return host;
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

// MLM loss and accuracy of `batch` (already masked: MaskTokens). Nothing in
// it waits for the device: the masked positions and their targets are found
// on the host, where MaskTokens made them, the ids are known to lie in the
// vocabulary (MaskTokens draws replacements from it; corpora are checked when
// read), and the loss and the count of right predictions stay on the device
// until a caller reads them.
absl::StatusOr<LossAndAccuracy> MlmStep(const model::BertEncoder& encoder, const MlmHead& head,
                                        const MaskedBatch& batch, const at::Tensor& attention, bool train, bool bf16) {
  LossAndAccuracy out;
  out.masked = batch.num_selected;
  if (batch.num_selected == 0) return out;
  const c10::Device device = encoder.device();
  const at::Tensor labels = batch.labels.reshape({-1});
  const at::Tensor positions = at::nonzero(labels != kIgnoreLabel).reshape({-1});
  const at::Tensor targets = ToDevice(labels.index_select(0, positions), device);
  model::EncoderInput input{ToDevice(batch.input_ids, device), at::Tensor(), ToDevice(attention, device)};
  AutocastScope autocast(bf16, device);
  ASSIGN_OR_RETURN(model::EncoderOutput enc, encoder.Forward(input, {.train = train, .inputs_checked = true}));
  return GuardTorch("MLM loss", [&]() -> absl::StatusOr<LossAndAccuracy> {
    const at::Tensor hidden = enc.last_hidden_state.reshape({-1, enc.last_hidden_state.size(-1)})
                                  .index_select(0, ToDevice(positions, device));
    const at::Tensor logits =
        head.Logits(hidden, encoder.weights().word_embeddings, encoder.config().layer_norm_eps).to(at::kFloat);
    out.loss = at::cross_entropy_loss(logits, targets);
    out.correct = (logits.argmax(-1) == targets).sum();
    return out;
  });
}

}  // namespace

bool CpuHasFastBf16() { return !CurrentFastBf16Feature().empty(); }

void ClipGradNorm(const std::vector<at::Tensor>& params, double max_norm) {
  std::vector<at::Tensor> grads, norms;
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return;
  for (const at::Tensor& g : grads) norms.push_back(g.norm());
  const at::Tensor total = at::stack(norms).norm();
  const at::Tensor coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
  for (at::Tensor& g : grads) g.mul_(coef);
}

PackedCorpus PackTokenized(const TokenizedDocuments& documents, int32_t cls_id, int32_t sep_id, int seq_len) {
  PackedCorpus out;
  out.num_documents = documents.num_documents();
  out.num_unk = documents.num_unk;
  const size_t capacity = static_cast<size_t>(std::max(seq_len, 8));
  std::vector<int32_t> current = {cls_id};
  auto flush = [&]() {
    if (current.size() > 1) {
      out.num_tokens += static_cast<int64_t>(current.size());
      out.sequences.push_back(std::move(current));
    }
    current = {cls_id};
  };
  for (int64_t d = 0; d < documents.num_documents(); ++d) {
    const auto begin = documents.ids.begin() + documents.offsets[static_cast<size_t>(d)];
    const size_t size =
        static_cast<size_t>(documents.offsets[static_cast<size_t>(d) + 1] - documents.offsets[static_cast<size_t>(d)]);
    size_t pos = 0;
    while (pos < size) {
      // Room for at least one piece and the closing [SEP].
      if (current.size() + 2 > capacity) flush();
      const size_t take = std::min(size - pos, capacity - current.size() - 1);
      current.insert(current.end(), begin + static_cast<std::ptrdiff_t>(pos),
                     begin + static_cast<std::ptrdiff_t>(pos + take));
      pos += take;
      current.push_back(sep_id);
      if (pos < size) flush();  // the document continues in the next sequence
    }
  }
  flush();
  return out;
}

PackedCorpus PackDocuments(const std::vector<std::string>& documents, const model::BertTokenizer& tokenizer,
                           int seq_len, int threads) {
  return PackTokenized(TokenizeDocuments(documents, tokenizer, threads), tokenizer.cls_id(), tokenizer.sep_id(),
                       seq_len);
}

absl::Status PretrainOptions::Validate() const {
  auto bad = [](std::string_view what) { return absl::InvalidArgumentError(std::string(what)); };
  if (max_steps <= 0 && max_minutes <= 0) return bad("give a budget: max_steps or max_minutes");
  if (max_steps < 0 || max_minutes < 0) return bad("max_steps and max_minutes must not be negative");
  if (batch_size < 1) return bad("batch_size must be at least 1");
  if (seq_len < 8) return bad("seq_len must be at least 8");
  if (!(learning_rate > 0 && learning_rate < 1)) return bad("learning_rate must be in (0, 1)");
  if (!(warmup_fraction >= 0 && warmup_fraction < 1)) return bad("warmup_fraction must be in [0, 1)");
  if (weight_decay < 0) return bad("weight_decay must not be negative");
  if (!(max_grad_norm > 0)) return bad("max_grad_norm must be positive");
  if (!(dropout < 1)) return bad("dropout must be below 1 (negative: the config's rates)");
  if (timing_steps < 1) return bad("timing_steps must be at least 1");
  if (checkpoint_every_steps < 0) return bad("checkpoint_every_steps must not be negative");
  if (autocast != "off" && autocast != "bf16" && autocast != "auto") {
    return bad("autocast must be off, bf16 or auto");
  }
  if (lr_schedule != "steps" && lr_schedule != "time") return bad("lr_schedule must be steps or time");
  if (lr_schedule == "time" && (max_minutes <= 0 || max_steps > 0)) {
    return bad("lr_schedule time follows max_minutes: give max_minutes and no max_steps");
  }
  const double p = masking.select_prob, m = masking.mask_prob, r = masking.random_prob;
  if (!(p > 0 && p < 1) || m < 0 || r < 0 || m + r > 1) return bad("masking rates out of range");
  return absl::OkStatus();
}

absl::StatusOr<MlmEvaluation> EvaluateMlm(const model::BertEncoder& encoder, const MlmHead& head,
                                          const PackedCorpus& corpus, const MaskingSpec& masking, uint64_t seed,
                                          int64_t max_sequences, int batch_size) {
  at::NoGradGuard no_grad;
  const size_t n = max_sequences > 0 ? std::min(corpus.sequences.size(), static_cast<size_t>(max_sequences))
                                     : corpus.sequences.size();
  if (n == 0) return absl::InvalidArgumentError("no sequences to evaluate");
  if (masking.vocab_size <= masking.first_normal_id || masking.vocab_size != encoder.config().vocab_size) {
    return absl::InvalidArgumentError("the masking spec's vocab_size does not match the model");
  }
  double loss_sum = 0;
  int64_t correct = 0, masked = 0;
  std::map<int64_t, int64_t> label_counts;
  for (size_t begin = 0, index = 0; begin < n; begin += static_cast<size_t>(batch_size), ++index) {
    std::vector<const std::vector<int32_t>*> rows;
    for (size_t i = begin; i < std::min(n, begin + static_cast<size_t>(batch_size)); ++i) {
      rows.push_back(&corpus.sequences[i]);
    }
    auto [ids, attention] = Pad(rows, 0);
    // One draw of the masks serves the model and the unigram baseline.
    const MaskedBatch m = MaskTokens(ids, masking, MaskSeed(seed, static_cast<int64_t>(index)));
    const int64_t* label = m.labels.data_ptr<int64_t>();
    for (int64_t i = 0; i < m.labels.numel(); ++i) {
      if (label[i] != kIgnoreLabel) ++label_counts[label[i]];
    }
    ASSIGN_OR_RETURN(LossAndAccuracy r, MlmStep(encoder, head, m, attention, /*train=*/false, false));
    if (r.masked == 0) continue;
    loss_sum += r.loss.item<double>() * static_cast<double>(r.masked);
    correct += r.correct.item<int64_t>();
    masked += r.masked;
  }
  if (masked == 0) return absl::InvalidArgumentError("the evaluation sample has no maskable tokens");
  int64_t most = 0;
  for (const auto& [id, c] : label_counts) most = std::max(most, c);
  MlmEvaluation e;
  e.loss = loss_sum / static_cast<double>(masked);
  e.accuracy = static_cast<double>(correct) / static_cast<double>(masked);
  e.unigram_accuracy = static_cast<double>(most) / static_cast<double>(masked);
  e.num_masked = masked;
  return e;
}

struct Pretrainer::State {
  model::BertConfig config;
  std::vector<std::string> vocab;
  PretrainOptions options;
  std::string work_dir;
  std::unique_ptr<model::BertTokenizer> tokenizer;
  std::unique_ptr<model::BertEncoder> encoder;
  MlmHead head;
  std::vector<at::Tensor> decayed, undecayed;
  std::unique_ptr<torch::optim::AdamW> optimizer;
  int64_t step = 0;
  int64_t total_steps = 0;
  double train_seconds = 0;  // over every run of this work_dir
  // The current learning-rate cycle (new_cycle) began at this step and
  // train_seconds; 0 and 0 for the first.
  int64_t cycle_start_step = 0;
  double cycle_start_seconds = 0;
  // The current cycle's length in seconds when its learning rate follows
  // time (lr_schedule "time"); 0 when it follows steps.
  double schedule_seconds = 0;
  std::string init_from;  // the model the run started from; "" = random
  bool resumed = false;
  bool bf16 = false;
};

Pretrainer::Pretrainer(std::unique_ptr<State> state) : state_(std::move(state)) {}
Pretrainer::~Pretrainer() = default;

absl::StatusOr<std::unique_ptr<Pretrainer>> Pretrainer::Create(const model::BertConfig& config,
                                                               std::vector<std::string> vocab, PretrainOptions options,
                                                               std::string work_dir) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(config.Validate());
  if (static_cast<int64_t>(vocab.size()) != config.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("the vocabulary has ", vocab.size(), " tokens but the config says ", config.vocab_size));
  }
  auto s = std::make_unique<State>();
  s->config = config;
  s->options = std::move(options);
  s->work_dir = std::move(work_dir);
  ASSIGN_OR_RETURN(s->tokenizer,
                   model::BertTokenizer::FromTokens(vocab, {.do_lower_case = true, .max_seq_len = s->options.seq_len}));
  s->vocab = std::move(vocab);
  const model::BertTokenizer& tok = *s->tokenizer;
  const int64_t first_normal = 1 + std::max({tok.pad_id(), tok.unk_id(), tok.cls_id(), tok.sep_id(), tok.mask_id()});
  if (first_normal != 5) {
    return absl::InvalidArgumentError("the vocabulary must start with the 5 special tokens");
  }
  s->options.masking.mask_id = tok.mask_id();
  s->options.masking.first_normal_id = first_normal;
  s->options.masking.vocab_size = config.vocab_size;
  s->bf16 = s->options.autocast == "bf16" ||
            (s->options.autocast == "auto" && (s->options.device.is_cuda() || CpuHasFastBf16()));
  // On CUDA, the products autocast leaves in fp32 (all of them with autocast
  // off) run on TF32 tensor cores: pretraining has no use for fp32's last
  // mantissa bits, and they cost half the speed.
  if (s->options.device.is_cuda()) at::globalContext().setAllowTF32CuBLAS(true);

  fs::path ckpt = fs::path(s->work_dir) / kCheckpoint;
  if (!fs::exists(ckpt / "state.json") && fs::exists(fs::path(s->work_dir) / "checkpoint.old" / "state.json")) {
    ckpt = fs::path(s->work_dir) / "checkpoint.old";  // a crash between the two renames
  }
  model::EncoderWeights weights;
  if (fs::exists(ckpt / "state.json")) {
    ASSIGN_OR_RETURN(const std::string state_json, ReadFileToString((ckpt / "state.json").string()));
    ASSIGN_OR_RETURN(std::tie(weights, s->head), LoadPretrained(ckpt, config, s->vocab, s->options.device));
    try {
      const nlohmann::json j = nlohmann::json::parse(state_json);
      s->step = j.at("step").get<int64_t>();
      s->total_steps = j.at("total_steps").get<int64_t>();
      s->train_seconds = j.at("train_seconds").get<double>();
      s->cycle_start_step = j.value("cycle_start_step", int64_t{0});
      s->cycle_start_seconds = j.value("cycle_start_seconds", 0.0);
      s->schedule_seconds = j.value("schedule_seconds", 0.0);
      s->init_from = j.value("init_from", std::string());
      if (j.at("seed").get<uint64_t>() != s->options.seed) {
        return absl::FailedPreconditionError("the checkpoint was trained with another seed");
      }
    } catch (const nlohmann::json::exception& e) {
      return absl::DataLossError(absl::StrCat("corrupt ", (ckpt / "state.json").string(), ": ", e.what()));
    }
    s->resumed = true;
    if (s->options.new_cycle) {
      s->cycle_start_step = s->step;
      s->cycle_start_seconds = s->train_seconds;
      s->total_steps = s->options.max_steps > 0 ? s->step + s->options.max_steps : 0;  // 0: timed in Train
      s->schedule_seconds = s->options.lr_schedule == "time" ? s->options.max_minutes * 60.0 : 0.0;
    }
  } else if (s->options.new_cycle) {
    return absl::FailedPreconditionError(
        absl::StrCat("new_cycle needs a checkpoint in ", s->work_dir, "/", kCheckpoint));
  } else if (!s->options.init_from.empty()) {
    ASSIGN_OR_RETURN(std::tie(weights, s->head),
                     LoadPretrained(s->options.init_from, config, s->vocab, s->options.device));
    s->init_from = s->options.init_from;
  } else {
    ASSIGN_OR_RETURN(weights, model::RandomEncoderWeights(config, s->options.seed, s->options.init_range));
    RETURN_IF_ERROR(GuardTorch("initialise", [&]() {
      // BERT's initialisation: zero biases, LayerNorm 1/0.
      weights.emb_ln_weight.fill_(1);
      weights.emb_ln_bias.zero_();
      for (model::EncoderLayerWeights& l : weights.layers) {
        for (at::Tensor* b : {&l.qkv_bias, &l.attn_out_bias, &l.intermediate_bias, &l.output_bias, &l.attn_ln_bias,
                              &l.output_ln_bias}) {
          b->zero_();
        }
        l.attn_ln_weight.fill_(1);
        l.output_ln_weight.fill_(1);
      }
    }));
    s->head = MlmHead::Random(config, s->options.seed + 1, s->options.init_range, s->options.device);
  }
  if (!s->resumed && s->options.max_steps > 0) s->total_steps = s->options.max_steps;  // a new run
  if (!s->resumed && s->options.lr_schedule == "time") s->schedule_seconds = s->options.max_minutes * 60.0;
  // No pooler, whatever the source: MLM has no sentence objective to train
  // one, and neither checkpoints nor exports hold it.
  weights.pooler_weight = at::Tensor();
  weights.pooler_bias = at::Tensor();
  model::BertConfig train_config = config;  // the saved config keeps its dropout
  if (s->options.dropout >= 0) {
    train_config.hidden_dropout_prob = s->options.dropout;
    train_config.attention_probs_dropout_prob = s->options.dropout;
  }
  ASSIGN_OR_RETURN(
      s->encoder,
      model::BertEncoder::Create(
          train_config, std::move(weights),
          {.device = s->options.device, .dtype = at::kFloat, .fingerprint = "pretraining", .trainable = true}));
  RETURN_IF_ERROR(GuardTorch("build the optimiser", [&]() {
    for (const at::Tensor& t : s->encoder->weights().Tensors()) {
      (t.dim() >= 2 ? s->decayed : s->undecayed).push_back(t);
    }
    for (at::Tensor& t : std::vector<at::Tensor>{s->head.dense_weight}) s->decayed.push_back(t);
    for (at::Tensor& t :
         std::vector<at::Tensor>{s->head.dense_bias, s->head.ln_weight, s->head.ln_bias, s->head.decoder_bias}) {
      s->undecayed.push_back(t);
    }
    for (at::Tensor& t : s->decayed) t.requires_grad_(true);
    for (at::Tensor& t : s->undecayed) t.requires_grad_(true);
    const PretrainOptions& o = s->options;
    auto adamw = [&](double wd) {
      return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(o.learning_rate)
                                                              .betas({o.adam_beta1, o.adam_beta2})
                                                              .eps(o.adam_epsilon)
                                                              .weight_decay(wd));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(s->decayed, adamw(o.weight_decay));
    groups.emplace_back(s->undecayed, adamw(0.0));
    s->optimizer = std::make_unique<torch::optim::AdamW>(groups, *adamw(o.weight_decay));
  }));
  if (s->resumed) {
    RETURN_IF_ERROR(GuardTorch("load the optimiser state",
                               [&]() { torch::load(*s->optimizer, (ckpt / "optimizer.pt").string()); }));
    ASSIGN_OR_RETURN(const std::string rng, ReadFileToString((ckpt / "rng.bin").string()));
    RETURN_IF_ERROR(model::RestoreCpuGeneratorState(rng));
  } else {
    at::manual_seed(s->options.seed);
  }
  return std::unique_ptr<Pretrainer>(new Pretrainer(std::move(s)));
}

absl::Status Pretrainer::SaveCheckpoint() const {
  const State& s = *state_;
  const fs::path root(s.work_dir);
  const fs::path tmp = root / "checkpoint.tmp", ckpt = root / kCheckpoint, old = root / "checkpoint.old";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  model::HfWriteOptions write;
  write.dtype = model::DType::kF32;
  write.bert_prefix = true;  // as HF BertForMaskedLM saves it (encoder under "bert.", head under "cls.")
  write.extra_tensors = s.head.Named();
  RETURN_IF_ERROR(model::WriteHfCheckpoint(tmp.string(), s.config, s.encoder->weights(), s.vocab, write));
  RETURN_IF_ERROR(
      GuardTorch("save the optimiser state", [&]() { torch::save(*s.optimizer, (tmp / "optimizer.pt").string()); }));
  RETURN_IF_ERROR(WriteFileAtomically((tmp / "rng.bin").string(), model::CaptureCpuGeneratorState()));
  const nlohmann::json state = {{"step", s.step},
                                {"total_steps", s.total_steps},
                                {"train_seconds", s.train_seconds},
                                {"cycle_start_step", s.cycle_start_step},
                                {"cycle_start_seconds", s.cycle_start_seconds},
                                {"schedule_seconds", s.schedule_seconds},
                                {"seed", s.options.seed},
                                {"init_from", s.init_from}};
  RETURN_IF_ERROR(WriteFileAtomically((tmp / "state.json").string(), state.dump(2) + "\n"));
  fs::remove_all(old, ec);
  if (fs::exists(ckpt)) {
    fs::rename(ckpt, old, ec);
    if (ec) return absl::InternalError(absl::StrCat("rename ", ckpt.string(), ": ", ec.message()));
  }
  fs::rename(tmp, ckpt, ec);
  if (ec) return absl::InternalError(absl::StrCat("rename ", tmp.string(), ": ", ec.message()));
  fs::remove_all(old, ec);
  return absl::OkStatus();
}

absl::Status Pretrainer::Train(const PackedCorpus& corpus, int64_t report_every,
                               const std::function<void(const StepReport&)>& report,
                               const std::function<bool()>& stop) {
  State& s = *state_;
  const PretrainOptions& o = s.options;
  const size_t n = corpus.sequences.size();
  if (n == 0) return absl::InvalidArgumentError("the corpus has no sequences");
  const int64_t pad = s.tokenizer->pad_id();
  std::vector<at::Tensor> params = s.decayed;
  params.insert(params.end(), s.undecayed.begin(), s.undecayed.end());

  int64_t cached_epoch = -1;
  std::vector<size_t> order;
  auto batch_of = [&](int64_t step) {
    std::vector<const std::vector<int32_t>*> rows;
    for (int64_t i = 0; i < o.batch_size; ++i) {
      const int64_t g = step * o.batch_size + i;
      const int64_t epoch = g / static_cast<int64_t>(n);
      if (epoch != cached_epoch) {
        order = Shuffled(n, o.seed, epoch);
        cached_epoch = epoch;
      }
      rows.push_back(&corpus.sequences[order[static_cast<size_t>(g % static_cast<int64_t>(n))]]);
    }
    return Pad(rows, pad);
  };
  // Forward + backward of one step's batch; gradients are left in .grad.
  auto forward_backward = [&](int64_t step) -> absl::StatusOr<LossAndAccuracy> {
    auto [ids, attention] = batch_of(step);
    const MaskedBatch masked = MaskTokens(ids, o.masking, MaskSeed(o.seed, step));
    ASSIGN_OR_RETURN(LossAndAccuracy r, MlmStep(*s.encoder, s.head, masked, attention, /*train=*/true, s.bf16));
    if (r.loss.defined()) {
      RETURN_IF_ERROR(GuardTorch("backward", [&]() { r.loss.backward(); }));
    }
    return r;
  };

  const bool timed = s.schedule_seconds > 0;  // lr_schedule "time"
  if (!timed && s.total_steps == 0) {
    // Time budget only: time a few forward/backward passes, then fix the
    // schedule's length. No update is applied and the RNG is restored, so
    // the run is the same as one given that many steps outright.
    const std::string rng = model::CaptureCpuGeneratorState();
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < o.timing_steps; ++i) {
      ASSIGN_OR_RETURN(LossAndAccuracy ignored, forward_backward(i));
      (void)ignored;
      s.optimizer->zero_grad();
    }
    const double per_step = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                            static_cast<double>(o.timing_steps);
    // Clipping, the optimiser and reporting cost a little on top.
    s.total_steps =
        s.cycle_start_step + std::max<int64_t>(1, static_cast<int64_t>(o.max_minutes * 60.0 / (per_step * 1.05)));
    RETURN_IF_ERROR(model::RestoreCpuGeneratorState(rng));
  }
  const int64_t cycle_steps = s.total_steps - s.cycle_start_step;
  const int64_t warmup = static_cast<int64_t>(o.warmup_fraction * static_cast<double>(cycle_steps));

  const auto start = std::chrono::steady_clock::now();
  const double seconds_before = s.train_seconds;
  auto since_start = [&]() { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  // The fraction of a timed cycle spent.
  auto cycle_fraction = [&]() { return (seconds_before + since_start() - s.cycle_start_seconds) / s.schedule_seconds; };
  double window_start = 0;
  int64_t window_tokens = 0, reported_step = -1;
  LossAndAccuracy r;
  double lr = 0;
  auto emit = [&]() {
    const double now = since_start();
    StepReport rep;
    rep.step = s.step;
    // A timed cycle's length in steps is an estimate from its pace so far.
    rep.total_steps = timed
                          ? s.cycle_start_step + static_cast<int64_t>(static_cast<double>(s.step - s.cycle_start_step) /
                                                                      std::max(1e-9, cycle_fraction()))
                          : s.total_steps;
    // The step's only reads from the device: every report_every steps.
    rep.loss = r.loss.defined() ? r.loss.item<double>() : 0.0;
    rep.accuracy = r.masked > 0 ? static_cast<double>(r.correct.item<int64_t>()) / static_cast<double>(r.masked) : 0.0;
    rep.learning_rate = lr;
    rep.tokens_per_second = static_cast<double>(window_tokens) / std::max(1e-9, now - window_start);
    rep.elapsed_seconds = s.train_seconds;
    report(rep);
    window_start = now;
    window_tokens = 0;
    reported_step = s.step;
  };
  while (timed ? cycle_fraction() < 1.0 : s.step < s.total_steps) {
    if (!timed && o.max_minutes > 0 && seconds_before + since_start() - s.cycle_start_seconds >= o.max_minutes * 60.0) {
      break;
    }
    if (stop && stop()) break;
    s.optimizer->zero_grad();
    ASSIGN_OR_RETURN(r, forward_backward(s.step));
    lr = timed ? model::LinearWarmupDecayFraction(cycle_fraction(), o.warmup_fraction, o.learning_rate)
               : model::LinearWarmupDecay(s.step - s.cycle_start_step, cycle_steps, warmup, o.learning_rate);
    RETURN_IF_ERROR(GuardTorch("optimiser step", [&]() {
      ClipGradNorm(params, o.max_grad_norm);
      for (auto& group : s.optimizer->param_groups()) {
        static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
      }
      s.optimizer->step();
    }));
    ++s.step;
    window_tokens += static_cast<int64_t>(o.batch_size) * o.seq_len;
    s.train_seconds = seconds_before + since_start();
    const bool last = !timed && s.step == s.total_steps;
    if (report && (s.step % std::max<int64_t>(1, report_every) == 0 || last)) emit();
    if (o.checkpoint_every_steps > 0 && s.step % o.checkpoint_every_steps == 0 && !last) {
      RETURN_IF_ERROR(SaveCheckpoint());
    }
  }
  if (timed && cycle_fraction() >= 1.0) s.total_steps = s.step;  // the cycle is over: its length is known
  if (report && reported_step != s.step && r.masked > 0) emit();
  return SaveCheckpoint();
}

absl::Status Pretrainer::ExportHf(const std::string& dir, model::DType dtype) const {
  model::HfWriteOptions write;
  write.dtype = dtype;
  write.bert_prefix = true;
  write.extra_tensors = state_->head.Named();
  return model::WriteHfCheckpoint(dir, state_->config, state_->encoder->weights(), state_->vocab, write);
}

int64_t Pretrainer::step() const { return state_->step; }
int64_t Pretrainer::total_steps() const { return state_->total_steps; }
bool Pretrainer::resumed() const { return state_->resumed; }
const std::string& Pretrainer::init_from() const { return state_->init_from; }
bool Pretrainer::using_bf16() const { return state_->bf16; }
const model::BertEncoder& Pretrainer::encoder() const { return *state_->encoder; }
const MlmHead& Pretrainer::head() const { return state_->head; }
const model::BertTokenizer& Pretrainer::tokenizer() const { return *state_->tokenizer; }

std::vector<at::Tensor> Pretrainer::Parameters() const {
  std::vector<at::Tensor> out = state_->encoder->weights().Tensors();
  for (const at::Tensor& t : state_->head.Tensors()) out.push_back(t);
  return out;
}

}  // namespace adapterd::pretrain
