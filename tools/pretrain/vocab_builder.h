// Builds an uncased BERT WordPiece vocabulary from a corpus.
//
// The vocabulary, in id order:
//   1. the special tokens [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4);
//   2. the alphabet: every printable ASCII character, plus each other
//      character seen at least `min_char_frequency` times (most frequent
//      first, at most `max_alphabet` in total), each as a word-initial piece
//      "c" and a continuation "##c";
//   3. pieces learnt by merging, in the order they were learnt.
// Because every ASCII character is a piece in both forms, the tokenizer's
// greedy longest match can always fall back to single characters: no ASCII
// word is ever [UNK].
//
// Learning (a WordPiece-style likelihood criterion, Schuster & Nakajima
// 2012): words are counted after the tokenizer's own basic tokenisation
// (BasicTokenize, lower-cased), so the vocabulary covers exactly what the
// tokenizer will look up; words seen fewer than `min_word_frequency` times
// are ignored. Each word starts as its characters; repeatedly, the adjacent
// pair (a, b) whose merge most increases the corpus log-likelihood under a
// unigram model of pieces is merged into a new piece. The gain is estimated
// as
//     c(ab) * log( c(ab) * T / (c(a) * c(b)) )
// where c() are current piece counts (weighted by word frequency) and T is
// the initial number of pieces (held fixed, which keeps the criterion a
// pure function of counts). Unlike BPE's raw pair frequency, it prefers
// pairs that occur together more than chance; unlike the plain ratio
// c(ab)/(c(a)c(b)), it does not favour rare pairs. Pairs seen fewer than
// `min_pair_frequency` times are never merged. Ties break on the smaller
// (a, b) ids, so the result is deterministic.
//
// Thread safety: VocabBuilder is single-threaded; build one per thread.
#ifndef ADAPTERD_TOOLS_PRETRAIN_VOCAB_BUILDER_H_
#define ADAPTERD_TOOLS_PRETRAIN_VOCAB_BUILDER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace adapterd::pretrain {

struct VocabOptions {
  int vocab_size = 8192;  // total, specials and alphabet included
  int64_t min_word_frequency = 2;
  int64_t min_pair_frequency = 2;
  int64_t min_char_frequency = 20;
  int max_alphabet = 400;  // characters (each gives two pieces)
};

inline constexpr std::string_view kSpecialTokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

class VocabBuilder {
 public:
  // Counts the words of one text (a line or a document).
  void AddText(std::string_view text);
  // Counts one already basic-tokenised word `count` times (tests).
  void AddWord(std::string_view word, int64_t count = 1);

  int64_t num_distinct_words() const { return static_cast<int64_t>(word_counts_.size()); }

  // The vocabulary (see above). INVALID_ARGUMENT when vocab_size cannot even
  // hold the specials and the ASCII alphabet. Fewer than vocab_size tokens
  // are returned when no pair qualifies any more.
  absl::StatusOr<std::vector<std::string>> Build(const VocabOptions& options) const;

 private:
  absl::flat_hash_map<std::string, int64_t> word_counts_;
};

}  // namespace adapterd::pretrain

#endif  // ADAPTERD_TOOLS_PRETRAIN_VOCAB_BUILDER_H_
