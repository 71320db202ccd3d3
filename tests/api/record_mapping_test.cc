// The API's messages and the stored records, where they meet
// (server/api/record_mapping.h): the pairs copied through their wire form
// still have one shape, and the mappings of different shapes leave no field
// of the API's message out.
#include "server/api/record_mapping.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/job_state.h"
#include "server/model/task_kinds.h"

namespace adapterd::api {
namespace {

using ::google::protobuf::Descriptor;
using ::google::protobuf::EnumDescriptor;
using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::Message;
using ::google::protobuf::Reflection;

// Why `api` and `record` differ in shape; "" when they have the same fields
// (number, name, type, cardinality, presence, oneof), recursively.
std::string EnumShapeDifference(const EnumDescriptor* api, const EnumDescriptor* record) {
  if (api->value_count() != record->value_count()) {
    return absl::StrCat(api->full_name(), " has ", api->value_count(), " values, ", record->full_name(), " ",
                        record->value_count());
  }
  for (int i = 0; i < api->value_count(); ++i) {
    const auto* a = api->value(i);
    const auto* r = record->FindValueByNumber(a->number());
    if (r == nullptr || r->name() != a->name()) {
      return absl::StrCat(api->full_name(), ".", a->name(), " = ", a->number(), " is not in ", record->full_name());
    }
  }
  return "";
}

// The fields the API computes (record_mapping.h): in the API's message only.
const std::set<std::string> kComputedFields = {"adapterd.v1.EpochMetrics.selection"};

std::string ShapeDifference(const Descriptor* api, const Descriptor* record) {
  int computed = 0;
  for (int i = 0; i < api->field_count(); ++i)
    computed += static_cast<int>(kComputedFields.count(api->field(i)->full_name()));
  if (api->field_count() - computed != record->field_count()) {
    return absl::StrCat(api->full_name(), " has ", api->field_count() - computed, " fields not computed, ",
                        record->full_name(), " ", record->field_count());
  }
  for (int i = 0; i < api->field_count(); ++i) {
    const FieldDescriptor* a = api->field(i);
    if (kComputedFields.count(a->full_name())) continue;
    const FieldDescriptor* r = record->FindFieldByNumber(a->number());
    const std::string where = absl::StrCat(api->full_name(), ".", a->name(), " (", a->number(), ")");
    if (r == nullptr) return absl::StrCat(where, " has no field of its number in ", record->full_name());
    if (r->name() != a->name() || r->type() != a->type() || r->label() != a->label() ||
        r->has_presence() != a->has_presence() ||
        (r->real_containing_oneof() == nullptr) != (a->real_containing_oneof() == nullptr) ||
        (a->real_containing_oneof() != nullptr &&
         a->real_containing_oneof()->name() != r->real_containing_oneof()->name())) {
      return absl::StrCat(where, " differs from ", r->full_name());
    }
    if (a->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (std::string d = ShapeDifference(a->message_type(), r->message_type()); !d.empty()) return d;
    }
    if (a->type() == FieldDescriptor::TYPE_ENUM) {
      if (std::string d = EnumShapeDifference(a->enum_type(), r->enum_type()); !d.empty()) return d;
    }
  }
  return "";
}

TEST(RecordMappingTest, PairsCopiedThroughTheirWireFormStillHaveOneShape) {
  // When one of these fails, the pair's shapes have parted: write its
  // mapping field by field in record_mapping.cc (and drop it from here).
  const std::pair<const Descriptor*, const Descriptor*> pairs[] = {
      {v1::Hyperparameters::descriptor(), storage::v1::Hyperparameters::descriptor()},
      {v1::JobProgress::descriptor(), storage::v1::JobProgress::descriptor()},
      {v1::EpochMetrics::descriptor(), storage::v1::EpochMetrics::descriptor()},
      {v1::JobEvent::descriptor(), storage::v1::JobEvent::descriptor()},
      {v1::DatasetChunk::descriptor(), storage::v1::DatasetChunk::descriptor()},
      {v1::AdapterConfig::descriptor(), storage::v1::AdapterConfig::descriptor()},
  };
  for (const auto& [api, record] : pairs) EXPECT_EQ(ShapeDifference(api, record), "") << api->full_name();
  EXPECT_EQ(EnumShapeDifference(v1::JobState_descriptor(), storage::v1::JobState_descriptor()), "");
  EXPECT_EQ(EnumShapeDifference(v1::TaskState_descriptor(), storage::v1::TaskState_descriptor()), "");
  EXPECT_EQ(EnumShapeDifference(v1::TaskKind_descriptor(), storage::v1::TaskKind_descriptor()), "");
}

// Sets every field of `m` (recursively, two elements of repeated fields, the
// last member of each oneof) to a value derived from its number, none of
// them a default.
void FillEveryField(Message& m, int salt = 0) {
  const Reflection* r = m.GetReflection();
  const Descriptor* d = m.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const int n = f->number() + 100 * salt;
    if (f->is_map()) {
      for (int k = 0; k < 2; ++k) {
        Message* entry = r->AddMessage(&m, f);
        entry->GetReflection()->SetString(entry, entry->GetDescriptor()->field(0), absl::StrCat("key", n, "_", k));
        entry->GetReflection()->SetInt64(entry, entry->GetDescriptor()->field(1), n * 10 + k);
      }
      continue;
    }
    for (int k = 0; k < (f->is_repeated() ? 2 : 1); ++k) {
      const int v = n * 10 + k + 1;
      switch (f->cpp_type()) {
#define ADAPTERD_SET(CPPTYPE, Setter, Adder, value) \
  case FieldDescriptor::CPPTYPE:                    \
    if (f->is_repeated()) {                         \
      r->Adder(&m, f, value);                       \
    } else {                                        \
      r->Setter(&m, f, value);                      \
    }                                               \
    break;
        ADAPTERD_SET(CPPTYPE_INT32, SetInt32, AddInt32, v)
        ADAPTERD_SET(CPPTYPE_INT64, SetInt64, AddInt64, v)
        ADAPTERD_SET(CPPTYPE_UINT32, SetUInt32, AddUInt32, static_cast<uint32_t>(v))
        ADAPTERD_SET(CPPTYPE_UINT64, SetUInt64, AddUInt64, static_cast<uint64_t>(v))
        ADAPTERD_SET(CPPTYPE_DOUBLE, SetDouble, AddDouble, v + 0.5)
        ADAPTERD_SET(CPPTYPE_FLOAT, SetFloat, AddFloat, static_cast<float>(v) + 0.5f)
        ADAPTERD_SET(CPPTYPE_BOOL, SetBool, AddBool, true)
        ADAPTERD_SET(CPPTYPE_STRING, SetString, AddString, absl::StrCat("text", v))
        ADAPTERD_SET(CPPTYPE_ENUM, SetEnumValue, AddEnumValue,
                     f->enum_type()->value(f->enum_type()->value_count() - 1)->number())
#undef ADAPTERD_SET
        case FieldDescriptor::CPPTYPE_MESSAGE:
          FillEveryField(f->is_repeated() ? *r->AddMessage(&m, f) : *r->MutableMessage(&m, f), salt + 1);
          break;
      }
    }
  }
}

// Every field of `api` except `computed` is set and equals `record`'s field
// of the same name (compared in text form, which names no package).
void ExpectEveryFieldMapped(const Message& api, const Message& record, const std::set<std::string>& computed = {}) {
  const Descriptor* d = api.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (computed.count(f->name())) continue;
    const FieldDescriptor* rf = record.GetDescriptor()->FindFieldByName(f->name());
    ASSERT_NE(rf, nullptr) << d->full_name() << "." << f->name() << " has no field of its name in the record";
    const bool set =
        f->is_repeated() ? api.GetReflection()->FieldSize(api, f) > 0 : api.GetReflection()->HasField(api, f);
    EXPECT_TRUE(set) << d->full_name() << "." << f->name() << " is left out of the mapping";
    // The message with only `field` kept, in text form.
    auto text = [](const Message& m, const FieldDescriptor* field) {
      std::unique_ptr<Message> copy(m.New());
      copy->CopyFrom(m);
      std::vector<const FieldDescriptor*> set_fields;
      copy->GetReflection()->ListFields(*copy, &set_fields);
      for (const FieldDescriptor* other : set_fields) {
        if (other != field) copy->GetReflection()->ClearField(copy.get(), other);
      }
      std::string out;
      google::protobuf::TextFormat::PrintToString(*copy, &out);
      return out;
    };
    EXPECT_EQ(text(api, f), text(record, rf)) << d->full_name() << "." << f->name();
  }
}

TEST(RecordMappingTest, AJobRecordMapsOntoEveryFieldOfTrainingJob) {
  storage::v1::JobRecord record;
  FillEveryField(record);
  v1::TrainingJob job = ToApi(record);
  // Computed (the next test): the rest of best_metrics is the record's.
  ASSERT_TRUE(job.best_metrics().has_selection());
  job.mutable_best_metrics()->clear_selection();
  ExpectEveryFieldMapped(job, record);
}

TEST(RecordMappingTest, EveryKindsEpochsCarryItsSelectionMetricFromTheKindTable) {
  for (const model::KindSpec& spec : model::AllKindSpecs()) {
    const std::string field(model::MetricField(spec.selection));
    SCOPED_TRACE(field);
    for (const Descriptor* d : {v1::EpochMetrics::descriptor(), storage::v1::EpochMetrics::descriptor()}) {
      const FieldDescriptor* f = d->FindFieldByName(field);
      ASSERT_NE(f, nullptr) << d->full_name() << " has no field " << field;
      EXPECT_EQ(f->cpp_type(), FieldDescriptor::CPPTYPE_DOUBLE);
    }
    storage::v1::JobRecord record;
    record.set_task_kind(static_cast<storage::v1::TaskKind>(spec.kind));
    storage::v1::EpochMetrics& m = *record.mutable_best_metrics();
    m.set_epoch(2);
    m.set_val_accuracy(0.25);
    m.set_micro_f1(0.375);
    m.set_spearman(-0.5);
    m.set_f1(0.625);
    const v1::SelectionMetric s = ToApi(record).best_metrics().selection();
    EXPECT_EQ(s.field(), field);
    EXPECT_EQ(s.label(), spec.selection_label);
    EXPECT_EQ(s.fraction(), spec.selection_is_fraction);
    const v1::EpochMetrics api = ToApi(m, record.task_kind());
    EXPECT_EQ(s.value(), api.GetReflection()->GetDouble(api, v1::EpochMetrics::descriptor()->FindFieldByName(field)));
    // The same in a stored event of the job.
    storage::v1::JobEvent event;
    *event.mutable_epoch_metrics() = m;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
        ToApi(event, record.task_kind()).epoch_metrics().selection(), s));
  }
  // Jobs stored before kinds are classification's; no epoch ended, no selection.
  storage::v1::EpochMetrics m;
  m.set_epoch(1);
  m.set_val_accuracy(0.5);
  EXPECT_EQ(ToApi(m, storage::v1::TASK_KIND_UNSPECIFIED).selection().label(), "val accuracy");
  EXPECT_EQ(ToApi(m, storage::v1::TASK_KIND_UNSPECIFIED).selection().value(), 0.5);
  m.set_epoch(0);
  EXPECT_FALSE(ToApi(m, storage::v1::TASK_KIND_REGRESSION).has_selection());
}

TEST(RecordMappingTest, ATaskRecordMapsOntoEveryFieldOfTaskButTheComputedOnes) {
  storage::v1::TaskRecord record;
  FillEveryField(record);
  // import_warning is ImportAdapter's response only, never stored.
  ExpectEveryFieldMapped(ToApi(record), record, {"adapter_bytes", "num_parameters", "import_warning"});
}

TEST(RecordMappingTest, ADatasetRecordMapsOntoEveryFieldOfDataset) {
  storage::v1::DatasetRecord record;
  FillEveryField(record);
  ExpectEveryFieldMapped(ToApi(record), record);
}

TEST(RecordMappingTest, SameShapedMessagesAndStatesCrossBothWaysUnchanged) {
  v1::Hyperparameters h;
  FillEveryField(h);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(ToApi(ToRecord(h)), h));
  v1::DatasetChunk chunk;
  FillEveryField(chunk);
  const storage::v1::DatasetChunk stored = ToRecord(chunk);
  ASSERT_EQ(stored.examples_size(), 2);
  EXPECT_EQ(stored.examples(1).label(), chunk.examples(1).label());
  storage::v1::JobEvent event;
  FillEveryField(event);
  const v1::JobEvent api_event = ToApi(event, storage::v1::TASK_KIND_REGRESSION);
  EXPECT_EQ(api_event.kind_case(), v1::JobEvent::kProgress);
  EXPECT_EQ(api_event.progress().total_steps(), event.progress().total_steps());
  for (int s = v1::JobState_MIN; s <= v1::JobState_MAX; ++s) {
    const auto state = static_cast<v1::JobState>(s);
    EXPECT_EQ(ToApi(ToRecord(state)), state);
    EXPECT_EQ(JobStateName(ToRecord(state)), JobStateName(state));
    EXPECT_EQ(IsTerminal(ToRecord(state)), IsTerminal(state));
  }
  EXPECT_EQ(ToApi(storage::v1::TASK_STATE_READY), v1::TASK_STATE_READY);
  // Records from before kinds are sequence classification.
  EXPECT_EQ(ToApi(storage::v1::TASK_KIND_UNSPECIFIED), v1::TASK_KIND_SEQUENCE_CLASSIFICATION);
  EXPECT_EQ(ToRecord(v1::TASK_KIND_EXTRACTIVE_QA), storage::v1::TASK_KIND_EXTRACTIVE_QA);
}

TEST(JobStateTest, NamesAndTerminalStatesGoByTheEnumsNames) {
  EXPECT_EQ(JobStateName(v1::JOB_STATE_RUNNING), "RUNNING");
  EXPECT_EQ(JobStateName(storage::v1::JOB_STATE_CANCELLING), "CANCELLING");
  EXPECT_EQ(JobStateName(static_cast<v1::JobState>(99)), "99");
  std::set<std::string> terminal;
  for (int s = v1::JobState_MIN; s <= v1::JobState_MAX; ++s) {
    if (IsTerminal(static_cast<v1::JobState>(s))) terminal.insert(JobStateName(static_cast<v1::JobState>(s)));
  }
  EXPECT_THAT(terminal, ::testing::ElementsAre("CANCELLED", "FAILED", "SUCCEEDED"));
  EXPECT_FALSE(IsTerminal(static_cast<storage::v1::JobState>(99)));
}

}  // namespace
}  // namespace adapterd::api
