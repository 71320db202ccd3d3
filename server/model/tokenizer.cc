#include "server/model/tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace adapterd::model {
namespace {

using Cp = utf8proc_int32_t;
using Vocab = std::unordered_map<std::string, int32_t>;

// HF's WordpieceTokenizer default; longer words become [UNK] without lookup.
constexpr size_t kMaxInputCharsPerWord = 100;
constexpr Cp kReplacementChar = 0xFFFD;
constexpr Cp kCapitalSigma = 0x03A3;

bool IsAsciiSpace(Cp cp) { return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r'; }

// HF's _is_whitespace plus U+2028/U+2029: those two are Zl/Zp, so HF's
// _clean_text keeps them, but Python's str.split() in whitespace_tokenize()
// then splits on them. Mapping them to ' ' here yields the same tokens.
bool IsWhitespace(Cp cp) {
  if (IsAsciiSpace(cp)) return true;
  if (cp < 0x80) return false;
  if (cp == 0x2028 || cp == 0x2029) return true;
  return utf8proc_category(cp) == UTF8PROC_CATEGORY_ZS;
}

// HF's _is_control: \t \n \r are whitespace, everything else whose category
// starts with "C" is dropped. Besides Cc and Cf that includes Co (private use)
// and Cn (unassigned); the fast tokenizer's BertNormalizer does the same.
bool IsControl(Cp cp) {
  if (IsAsciiSpace(cp)) return false;
  if (cp < 0x80) return cp < 0x20 || cp == 0x7F;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
      return true;
    default:
      return false;
  }
}

// HF treats every non-alphanumeric printable ASCII character as punctuation,
// including symbols such as $ ^ ` that Unicode files under S*.
bool IsPunctuation(Cp cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126)) {
    return true;
  }
  if (cp < 0x80) return false;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

// The "CJK Unified Ideographs" blocks as HF defines them; Hangul, Hiragana
// and Katakana are deliberately not included (they are space-separated).
bool IsChineseChar(Cp cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// Unicode's Cased property, which utf8proc does not expose: Lu Ll Lt, code
// points with a case mapping, and these Other_Lowercase/Other_Uppercase ones
// without a mapping (ordinal indicators, modifier letters, squared letters).
bool IsCased(Cp cp) {
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
      return true;
    default:
      break;
  }
  if (utf8proc_tolower(cp) != cp || utf8proc_toupper(cp) != cp) return true;
  static constexpr std::pair<Cp, Cp> kUnmappedCased[] = {
      {0x00AA, 0x00AA},   {0x00BA, 0x00BA},   {0x02B0, 0x02B8},   {0x02C0, 0x02C1},   {0x02E0, 0x02E4},
      {0x037A, 0x037A},   {0x1D2C, 0x1D6A},   {0x1D78, 0x1D78},   {0x1D9B, 0x1DBF},   {0x2071, 0x2071},
      {0x207F, 0x207F},   {0x2090, 0x209C},   {0x2C7C, 0x2C7D},   {0xA69C, 0xA69D},   {0xA770, 0xA770},
      {0xA7F8, 0xA7F9},   {0xAB5C, 0xAB5F},   {0x10780, 0x10780}, {0x10783, 0x10785}, {0x10787, 0x107B0},
      {0x107B2, 0x107BA}, {0x1F130, 0x1F149}, {0x1F150, 0x1F169}, {0x1F170, 0x1F189},
  };
  for (const auto& [first, last] : kUnmappedCased) {
    if (cp >= first && cp <= last) return true;
  }
  return false;
}

// Unicode's Case_Ignorable property: Mn Me Cf Lm Sk plus the Word_Break
// MidLetter, MidNumLet and Single_Quote characters.
bool IsCaseIgnorable(Cp cp) {
  static constexpr Cp kWordBreakIgnorable[] = {
      0x0027, 0x002E, 0x003A, 0x00B7, 0x0387, 0x055F, 0x05F4, 0x2018, 0x2019,
      0x2024, 0x2027, 0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A,
  };
  if (std::find(std::begin(kWordBreakIgnorable), std::end(kWordBreakIgnorable), cp) != std::end(kWordBreakIgnorable)) {
    return true;
  }
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      return false;
  }
}

// Python's str.lower() maps U+03A3 to final sigma (U+03C2) when it ends a
// cased word (Unicode's Final_Sigma condition); utf8proc_tolower always gives
// U+03C3. Mirrors CPython's handle_capital_sigma.
bool IsFinalSigma(std::span<const Cp> word, size_t i) {
  size_t j = i;
  while (j > 0 && IsCaseIgnorable(word[j - 1])) --j;
  if (j == 0 || !IsCased(word[j - 1])) return false;
  for (size_t k = i + 1; k < word.size(); ++k) {
    if (!IsCaseIgnorable(word[k])) return !IsCased(word[k]);
  }
  return true;
}

void AppendUtf8(Cp cp, std::string* out) {
  utf8proc_uint8_t buf[4];
  utf8proc_ssize_t n = utf8proc_encode_char(cp, buf);
  out->append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// Runs BasicTokenizer + WordpieceTokenizer over one text, appending ids.
// Scratch buffers live as long as one call so that, after the first few
// words, tokenizing allocates nothing per character or per word.
class Pipeline {
 public:
  // Ids into `out`; with `pieces`, also each id's span and word there.
  Pipeline(const Vocab& vocab, int32_t unk_id, bool do_lower_case, std::vector<int32_t>* out,
           std::vector<TokenPiece>* pieces = nullptr)
      : vocab_(vocab), unk_id_(unk_id), do_lower_case_(do_lower_case), out_(out), pieces_(pieces) {}
  // Basic tokenisation only (steps 1-5): words are appended to `words`
  // instead of being split into pieces.
  Pipeline(bool do_lower_case, std::vector<std::string>* words)
      : vocab_(EmptyVocab()), unk_id_(0), do_lower_case_(do_lower_case), out_(nullptr), words_(words) {}

  void Run(std::string_view text) {
    const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
    const size_t size = text.size();
    size_t pos = 0;
    // Code points read so far: the index of the next one in the text.
    int32_t index = 0;
    while (pos < size) {
      const int32_t at = index++;
      Cp cp = bytes[pos];
      if (cp < 0x80) {
        ++pos;
      } else {
        utf8proc_ssize_t n = utf8proc_iterate(bytes + pos, static_cast<utf8proc_ssize_t>(size - pos), &cp);
        // A bad byte decodes as U+FFFD, which cleaning drops; skipping one
        // byte resynchronises on the next valid sequence.
        if (n <= 0) {
          cp = kReplacementChar;
          n = 1;
        }
        pos += static_cast<size_t>(n);
      }
      // _clean_text.
      if (cp == 0 || cp == kReplacementChar || IsControl(cp)) continue;
      if (IsWhitespace(cp)) {
        FlushWord();
        continue;
      }
      // _tokenize_chinese_chars: a CJK ideograph is a whitespace token of
      // its own, and still goes through lowercasing/normalisation (which
      // maps compatibility ideographs to unified ones).
      if (IsChineseChar(cp)) {
        FlushWord();
        word_.push_back(cp);
        word_at_.push_back(at);
        word_ascii_ = false;
        FlushWord();
        continue;
      }
      word_.push_back(cp);
      word_at_.push_back(at);
      if (cp >= 0x80) word_ascii_ = false;
    }
    FlushWord();
  }

 private:
  // Processes one whitespace-separated token: case/accents, punctuation
  // split, WordPiece.
  void FlushWord() {
    if (word_.empty()) return;
    std::span<const Cp> word = word_;
    if (pieces_ != nullptr) {
      spans_.clear();
      for (int32_t at : word_at_) spans_.push_back({at, at + 1});
    }
    if (word_ascii_) {
      if (do_lower_case_) {
        for (Cp& cp : word_) {
          if (cp >= 'A' && cp <= 'Z') cp += 'a' - 'A';
        }
      }
    } else if (do_lower_case_) {
      // token.lower() then _run_strip_accents (NFD, drop Mn).
      lowered_.clear();
      norm_input_.clear();
      for (size_t i = 0; i < word_.size(); ++i) {
        Cp cp = word_[i];
        lowered_.push_back(cp == kCapitalSigma ? (IsFinalSigma(word_, i) ? 0x03C2 : 0x03C3) : utf8proc_tolower(cp));
        AppendUtf8(lowered_.back(), &norm_input_);
      }
      word = lowered_;
      if (Normalize(static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE))) {
        if (pieces_ != nullptr) SpansAfterDecomposing(lowered_);
        // Drop the combining marks; a dropped mark's span joins the code
        // point before it, so a piece still covers its word's accents.
        size_t kept = 0;
        for (size_t i = 0; i < norm_.size(); ++i) {
          if (utf8proc_category(norm_[i]) == UTF8PROC_CATEGORY_MN) {
            if (pieces_ != nullptr) {
              if (kept > 0) {
                spans_[kept - 1].second = std::max(spans_[kept - 1].second, spans_[i].second);
              } else if (i + 1 < norm_.size()) {
                spans_[i + 1].first = std::min(spans_[i + 1].first, spans_[i].first);
              }
            }
            continue;
          }
          norm_[kept] = norm_[i];
          if (pieces_ != nullptr) spans_[kept] = spans_[i];
          ++kept;
        }
        norm_.resize(kept);
        if (pieces_ != nullptr) spans_.resize(kept);
        word = norm_;
      }
    } else {
      // Current HF BasicTokenizer NFC-normalises the text before splitting
      // it; that only matters when accents are kept, as NFD follows otherwise.
      norm_input_.clear();
      for (Cp cp : word_) AppendUtf8(cp, &norm_input_);
      if (Normalize(static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE))) {
        if (pieces_ != nullptr) SpansAfterDecomposing(word_);
        utf8proc_ssize_t n =
            utf8proc_normalize_utf32(norm_.data(), static_cast<utf8proc_ssize_t>(norm_.size()),
                                     static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
        if (n >= 0) {
          norm_.resize(static_cast<size_t>(n));
          if (pieces_ != nullptr) SpansAfterComposing();
          word = norm_;
        } else if (pieces_ != nullptr) {  // the word stays as it came
          spans_.clear();
          for (int32_t at : word_at_) spans_.push_back({at, at + 1});
        }
      }
    }
    SplitOnPunctuation(word);
    word_.clear();
    word_at_.clear();
    word_ascii_ = true;
  }

  // spans_ (one per code point of `source`) re-aligned to norm_, the full
  // canonical decomposition of `source`: each code point's decomposition
  // takes its span. (Canonical reordering can swap combining marks of
  // neighbouring code points; their spans are then each other's, within
  // one combining sequence.)
  void SpansAfterDecomposing(std::span<const Cp> source) {
    decomposed_.clear();
    Cp buf[32];
    for (size_t i = 0; i < source.size(); ++i) {
      int boundclass = UTF8PROC_BOUNDCLASS_START;
      utf8proc_ssize_t n = utf8proc_decompose_char(
          source[i], buf, 32, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE), &boundclass);
      for (utf8proc_ssize_t k = 0; k < std::max<utf8proc_ssize_t>(n, 1); ++k) decomposed_.push_back(spans_[i]);
    }
    if (decomposed_.size() != norm_.size()) {  // cannot happen; keep the word's span
      decomposed_.assign(norm_.size(), {spans_.front().first, spans_.back().second});
    }
    spans_.swap(decomposed_);
  }

  // spans_ (one per code point of the decomposition) re-aligned to norm_,
  // its composition: each composed code point covers the decomposition's
  // code points it came from (its own decomposition's length).
  void SpansAfterComposing() {
    decomposed_.swap(spans_);
    spans_.clear();
    Cp buf[32];
    size_t at = 0;
    for (Cp cp : norm_) {
      int boundclass = UTF8PROC_BOUNDCLASS_START;
      utf8proc_ssize_t n = utf8proc_decompose_char(
          cp, buf, 32, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE), &boundclass);
      const size_t len = static_cast<size_t>(std::max<utf8proc_ssize_t>(n, 1));
      const size_t last = std::min(at + len, decomposed_.size()) - 1;
      std::pair<int32_t, int32_t> span = decomposed_[std::min(at, last)];
      for (size_t k = at; k <= last; ++k) {
        span.first = std::min(span.first, decomposed_[k].first);
        span.second = std::max(span.second, decomposed_[k].second);
      }
      spans_.push_back(span);
      at += len;
    }
  }

  // Decomposes norm_input_ (UTF-8) into norm_ with `options`. False (and the
  // word used unnormalised) only on a utf8proc error, which valid code
  // points cannot cause.
  bool Normalize(utf8proc_option_t options) {
    const auto* str = reinterpret_cast<const utf8proc_uint8_t*>(norm_input_.data());
    const auto len = static_cast<utf8proc_ssize_t>(norm_input_.size());
    norm_.resize(std::max<size_t>(norm_.capacity(), 2 * norm_input_.size() + 8));
    utf8proc_ssize_t n =
        utf8proc_decompose(str, len, norm_.data(), static_cast<utf8proc_ssize_t>(norm_.size()), options);
    if (n > static_cast<utf8proc_ssize_t>(norm_.size())) {
      norm_.resize(static_cast<size_t>(n));
      n = utf8proc_decompose(str, len, norm_.data(), n, options);
    }
    if (n < 0) return false;
    norm_.resize(static_cast<size_t>(n));
    return true;
  }

  // _run_split_on_punc: every punctuation character is a word of its own.
  void SplitOnPunctuation(std::span<const Cp> word) {
    size_t start = 0;
    for (size_t i = 0; i < word.size(); ++i) {
      if (!IsPunctuation(word[i])) continue;
      if (i > start) WordPiece(word.subspan(start, i - start), start);
      WordPiece(word.subspan(i, 1), i);
      start = i + 1;
    }
    if (start < word.size()) WordPiece(word.subspan(start), start);
  }

  // Records the piece just appended to out_: it covers code points
  // [first, last) of the word WordPiece has, which starts at `base` of spans_.
  void AddPiece(size_t base, size_t first, size_t last) {
    if (pieces_ == nullptr) return;
    pieces_->push_back({.id = out_->back(),
                        .start = spans_[base + first].first,
                        .end = spans_[base + last - 1].second,
                        .word = words_seen_});
  }

  // Greedy longest-match-first; one unmatched position makes the whole word
  // [UNK], as in HF.
  // `word` starts at code point `base` of the normalised word (spans_).
  void WordPiece(std::span<const Cp> word, size_t base) {
    if (words_ != nullptr) {
      std::string& w = words_->emplace_back();
      for (Cp cp : word) AppendUtf8(cp, &w);
      return;
    }
    if (word.size() > kMaxInputCharsPerWord) {
      out_->push_back(unk_id_);
      AddPiece(base, 0, word.size());
      ++words_seen_;
      return;
    }
    utf8_.clear();
    offsets_.clear();
    offsets_.push_back(0);
    for (Cp cp : word) {
      AppendUtf8(cp, &utf8_);
      offsets_.push_back(utf8_.size());
    }
    const size_t n = word.size();
    const size_t first_piece = out_->size();
    const size_t first_piece_record = pieces_ != nullptr ? pieces_->size() : 0;
    size_t start = 0;
    while (start < n) {
      // key_ holds ("##" +) the rest of the word and is shortened in place,
      // so each lookup reuses one buffer instead of building a substring.
      key_.clear();
      if (start > 0) key_.append("##");
      const size_t prefix = key_.size();
      key_.append(utf8_, offsets_[start], std::string::npos);
      size_t end = n;
      int32_t id = -1;
      for (; end > start; --end) {
        key_.resize(prefix + offsets_[end] - offsets_[start]);
        auto it = vocab_.find(key_);
        if (it != vocab_.end()) {
          id = it->second;
          break;
        }
      }
      if (id < 0) {
        out_->resize(first_piece);
        out_->push_back(unk_id_);
        if (pieces_ != nullptr) {
          pieces_->resize(first_piece_record);
          AddPiece(base, 0, n);
        }
        ++words_seen_;
        return;
      }
      out_->push_back(id);
      AddPiece(base, start, end);
      start = end;
    }
    ++words_seen_;
  }

  static const Vocab& EmptyVocab() {
    static const Vocab* const empty = new Vocab();
    return *empty;
  }

  const Vocab& vocab_;
  const int32_t unk_id_;
  const bool do_lower_case_;
  std::vector<int32_t>* out_;
  std::vector<TokenPiece>* pieces_ = nullptr;
  std::vector<std::string>* words_ = nullptr;
  // Words (after punctuation splitting) given to WordPiece so far.
  int32_t words_seen_ = 0;

  std::vector<Cp> word_;
  // Index in the text of each code point of word_.
  std::vector<int32_t> word_at_;
  // With pieces_: the span in the text of each code point of the word being
  // normalised, as it is normalised; decomposed_ is scratch.
  std::vector<std::pair<int32_t, int32_t>> spans_;
  std::vector<std::pair<int32_t, int32_t>> decomposed_;
  bool word_ascii_ = true;
  std::vector<Cp> lowered_;
  std::string norm_input_;
  std::vector<Cp> norm_;
  std::string utf8_;
  std::vector<size_t> offsets_;
  std::string key_;
};

// HF's truncate_sequences with "longest_first", one token at a time.
int TruncatePair(size_t budget, std::vector<int32_t>* a, std::vector<int32_t>* b) {
  int removed = 0;
  while (a->size() + b->size() > budget) {
    if (a->size() > b->size()) {
      a->pop_back();
    } else {
      b->pop_back();
    }
    ++removed;
  }
  return removed;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BertTokenizer>> BertTokenizer::FromVocabFile(const std::string& path,
                                                                            const TokenizerOptions& options) {
  absl::StatusOr<std::string> contents = ReadFileToString(path);
  if (!contents.ok()) return contents.status();
  // One token per line, as HF's load_vocab; a final newline does not start
  // another (empty) token.
  std::vector<std::string> tokens;
  std::string_view rest = *contents;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    tokens.emplace_back(line);
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  auto tokenizer = FromTokens(std::move(tokens), options);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(), absl::StrCat(path, ": ", tokenizer.status().message()));
  }
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<BertTokenizer>> BertTokenizer::FromTokens(std::vector<std::string> tokens,
                                                                         const TokenizerOptions& options) {
  if (options.max_seq_len < 2) {
    return absl::InvalidArgumentError(absl::StrCat("max_seq_len must be at least 2, got ", options.max_seq_len));
  }
  if (tokens.empty()) return absl::InvalidArgumentError("vocab is empty");
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("vocab has too many tokens: ", tokens.size()));
  }
  std::unique_ptr<BertTokenizer> tokenizer(new BertTokenizer());
  tokenizer->options_ = options;
  tokenizer->ids_.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto [it, inserted] = tokenizer->ids_.emplace(tokens[i], static_cast<int32_t>(i));
    if (!inserted) {
      // Line numbers are 1-based ids, which is what a vocab.txt editor shows.
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate token \"", tokens[i], "\" on line ", i + 1, " (first on line ", it->second + 1, ")"));
    }
  }
  struct Special {
    const char* text;
    int32_t BertTokenizer::*id;
  };
  static constexpr Special kSpecials[] = {
      {"[PAD]", &BertTokenizer::pad_id_}, {"[UNK]", &BertTokenizer::unk_id_},   {"[CLS]", &BertTokenizer::cls_id_},
      {"[SEP]", &BertTokenizer::sep_id_}, {"[MASK]", &BertTokenizer::mask_id_},
  };
  for (const Special& special : kSpecials) {
    auto it = tokenizer->ids_.find(special.text);
    if (it == tokenizer->ids_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("vocab is missing special token ", special.text));
    }
    tokenizer.get()->*special.id = it->second;
  }
  tokenizer->tokens_ = std::move(tokens);
  return tokenizer;
}

// Special tokens are never split out of raw text: "[SEP]" typed by a user is
// ordinary text ("[", "sep", "]" after punctuation splitting), so user input
// cannot forge sequence boundaries. HF's slow and fast tokenizers would
// instead match it as the special token.
std::vector<int32_t> BertTokenizer::TokenizeToIds(std::string_view text) const {
  std::vector<int32_t> ids;
  Pipeline(ids_, unk_id_, options_.do_lower_case, &ids).Run(text);
  return ids;
}

std::vector<TokenPiece> BertTokenizer::TokenizeWithOffsets(std::string_view text) const {
  std::vector<int32_t> ids;
  std::vector<TokenPiece> pieces;
  Pipeline(ids_, unk_id_, options_.do_lower_case, &ids, &pieces).Run(text);
  return pieces;
}

std::vector<std::string> BasicTokenize(std::string_view text, bool do_lower_case) {
  std::vector<std::string> words;
  Pipeline(do_lower_case, &words).Run(text);
  return words;
}

std::vector<std::string> BertTokenizer::Tokenize(std::string_view text) const {
  std::vector<int32_t> ids = TokenizeToIds(text);
  std::vector<std::string> pieces;
  pieces.reserve(ids.size());
  for (int32_t id : ids) pieces.push_back(tokens_[static_cast<size_t>(id)]);
  return pieces;
}

Encoding BertTokenizer::Encode(std::string_view text, std::optional<std::string_view> text_pair) const {
  Encoding encoding;
  std::vector<int32_t> a = TokenizeToIds(text);
  std::vector<int32_t> b;
  const int num_specials = text_pair.has_value() ? 3 : 2;
  // A max_seq_len below the specials' count leaves room for the specials
  // only; the result is then longer than max_seq_len.
  const size_t budget = static_cast<size_t>(std::max(0, options_.max_seq_len - num_specials));
  if (text_pair.has_value()) {
    b = TokenizeToIds(*text_pair);
    encoding.num_truncated = TruncatePair(budget, &a, &b);
  } else if (a.size() > budget) {
    encoding.num_truncated = static_cast<int>(a.size() - budget);
    a.resize(budget);
  }
  const size_t total = a.size() + b.size() + static_cast<size_t>(num_specials);
  encoding.input_ids.reserve(total);
  encoding.input_ids.push_back(cls_id_);
  encoding.input_ids.insert(encoding.input_ids.end(), a.begin(), a.end());
  encoding.input_ids.push_back(sep_id_);
  encoding.token_type_ids.assign(encoding.input_ids.size(), 0);
  if (text_pair.has_value()) {
    encoding.input_ids.insert(encoding.input_ids.end(), b.begin(), b.end());
    encoding.input_ids.push_back(sep_id_);
    encoding.token_type_ids.resize(encoding.input_ids.size(), 1);
  }
  return encoding;
}

EncodedBatch BertTokenizer::EncodeBatch(std::span<const std::string> texts,
                                        std::span<const std::string> text_pairs) const {
  std::vector<Encoding> rows;
  rows.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    // Rows past the end of a (mis-sized) text_pairs are encoded as singles.
    std::optional<std::string_view> pair;
    if (i < text_pairs.size()) pair = text_pairs[i];
    rows.push_back(Encode(texts[i], pair));
  }
  EncodedBatch batch = PadRows(
      rows.size(), pad_id_, [&](size_t r) -> const std::vector<int32_t>& { return rows[r].input_ids; },
      [&](size_t r) -> const std::vector<int32_t>& { return rows[r].token_type_ids; });
  batch.num_truncated.reserve(rows.size());
  for (const Encoding& row : rows) batch.num_truncated.push_back(row.num_truncated);
  return batch;
}

std::optional<int32_t> BertTokenizer::TokenToId(std::string_view token) const {
  auto it = ids_.find(std::string(token));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string& BertTokenizer::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) {
    return tokens_[static_cast<size_t>(unk_id_)];
  }
  return tokens_[static_cast<size_t>(id)];
}

}  // namespace adapterd::model
