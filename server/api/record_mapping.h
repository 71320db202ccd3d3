// Where the public API's messages (adapterd.v1,
// proto/adapterd/v1/adapterd_service.proto) and the stored records
// (adapterd.storage.v1, proto/adapterd/storage/v1/records.proto) meet: the
// one place that turns one into the other, so that the wire contract and the
// disk schema can change separately.
//
// Messages of the same shape on both sides today (Hyperparameters, JobEvent
// and what it holds, Example and DatasetChunk, AdapterConfig) are copied
// through their wire form, and enums of the same values by number. The one
// field the API adds to them, EpochMetrics.selection, is computed here from
// the job's kind (model::KindSpec), not stored:
// tests/api/record_mapping_test.cc proves, field by field, that each pair
// still has the same shape. When one side changes, that test fails, and the
// pair gets a field-by-field mapping here. Messages of different shapes
// (a job record and a TrainingJob, ...) are mapped field by field, and the
// test proves that no field of the API's message is left out.
//
// Thread safety: pure functions.
#ifndef ADAPTERD_SERVER_API_RECORD_MAPPING_H_
#define ADAPTERD_SERVER_API_RECORD_MAPPING_H_

#include "proto/adapterd/storage/v1/records.pb.h"
#include "proto/adapterd/v1/adapterd_service.pb.h"

namespace adapterd::api {

// Stored -> API.
v1::JobState ToApi(storage::v1::JobState state);
// A record's UNSPECIFIED (written before kinds existed) is sequence
// classification.
v1::TaskKind ToApi(storage::v1::TaskKind kind);
v1::TaskState ToApi(storage::v1::TaskState state);
v1::Hyperparameters ToApi(const storage::v1::Hyperparameters& hyperparameters);
// An event of a job of `kind`: its EpochMetrics get their selection.
v1::JobEvent ToApi(const storage::v1::JobEvent& event, storage::v1::TaskKind kind);
// An epoch of a job of `kind` with its selection (model::KindSpec's metric,
// label and form); an epoch 0 (none ended yet) gets none.
v1::EpochMetrics ToApi(const storage::v1::EpochMetrics& metrics, storage::v1::TaskKind kind);
// The job as callers see it: the record's error message passes through
// CallerMessage (server/api/grpc_status.h), as every error text does.
v1::TrainingJob ToApi(const storage::v1::JobRecord& job);
v1::Dataset ToApi(const storage::v1::DatasetRecord& record);
// Every field but the two the backend computes (adapter_bytes,
// num_parameters).
v1::Task ToApi(const storage::v1::TaskRecord& task);

// API -> stored.
storage::v1::JobState ToRecord(v1::JobState state);
storage::v1::TaskKind ToRecord(v1::TaskKind kind);
storage::v1::Hyperparameters ToRecord(const v1::Hyperparameters& hyperparameters);
storage::v1::DatasetChunk ToRecord(const v1::DatasetChunk& chunk);

}  // namespace adapterd::api

#endif  // ADAPTERD_SERVER_API_RECORD_MAPPING_H_
