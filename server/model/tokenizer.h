// BERT WordPiece tokenizer with HuggingFace BertTokenizer semantics.
//
// Pipeline (BasicTokenizer then WordpieceTokenizer, as in HF transformers):
//   0. when not lower-casing, NFC-normalise (HF does; lower-casing's NFD
//      makes it moot otherwise);
//   1. clean: drop NUL, U+FFFD and control characters (every Unicode C*
//      category, as HF's _is_control, except \t \n \r, which are
//      whitespace); map every whitespace character (Zs, \t \n \r,
//      U+2028/U+2029) to ' ';
//   2. surround CJK ideographs with spaces;
//   3. split on whitespace;
//   4. if do_lower_case: lowercase (word-final capital sigma becomes final
//      sigma, as Python's lower()), then NFD and drop combining marks (Mn);
//   5. split on punctuation: ASCII 33-47, 58-64, 91-96, 123-126 and Unicode P*;
//   6. WordPiece: greedy longest match with "##" continuations. A word of more
//      than 100 code points, or one with any unmatched piece, becomes [UNK].
// Invalid UTF-8 bytes are treated as U+FFFD and therefore dropped; the API
// layer rejects invalid UTF-8 before it gets here.
//
// Offsets (TokenizeWithOffsets): every piece keeps its span in the original
// text, in Unicode code points, through every step above; an invalid byte
// counts as one code point.
//
// Encoding: [CLS] a [SEP] (b [SEP]); token type ids 0 for a (and its
// specials), 1 for b and its [SEP]. Sequences longer than max_seq_len are
// truncated: for single texts the tail of a; for pairs "longest_first" (remove
// one token at a time from the end of the longer sequence; on a tie from b),
// as HF does.
//
// Thread safety: immutable after creation; all methods are const and safe
// to call concurrently.
#ifndef ADAPTERD_SERVER_MODEL_TOKENIZER_H_
#define ADAPTERD_SERVER_MODEL_TOKENIZER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

namespace adapterd::model {

struct TokenizerOptions {
  bool do_lower_case = true;
  // Longest encoded sequence, specials included. Must be >= 3 for pairs
  // ([CLS] [SEP] [SEP]) and >= 2 for single texts.
  int max_seq_len = 128;
};

// One encoded sequence (specials included, no padding).
struct Encoding {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> token_type_ids;
  // Number of word pieces removed by truncation (0 when it fit).
  int num_truncated = 0;
};

// A padded batch, row-major [batch, seq_len], seq_len = the longest row.
// Padding positions have input id [PAD], type 0 and attention mask 0.
struct EncodedBatch {
  int64_t batch = 0;
  int64_t seq_len = 0;
  std::vector<int64_t> input_ids;
  std::vector<int64_t> token_type_ids;
  std::vector<int64_t> attention_mask;
  // Real (unpadded) length of each row.
  std::vector<int64_t> lengths;
  // Pieces removed by truncation, per row (EncodeBatch only).
  std::vector<int> num_truncated;
};

// Pads `rows` rows of token ids into one EncodedBatch: the one padding every
// batch in the project goes through (the tokenizer's EncodeBatch, the
// trainer's batches, the serving batcher's, pretraining's). `ids_of(i)` and
// `types_of(i)` return row i's token ids and token types as ranges of
// integers (int32 or int64); an empty types range means all 0.
template <typename IdsOf, typename TypesOf>
EncodedBatch PadRows(size_t rows, int64_t pad_id, IdsOf&& ids_of, TypesOf&& types_of) {
  EncodedBatch batch;
  batch.batch = static_cast<int64_t>(rows);
  for (size_t r = 0; r < rows; ++r) batch.seq_len = std::max<int64_t>(batch.seq_len, std::ssize(ids_of(r)));
  const size_t width = static_cast<size_t>(batch.seq_len), cells = rows * width;
  batch.input_ids.assign(cells, pad_id);
  batch.token_type_ids.assign(cells, 0);
  batch.attention_mask.assign(cells, 0);
  batch.lengths.reserve(rows);
  for (size_t r = 0; r < rows; ++r) {
    const auto& ids = ids_of(r);
    const auto& types = types_of(r);
    const auto at = static_cast<std::ptrdiff_t>(r * width);
    std::copy(ids.begin(), ids.end(), batch.input_ids.begin() + at);
    std::copy(types.begin(), types.end(), batch.token_type_ids.begin() + at);
    std::fill_n(batch.attention_mask.begin() + at, std::ssize(ids), 1);
    batch.lengths.push_back(std::ssize(ids));
  }
  return batch;
}

// One word piece of a text and where it came from.
struct TokenPiece {
  int32_t id = 0;
  // [start, end): the Unicode code points of the original text the piece
  // covers (Python's text[start:end]), through cleaning, lower-casing,
  // accent stripping and normalisation: a piece whose word lost a combining
  // mark still covers it, and a character composed from several covers them
  // all. [UNK] covers its whole word. Dropped characters between words
  // (whitespace, controls) belong to no piece.
  int32_t start = 0;
  int32_t end = 0;
  // 0-based index of the piece's word: a run BasicTokenize returns as one
  // word (whitespace- and punctuation-split; each CJK ideograph alone).
  int32_t word = 0;
};

// Steps 1-5 of the pipeline (HF BasicTokenizer): the words WordPiece would
// see, in order, as UTF-8. Used by the vocabulary builder, so that a built
// vocabulary covers exactly what the tokenizer will look up.
std::vector<std::string> BasicTokenize(std::string_view text, bool do_lower_case);

class BertTokenizer {
 public:
  // Reads a vocab.txt (one token per line, id = line number; a trailing
  // '\r' is stripped). Errors: the file's I/O error; INVALID_ARGUMENT for an
  // empty vocab, a duplicate token (names it and its line), or a missing
  // special token ([PAD] [UNK] [CLS] [SEP] [MASK]).
  static absl::StatusOr<std::unique_ptr<BertTokenizer>> FromVocabFile(const std::string& path,
                                                                      const TokenizerOptions& options);
  // Same from tokens in id order.
  static absl::StatusOr<std::unique_ptr<BertTokenizer>> FromTokens(std::vector<std::string> tokens,
                                                                   const TokenizerOptions& options);

  // Steps 1-6 above: word pieces as strings ("[UNK]" for unknown words).
  std::vector<std::string> Tokenize(std::string_view text) const;
  // Tokenize() mapped to ids.
  std::vector<int32_t> TokenizeToIds(std::string_view text) const;
  // TokenizeToIds() with each id's span in `text` and its word (TokenPiece):
  // the same ids, in the same order.
  std::vector<TokenPiece> TokenizeWithOffsets(std::string_view text) const;

  // Encodes one text, or a pair when `text_pair` is set, with specials and
  // truncation to options().max_seq_len.
  Encoding Encode(std::string_view text, std::optional<std::string_view> text_pair = std::nullopt) const;

  // Encodes rows and pads them to the longest. `text_pairs` is empty (single
  // texts) or the same size as `texts`.
  EncodedBatch EncodeBatch(std::span<const std::string> texts, std::span<const std::string> text_pairs = {}) const;

  // Id of `token`, if present.
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // Token of `id`; "[UNK]"'s text for an out-of-range id.
  const std::string& IdToToken(int32_t id) const;

  int32_t pad_id() const { return pad_id_; }
  int32_t unk_id() const { return unk_id_; }
  int32_t cls_id() const { return cls_id_; }
  int32_t sep_id() const { return sep_id_; }
  int32_t mask_id() const { return mask_id_; }
  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  const std::vector<std::string>& tokens() const { return tokens_; }
  const TokenizerOptions& options() const { return options_; }

 private:
  BertTokenizer() = default;

  TokenizerOptions options_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  int32_t pad_id_ = 0, unk_id_ = 0, cls_id_ = 0, sep_id_ = 0, mask_id_ = 0;
};

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_TOKENIZER_H_
