#include "server/api/request_checks.h"

#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace adapterd::api {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::HasSubstr;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

v1::PredictRequest Predict(std::initializer_list<std::string> texts) {
  v1::PredictRequest r;
  r.set_task_id("task");
  for (const std::string& t : texts) r.add_texts(t);
  return r;
}

TEST(RequestChecks, PredictTextsAreBoundedOneByOne) {
  EXPECT_OK(CheckPredictRequest(Predict({"a", std::string(kMaxTextBytes, 'x')})));
  EXPECT_THAT(CheckPredictRequest(Predict({"a", std::string(kMaxTextBytes + 1, 'x')})),
              StatusIs(kInvalid, HasSubstr("texts[1] has 65537 bytes")));
  v1::PredictRequest pairs = Predict({"a", "b"});
  pairs.add_text_pairs("p");
  EXPECT_THAT(CheckPredictRequest(pairs), StatusIs(kInvalid, HasSubstr("text_pairs has 1 entries")));
  pairs.add_text_pairs(std::string(kMaxTextBytes + 1, 'y'));
  EXPECT_THAT(CheckPredictRequest(pairs), StatusIs(kInvalid, HasSubstr("text_pairs[1]")));
  EXPECT_THAT(CheckPredictRequest(Predict({})), StatusIs(kInvalid, HasSubstr("texts is empty")));
  v1::PredictRequest version = Predict({"a"});
  version.set_version(-1);
  EXPECT_THAT(CheckPredictRequest(version), StatusIs(kInvalid, HasSubstr("version")));
  v1::PredictRequest no_task = Predict({"a"});
  no_task.clear_task_id();
  EXPECT_THAT(CheckPredictRequest(no_task), StatusIs(kInvalid, HasSubstr("task_id")));
}

TEST(RequestChecks, ExamplesAreBoundedAndValidUtf8) {
  v1::Example e;
  e.set_text("good");
  e.set_label("pos");
  EXPECT_OK(CheckExample(e, 0));
  v1::Example long_label = e;
  long_label.set_label(std::string(training::kMaxLabelBytes + 1, 'l'));
  EXPECT_THAT(CheckExample(long_label, 7), StatusIs(kInvalid, HasSubstr("example 7: label has 129 bytes")));
  v1::Example long_pair = e;
  long_pair.set_text_pair(std::string(kMaxTextBytes + 1, 'p'));
  EXPECT_THAT(CheckExample(long_pair, 0), StatusIs(kInvalid, HasSubstr("over the limit")));
  v1::Example bad_utf8 = e;
  bad_utf8.set_text("\xc3");
  EXPECT_THAT(CheckExample(bad_utf8, 0), StatusIs(kInvalid, HasSubstr("not valid UTF-8")));
  // A dataset serves any kind of task: what a kind needs (a label, tags,
  // answers) is a job's check. An upload checks each field's form.
  v1::Example no_label = e;
  no_label.clear_label();
  EXPECT_OK(CheckExample(no_label, 0));
  v1::Example tagged;
  tagged.add_tokens("Ada");
  tagged.add_tokens("met");
  tagged.add_tags("B-PER");
  EXPECT_THAT(CheckExample(tagged, 3), StatusIs(kInvalid, HasSubstr("example 3: tokens has 2 entries and tags 1")));
  tagged.add_tags("O");
  EXPECT_OK(CheckExample(tagged, 3));
  tagged.set_text("Ada met");
  EXPECT_THAT(CheckExample(tagged, 3), StatusIs(kInvalid, HasSubstr("text and tokens are both set")));
  v1::Example entity = e;
  auto* x = entity.add_entities();
  x->set_start(4);
  x->set_end(4);
  x->set_label("PER");
  EXPECT_THAT(CheckExample(entity, 1), StatusIs(kInvalid, HasSubstr("entities[0] spans [4, 4)")));
  v1::Example qa = e;
  qa.add_answers()->set_answer_start(-1);
  EXPECT_THAT(CheckExample(qa, 2), StatusIs(kInvalid, HasSubstr("answers[0].text is empty")));
  qa.mutable_answers(0)->set_text("x");
  EXPECT_THAT(CheckExample(qa, 2), StatusIs(kInvalid, HasSubstr("answers[0].answer_start is -1")));
}

// The list fields and the example's bytes together, at N and N+1.
TEST(RequestChecks, AnExamplesListsAndBytesAreBoundedAtNAndNPlusOne) {
  v1::Example tagged;
  for (int i = 0; i < kMaxListEntriesPerExample; ++i) {
    tagged.add_tokens("w");
    tagged.add_tags("O");
  }
  EXPECT_OK(CheckExample(tagged, 0));
  tagged.add_tokens("w");
  tagged.add_tags("O");
  EXPECT_THAT(CheckExample(tagged, 0), StatusIs(kInvalid, HasSubstr("tokens has 4097 entries; the limit is 4096")));
  // Bytes: 4 tokens of a quarter of the limit each reach it exactly.
  v1::Example big;
  const std::string quarter(kMaxExampleBytes / 4, 'a');
  for (int i = 0; i < 4; ++i) {
    big.add_tokens(quarter);
    big.add_tags("O");
  }
  big.mutable_tokens(3)->resize(quarter.size() - 4);  // the tags' 4 bytes count too
  EXPECT_OK(CheckExample(big, 0));
  big.mutable_tokens(3)->push_back('a');
  EXPECT_THAT(CheckExample(big, 0), StatusIs(kInvalid, HasSubstr("the limit is 262144")));
}

TEST(RequestChecks, JobsNameAtMostSoManyDatasets) {
  v1::CreateTrainingJobRequest r;
  r.set_task_id("t");
  EXPECT_THAT(CheckCreateTrainingJobRequest(r), StatusIs(kInvalid, HasSubstr("dataset_ids is empty")));
  for (int i = 0; i < kMaxDatasetsPerJob; ++i) r.add_dataset_ids("ds");
  EXPECT_OK(CheckCreateTrainingJobRequest(r));
  r.add_dataset_ids("ds");
  EXPECT_THAT(CheckCreateTrainingJobRequest(r), StatusIs(kInvalid, HasSubstr("the limit is 64")));
}

TEST(RequestChecks, PagesAndIdsAreChecked) {
  v1::ListTasksRequest list;
  list.set_page_token(std::string(kMaxPageTokenBytes, 'x'));
  EXPECT_OK(CheckListTasksRequest(list));
  list.set_page_token(std::string(kMaxPageTokenBytes + 1, 'x'));
  EXPECT_THAT(CheckListTasksRequest(list), StatusIs(kInvalid, HasSubstr("page_token")));
  list.clear_page_token();
  list.set_page_size(-1);
  EXPECT_THAT(CheckListTasksRequest(list), StatusIs(kInvalid, HasSubstr("page_size")));
  v1::ListTrainingJobsRequest jobs;
  jobs.set_state(static_cast<v1::JobState>(999));
  EXPECT_THAT(CheckListTrainingJobsRequest(jobs), StatusIs(kInvalid, HasSubstr("job state")));
  v1::WatchTrainingJobRequest watch;
  watch.set_job_id("job-1");
  watch.set_after_seq(-1);
  EXPECT_THAT(CheckWatchTrainingJobRequest(watch), StatusIs(kInvalid, HasSubstr("after_seq")));
  v1::UploadDatasetRequest::Metadata meta;
  meta.set_display_name(std::string(kMaxDisplayNameBytes + 1, 'n'));
  EXPECT_THAT(CheckUploadMetadata(meta, ""), StatusIs(kInvalid, HasSubstr("display_name")));
  meta.clear_display_name();
  EXPECT_THAT(CheckUploadMetadata(meta, "bad/task"), StatusIs(kInvalid, HasSubstr("x-task-id")));
  EXPECT_OK(CheckUploadMetadata(meta, "task-1"));
  v1::ImportAdapterRequest::Metadata import;
  import.set_task_id("../etc");
  EXPECT_THAT(CheckImportAdapterMetadata(import), StatusIs(kInvalid, HasSubstr("task_id")));
  v1::ExportAdapterRequest exp;
  exp.set_task_id("t");
  exp.set_version(-2);
  EXPECT_THAT(CheckExportAdapterRequest(exp), StatusIs(kInvalid, HasSubstr("version")));
}

}  // namespace
}  // namespace adapterd::api
