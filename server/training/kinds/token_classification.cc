// Token classification (named entities): an example is pre-split `tokens`
// with one BIO tag each (IOB2: O, B-X, I-X after B-X/I-X), or a `text` with
// `entities` (code-point spans inside the text, apart, each over a word).
// The task's labels are BioTagSet of its entity types. Rows are windows of
// the text, the task's window long (stored with it, so that Predict cuts
// the same windows); each word's first piece targets its tag, every other
// position is unscored. Scored by conlleval's entity F1 over words.
#include <algorithm>
#include <optional>

#include "common/status_macros.h"
#include "common/utf8.h"
#include "server/model/window_decoding.h"
#include "server/training/kind_examples.h"
#include "server/training/kinds/kind_support.h"
#include "server/training/validation_metrics.h"

namespace adapterd::training::kinds {
namespace {

// The entity type of a B-X / I-X tag; nullopt for anything else.
std::optional<std::string> TagType(const std::string& tag, char prefix) {
  if (tag.size() > 2 && tag[0] == prefix && tag[1] == '-') return tag.substr(2);
  return std::nullopt;
}

// IOB2: each tag is O, B-X, or I-X continuing an X entity.
absl::Status CheckTags(const std::vector<std::string>& tags) {
  std::string open;  // the type of the entity the previous tag is in
  for (size_t i = 0; i < tags.size(); ++i) {
    const std::string& t = tags[i];
    if (t == "O") {
      open.clear();
    } else if (auto b = TagType(t, 'B')) {
      open = *b;
    } else if (auto in = TagType(t, 'I')) {
      if (*in != open) {
        return BadExample(absl::StrCat("tags[", i, "] '", t, "' does not continue an entity of type ", *in,
                                       " (it follows '", i == 0 ? std::string("the start") : tags[i - 1],
                                       "'); tags are BIO (IOB2): an entity starts with B-", *in));
      }
    } else {
      return BadExample(absl::StrCat("tags[", i, "] '", t, "' is not a BIO tag: O, B-<type> or I-<type>"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckEntities(const Example& e) {
  const auto length = static_cast<int32_t>(CodePointOffsets(e.text).size() - 1);
  std::vector<size_t> order(e.entities.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_pair(e.entities[a].start, a) < std::make_pair(e.entities[b].start, b);
  });
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    const EntitySpan& x = e.entities[i];
    if (x.end > length) {
      return BadExample(
          absl::StrCat("entities[", i, "] ends at ", x.end, ", past the text's ", length, " code points"));
    }
    if (k > 0 && e.entities[order[k - 1]].end > x.start) {
      return BadExample(absl::StrCat("entities[", order[k - 1], "] and entities[", i, "] overlap; entities must not"));
    }
  }
  return absl::OkStatus();
}

class TokenClassification final : public KindRules {
 public:
  model::TaskKind kind() const override { return model::TaskKind::kTokenClassification; }

  absl::Status CheckExample(const Example& e) const override {
    if (!e.tokens.empty() && !e.entities.empty()) return BadExample("tokens and entities are both set; give one");
    if (!e.tokens.empty()) return CheckTags(e.tags);
    if (!e.label.empty() || !e.labels.empty()) {
      return BadExample("a token classification example has tokens and tags, or text and entities; not a label");
    }
    return CheckEntities(e);
  }
  std::vector<std::string> LabelNames(const Example& e) const override {
    std::vector<std::string> types;
    for (const std::string& t : e.tags) {
      if (auto b = TagType(t, 'B')) types.push_back(*b);
      if (auto in = TagType(t, 'I')) types.push_back(*in);
    }
    for (const EntitySpan& x : e.entities) types.push_back(x.label);
    std::sort(types.begin(), types.end());
    types.erase(std::unique(types.begin(), types.end()), types.end());
    return types;
  }
  std::string_view name_noun() const override { return "entity type"; }
  std::string LabelOfName(const std::string& name) const override { return "B-" + name; }
  std::vector<std::string> LabelsOfNames(const std::vector<std::string>& names) const override {
    return model::BioTagSet(names);
  }
  absl::Status CheckDistinctNames(const std::map<std::string, int64_t>& counts) const override {
    if (!counts.empty()) return absl::OkStatus();
    return BadExample("dataset has no entities: token classification needs at least 1 entity type");
  }
  absl::Status CheckTokens(const Example& e, const model::BertTokenizer& tokenizer, int32_t, int64_t&) const override {
    return TagWords(e, tokenizer).status();
  }

  absl::Status SetParameters(const std::vector<Example>&, const ParameterChoices& choices,
                             model::AdapterConfig& config) const override {
    config.tagging_max_seq_len = choices.max_seq_len;
    return absl::OkStatus();
  }

  uint32_t targets() const override { return kTagTarget; }
  // Windows over the text's pieces, each word's first piece targeting its
  // tag.
  absl::Status AddRows(const RowContext& c, const Example& e, RowSet& out, ExampleGold& gold) const override {
    ASSIGN_OR_RETURN(TaggedWords tagged, TagWords(e, c.tokenizer));
    std::vector<int64_t> piece_tags(tagged.pieces.ids.size(), model::kIgnoredPosition);
    for (size_t w = 0; w < tagged.tags.size(); ++w) {
      const int32_t first = tagged.pieces.first_piece[w];
      if (first < 0) continue;
      ASSIGN_OR_RETURN(piece_tags[static_cast<size_t>(first)], IndexOf(c, tagged.tags[w], "tag"));
    }
    const int32_t window = c.config.window_length(c.tokenizer.options().max_seq_len);
    for (const model::SlidingWindow& w : model::TaggingWindows(c.tokenizer, tagged.pieces, window)) {
      Row r = WindowRow(w);
      r.tags.assign(r.input_ids.size(), model::kIgnoredPosition);
      for (int32_t p = w.context_begin; p < w.context_end; ++p) {
        r.tags[static_cast<size_t>(p)] = piece_tags[static_cast<size_t>(w.context_offset + p - w.context_begin)];
      }
      AddRow(std::move(r), out, gold);
    }
    gold.text = std::move(tagged.text);
    gold.pieces = std::move(tagged.pieces);
    gold.tags = std::move(tagged.tags);
    return absl::OkStatus();
  }
  Evaluation Score(const model::AdapterConfig& config, const RowSet& data, const RowOutputs& outputs) const override {
    const std::vector<std::string>& tags = config.labels;
    const auto k = static_cast<int64_t>(tags.size());
    std::vector<std::vector<std::string>> gold, predicted;
    for (const ExampleGold& g : data.examples) {
      const std::vector<std::vector<float>> words =
          model::WordOutputs(g.pieces, WindowsOf(data, g), OutputsOf(outputs, g), k);
      std::vector<std::string>& p = predicted.emplace_back(g.tags.size(), "O");
      for (size_t w = 0; w < words.size() && w < p.size(); ++w) {
        if (words[w].empty()) continue;
        p[w] = tags[static_cast<size_t>(std::max_element(words[w].begin(), words[w].end()) - words[w].begin())];
      }
      gold.push_back(g.tags);
    }
    Evaluation e;
    e.f1 = EntityF1(gold, predicted).f1;
    return e;
  }
};

}  // namespace

const KindRules& TokenClassificationRules() {
  static const TokenClassification rules;
  return rules;
}

}  // namespace adapterd::training::kinds
