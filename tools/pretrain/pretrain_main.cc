// adapterd-pretrain: builds a WordPiece vocabulary from a corpus, pretrains a
// BERT encoder on it with masked language modelling, and evaluates
// held-out masked-token accuracy. See tools/pretrain/pretrainer.h and
// scripts/build-default-model.sh.
//
//   adapterd-pretrain vocab --corpus train.txt --size 8192 --out vocab.txt
//   adapterd-pretrain train --corpus train.txt --vocab vocab.txt --preset mini
//       --max_minutes 50 --work_dir work --out models/adapterd-mini-en --heldout heldout.txt
//   adapterd-pretrain eval --model_dir models/adapterd-mini-en --corpus heldout.txt
//   adapterd-pretrain tokenize --corpus train.txt --vocab vocab.txt --out train.ids
// Every --corpus/--heldout takes text (one document per line) or a token-id
// file from `tokenize` (token_corpus.h), told apart by the file's magic.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <ATen/Parallel.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/model/bert_config.h"
#include "server/model/model_loader.h"
#include "server/model/tensor_io.h"
#include "tools/pretrain/mlm.h"
#include "tools/pretrain/pretrainer.h"
#include "tools/pretrain/token_corpus.h"
#include "tools/pretrain/vocab_builder.h"

namespace adapterd::pretrain {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

// Non-empty lines of `path`.
absl::StatusOr<std::vector<std::string>> ReadLines(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    lines.emplace_back(line);
  }
  return lines;
}

absl::StatusOr<std::vector<std::string>> ReadVocab(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  std::vector<std::string> tokens = absl::StrSplit(text, '\n');
  while (!tokens.empty() && tokens.back().empty()) tokens.pop_back();
  return tokens;
}

// The documents of `path` (text or a token-id file) packed for `tokenizer`.
absl::StatusOr<PackedCorpus> LoadCorpus(const std::string& path, const std::vector<std::string>& vocab,
                                        const model::BertTokenizer& tokenizer, int seq_len, int threads) {
  if (IsTokenIdsFile(path)) {
    ASSIGN_OR_RETURN(const TokenizedDocuments docs, ReadTokenIds(path, vocab, tokenizer.unk_id()));
    return PackTokenized(docs, tokenizer.cls_id(), tokenizer.sep_id(), seq_len);
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> docs, ReadLines(path));
  return PackDocuments(docs, tokenizer, seq_len, threads);
}

struct TokenizeArgs {
  std::string corpus, vocab, out;
  int threads = 0;
};

absl::Status RunTokenize(const TokenizeArgs& a) {
  ASSIGN_OR_RETURN(const std::vector<std::string> vocab, ReadVocab(a.vocab));
  ASSIGN_OR_RETURN(const std::unique_ptr<model::BertTokenizer> tokenizer,
                   model::BertTokenizer::FromTokens(vocab, {.do_lower_case = true}));
  ASSIGN_OR_RETURN(const std::vector<std::string> docs, ReadLines(a.corpus));
  const TokenizedDocuments ids = TokenizeDocuments(docs, *tokenizer, a.threads);
  RETURN_IF_ERROR(WriteTokenIds(a.out, ids, vocab));
  std::cout << "tokenize: " << ids.num_documents() << " documents, " << ids.ids.size() << " pieces ([UNK] "
            << ids.num_unk << ") -> " << a.out << "\n";
  return absl::OkStatus();
}

struct VocabArgs {
  std::vector<std::string> corpus;
  std::string out;
  VocabOptions options;
};

absl::Status RunVocab(const VocabArgs& a) {
  VocabBuilder builder;
  int64_t lines = 0;
  for (const std::string& path : a.corpus) {
    ASSIGN_OR_RETURN(const std::vector<std::string> docs, ReadLines(path));
    for (const std::string& d : docs) builder.AddText(d);
    lines += static_cast<int64_t>(docs.size());
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> vocab, builder.Build(a.options));
  std::string text;
  for (const std::string& t : vocab) absl::StrAppend(&text, t, "\n");
  RETURN_IF_ERROR(WriteFileAtomically(a.out, text));
  std::cout << "vocab: " << vocab.size() << " tokens from " << lines << " documents (" << builder.num_distinct_words()
            << " distinct words) -> " << a.out << "\n";
  return absl::OkStatus();
}

// BERT's masking rule for the model's vocabulary (held-out evaluation: the
// same rule as training, `eval` and `train --heldout` agree).
MaskingSpec HeldOutMasking(const model::BertTokenizer& tokenizer, const model::BertConfig& config) {
  MaskingSpec m;
  m.mask_id = tokenizer.mask_id();
  m.vocab_size = config.vocab_size;
  return m;
}

struct TrainArgs {
  std::string corpus, heldout, vocab, out, work_dir, preset = "mini", out_dtype = "f16", device = "cpu";
  int64_t layers = 0, hidden = 0, heads = 0, intermediate = 0, max_positions = 512;
  int64_t report_every = 20, eval_sequences = 2000;
  int threads = 0;
  PretrainOptions options;
};

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("model name")) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

absl::Status RunTrain(TrainArgs a) {
  model::SetComputeThreads(a.threads);
  ASSIGN_OR_RETURN(std::vector<std::string> vocab, ReadVocab(a.vocab));
  ASSIGN_OR_RETURN(model::BertConfig config, model::BertConfig::Preset(a.preset, static_cast<int64_t>(vocab.size())));
  if (a.layers > 0) config.num_hidden_layers = a.layers;
  if (a.hidden > 0) {
    config.hidden_size = a.hidden;
    config.intermediate_size = 4 * a.hidden;
  }
  if (a.heads > 0) config.num_attention_heads = a.heads;
  if (a.intermediate > 0) config.intermediate_size = a.intermediate;
  config.max_position_embeddings = a.max_positions;
  ASSIGN_OR_RETURN(a.options.device, model::ParseDevice(a.device));
  ASSIGN_OR_RETURN(const model::DType out_dtype, model::ParseDType(a.out_dtype == "f16"    ? "F16"
                                                                   : a.out_dtype == "bf16" ? "BF16"
                                                                                           : "F32"));

  ASSIGN_OR_RETURN(std::unique_ptr<Pretrainer> trainer, Pretrainer::Create(config, vocab, a.options, a.work_dir));
  std::cout << (trainer->resumed()             ? absl::StrCat("resumed at step ", trainer->step())
                : trainer->init_from().empty() ? std::string("fresh model")
                                               : absl::StrCat("model from ", trainer->init_from()))
            << ": " << config.num_hidden_layers << " layers, hidden " << config.hidden_size << ", "
            << config.num_attention_heads << " heads, FFN " << config.intermediate_size << ", vocab "
            << config.vocab_size << "; " << a.device << ", autocast " << (trainer->using_bf16() ? "bf16" : "off")
            << (a.options.device.is_cuda() ? ""
                : CpuHasFastBf16()         ? " (CPU has native bf16)"
                                           : " (CPU has no native bf16)")
            << "\n";

  ASSIGN_OR_RETURN(const PackedCorpus corpus,
                   LoadCorpus(a.corpus, vocab, trainer->tokenizer(), a.options.seq_len, a.threads));
  std::cout << "corpus: " << corpus.num_documents << " documents, " << corpus.num_tokens << " tokens, "
            << corpus.sequences.size() << " sequences of <= " << a.options.seq_len << " ([UNK] " << corpus.num_unk
            << ")\n"
            << std::flush;

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  const std::string log_path = a.work_dir + "/train_log.jsonl";
  std::error_code ec;
  std::filesystem::create_directories(a.work_dir, ec);  // a fresh run's checkpoint creates it only later
  std::ofstream log(log_path, std::ios::app);
  if (!log) return absl::PermissionDeniedError(absl::StrCat("cannot write ", log_path));
  RETURN_IF_ERROR(trainer->Train(
      corpus, a.report_every,
      [&](const StepReport& r) {
        std::printf("step %6lld/%lld  loss %.4f  masked acc %.3f  lr %.2e  %.0f tok/s  %.0f s\n",
                    static_cast<long long>(r.step), static_cast<long long>(r.total_steps), r.loss, r.accuracy,
                    r.learning_rate, r.tokens_per_second, r.elapsed_seconds);
        std::fflush(stdout);
        log << nlohmann::json{{"step", r.step},
                              {"total_steps", r.total_steps},
                              {"loss", r.loss},
                              {"accuracy", r.accuracy},
                              {"lr", r.learning_rate},
                              {"tokens_per_second", r.tokens_per_second},
                              {"seconds", r.elapsed_seconds}}
                   .dump()
            << "\n"
            << std::flush;
      },
      [] { return g_stop.load(); }));
  if (g_stop) {  // not an error, but the run is unfinished: no export, exit 130
    return absl::CancelledError(absl::StrCat("stopped by a signal at step ", trainer->step(), "; the checkpoint in ",
                                             a.work_dir, " resumes it"));
  }

  nlohmann::json summary = {{"steps", trainer->step()},
                            {"total_steps", trainer->total_steps()},
                            {"batch_size", a.options.batch_size},
                            {"seq_len", a.options.seq_len},
                            {"learning_rate", a.options.learning_rate},
                            {"init_range", a.options.init_range},
                            {"dropout", a.options.dropout},
                            {"seed", a.options.seed},
                            {"init_from", trainer->init_from()},
                            {"autocast", trainer->using_bf16() ? "bf16" : "off"},
                            {"lr_schedule", a.options.lr_schedule},
                            {"device", a.device},
                            {"cpu", CpuModel()},
                            {"threads", at::get_num_threads()},
                            {"corpus_documents", corpus.num_documents},
                            {"corpus_tokens", corpus.num_tokens},
                            {"parameters", trainer->encoder().NumParameters()}};
  if (!a.out.empty()) {
    RETURN_IF_ERROR(trainer->ExportHf(a.out, out_dtype));
    std::cout << "wrote " << a.out << " (" << a.out_dtype << ")\n";
  }
  if (!a.heldout.empty()) {
    ASSIGN_OR_RETURN(const PackedCorpus held_corpus,
                     LoadCorpus(a.heldout, vocab, trainer->tokenizer(), a.options.seq_len, a.threads));
    ASSIGN_OR_RETURN(const MlmEvaluation e,
                     EvaluateMlm(trainer->encoder(), trainer->head(), held_corpus,
                                 HeldOutMasking(trainer->tokenizer(), config), /*seed=*/1234, a.eval_sequences, 64));
    std::printf("held-out: masked-token accuracy %.4f (unigram baseline %.4f), loss %.4f, %lld masked\n", e.accuracy,
                e.unigram_accuracy, e.loss, static_cast<long long>(e.num_masked));
    summary["heldout"] = {{"documents", held_corpus.num_documents},
                          {"masked_tokens", e.num_masked},
                          {"accuracy", e.accuracy},
                          {"unigram_accuracy", e.unigram_accuracy},
                          {"loss", e.loss}};
  }
  // Read back the train-time total from the work dir's checkpoint.
  ASSIGN_OR_RETURN(const std::string state, ReadFileToString(a.work_dir + "/checkpoint/state.json"));
  summary["train_seconds"] = nlohmann::json::parse(state).at("train_seconds");
  const std::string summary_path = (a.out.empty() ? a.work_dir : a.out) + "/pretrain_summary.json";
  RETURN_IF_ERROR(WriteFileAtomically(summary_path, summary.dump(2) + "\n"));
  std::cout << "summary: " << summary_path << "\n";
  return absl::OkStatus();
}

struct EvalArgs {
  std::string model_dir, corpus;
  int64_t max_sequences = 0;
  int seq_len = 128;
  uint64_t seed = 1234;
};

absl::Status RunEval(const EvalArgs& a) {
  ASSIGN_OR_RETURN(model::LoadedModel m, model::LoadBertModel(a.model_dir, {.max_seq_len = a.seq_len}));
  ASSIGN_OR_RETURN(model::SafetensorsFile file, model::SafetensorsFile::Open(a.model_dir + "/model.safetensors"));
  ASSIGN_OR_RETURN(const MlmHead head, MlmHead::FromSafetensors(file, m.config, c10::Device(c10::kCPU)));
  ASSIGN_OR_RETURN(const std::vector<std::string> vocab, ReadVocab(a.model_dir + "/vocab.txt"));
  ASSIGN_OR_RETURN(const PackedCorpus corpus, LoadCorpus(a.corpus, vocab, *m.tokenizer, a.seq_len, 0));
  ASSIGN_OR_RETURN(const MlmEvaluation e, EvaluateMlm(*m.encoder, head, corpus, HeldOutMasking(*m.tokenizer, m.config),
                                                      a.seed, a.max_sequences, 64));
  std::printf("masked-token accuracy %.4f (unigram baseline %.4f), loss %.4f, %lld masked tokens\n", e.accuracy,
              e.unigram_accuracy, e.loss, static_cast<long long>(e.num_masked));
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  CLI::App app{"adapterd-pretrain: WordPiece vocabulary, MLM pretraining and evaluation of a BERT encoder"};
  app.require_subcommand(1);

  VocabArgs va;
  auto* vocab = app.add_subcommand("vocab", "build an uncased WordPiece vocabulary from corpus files");
  vocab->add_option("--corpus", va.corpus, "corpus files, one document per line")->required();
  vocab->add_option("--out", va.out, "vocab.txt to write")->required();
  vocab->add_option("--size", va.options.vocab_size, "vocabulary size")->capture_default_str();
  vocab->add_option("--min_word_frequency", va.options.min_word_frequency, "ignore rarer words")->capture_default_str();
  vocab->add_option("--min_pair_frequency", va.options.min_pair_frequency, "never merge rarer pairs")
      ->capture_default_str();
  vocab
      ->add_option("--min_char_frequency", va.options.min_char_frequency,
                   "non-ASCII characters rarer than this are left out (their words become [UNK])")
      ->capture_default_str();

  TrainArgs ta;
  auto* train = app.add_subcommand("train", "pretrain with masked language modelling (resumes from --work_dir)");
  train->add_option("--corpus", ta.corpus, "training corpus: text, one document per line, or a token-id file")
      ->required();
  train->add_option("--vocab", ta.vocab, "vocab.txt (adapterd-pretrain vocab)")->required();
  train->add_option("--work_dir", ta.work_dir, "checkpoints and the training log")->required();
  train->add_option("--out", ta.out, "HuggingFace BERT directory to write at the end");
  train->add_option("--heldout", ta.heldout, "held-out corpus for the final masked-token accuracy");
  train->add_option("--eval_sequences", ta.eval_sequences, "held-out sequences to evaluate (0 = all)")
      ->capture_default_str();
  train->add_option("--preset", ta.preset, "size preset: tiny, mini, small, base, large")->capture_default_str();
  train->add_option("--layers", ta.layers, "override num_hidden_layers");
  train->add_option("--hidden", ta.hidden, "override hidden_size (FFN 4x)");
  train->add_option("--heads", ta.heads, "override num_attention_heads");
  train->add_option("--intermediate", ta.intermediate, "override intermediate_size");
  train->add_option("--max_positions", ta.max_positions, "max_position_embeddings")->capture_default_str();
  train->add_option("--max_steps", ta.options.max_steps, "steps in the schedule (0: from --max_minutes)");
  train->add_option("--max_minutes", ta.options.max_minutes, "training-time budget in minutes");
  train->add_option("--batch_size", ta.options.batch_size, "sequences per step")->capture_default_str();
  train->add_option("--seq_len", ta.options.seq_len, "tokens per sequence")->capture_default_str();
  train->add_option("--lr", ta.options.learning_rate, "peak learning rate")->capture_default_str();
  train->add_option("--warmup", ta.options.warmup_fraction, "warmup fraction")->capture_default_str();
  train->add_option("--weight_decay", ta.options.weight_decay, "AdamW weight decay")->capture_default_str();
  train->add_option("--seed", ta.options.seed, "seed")->capture_default_str();
  train
      ->add_option("--dropout", ta.options.dropout,
                   "dropout while pretraining (negative: the config's 0.1; the exported config keeps 0.1)")
      ->capture_default_str();
  train
      ->add_option("--init_range", ta.options.init_range,
                   "std of the weights' normal initialisation (BERT: 0.02 at hidden 768)")
      ->capture_default_str();
  train->add_option("--checkpoint_every", ta.options.checkpoint_every_steps, "checkpoint every N steps")
      ->capture_default_str();
  train
      ->add_option("--autocast", ta.options.autocast,
                   "off, bf16, or auto (bf16 with CUDA or a CPU with amx_bf16/avx512_bf16)")
      ->capture_default_str();
  train->add_option("--device", ta.device, "cpu or cuda[:N]")->capture_default_str();
  train
      ->add_option("--lr_schedule", ta.options.lr_schedule,
                   "steps, or time: warmup and decay follow --max_minutes' clock, ending at it (a deadline)")
      ->capture_default_str();
  train->add_flag("--new_cycle", ta.options.new_cycle,
                  "continue the checkpoint in --work_dir with a new warmup+decay cycle of this budget");
  train->add_option("--init_from", ta.options.init_from,
                    "start a new work_dir from this HF BERT directory (same config and vocab) instead of "
                    "random weights, e.g. to continue the default model");
  train->add_option("--threads", ta.threads, "LibTorch intra-op threads (0 = one per hardware thread)");
  train->add_option("--out_dtype", ta.out_dtype, "f16, bf16 or f32 for --out")->capture_default_str();
  train->add_option("--report_every", ta.report_every, "log every N steps")->capture_default_str();

  EvalArgs ea;
  auto* eval = app.add_subcommand("eval", "held-out masked-token accuracy of a pretrained model directory");
  eval->add_option("--model_dir", ea.model_dir, "HF BERT directory with cls.predictions.* tensors")->required();
  eval->add_option("--corpus", ea.corpus, "held-out corpus: text, one document per line, or a token-id file")
      ->required();
  eval->add_option("--max_sequences", ea.max_sequences, "evaluate at most N sequences (0 = all)");
  eval->add_option("--seq_len", ea.seq_len, "tokens per sequence")->capture_default_str();
  eval->add_option("--seed", ea.seed, "masking seed")->capture_default_str();

  TokenizeArgs tk;
  auto* tokenize = app.add_subcommand("tokenize", "tokenize a text corpus into a token-id file for train/eval");
  tokenize->add_option("--corpus", tk.corpus, "text corpus, one document per line")->required();
  tokenize->add_option("--vocab", tk.vocab, "vocab.txt")->required();
  tokenize->add_option("--out", tk.out, "token-id file to write")->required();
  tokenize->add_option("--threads", tk.threads, "tokenizer threads (0 = one per hardware thread)")
      ->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  absl::Status status;
  if (*vocab)
    status = RunVocab(va);
  else if (*tokenize)
    status = RunTokenize(tk);
  else if (*train)
    status = RunTrain(ta);
  else
    status = RunEval(ea);
  if (!status.ok()) {
    std::cerr << "adapterd-pretrain: " << status << "\n";
    // 130 (interrupted, as a shell reports SIGINT): scripts stop there
    // instead of exporting an unfinished model.
    return status.code() == absl::StatusCode::kCancelled ? 130 : 1;
  }
  return 0;
}

}  // namespace
}  // namespace adapterd::pretrain

int main(int argc, char** argv) { return adapterd::pretrain::Main(argc, argv); }
