// Masked-language-model pretraining of a BERT encoder from scratch
// (adapterd-pretrain). Reuses the serving encoder (BertEncoder, created
// trainable) and the trainer's schedule and RNG checkpointing, so the model
// that is pretrained is exactly the model that serves.
//
// Data: documents (one per corpus line) are tokenized and packed into
// sequences "[CLS] doc [SEP] doc [SEP] ..." of at most seq_len tokens;
// a document longer than a sequence continues in the next one. There is no
// next-sentence objective (as RoBERTa), token type ids are 0. Sequences are
// visited in a shuffled order that is a function of (seed, epoch).
//
// Objective and optimiser: MLM (mlm.h) with AdamW (weight decay on matrices
// and embeddings only), linear warmup then linear decay to 0, global
// grad-norm clip. The step's masks are a function of (seed, step), dropout
// draws from LibTorch's CPU generator, whose state is checkpointed: a run
// resumed from a checkpoint is bit-identical on CPU to one that was not
// interrupted.
//
// Budget: max_steps, or max_minutes (then the schedule's length is fixed
// after the first timing_steps steps from their measured speed, and saved in
// the checkpoint, so that a resumed run keeps the same schedule). Both may be
// given: the schedule follows max_steps and max_minutes stops early.
// lr_schedule "time" instead makes the learning rate a function of the time
// spent (warmup over the first warmup_fraction of max_minutes, then linear
// decay to 0 at max_minutes, where the run ends), however fast the steps
// are: for a run that must end at a deadline on a device whose pace is not
// known ahead, or that it shares with other runs (a lent GPU). Its cycle
// length is saved in the checkpoint too; the run is then not a function of
// the seed alone (its steps' learning rates depend on their timing).
// new_cycle continues a finished (or any) checkpoint with a further budget:
// a new warmup-then-decay schedule of that budget starts at the checkpoint's
// step (a second learning-rate cycle), e.g. for a longer run later.
//
// init_from starts a fresh work_dir from a pretrained model instead of a
// random initialisation: an HF directory (an earlier run's export, e.g. the
// committed default model) with the same config and vocabulary, whose
// encoder and MLM head are read as fp32. The run is a new one (step 0, its
// own schedule and optimiser, which the export does not keep); once
// work_dir has a checkpoint, that checkpoint is resumed and init_from is
// not read again. It continues a model whose checkpoint is gone.
//
// Checkpoints: `work_dir/checkpoint/` holds an HF directory in fp32 (encoder
// + MLM head), optimizer.pt, rng.bin and state.json; it is replaced
// atomically (written beside, then renamed). Create() resumes from it when
// present.
//
// Precision: autocast "bf16" runs matmuls in bfloat16 under LibTorch's
// autocast (weights and optimiser stay fp32); "auto" chooses it on CUDA and
// on CPUs with native bf16 dot products (amx_bf16 or avx512_bf16 in
// /proc/cpuinfo), where it trains faster with the same loss curve
// (models/adapterd-mini-en/MODEL_CARD.md has the figures). Without them
// oneDNN emulates bf16 and it is slower. On CUDA, the products left in fp32
// run on TF32 tensor cores.
//
// Device: the step never waits for a CUDA device (no reads back but the
// loss and accuracy every report_every steps; inputs copied from pinned
// memory), so that the host prepares the next batch while the device runs.
//
// Thread safety: one Pretrainer per process (LibTorch's CPU generator is
// process-global).
#ifndef ADAPTERD_TOOLS_PRETRAIN_PRETRAINER_H_
#define ADAPTERD_TOOLS_PRETRAIN_PRETRAINER_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/bert_config.h"
#include "server/model/bert_encoder.h"
#include "server/model/safetensors.h"
#include "server/model/tokenizer.h"
#include "tools/pretrain/mlm.h"
#include "tools/pretrain/token_corpus.h"

namespace adapterd::pretrain {

// Packed training sequences (token ids, specials included, unpadded).
struct PackedCorpus {
  std::vector<std::vector<int32_t>> sequences;
  int64_t num_documents = 0;
  int64_t num_tokens = 0;  // specials included
  int64_t num_unk = 0;     // [UNK] pieces
};

// Packs tokenized documents into sequences of at most `seq_len` (>= 8)
// tokens: "[CLS] doc [SEP] doc [SEP] ...", a document longer than what is
// left of a sequence continuing in the next one.
PackedCorpus PackTokenized(const TokenizedDocuments& documents, int32_t cls_id, int32_t sep_id, int seq_len);

// TokenizeDocuments (token_corpus.h) on `threads` threads, then PackTokenized.
PackedCorpus PackDocuments(const std::vector<std::string>& documents, const model::BertTokenizer& tokenizer,
                           int seq_len, int threads = 1);

struct PretrainOptions {
  int64_t max_steps = 0;   // 0: use max_minutes
  double max_minutes = 0;  // 0: no time limit (max_steps must be set)
  int64_t timing_steps = 10;
  int batch_size = 32;
  int seq_len = 128;
  double learning_rate = 1e-3;
  double warmup_fraction = 0.06;
  double weight_decay = 0.01;
  double max_grad_norm = 1.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.98;
  double adam_epsilon = 1e-6;
  double init_range = 0.02;
  // Dropout (hidden and attention) while pretraining; < 0 keeps the
  // config's rates. The saved and exported config keeps its own rates, which
  // are the ones fine-tuning uses. 0 suits short budgets (a few passes over
  // the corpus), where the model underfits rather than overfits (Geiping & Goldstein 2022,
  // "Cramming").
  double dropout = -1;
  uint64_t seed = 42;
  int64_t checkpoint_every_steps = 200;  // 0: only at the end
  std::string autocast = "off";          // off | bf16 | auto
  std::string lr_schedule = "steps";     // steps | time (see "Budget" above)
  bool new_cycle = false;                // see "Budget" above; needs a checkpoint
  std::string init_from;                 // see "init_from" above; "" = random initialisation
  MaskingSpec masking;                   // ids and vocab size are filled in by Create()
  c10::Device device = c10::Device(c10::kCPU);

  absl::Status Validate() const;
};

struct StepReport {
  int64_t step = 0;         // 1-based, after the update
  int64_t total_steps = 0;  // the schedule's length
  double loss = 0;          // MLM loss of this step's batch
  double accuracy = 0;      // masked-token accuracy of this step's batch
  double learning_rate = 0;
  double tokens_per_second = 0;  // since the previous report
  double elapsed_seconds = 0;    // this process's training time
};

struct MlmEvaluation {
  double loss = 0;
  double accuracy = 0;          // masked-token accuracy
  double unigram_accuracy = 0;  // always predicting the evaluation set's most frequent token
  int64_t num_masked = 0;
};

// Masked-token loss and accuracy of `encoder` + `head` on `corpus`
// (no dropout), masks drawn with `seed`; the first `max_sequences` (0 = all).
absl::StatusOr<MlmEvaluation> EvaluateMlm(const model::BertEncoder& encoder, const MlmHead& head,
                                          const PackedCorpus& corpus, const MaskingSpec& masking, uint64_t seed,
                                          int64_t max_sequences, int batch_size);

class Pretrainer {
 public:
  // A fresh model for `config` with `vocab` (random, or options.init_from's),
  // or the one in work_dir/checkpoint when present. A checkpoint or
  // init_from directory must hold this config and vocab: FAILED_PRECONDITION
  // otherwise.
  static absl::StatusOr<std::unique_ptr<Pretrainer>> Create(const model::BertConfig& config,
                                                            std::vector<std::string> vocab, PretrainOptions options,
                                                            std::string work_dir);
  ~Pretrainer();

  // Trains until the budget is spent (or `stop` returns true, checked each
  // step), checkpointing as configured and at the end. `report` is called
  // every `report_every` steps and after the last one.
  absl::Status Train(const PackedCorpus& corpus, int64_t report_every,
                     const std::function<void(const StepReport&)>& report, const std::function<bool()>& stop = nullptr);

  // Writes a HuggingFace BERT directory: config.json, model.safetensors
  // (encoder without pooler + the MLM head, in `dtype`), vocab.txt,
  // tokenizer_config.json.
  absl::Status ExportHf(const std::string& dir, model::DType dtype) const;

  int64_t step() const;
  int64_t total_steps() const;
  bool resumed() const;
  // The init_from model this run (or the run it resumes) started from; "" if random.
  const std::string& init_from() const;
  bool using_bf16() const;
  const model::BertEncoder& encoder() const;
  const MlmHead& head() const;
  const model::BertTokenizer& tokenizer() const;
  // Every trainable tensor (encoder then head), for tests.
  std::vector<at::Tensor> Parameters() const;

 private:
  struct State;
  explicit Pretrainer(std::unique_ptr<State> state);
  absl::Status SaveCheckpoint() const;
  std::unique_ptr<State> state_;
};

// Scales the gradients of `params` so that their global L2 norm is at most
// `max_norm` (torch::nn::utils::clip_grad_norm_'s rule), without reading the
// norm back to the host, which would wait for a CUDA device every step.
void ClipGradNorm(const std::vector<at::Tensor>& params, double max_norm);

// True when /proc/cpuinfo lists amx_bf16 or avx512_bf16.
bool CpuHasFastBf16();

}  // namespace adapterd::pretrain

#endif  // ADAPTERD_TOOLS_PRETRAIN_PRETRAINER_H_
