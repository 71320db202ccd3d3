#include "server/training/kinds/kind_support.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace adapterd::training::kinds {

absl::Status BadExample(const std::string& why) { return absl::InvalidArgumentError(why); }

absl::StatusOr<int64_t> IndexOf(const RowContext& context, const std::string& name, const char* what) {
  auto it = context.label_index.find(name);
  if (it == context.label_index.end()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", name, "' is not one of the task's ", what, "s"));
  }
  return it->second;
}

absl::Status CheckAtLeastTwoLabels(const std::map<std::string, int64_t>& counts) {
  if (counts.size() >= 2) return absl::OkStatus();
  return BadExample(absl::StrCat("dataset needs at least 2 distinct labels; found ", counts.size(),
                                 counts.empty() ? "" : absl::StrCat(" ('", counts.begin()->first, "')")));
}

Row PooledRow(const model::BertTokenizer& tokenizer, const Example& e) {
  const model::Encoding enc = e.text_pair.empty() ? tokenizer.Encode(e.text) : tokenizer.Encode(e.text, e.text_pair);
  Row r;
  r.input_ids = enc.input_ids;
  r.token_type_ids = enc.token_type_ids;
  return r;
}

void AddRow(Row row, RowSet& out, ExampleGold& gold) {
  gold.rows.push_back(static_cast<int32_t>(out.rows.size()));
  out.rows.push_back(std::move(row));
}

Row WindowRow(const model::SlidingWindow& w) {
  Row r;
  r.input_ids = w.input_ids;
  r.token_type_ids = w.token_type_ids;
  r.context_begin = w.context_begin;
  r.context_end = w.context_end;
  r.context_offset = w.context_offset;
  return r;
}

std::vector<model::SlidingWindow> WindowsOf(const RowSet& data, const ExampleGold& gold) {
  std::vector<model::SlidingWindow> windows;
  for (int32_t r : gold.rows) {
    const Row& row = data.rows[static_cast<size_t>(r)];
    model::SlidingWindow& w = windows.emplace_back();
    w.context_begin = row.context_begin;
    w.context_end = row.context_end;
    w.context_offset = row.context_offset;
  }
  return windows;
}

std::vector<std::span<const float>> OutputsOf(const RowOutputs& outputs, const ExampleGold& gold) {
  std::vector<std::span<const float>> spans;
  for (int32_t r : gold.rows) spans.emplace_back(outputs[static_cast<size_t>(r)]);
  return spans;
}

}  // namespace adapterd::training::kinds
