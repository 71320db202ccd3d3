#include "tools/pretrain/vocab_builder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/model/tokenizer.h"

namespace adapterd::pretrain {
namespace {

// The UTF-8 code points of `word`, each as its own string. Words are
// produced by BasicTokenize, so they are valid UTF-8.
std::vector<std::string> SplitChars(std::string_view word) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < word.size()) {
    const auto lead = static_cast<unsigned char>(word[i]);
    size_t n = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : 4;
    n = std::min(n, word.size() - i);
    out.emplace_back(word.substr(i, n));
    i += n;
  }
  return out;
}

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

struct Symbol {
  std::string text;  // without "##"
  bool continuation = false;
  std::string Token() const { return continuation ? "##" + text : text; }
};

struct PairStat {
  int64_t count = 0;
  double log_count = 0;
};

// The merge loop's state. Words are symbol-id sequences with frequencies.
class Merger {
 public:
  Merger(std::vector<Symbol> symbols, std::vector<std::vector<int32_t>> words, std::vector<int64_t> freqs)
      : symbols_(std::move(symbols)), words_(std::move(words)), freqs_(std::move(freqs)) {
    for (size_t i = 0; i < symbols_.size(); ++i) ids_[symbols_[i].Token()] = static_cast<int32_t>(i);
    counts_.assign(symbols_.size(), 0);
    for (size_t w = 0; w < words_.size(); ++w) {
      const auto& seq = words_[w];
      for (size_t i = 0; i < seq.size(); ++i) {
        counts_[static_cast<size_t>(seq[i])] += freqs_[w];
        if (i + 1 < seq.size()) AddPair(seq[i], seq[i + 1], freqs_[w], static_cast<int32_t>(w));
      }
    }
    double total = 0;
    for (int64_t c : counts_) total += static_cast<double>(c);
    log_total_ = std::log(std::max(total, 1.0));
    log_counts_.resize(counts_.size());
    for (size_t i = 0; i < counts_.size(); ++i) RefreshLog(static_cast<int32_t>(i));
  }

  // Merges the best pair; false when none has at least `min_pair` occurrences.
  // `*added` is true when the merge created a token not seen before.
  bool MergeBest(int64_t min_pair, std::string* new_token, bool* added) {
    uint64_t best_key = 0;
    double best_score = -std::numeric_limits<double>::infinity();
    bool found = false;
    for (const auto& [key, stat] : pairs_) {
      if (stat.count < min_pair) continue;
      const auto a = static_cast<int32_t>(key >> 32);
      const auto b = static_cast<int32_t>(key & 0xffffffffu);
      const double score =
          static_cast<double>(stat.count) *
          (stat.log_count + log_total_ - log_counts_[static_cast<size_t>(a)] - log_counts_[static_cast<size_t>(b)]);
      if (!found || score > best_score || (score == best_score && key < best_key)) {
        best_score = score;
        best_key = key;
        found = true;
      }
    }
    if (!found) return false;
    const auto a = static_cast<int32_t>(best_key >> 32);
    const auto b = static_cast<int32_t>(best_key & 0xffffffffu);
    Symbol merged{symbols_[static_cast<size_t>(a)].text + symbols_[static_cast<size_t>(b)].text,
                  symbols_[static_cast<size_t>(a)].continuation};
    const std::string token = merged.Token();
    int32_t n;
    if (auto it = ids_.find(token); it != ids_.end()) {
      n = it->second;  // e.g. "a"+"##bc" after "ab"+"##c": same piece
      *added = false;
    } else {
      n = static_cast<int32_t>(symbols_.size());
      symbols_.push_back(std::move(merged));
      ids_[token] = n;
      counts_.push_back(0);
      log_counts_.push_back(0);
      *added = true;
    }
    *new_token = token;

    std::vector<int32_t> affected = std::move(where_[best_key]);
    where_.erase(best_key);
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    std::vector<int32_t> touched_symbols = {a, b, n};
    for (int32_t w : affected) {
      auto& seq = words_[static_cast<size_t>(w)];
      const int64_t f = freqs_[static_cast<size_t>(w)];
      bool has = false;
      for (size_t i = 0; i + 1 < seq.size(); ++i) has |= seq[i] == a && seq[i + 1] == b;
      if (!has) continue;  // a stale entry: an earlier merge rewrote the word
      for (size_t i = 0; i + 1 < seq.size(); ++i) RemovePair(seq[i], seq[i + 1], f);
      std::vector<int32_t> next;
      next.reserve(seq.size());
      for (size_t i = 0; i < seq.size(); ++i) {
        if (i + 1 < seq.size() && seq[i] == a && seq[i + 1] == b) {
          next.push_back(n);
          counts_[static_cast<size_t>(a)] -= f;
          counts_[static_cast<size_t>(b)] -= f;
          counts_[static_cast<size_t>(n)] += f;
          ++i;
        } else {
          next.push_back(seq[i]);
        }
      }
      seq = std::move(next);
      for (size_t i = 0; i + 1 < seq.size(); ++i) AddPair(seq[i], seq[i + 1], f, w);
    }
    for (int32_t s : touched_symbols) RefreshLog(s);
    return true;
  }

 private:
  void AddPair(int32_t a, int32_t b, int64_t f, int32_t word) {
    const uint64_t key = PairKey(a, b);
    PairStat& stat = pairs_[key];
    stat.count += f;
    stat.log_count = std::log(static_cast<double>(stat.count));
    where_[key].push_back(word);
  }
  void RemovePair(int32_t a, int32_t b, int64_t f) {
    const uint64_t key = PairKey(a, b);
    auto it = pairs_.find(key);
    if (it == pairs_.end()) return;
    it->second.count -= f;
    if (it->second.count <= 0) {
      pairs_.erase(it);
      where_.erase(key);
    } else {
      it->second.log_count = std::log(static_cast<double>(it->second.count));
    }
  }
  void RefreshLog(int32_t s) {
    const int64_t c = counts_[static_cast<size_t>(s)];
    // An exhausted piece has no pairs left, so its value is never read.
    log_counts_[static_cast<size_t>(s)] = c > 0 ? std::log(static_cast<double>(c)) : 0.0;
  }

  std::vector<Symbol> symbols_;
  absl::flat_hash_map<std::string, int32_t> ids_;
  std::vector<std::vector<int32_t>> words_;
  std::vector<int64_t> freqs_;
  std::vector<int64_t> counts_;
  std::vector<double> log_counts_;
  double log_total_ = 0;
  absl::flat_hash_map<uint64_t, PairStat> pairs_;
  absl::flat_hash_map<uint64_t, std::vector<int32_t>> where_;
};

}  // namespace

void VocabBuilder::AddText(std::string_view text) {
  for (std::string& word : model::BasicTokenize(text, /*do_lower_case=*/true)) {
    ++word_counts_[std::move(word)];
  }
}

void VocabBuilder::AddWord(std::string_view word, int64_t count) { word_counts_[std::string(word)] += count; }

absl::StatusOr<std::vector<std::string>> VocabBuilder::Build(const VocabOptions& options) const {
  constexpr int kAsciiPrintable = 126 - 33 + 1;  // '!'..'~'
  const int minimum = static_cast<int>(std::size(kSpecialTokens)) + 2 * kAsciiPrintable;
  if (options.vocab_size < minimum) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size ", options.vocab_size, " is below the minimum of ", minimum,
                     " (5 special tokens and both forms of the printable ASCII characters)"));
  }
  if (options.max_alphabet < kAsciiPrintable) {
    return absl::InvalidArgumentError(absl::StrCat("max_alphabet must be at least ", kAsciiPrintable));
  }

  // Words in a deterministic order (the hash map's is not).
  std::vector<std::pair<std::string, int64_t>> words;
  for (const auto& [w, c] : word_counts_) {
    if (c >= options.min_word_frequency) words.emplace_back(w, c);
  }
  std::sort(words.begin(), words.end());

  // The alphabet: printable ASCII, then the most frequent other characters.
  absl::flat_hash_map<std::string, int64_t> char_counts;
  for (const auto& [w, c] : word_counts_) {
    for (std::string& ch : SplitChars(w)) char_counts[std::move(ch)] += c;
  }
  std::vector<std::string> alphabet;
  for (char c = '!'; c <= '~'; ++c) alphabet.emplace_back(1, c);
  std::vector<std::pair<int64_t, std::string>> others;
  for (const auto& [ch, c] : char_counts) {
    const bool ascii = ch.size() == 1 && ch[0] >= '!' && ch[0] <= '~';
    if (!ascii && c >= options.min_char_frequency) others.emplace_back(-c, ch);
  }
  std::sort(others.begin(), others.end());
  const size_t room =
      std::min<size_t>(static_cast<size_t>(options.max_alphabet) - alphabet.size(),
                       (static_cast<size_t>(options.vocab_size) - std::size(kSpecialTokens)) / 2 - alphabet.size());
  for (size_t i = 0; i < others.size() && i < room; ++i) alphabet.push_back(others[i].second);

  std::vector<Symbol> symbols;
  absl::flat_hash_map<std::string, int32_t> initial, continuation;
  for (const std::string& ch : alphabet) {
    initial[ch] = static_cast<int32_t>(symbols.size());
    symbols.push_back({ch, false});
  }
  for (const std::string& ch : alphabet) {
    continuation[ch] = static_cast<int32_t>(symbols.size());
    symbols.push_back({ch, true});
  }

  std::vector<std::vector<int32_t>> seqs;
  std::vector<int64_t> freqs;
  for (const auto& [w, c] : words) {
    const std::vector<std::string> chars = SplitChars(w);
    // Single-character words have nothing to merge but count towards their
    // piece's frequency and the total, as in the unigram model.
    if (chars.empty() || chars.size() > 100) continue;  // > 100: [UNK] for the tokenizer anyway
    std::vector<int32_t> seq;
    bool ok = true;
    for (size_t i = 0; i < chars.size() && ok; ++i) {
      const auto& table = i == 0 ? initial : continuation;
      auto it = table.find(chars[i]);
      ok = it != table.end();
      if (ok) seq.push_back(it->second);
    }
    if (!ok) continue;  // a character outside the alphabet: the word stays [UNK]
    seqs.push_back(std::move(seq));
    freqs.push_back(c);
  }

  std::vector<std::string> vocab(std::begin(kSpecialTokens), std::end(kSpecialTokens));
  for (const Symbol& s : symbols) vocab.push_back(s.Token());
  Merger merger(std::move(symbols), std::move(seqs), std::move(freqs));
  std::string token;
  bool added = false;
  while (static_cast<int>(vocab.size()) < options.vocab_size &&
         merger.MergeBest(options.min_pair_frequency, &token, &added)) {
    if (added) vocab.push_back(token);
  }
  return vocab;
}

}  // namespace adapterd::pretrain
