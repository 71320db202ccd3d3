// Runs server/training/validation_metrics.h on cases read from stdin, one JSON object
// per line, and prints each result as one JSON line, for
// training_metrics_test.py, which compares them with scikit-learn, scipy and
// the published scripts.
//
//   {"metric": "class", "gold": [0, 2], "pred": [0, 1]}
//   {"metric": "multilabel", "gold": [[0], []], "pred": [[0, 1], []], "num_labels": 3}
//   {"metric": "regression", "gold": [1.5, 2], "pred": [1, 2]}
//   {"metric": "entities", "gold": [["B-PER", "I-PER", "O"]], "pred": [["B-PER", "O", "O"]]}
//   {"metric": "squad", "gold": [["the Cat", "cat"]], "pred": ["a cat!"]}
//   {"metric": "normalize", "text": "The  Cat!"}
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/training/validation_metrics.h"

namespace adapterd::training {
namespace {

nlohmann::json Run(const nlohmann::json& c) {
  const std::string metric = c.at("metric");
  if (metric == "class") {
    const auto gold = c.at("gold").get<std::vector<int32_t>>(), pred = c.at("pred").get<std::vector<int32_t>>();
    const F1Scores f1 = ClassF1(gold, pred);
    return {{"accuracy", Accuracy(gold, pred)}, {"micro_f1", f1.micro_f1}, {"macro_f1", f1.macro_f1}};
  }
  if (metric == "multilabel") {
    const auto gold = c.at("gold").get<std::vector<std::vector<int32_t>>>();
    const auto pred = c.at("pred").get<std::vector<std::vector<int32_t>>>();
    const MultiLabelScores s = MultiLabelF1(gold, pred, c.at("num_labels").get<int32_t>());
    return {{"micro_f1", s.micro_f1}, {"macro_f1", s.macro_f1}, {"exact_match", s.exact_match}};
  }
  if (metric == "regression") {
    const auto gold = c.at("gold").get<std::vector<double>>(), pred = c.at("pred").get<std::vector<double>>();
    const RegressionScores s = RegressionMetrics(gold, pred);
    return {{"pearson", s.pearson}, {"spearman", s.spearman}, {"mse", s.mse}};
  }
  if (metric == "entities") {
    const auto gold = c.at("gold").get<std::vector<std::vector<std::string>>>();
    const auto pred = c.at("pred").get<std::vector<std::vector<std::string>>>();
    const EntityScores s = EntityF1(gold, pred);
    nlohmann::json chunks = nlohmann::json::array();
    for (const auto& sentence : gold) {
      nlohmann::json one = nlohmann::json::array();
      for (const Chunk& chunk : BioChunks(sentence)) one.push_back({chunk.type, chunk.start, chunk.end});
      chunks.push_back(one);
    }
    return {{"precision", s.precision},
            {"recall", s.recall},
            {"f1", s.f1},
            {"f1_by_type", s.f1_by_type},
            {"gold_chunks", chunks}};
  }
  if (metric == "squad") {
    const auto gold = c.at("gold").get<std::vector<std::vector<std::string>>>();
    const auto pred = c.at("pred").get<std::vector<std::string>>();
    const QaScores s = SquadScores(gold, pred);
    return {{"exact_match", s.exact_match}, {"f1", s.f1}};
  }
  if (metric == "normalize") return {{"normalized", NormalizeAnswer(c.at("text").get<std::string>())}};
  return {{"error", "unknown metric " + metric}};
}

}  // namespace
}  // namespace adapterd::training

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    std::cout << adapterd::training::Run(nlohmann::json::parse(line)).dump() << "\n";
  }
  return 0;
}
