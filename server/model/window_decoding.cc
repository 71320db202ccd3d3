#include "server/model/window_decoding.h"

namespace adapterd::model {

std::vector<std::vector<float>> WordOutputs(const TextPieces& pieces, std::span<const SlidingWindow> windows,
                                            WindowOutputs outputs, int64_t k) {
  const std::vector<int32_t> best = MaxContextWindows(windows, static_cast<int32_t>(pieces.ids.size()));
  std::vector<std::vector<float>> out(pieces.first_piece.size());
  for (size_t w = 0; w < out.size(); ++w) {
    const int32_t piece = pieces.first_piece[w];
    if (piece < 0 || best[static_cast<size_t>(piece)] < 0) continue;
    const auto window = static_cast<size_t>(best[static_cast<size_t>(piece)]);
    const SlidingWindow& win = windows[window];
    const int64_t position = win.context_begin + piece - win.context_offset;
    const std::span<const float> row = outputs[window];
    if ((position + 1) * k > static_cast<int64_t>(row.size())) continue;
    out[w].assign(row.begin() + position * k, row.begin() + (position + 1) * k);
  }
  return out;
}

std::vector<TextAnswer> DecodeAnswers(std::string_view context, const TextPieces& pieces,
                                      std::span<const SlidingWindow> windows, WindowOutputs outputs,
                                      const QaDecodeOptions& options) {
  std::vector<std::vector<float>> starts(windows.size()), ends(windows.size());
  std::vector<QaWindow> qa;
  for (size_t w = 0; w < windows.size(); ++w) {
    const std::span<const float> row = outputs[w];
    for (size_t i = 0; i + 1 < row.size(); i += 2) {
      starts[w].push_back(row[i]);
      ends[w].push_back(row[i + 1]);
    }
    qa.push_back({starts[w], ends[w], windows[w].context_begin, windows[w].context_end, windows[w].context_offset});
  }
  std::vector<TextAnswer> out;
  for (const QaSpan& span : DecodeQaSpans(qa, options)) {
    TextAnswer& a = out.emplace_back();
    a.score = span.probability;
    if (span.window < 0) continue;  // no answer
    a.start = pieces.spans[static_cast<size_t>(span.context_start)].first;
    a.end = pieces.spans[static_cast<size_t>(span.context_end)].second;
    a.text = CodePointSubstr(context, a.start, a.end);
  }
  return out;
}

}  // namespace adapterd::model
