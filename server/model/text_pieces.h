// A text's word pieces with where each came from, for the kinds whose head
// reads every token (token classification, extractive QA): the trainer
// builds its rows from these and serving builds Predict's, so a task sees
// the same pieces, words and windows in both. No LibTorch
// (adapterd::model_formats).
//
// Thread safety: pure functions of their arguments.
#ifndef ADAPTERD_SERVER_MODEL_TEXT_PIECES_H_
#define ADAPTERD_SERVER_MODEL_TEXT_PIECES_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/model/task_kinds.h"
#include "server/model/tokenizer.h"

namespace adapterd::model {

using Span = std::pair<int32_t, int32_t>;  // [start, end) in code points

struct TextPieces {
  std::vector<int32_t> ids;  // the pieces, in order
  std::vector<Span> spans;   // each piece's span in the text
  std::vector<int32_t> word_of_piece;
  // Per word: its span in the text, and its first piece (-1 for a word
  // that tokenised to nothing: only characters the tokenizer drops).
  std::vector<Span> word_spans;
  std::vector<int32_t> first_piece;
};

// The tokenizer's words and pieces of `text` (TokenizeWithOffsets).
TextPieces PiecesOfText(const BertTokenizer& tokenizer, std::string_view text);

// Pre-split words (a token classification dataset's `tokens`): each word is
// tokenised on its own, so its pieces are its own even where the tokenizer
// would split it further (punctuation). Spans are into JoinWords(words).
TextPieces PiecesOfWords(const BertTokenizer& tokenizer, std::span<const std::string> words);
// The words joined by single spaces: the text PiecesOfWords' spans index.
std::string JoinWords(std::span<const std::string> words);

// The pieces [first, last] (inclusive) that code points [start, end)
// overlap; nullopt when none does (the span holds only dropped characters,
// or lies past the text).
std::optional<std::pair<int32_t, int32_t>> PiecesCovering(const TextPieces& pieces, int32_t start, int32_t end);

// Code points [start, end) of `text` (clamped to it), as UTF-8.
std::string CodePointSubstr(std::string_view text, int32_t start, int32_t end);

// Token classification's windows over a text's pieces: [CLS] a stretch
// [SEP], at most `max_seq_len` tokens, TaggingStride apart. Both stop after
// max_windows + 1 windows (SlidingWindows), so a caller that bounds them
// sees the excess without building every window.
std::vector<SlidingWindow> TaggingWindows(const BertTokenizer& tokenizer, const TextPieces& text, int32_t max_seq_len,
                                          size_t max_windows = SIZE_MAX);
// Extractive QA's windows over a context's pieces for `question`: the
// task's windowing (`qa`), at most `max_seq_len` tokens long.
std::vector<SlidingWindow> QaWindows(const BertTokenizer& tokenizer, std::string_view question,
                                     const TextPieces& context, const QaWindowing& qa, int32_t max_seq_len,
                                     size_t max_windows = SIZE_MAX);

// Context tokens between the starts of two windows when a job does not say:
// a third of the window (run_squad's 128 of 384).
inline int32_t DefaultDocStride(int32_t max_seq_len) { return std::max(1, max_seq_len / 3); }
// The smallest doc_stride a job or an imported adapter may set: an eighth of
// the window, so that a context's windows are at most 8 per window's worth
// of its tokens (a stride of 1 would make one per token).
inline int32_t MinDocStride(int32_t max_seq_len) { return std::max(1, max_seq_len / 8); }
// Token classification's windows over a long text start half a window
// apart, so every token has a window with context on both sides.
inline int32_t TaggingStride(int32_t max_seq_len) { return std::max(1, (max_seq_len - 2) / 2); }

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_TEXT_PIECES_H_
