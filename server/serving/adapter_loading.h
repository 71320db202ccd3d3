// Loading one task version for AdapterCache: (tenant, task_id, version) ->
// an AdapterSet on the encoder's device, in its dtype (docs/ARCHITECTURE.md,
// "server/serving"). What AdapterCache::Load does below its tiers.
//
// From RocksDB, the version's serving form (server/model/serving_form.h) is
// read first, without RocksDB's checksums (its own XXH3-64 digest is checked
// instead), and decoded with one copy per tensor. When there is none, or it
// is stale (made for another encoder, dtype or layout), the canonical
// adapter file is read and parsed as before, and a serving form is made
// from the set and stored for the next cold load. Storing it is best effort:
// a failed write (disk full, closed database) is logged once per process
// and the load goes on. Either way the serving-form bytes are returned for
// the host tier, whose hits then decode them without the digest (verified
// when read).
//
// Errors: those of AdapterStore (NOT_FOUND, FAILED_PRECONDITION for a task
// without a ready version) and DeserializeAdapterSet (FAILED_PRECONDITION
// for another encoder, INVALID_ARGUMENT for a malformed file); DATA_LOSS
// naming the key when a stored serving form is corrupt (a flipped byte):
// that load fails, the corrupt form is deleted, and the next load rebuilds
// it from the canonical file, which is never touched.
//
// Thread safety: thread-safe (no state but the database's); loads of one
// version may run concurrently. Ownership: AdapterSource's pointers are
// borrowed and must outlive the call.
#ifndef ADAPTERD_SERVER_SERVING_ADAPTER_LOADING_H_
#define ADAPTERD_SERVER_SERVING_ADAPTER_LOADING_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/model/adapter_set.h"
#include "server/serving/serving_observer.h"

namespace adapterd::model {
class BertEncoder;
}
namespace adapterd::storage {
class Database;
}

namespace adapterd::serving {

// Where loads read from and report to.
struct AdapterSource {
  const model::BertEncoder* encoder = nullptr;  // required
  storage::Database* db = nullptr;              // required
  ServingObserver* observer = nullptr;          // optional: OnLoad, OnServingForm
};

struct LoadedAdapterSet {
  int64_t version = 0;  // the version loaded (the current one for version 0)
  // On the encoder's device, in its dtype.
  std::unique_ptr<model::AdapterSet> set;
  // The version's serving form (what the host tier caches); null when none
  // could be made.
  std::shared_ptr<const std::string> serving_form;
};

// Loads `version` (0 = the task's current version, read with the task
// record from one snapshot) from RocksDB. Reports the read as
// OnLoad(kHost, ...) and the decode as OnLoad(kDevice, ...).
absl::StatusOr<LoadedAdapterSet> LoadFromStorage(const AdapterSource& source, const std::string& tenant,
                                                 const std::string& task_id, int64_t version);

// Decodes a serving form already verified (a host-tier hit): no digest, one
// copy per tensor. Reports OnLoad(kDevice, ...).
absl::StatusOr<std::unique_ptr<model::AdapterSet>> LoadFromServingForm(const AdapterSource& source,
                                                                       const std::string& tenant,
                                                                       const std::string& task_id, int64_t version,
                                                                       const std::string& serving_form);

}  // namespace adapterd::serving

#endif  // ADAPTERD_SERVER_SERVING_ADAPTER_LOADING_H_
