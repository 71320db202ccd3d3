// A built-in English WordPiece vocabulary for generated (random) checkpoints,
// so that English text tokenizes into words rather than single characters.
//
// Contract of DefaultEnglishVocab(): tokens in id order, no duplicates, the
// same list on every call and every platform. Ids 0-4 are [PAD] [UNK] [CLS]
// [SEP] [MASK]; then every printable ASCII character except space and A-Z;
// then "##" + each of a-z, 0-9 and a few punctuation marks; then frequent
// lowercase English words, "##" word endings and word starts. The vocabulary
// is uncased: use it with do_lower_case = true. Every ASCII word has a
// WordPiece split, so ASCII text never tokenizes to [UNK].
#ifndef ADAPTERD_TOOLS_MAKE_MODEL_ENGLISH_VOCAB_H_
#define ADAPTERD_TOOLS_MAKE_MODEL_ENGLISH_VOCAB_H_

#include <string>
#include <vector>

namespace adapterd::tools {

std::vector<std::string> DefaultEnglishVocab();

}  // namespace adapterd::tools

#endif  // ADAPTERD_TOOLS_MAKE_MODEL_ENGLISH_VOCAB_H_
