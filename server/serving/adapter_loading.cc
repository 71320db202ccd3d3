#include "server/serving/adapter_loading.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "server/model/adapter_format.h"
#include "server/model/bert_encoder.h"
#include "server/model/serving_form.h"
#include "storage/database.h"
#include "storage/keys.h"

namespace adapterd::serving {
namespace {

void Report(const AdapterSource& source, ServingFormEvent event) {
  if (source.observer != nullptr) source.observer->OnServingForm(event);
}

void ReportLoad(const AdapterSource& source, CacheTier tier, absl::Time since) {
  if (source.observer != nullptr) source.observer->OnLoad(tier, absl::ToDoubleSeconds(absl::Now() - since));
}

model::ServingFormExpectation Expect(const model::BertEncoder& encoder, const std::string& key, bool verify) {
  return {
      .source = key, .encoder_fingerprint = encoder.fingerprint(), .dtype = encoder.dtype(), .verify_digest = verify};
}

// The canonical file parsed into the encoder's dtype and device, then a
// serving form made from it and stored (best effort). `epoch` was taken
// before anything was read.
absl::StatusOr<LoadedAdapterSet> FromCanonical(const AdapterSource& source, const std::string& tenant,
                                               const std::string& task_id, int64_t version, uint64_t epoch,
                                               absl::Time read_start) {
  const model::BertEncoder& encoder = *source.encoder;
  storage::AdapterStore& store = source.db->adapters();
  LoadedAdapterSet out;
  std::string bytes;
  if (version == 0) {
    ASSIGN_OR_RETURN(storage::AdapterStore::Current current, store.GetCurrent(tenant, task_id));
    out.version = current.version;
    bytes = std::move(current.bytes);
  } else {
    ASSIGN_OR_RETURN(bytes, store.Get(tenant, task_id, version));
    out.version = version;
  }
  ReportLoad(source, CacheTier::kHost, read_start);

  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(out.set,
                   model::DeserializeAdapterSet(bytes, encoder.config(), encoder.fingerprint(), encoder.device(),
                                                {.v1_fingerprint = encoder.weights_fingerprint(),
                                                 // Checked when stored (import, training).
                                                 .check_finite = false,
                                                 .dtype = encoder.dtype()}));
  if (out.set->dtype() != encoder.dtype() || out.set->device() != encoder.device()) {
    ASSIGN_OR_RETURN(out.set, out.set->Clone(encoder.device(), encoder.dtype()));
  }
  ReportLoad(source, CacheTier::kDevice, start);

  const std::string key = storage::keys::Adapter(tenant, task_id, out.version);
  absl::StatusOr<std::string> form = model::EncodeServingForm(*out.set, key, encoder.fingerprint(), bytes);
  if (!form.ok()) {
    LOG_FIRST_N(WARNING, 1) << "serving: cannot make the serving form of '" << key << "' (loads go on from the "
                            << "adapter file; logged once): " << form.status();
    Report(source, ServingFormEvent::kWriteFailed);
    return out;
  }
  absl::Status put = store.PutServingForm(tenant, task_id, out.version, *form, epoch);
  if (put.ok()) {
    Report(source, ServingFormEvent::kWritten);
  } else if (absl::IsAborted(put) || absl::IsNotFound(put)) {
    // A deletion raced with this load: the next load makes it.
    VLOG(1) << "serving: serving form of '" << key << "' not stored: " << put;
  } else {
    LOG_FIRST_N(WARNING, 1) << "serving: cannot store the serving form of '" << key
                            << "' (loads go on from the adapter file; logged once): " << put;
    Report(source, ServingFormEvent::kWriteFailed);
  }
  out.serving_form = std::make_shared<const std::string>(*std::move(form));
  return out;
}

}  // namespace

absl::StatusOr<LoadedAdapterSet> LoadFromStorage(const AdapterSource& source, const std::string& tenant,
                                                 const std::string& task_id, int64_t version) {
  const model::BertEncoder& encoder = *source.encoder;
  storage::AdapterStore& store = source.db->adapters();
  // Before any read (AdapterStore::PutServingForm).
  const uint64_t epoch = store.ServingFormEpoch();
  const absl::Time read_start = absl::Now();
  int64_t resolved = version;
  std::optional<std::string> form;
  if (version == 0) {
    ASSIGN_OR_RETURN(storage::AdapterStore::CurrentServingForm current, store.GetCurrentServingForm(tenant, task_id));
    resolved = current.version;
    form = std::move(current.bytes);
  } else {
    ASSIGN_OR_RETURN(form, store.GetServingForm(tenant, task_id, version));
  }
  if (!form.has_value()) return FromCanonical(source, tenant, task_id, version, epoch, read_start);

  ReportLoad(source, CacheTier::kHost, read_start);
  const std::string key = storage::keys::Adapter(tenant, task_id, resolved);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<model::AdapterSet>> set =
      model::DecodeServingForm(*form, encoder.config(), encoder.device(), Expect(encoder, key, /*verify=*/true));
  if (set.ok()) {
    ReportLoad(source, CacheTier::kDevice, start);
    Report(source, ServingFormEvent::kRead);
    return LoadedAdapterSet{resolved, *std::move(set), std::make_shared<const std::string>(*std::move(form))};
  }
  if (absl::IsFailedPrecondition(set.status())) {
    VLOG(1) << "serving: rebuilding from the adapter file: " << set.status();
    Report(source, ServingFormEvent::kStale);
    return FromCanonical(source, tenant, task_id, version, epoch, read_start);
  }
  if (absl::IsDataLoss(set.status())) {
    Report(source, ServingFormEvent::kCorrupt);
    LOG(ERROR) << "serving: " << set.status() << "; deleting it (the next load rebuilds it from the adapter file)";
    if (absl::Status d = store.DeleteServingForm(tenant, task_id, resolved); !d.ok()) {
      LOG(ERROR) << "serving: cannot delete the corrupt serving form of '" << key << "': " << d;
    }
  }
  return set.status();
}

absl::StatusOr<std::unique_ptr<model::AdapterSet>> LoadFromServingForm(const AdapterSource& source,
                                                                       const std::string& tenant,
                                                                       const std::string& task_id, int64_t version,
                                                                       const std::string& serving_form) {
  const model::BertEncoder& encoder = *source.encoder;
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(
      std::unique_ptr<model::AdapterSet> set,
      model::DecodeServingForm(serving_form, encoder.config(), encoder.device(),
                               Expect(encoder, storage::keys::Adapter(tenant, task_id, version), /*verify=*/false)));
  ReportLoad(source, CacheTier::kDevice, start);
  return set;
}

}  // namespace adapterd::serving
