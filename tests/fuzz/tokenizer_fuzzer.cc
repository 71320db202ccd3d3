// Fuzzes the WordPiece tokenizer (server/model/tokenizer.h) with arbitrary
// bytes, invalid UTF-8 included: every predicted or trained text reaches it.
//
// Input: byte 0 picks the tokenizer (bits 0-2: max_seq_len from kMaxLens,
// bit 3: lower-casing, bit 4: the project's real vocabulary or a tiny one with
// few words, so that both matches and [UNK] are common); byte 1 splits the
// rest into text a and text b for pairs.
//
// Invariants: ids within the vocabulary; [CLS] a [SEP] (b [SEP]) layout with
// type ids 0 then 1; length <= max(max_seq_len, number of specials); the kept
// pieces are prefixes of TokenizeToIds and the truncation count adds up;
// pairs truncate "longest_first" exactly as documented (checked in closed
// form); EncodeBatch pads rows consistently with Encode; BasicTokenize words
// are non-empty, valid UTF-8 and contain no whitespace; TokenizeWithOffsets
// gives TokenizeToIds' ids with spans inside the text, in order, never
// overlapping, and word numbers that start at 0 and step by 0 or 1.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <utf8proc.h>

#include "common/utf8.h"
#include "server/model/tokenizer.h"
#include "tests/fuzz/fuzz_check.h"

#ifndef ADAPTERD_FUZZ_VOCAB
#error "ADAPTERD_FUZZ_VOCAB (a vocab.txt path) must be defined by the build"
#endif

namespace adapterd::model {
namespace {

constexpr int kMaxLens[8] = {2, 3, 4, 5, 8, 16, 64, 512};

// The vocabulary of tests/model/tokenizer_test.cc.
std::vector<std::string> TinyVocab() {
  return {"[PAD]",
          "[UNK]",
          "[CLS]",
          "[SEP]",
          "[MASK]",
          "the",
          "quick",
          "brown",
          "fox",
          "jump",
          "##s",
          "##ed",
          "##ing",
          "over",
          "lazy",
          "dog",
          "un",
          "##aff",
          "##able",
          "hello",
          "world",
          "cafe",
          "caf\u00e9",
          "naive",
          "Hello",
          "The",
          ".",
          ",",
          "!",
          "?",
          "'",
          "-",
          "[",
          "]",
          "$",
          "\u201c",
          "\u201d",
          "\u2014",
          "\u00bf",
          "\u4e2d",
          "\u56fd",
          "\u4eba",
          "a",
          "##a",
          "##b",
          "ab",
          "cl",
          "don",
          "t",
          "4",
          "##2",
          "\u03bf\u03b4\u03bf\u03c2",
          "\u03c3\u03b1",
          "he",
          "##llo",
          "^",
          "`"};
}

struct Tokenizers {
  // [vocab][lower][max_len index]
  std::unique_ptr<BertTokenizer> t[2][2][8];
};

const Tokenizers& Get() {
  static const Tokenizers* const tokenizers = [] {
    auto* out = new Tokenizers();
    for (int vocab = 0; vocab < 2; ++vocab) {
      for (int lower = 0; lower < 2; ++lower) {
        for (int len = 0; len < 8; ++len) {
          TokenizerOptions options;
          options.do_lower_case = lower != 0;
          options.max_seq_len = kMaxLens[len];
          absl::StatusOr<std::unique_ptr<BertTokenizer>> t =
              vocab == 0 ? BertTokenizer::FromTokens(TinyVocab(), options)
                         : BertTokenizer::FromVocabFile(ADAPTERD_FUZZ_VOCAB, options);
          if (!t.ok()) {
            std::fprintf(stderr, "tokenizer_fuzzer: cannot build a tokenizer: %s\n", t.status().ToString().c_str());
            std::abort();
          }
          out->t[vocab][lower][len] = *std::move(t);
        }
      }
    }
    return out;
  }();
  return *tokenizers;
}

void CheckIds(const BertTokenizer& tok, const std::vector<int32_t>& ids, const char* what) {
  for (int32_t id : ids) {
    FUZZ_CHECK(id >= 0 && id < tok.vocab_size()) << what << ": id " << id << " out of range";
  }
}

// Pieces kept of each text after "longest_first" truncation to `budget`.
std::pair<size_t, size_t> ExpectedPairLengths(size_t la, size_t lb, size_t budget) {
  if (la + lb <= budget) return {la, lb};
  if (lb <= budget / 2) return {budget - lb, lb};
  if (la <= budget / 2) return {la, budget - la};
  return {(budget + 1) / 2, budget / 2};  // ties remove from b
}

// Code points of `text` as the tokenizer counts them: a byte that starts no
// valid UTF-8 sequence counts as one.
int32_t CodePointCount(std::string_view text) {
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  int32_t count = 0;
  for (size_t pos = 0; pos < text.size(); ++count) {
    utf8proc_int32_t cp;
    const utf8proc_ssize_t n = utf8proc_iterate(bytes + pos, static_cast<utf8proc_ssize_t>(text.size() - pos), &cp);
    pos += n > 0 ? static_cast<size_t>(n) : 1;
  }
  return count;
}

void CheckOffsets(const BertTokenizer& tok, std::string_view text, const std::vector<int32_t>& ids) {
  const std::vector<TokenPiece> pieces = tok.TokenizeWithOffsets(text);
  FUZZ_CHECK(pieces.size() == ids.size())
      << "TokenizeWithOffsets gave " << pieces.size() << " pieces, not " << ids.size();
  const int32_t length = CodePointCount(text);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const TokenPiece& p = pieces[i];
    FUZZ_CHECK(p.id == ids[i]) << "piece " << i << " has id " << p.id << ", not " << ids[i];
    FUZZ_CHECK(0 <= p.start && p.start < p.end && p.end <= length)
        << "piece " << i << " spans [" << p.start << ", " << p.end << ") of " << length;
    if (i == 0) {
      FUZZ_CHECK(p.word == 0) << "the first piece's word is " << p.word;
    } else {
      FUZZ_CHECK(p.start >= pieces[i - 1].end) << "piece " << i << " overlaps the one before";
      FUZZ_CHECK(p.word == pieces[i - 1].word || p.word == pieces[i - 1].word + 1) << "piece " << i << "'s word";
    }
  }
}

void CheckSingle(const BertTokenizer& tok, std::string_view text) {
  const std::vector<int32_t> pieces = tok.TokenizeToIds(text);
  CheckIds(tok, pieces, "TokenizeToIds");
  CheckOffsets(tok, text, pieces);
  const Encoding e = tok.Encode(text);
  const size_t max_len = static_cast<size_t>(tok.options().max_seq_len);
  const size_t n = e.input_ids.size();
  CheckIds(tok, e.input_ids, "Encode");
  FUZZ_CHECK(n >= 2 && n <= std::max<size_t>(max_len, 2)) << "length " << n << " for max " << max_len;
  FUZZ_CHECK(e.token_type_ids.size() == n) << "type ids size";
  FUZZ_CHECK(std::all_of(e.token_type_ids.begin(), e.token_type_ids.end(), [](int32_t t) { return t == 0; }))
      << "single text with a type id other than 0";
  FUZZ_CHECK(e.input_ids.front() == tok.cls_id() && e.input_ids.back() == tok.sep_id()) << "missing [CLS]/[SEP]";
  const size_t kept = n - 2;
  FUZZ_CHECK(e.num_truncated >= 0 && kept + static_cast<size_t>(e.num_truncated) == pieces.size())
      << "kept " << kept << " + truncated " << e.num_truncated << " != " << pieces.size();
  FUZZ_CHECK(e.num_truncated == 0 || n == std::max<size_t>(max_len, 2)) << "truncated although there was room";
  FUZZ_CHECK(std::equal(pieces.begin(), pieces.begin() + static_cast<ptrdiff_t>(kept), e.input_ids.begin() + 1))
      << "kept pieces are not a prefix of the text's pieces";
}

void CheckPair(const BertTokenizer& tok, std::string_view a, std::string_view b) {
  const std::vector<int32_t> pa = tok.TokenizeToIds(a);
  const std::vector<int32_t> pb = tok.TokenizeToIds(b);
  const Encoding e = tok.Encode(a, b);
  const size_t max_len = static_cast<size_t>(tok.options().max_seq_len);
  const size_t n = e.input_ids.size();
  CheckIds(tok, e.input_ids, "Encode(pair)");
  FUZZ_CHECK(n >= 3 && n <= std::max<size_t>(max_len, 3)) << "pair length " << n << " for max " << max_len;
  FUZZ_CHECK(e.token_type_ids.size() == n) << "pair type ids size";
  // Layout: [CLS] a [SEP] b [SEP], types 0...0 1...1.
  size_t zeros = 0;
  while (zeros < n && e.token_type_ids[zeros] == 0) ++zeros;
  for (size_t i = zeros; i < n; ++i) FUZZ_CHECK(e.token_type_ids[i] == 1) << "type ids not 0* 1*";
  FUZZ_CHECK(zeros >= 2 && n - zeros >= 1) << "pair segments too short";
  FUZZ_CHECK(e.input_ids[0] == tok.cls_id() && e.input_ids[zeros - 1] == tok.sep_id() &&
             e.input_ids[n - 1] == tok.sep_id())
      << "pair specials misplaced";
  const size_t ka = zeros - 2, kb = n - zeros - 1;
  const size_t budget = max_len > 3 ? max_len - 3 : 0;
  const auto [want_a, want_b] = ExpectedPairLengths(pa.size(), pb.size(), budget);
  FUZZ_CHECK(ka == want_a && kb == want_b)
      << "longest_first kept (" << ka << ", " << kb << ") of (" << pa.size() << ", " << pb.size() << ") with budget "
      << budget << ", expected (" << want_a << ", " << want_b << ")";
  FUZZ_CHECK(static_cast<size_t>(e.num_truncated) == pa.size() + pb.size() - ka - kb) << "pair truncation count";
  FUZZ_CHECK(std::equal(pa.begin(), pa.begin() + static_cast<ptrdiff_t>(ka), e.input_ids.begin() + 1) &&
             std::equal(pb.begin(), pb.begin() + static_cast<ptrdiff_t>(kb),
                        e.input_ids.begin() + static_cast<ptrdiff_t>(zeros)))
      << "pair pieces are not prefixes";
}

void CheckBatch(const BertTokenizer& tok, std::string_view a, std::string_view b) {
  const std::vector<std::string> texts = {std::string(a), std::string(b)};
  const std::vector<std::string> pairs = {std::string(b), std::string(a)};
  const bool with_pairs = tok.options().max_seq_len >= 3;
  const EncodedBatch batch = with_pairs ? tok.EncodeBatch(texts, pairs) : tok.EncodeBatch(texts);
  FUZZ_CHECK(batch.batch == 2 && batch.lengths.size() == 2 && batch.num_truncated.size() == 2) << "batch rows";
  const size_t cells = static_cast<size_t>(batch.batch * batch.seq_len);
  FUZZ_CHECK(batch.input_ids.size() == cells && batch.token_type_ids.size() == cells &&
             batch.attention_mask.size() == cells)
      << "batch tensor sizes";
  for (size_t r = 0; r < 2; ++r) {
    const Encoding e = with_pairs ? tok.Encode(texts[r], pairs[r]) : tok.Encode(texts[r]);
    FUZZ_CHECK(batch.lengths[r] == static_cast<int64_t>(e.input_ids.size()) &&
               batch.num_truncated[r] == e.num_truncated)
        << "batch row " << r << " differs from Encode";
    for (int64_t t = 0; t < batch.seq_len; ++t) {
      const size_t cell = r * static_cast<size_t>(batch.seq_len) + static_cast<size_t>(t);
      const bool real = t < batch.lengths[r];
      FUZZ_CHECK(batch.attention_mask[cell] == (real ? 1 : 0)) << "attention mask";
      FUZZ_CHECK(batch.input_ids[cell] == (real ? e.input_ids[static_cast<size_t>(t)] : tok.pad_id())) << "batch ids";
    }
  }
}

void CheckBasic(std::string_view text, bool lower) {
  for (const std::string& word : BasicTokenize(text, lower)) {
    FUZZ_CHECK(!word.empty()) << "empty word";
    FUZZ_CHECK(IsValidUtf8(word)) << "word is not valid UTF-8";
    FUZZ_CHECK(word.find_first_of(" \t\n\r") == std::string::npos) << "word holds whitespace";
  }
}

}  // namespace
}  // namespace adapterd::model

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  (void)adapterd::model::Get();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace adapterd::model;
  if (size < 2) return 0;
  const uint8_t config = data[0];
  const std::string_view rest = adapterd::fuzz::AsStringView(data + 2, size - 2);
  const size_t split = rest.size() * data[1] / 256;
  const std::string_view a = rest.substr(0, split), b = rest.substr(split);
  const bool lower = (config & 8) != 0;
  const BertTokenizer& tok = *Get().t[(config >> 4) & 1][lower ? 1 : 0][config & 7];

  CheckBasic(rest, lower);
  CheckSingle(tok, rest);
  if (tok.options().max_seq_len >= 3) CheckPair(tok, a, b);
  CheckBatch(tok, a, b);
  return 0;
}
