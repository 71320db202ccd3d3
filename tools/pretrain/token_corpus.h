// A pretraining corpus as WordPiece ids: tokenized once (on the machine that
// built the corpus), stored compactly, and packed into training sequences.
//
// Why a file of ids: a GPU machine is lent for minutes, and tokenizing a
// corpus of tens of millions of tokens on one thread there would spend a
// large share of them; the ids also travel smaller than the text does once
// compressed (docs/PERFORMANCE.md, "Pretraining on a lent GPU").
//
// File format (`.ids`, little-endian, written by WriteTokenIds):
//   bytes 0-7    magic "ADPTIDS1"
//   u32          bytes per id: 2 (vocabularies of up to 65,536 tokens) or 4
//   u32          vocabulary size
//   64 bytes     SHA-256 (lower-case hex) of the vocabulary (its tokens
//                joined by '\n', one '\n' after the last: vocab.txt's
//                bytes), so that ids are never read against another one
//   u64          number of documents
//   u64          number of ids (documents' pieces, separators excluded)
//   ids          every document's pieces, each document followed by the id
//                0 ([PAD], which a tokenized document never holds)
// Reading checks every field against the file's length, the vocabulary and
// the ids' range (< vocabulary size, no [PAD] inside a document): a
// truncated, corrupt or mismatched file is DATA_LOSS or FAILED_PRECONDITION,
// never undefined ids reaching the encoder.
//
// Thread safety: free functions over values; TokenizeDocuments uses up to
// `threads` threads internally and only reads the tokenizer (BertTokenizer's
// const methods are thread-safe).
#ifndef ADAPTERD_TOOLS_PRETRAIN_TOKEN_CORPUS_H_
#define ADAPTERD_TOOLS_PRETRAIN_TOKEN_CORPUS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/model/tokenizer.h"

namespace adapterd::pretrain {

inline constexpr std::string_view kTokenIdsMagic = "ADPTIDS1";

// Documents as WordPiece ids (no special tokens): document i is
// ids[offsets[i], offsets[i + 1]). Documents that tokenize to nothing are
// left out.
struct TokenizedDocuments {
  std::vector<int32_t> ids;
  std::vector<int64_t> offsets = {0};
  int64_t num_unk = 0;  // [UNK] pieces

  int64_t num_documents() const { return static_cast<int64_t>(offsets.size()) - 1; }
};

// Tokenizes `documents` with `tokenizer` (its max_seq_len is ignored) on up
// to `threads` threads (<= 0: one per hardware thread). The result does not
// depend on the thread count.
TokenizedDocuments TokenizeDocuments(const std::vector<std::string>& documents, const model::BertTokenizer& tokenizer,
                                     int threads);

// SHA-256 (hex) of a vocabulary as vocab.txt stores it.
std::string VocabularyDigest(const std::vector<std::string>& vocab);

// True when the file at `path` starts with kTokenIdsMagic (false when it is
// text, or unreadable: reading it then reports why).
bool IsTokenIdsFile(const std::string& path);

// Writes `docs` for `vocab` (atomically: beside, then renamed). Ids must be
// in [1, vocab size).
absl::Status WriteTokenIds(const std::string& path, const TokenizedDocuments& docs,
                           const std::vector<std::string>& vocab);

// Reads a file written by WriteTokenIds for the same `vocab` (see the format's
// checks above); num_unk is counted with `unk_id`.
absl::StatusOr<TokenizedDocuments> ReadTokenIds(const std::string& path, const std::vector<std::string>& vocab,
                                                int32_t unk_id);

}  // namespace adapterd::pretrain

#endif  // ADAPTERD_TOOLS_PRETRAIN_TOKEN_CORPUS_H_
