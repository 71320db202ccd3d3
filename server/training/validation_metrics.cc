#include "server/training/validation_metrics.h"

#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <set>
#include <unordered_map>
#include <utility>

namespace adapterd::training {
namespace {

// 2TP / (2TP + FP + FN): F1 without forming precision and recall, 0 when
// there is nothing to score (sklearn's zero_division=0).
double F1Of(int64_t tp, int64_t fp, int64_t fn) {
  const int64_t denominator = 2 * tp + fp + fn;
  return denominator == 0 ? 0.0 : 2.0 * static_cast<double>(tp) / static_cast<double>(denominator);
}

double Mean(std::span<const double> v) {
  if (v.empty()) return 0;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double Pearson(std::span<const double> x, std::span<const double> y) {
  const size_t n = std::min(x.size(), y.size());
  if (n < 2) return 0;
  const double mx = Mean(x.first(n)), my = Mean(y.first(n));
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx <= 0 || syy <= 0) return 0;
  return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

// 1-based ranks, ties given their average rank (scipy's rankdata).
std::vector<double> Ranks(std::span<const double> v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> ranks(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double average = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = average;
    i = j + 1;
  }
  return ranks;
}

// Python's str.isalnum() or '_': the characters `\b` in a Python regex
// treats as word characters.
bool IsWordChar(utf8proc_int32_t cp) {
  if (cp == '_') return true;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

// Python's str.isspace(): the separators str.split() splits on.
bool IsPythonSpace(utf8proc_int32_t cp) {
  if ((cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85) return true;
  if (cp < 0x80) return false;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      return true;
    default:
      return false;
  }
}

bool IsAsciiPunctuation(utf8proc_int32_t cp) {
  return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126);
}

std::vector<utf8proc_int32_t> Decode(std::string_view text) {
  std::vector<utf8proc_int32_t> out;
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  for (size_t pos = 0; pos < text.size();) {
    utf8proc_int32_t cp;
    const utf8proc_ssize_t n = utf8proc_iterate(bytes + pos, static_cast<utf8proc_ssize_t>(text.size() - pos), &cp);
    if (n <= 0) {
      out.push_back(0xFFFD);
      ++pos;
    } else {
      out.push_back(cp);
      pos += static_cast<size_t>(n);
    }
  }
  return out;
}

std::vector<std::string> Words(std::string_view normalized) {
  std::vector<std::string> words;
  size_t start = 0;
  for (size_t i = 0; i <= normalized.size(); ++i) {
    if (i == normalized.size() || normalized[i] == ' ') {
      if (i > start) words.emplace_back(normalized.substr(start, i - start));
      start = i + 1;
    }
  }
  return words;
}

// SQuAD 2.0's compute_f1: token overlap; two empty answers match.
double TokenF1(const std::vector<std::string>& gold, const std::vector<std::string>& predicted) {
  if (gold.empty() || predicted.empty()) return gold.empty() && predicted.empty() ? 1.0 : 0.0;
  std::unordered_map<std::string, int64_t> counts;
  for (const std::string& w : gold) ++counts[w];
  int64_t same = 0;
  for (const std::string& w : predicted) {
    auto it = counts.find(w);
    if (it != counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0;
  const double precision = static_cast<double>(same) / static_cast<double>(predicted.size());
  const double recall = static_cast<double>(same) / static_cast<double>(gold.size());
  return 2 * precision * recall / (precision + recall);
}

}  // namespace

double Accuracy(std::span<const int32_t> gold, std::span<const int32_t> predicted) {
  const size_t n = std::min(gold.size(), predicted.size());
  if (n == 0) return 0;
  size_t right = 0;
  for (size_t i = 0; i < n; ++i) right += gold[i] == predicted[i];
  return static_cast<double>(right) / static_cast<double>(n);
}

F1Scores ClassF1(std::span<const int32_t> gold, std::span<const int32_t> predicted) {
  const size_t n = std::min(gold.size(), predicted.size());
  F1Scores out;
  if (n == 0) return out;
  std::set<int32_t> labels(gold.begin(), gold.begin() + static_cast<std::ptrdiff_t>(n));
  labels.insert(predicted.begin(), predicted.begin() + static_cast<std::ptrdiff_t>(n));
  double sum = 0;
  for (int32_t label : labels) {
    int64_t tp = 0, fp = 0, fn = 0;
    for (size_t i = 0; i < n; ++i) {
      tp += gold[i] == label && predicted[i] == label;
      fp += gold[i] != label && predicted[i] == label;
      fn += gold[i] == label && predicted[i] != label;
    }
    sum += F1Of(tp, fp, fn);
  }
  out.macro_f1 = sum / static_cast<double>(labels.size());
  out.micro_f1 = Accuracy(gold, predicted);  // every row is one true and one predicted label
  return out;
}

MultiLabelScores MultiLabelF1(std::span<const std::vector<int32_t>> gold,
                              std::span<const std::vector<int32_t>> predicted, int32_t num_labels) {
  MultiLabelScores out;
  const size_t n = std::min(gold.size(), predicted.size());
  if (n == 0 || num_labels <= 0) return out;
  std::vector<int64_t> tp(static_cast<size_t>(num_labels)), fp(tp.size()), fn(tp.size());
  size_t exact = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::set<int32_t> g(gold[i].begin(), gold[i].end()), p(predicted[i].begin(), predicted[i].end());
    exact += g == p;
    for (int32_t label = 0; label < num_labels; ++label) {
      const bool in_g = g.contains(label), in_p = p.contains(label);
      const auto l = static_cast<size_t>(label);
      tp[l] += in_g && in_p;
      fp[l] += !in_g && in_p;
      fn[l] += in_g && !in_p;
    }
  }
  double sum = 0;
  for (size_t l = 0; l < tp.size(); ++l) sum += F1Of(tp[l], fp[l], fn[l]);
  out.macro_f1 = sum / static_cast<double>(num_labels);
  out.micro_f1 =
      F1Of(std::accumulate(tp.begin(), tp.end(), int64_t{0}), std::accumulate(fp.begin(), fp.end(), int64_t{0}),
           std::accumulate(fn.begin(), fn.end(), int64_t{0}));
  out.exact_match = static_cast<double>(exact) / static_cast<double>(n);
  return out;
}

RegressionScores RegressionMetrics(std::span<const double> gold, std::span<const double> predicted) {
  RegressionScores out;
  const size_t n = std::min(gold.size(), predicted.size());
  if (n == 0) return out;
  gold = gold.first(n);
  predicted = predicted.first(n);
  double se = 0;
  for (size_t i = 0; i < n; ++i) se += (gold[i] - predicted[i]) * (gold[i] - predicted[i]);
  out.mse = se / static_cast<double>(n);
  out.pearson = Pearson(gold, predicted);
  out.spearman = Pearson(Ranks(gold), Ranks(predicted));
  return out;
}

EntityScores EntityF1(std::span<const std::vector<std::string>> gold_tags,
                      std::span<const std::vector<std::string>> predicted_tags) {
  struct Counts {
    int64_t correct = 0, gold = 0, predicted = 0;
  };
  Counts all;
  std::map<std::string, Counts> by_type;
  const size_t n = std::min(gold_tags.size(), predicted_tags.size());
  for (size_t s = 0; s < n; ++s) {
    const std::vector<Chunk> gold = BioChunks(gold_tags[s]), predicted = BioChunks(predicted_tags[s]);
    for (const Chunk& c : gold) {
      ++all.gold;
      ++by_type[c.type].gold;
    }
    for (const Chunk& c : predicted) {
      ++all.predicted;
      ++by_type[c.type].predicted;
      if (std::find(gold.begin(), gold.end(), c) != gold.end()) {
        ++all.correct;
        ++by_type[c.type].correct;
      }
    }
  }
  EntityScores out;
  out.precision = all.predicted == 0 ? 0 : static_cast<double>(all.correct) / static_cast<double>(all.predicted);
  out.recall = all.gold == 0 ? 0 : static_cast<double>(all.correct) / static_cast<double>(all.gold);
  out.f1 = F1Of(all.correct, all.predicted - all.correct, all.gold - all.correct);
  for (const auto& [type, c] : by_type)
    out.f1_by_type[type] = F1Of(c.correct, c.predicted - c.correct, c.gold - c.correct);
  return out;
}

std::string NormalizeAnswer(std::string_view answer) {
  // lower(), then remove_punc().
  std::vector<utf8proc_int32_t> text;
  for (utf8proc_int32_t cp : Decode(answer)) {
    cp = utf8proc_tolower(cp);
    if (!IsAsciiPunctuation(cp)) text.push_back(cp);
  }
  // remove_articles(): \b(a|an|the)\b -> ' '.
  std::vector<utf8proc_int32_t> kept;
  for (size_t i = 0; i < text.size();) {
    const bool boundary_before = i == 0 || !IsWordChar(text[i - 1]);
    size_t matched = 0;
    if (boundary_before) {
      for (std::string_view article : {"the", "an", "a"}) {
        if (i + article.size() > text.size()) continue;
        bool same = true;
        for (size_t k = 0; k < article.size(); ++k) same = same && text[i + k] == article[k];
        const size_t end = i + article.size();
        if (same && (end == text.size() || !IsWordChar(text[end]))) {
          matched = article.size();
          break;
        }
      }
    }
    if (matched > 0) {
      kept.push_back(' ');
      i += matched;
    } else {
      kept.push_back(text[i++]);
    }
  }
  // white_space_fix(): split on whitespace, join with one space.
  std::string out;
  bool pending_space = false;
  for (utf8proc_int32_t cp : kept) {
    if (IsPythonSpace(cp)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    utf8proc_uint8_t buf[4];
    const utf8proc_ssize_t n = utf8proc_encode_char(cp, buf);
    out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
  }
  return out;
}

QaScores SquadScores(std::span<const std::vector<std::string>> gold, std::span<const std::string> predicted) {
  QaScores out;
  const size_t n = std::min(gold.size(), predicted.size());
  if (n == 0) return out;
  double em = 0, f1 = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::string p = NormalizeAnswer(predicted[i]);
    const std::vector<std::string> p_words = Words(p);
    // As the v2.0 script: gold answers that normalise to nothing are
    // dropped, unless all do (then the answer is "no answer").
    std::vector<std::string> answers;
    for (const std::string& answer : gold[i]) {
      if (std::string g = NormalizeAnswer(answer); !g.empty()) answers.push_back(std::move(g));
    }
    if (answers.empty()) answers.emplace_back();
    double best_em = 0, best_f1 = 0;
    for (const std::string& g : answers) {
      best_em = std::max(best_em, g == p ? 1.0 : 0.0);
      best_f1 = std::max(best_f1, TokenF1(Words(g), p_words));
    }
    em += best_em;
    f1 += best_f1;
  }
  out.exact_match = em / static_cast<double>(n);
  out.f1 = f1 / static_cast<double>(n);
  return out;
}

}  // namespace adapterd::training
