#include "tools/pretrain/token_corpus.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace adapterd::pretrain {
namespace {

constexpr size_t kDigestBytes = 64;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + kDigestBytes + 8 + 8;

template <typename T>
void Put(std::string& out, T value) {
  unsigned char bytes[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) bytes[i] = static_cast<unsigned char>((value >> (8 * i)) & 0xFF);
  out.append(reinterpret_cast<const char*>(bytes), sizeof(T));
}

template <typename T>
T Get(const std::string& in, size_t at) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<T>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  }
  return value;
}

}  // namespace

TokenizedDocuments TokenizeDocuments(const std::vector<std::string>& documents, const model::BertTokenizer& tokenizer,
                                     int threads) {
  const size_t n = documents.size();
  size_t workers = threads > 0 ? static_cast<size_t>(threads) : std::max(1u, std::thread::hardware_concurrency());
  workers = std::max<size_t>(1, std::min(workers, n / 64 + 1));
  // Contiguous shares, tokenized apart and concatenated in order: the same
  // result for any thread count.
  std::vector<TokenizedDocuments> parts(workers);
  auto run = [&](size_t w) {
    TokenizedDocuments& part = parts[w];
    for (size_t i = n * w / workers; i < n * (w + 1) / workers; ++i) {
      const std::vector<int32_t> ids = tokenizer.TokenizeToIds(documents[i]);
      if (ids.empty()) continue;
      part.num_unk += std::count(ids.begin(), ids.end(), tokenizer.unk_id());
      part.ids.insert(part.ids.end(), ids.begin(), ids.end());
      part.offsets.push_back(static_cast<int64_t>(part.ids.size()));
    }
  };
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers; ++w) pool.emplace_back(run, w);
  run(0);
  for (std::thread& t : pool) t.join();

  TokenizedDocuments out = std::move(parts[0]);
  for (size_t w = 1; w < workers; ++w) {
    const int64_t base = static_cast<int64_t>(out.ids.size());
    out.ids.insert(out.ids.end(), parts[w].ids.begin(), parts[w].ids.end());
    for (size_t i = 1; i < parts[w].offsets.size(); ++i) out.offsets.push_back(base + parts[w].offsets[i]);
    out.num_unk += parts[w].num_unk;
  }
  return out;
}

std::string VocabularyDigest(const std::vector<std::string>& vocab) {
  return Sha256Hex(absl::StrJoin(vocab, "\n") + "\n");
}

bool IsTokenIdsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  return in.read(magic, sizeof(magic)) && std::string_view(magic, sizeof(magic)) == kTokenIdsMagic;
}

absl::Status WriteTokenIds(const std::string& path, const TokenizedDocuments& docs,
                           const std::vector<std::string>& vocab) {
  const uint32_t width = vocab.size() <= 65536 ? 2 : 4;
  std::string out(kTokenIdsMagic);
  Put<uint32_t>(out, width);
  Put<uint32_t>(out, static_cast<uint32_t>(vocab.size()));
  out += VocabularyDigest(vocab);
  Put<uint64_t>(out, static_cast<uint64_t>(docs.num_documents()));
  Put<uint64_t>(out, static_cast<uint64_t>(docs.ids.size()));
  out.reserve(out.size() + (docs.ids.size() + static_cast<size_t>(docs.num_documents())) * width);
  for (int64_t d = 0; d < docs.num_documents(); ++d) {
    for (int64_t i = docs.offsets[static_cast<size_t>(d)]; i < docs.offsets[static_cast<size_t>(d) + 1]; ++i) {
      const int32_t id = docs.ids[static_cast<size_t>(i)];
      if (id <= 0 || static_cast<size_t>(id) >= vocab.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("id ", id, " of document ", d, " is outside [1, ", vocab.size(), ")"));
      }
      width == 2 ? Put<uint16_t>(out, static_cast<uint16_t>(id)) : Put<uint32_t>(out, static_cast<uint32_t>(id));
    }
    width == 2 ? Put<uint16_t>(out, 0) : Put<uint32_t>(out, 0);
  }
  return WriteFileAtomically(path, out);
}

absl::StatusOr<TokenizedDocuments> ReadTokenIds(const std::string& path, const std::vector<std::string>& vocab,
                                                int32_t unk_id) {
  ASSIGN_OR_RETURN(const std::string in, ReadFileToString(path));
  auto corrupt = [&](absl::string_view why) { return absl::DataLossError(absl::StrCat(path, ": ", why)); };
  if (in.size() < kHeaderBytes || std::string_view(in).substr(0, 8) != kTokenIdsMagic) {
    return corrupt("not a token-id corpus (adapterd-pretrain tokenize), or truncated in its header");
  }
  const uint32_t width = Get<uint32_t>(in, 8);
  const uint32_t vocab_size = Get<uint32_t>(in, 12);
  const std::string digest = in.substr(16, kDigestBytes);
  const uint64_t num_documents = Get<uint64_t>(in, 16 + kDigestBytes);
  const uint64_t num_ids = Get<uint64_t>(in, 24 + kDigestBytes);
  if (width != 2 && width != 4) return corrupt(absl::StrCat("bytes per id is ", width, ", not 2 or 4"));
  if (vocab_size != vocab.size() || digest != VocabularyDigest(vocab)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " was tokenized with another vocabulary (", vocab_size,
                                                      " tokens, sha256 ", digest, ") than the one given (",
                                                      vocab.size(), " tokens, sha256 ", VocabularyDigest(vocab), ")"));
  }
  if (num_ids > (in.size() - kHeaderBytes) / width || (in.size() - kHeaderBytes) != (num_ids + num_documents) * width) {
    return corrupt(absl::StrCat("its length does not match its header (", num_documents, " documents, ", num_ids,
                                " ids of ", width, " bytes)"));
  }
  TokenizedDocuments docs;
  docs.ids.reserve(num_ids);
  docs.offsets.reserve(num_documents + 1);
  for (size_t at = kHeaderBytes; at < in.size(); at += width) {
    const uint32_t id = width == 2 ? Get<uint16_t>(in, at) : Get<uint32_t>(in, at);
    if (id == 0) {
      if (docs.offsets.back() == static_cast<int64_t>(docs.ids.size())) return corrupt("an empty document");
      docs.offsets.push_back(static_cast<int64_t>(docs.ids.size()));
      continue;
    }
    if (id >= vocab_size) return corrupt(absl::StrCat("id ", id, " is outside the vocabulary of ", vocab_size));
    docs.ids.push_back(static_cast<int32_t>(id));
    docs.num_unk += static_cast<int32_t>(id) == unk_id;
  }
  if (static_cast<uint64_t>(docs.num_documents()) != num_documents || docs.ids.size() != num_ids) {
    return corrupt("its document separators do not match its header");
  }
  return docs;
}

}  // namespace adapterd::pretrain
