#include "server/model/text_pieces.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "common/utf8.h"

namespace adapterd::model {

TextPieces PiecesOfText(const BertTokenizer& tokenizer, std::string_view text) {
  TextPieces out;
  for (const TokenPiece& p : tokenizer.TokenizeWithOffsets(text)) {
    const auto piece = static_cast<int32_t>(out.ids.size());
    out.ids.push_back(p.id);
    out.spans.emplace_back(p.start, p.end);
    out.word_of_piece.push_back(p.word);
    while (static_cast<int32_t>(out.word_spans.size()) <= p.word) {
      out.word_spans.emplace_back(p.start, p.end);
      out.first_piece.push_back(piece);
    }
    Span& w = out.word_spans[static_cast<size_t>(p.word)];
    w.first = std::min(w.first, p.start);
    w.second = std::max(w.second, p.end);
  }
  return out;
}

std::string JoinWords(std::span<const std::string> words) { return absl::StrJoin(words, " "); }

TextPieces PiecesOfWords(const BertTokenizer& tokenizer, std::span<const std::string> words) {
  TextPieces out;
  int32_t base = 0;  // code point where the word starts in JoinWords(words)
  for (size_t w = 0; w < words.size(); ++w) {
    const auto length = static_cast<int32_t>(CodePointOffsets(words[w]).size() - 1);
    out.word_spans.emplace_back(base, base + length);
    out.first_piece.push_back(-1);
    for (const TokenPiece& p : tokenizer.TokenizeWithOffsets(words[w])) {
      if (out.first_piece.back() < 0) out.first_piece.back() = static_cast<int32_t>(out.ids.size());
      out.ids.push_back(p.id);
      out.spans.emplace_back(base + p.start, base + p.end);
      out.word_of_piece.push_back(static_cast<int32_t>(w));
    }
    base += length + 1;
  }
  return out;
}

std::vector<SlidingWindow> TaggingWindows(const BertTokenizer& tokenizer, const TextPieces& text, int32_t max_seq_len,
                                          size_t max_windows) {
  return SlidingWindows({}, text.ids, max_seq_len, TaggingStride(max_seq_len), 0, tokenizer.cls_id(),
                        tokenizer.sep_id(), max_windows);
}

std::vector<SlidingWindow> QaWindows(const BertTokenizer& tokenizer, std::string_view question,
                                     const TextPieces& context, const QaWindowing& qa, int32_t max_seq_len,
                                     size_t max_windows) {
  return SlidingWindows(tokenizer.TokenizeToIds(question), context.ids, std::min(qa.max_seq_len, max_seq_len),
                        qa.doc_stride, qa.max_question_tokens, tokenizer.cls_id(), tokenizer.sep_id(), max_windows);
}

std::optional<std::pair<int32_t, int32_t>> PiecesCovering(const TextPieces& pieces, int32_t start, int32_t end) {
  int32_t first = -1, last = -1;
  for (size_t i = 0; i < pieces.spans.size(); ++i) {
    const auto [s, e] = pieces.spans[i];
    if (s < end && e > start) {
      if (first < 0) first = static_cast<int32_t>(i);
      last = static_cast<int32_t>(i);
    }
  }
  if (first < 0) return std::nullopt;
  return std::make_pair(first, last);
}

std::string CodePointSubstr(std::string_view text, int32_t start, int32_t end) {
  const std::vector<size_t> at = CodePointOffsets(text);
  const auto n = static_cast<int32_t>(at.size() - 1);
  start = std::clamp(start, 0, n);
  end = std::clamp(end, start, n);
  return std::string(
      text.substr(at[static_cast<size_t>(start)], at[static_cast<size_t>(end)] - at[static_cast<size_t>(start)]));
}

}  // namespace adapterd::model
