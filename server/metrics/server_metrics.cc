#include "server/metrics/server_metrics.h"

namespace adapterd::metrics {

BucketBoundaries LatencyBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}
BucketBoundaries CountBuckets() { return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}; }
BucketBoundaries RatioBuckets() { return {0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}; }
BucketBoundaries LoadBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1, 10};
}

ServerMetrics::ServerMetrics(Registry& r)
    : requests_total(r.AddCounter("adapterd_requests_total",
                                  "API calls finished, by method, status code, tenant and protocol (grpc, or http for "
                                  "calls through the HTTP gateway).")),
      request_duration_seconds(r.AddHistogram("adapterd_request_duration_seconds",
                                              "Server-side latency of API calls, by method, tenant and protocol.",
                                              LatencyBuckets())),
      predict_texts_total(r.AddCounter("adapterd_predict_texts_total", "Texts received in Predict calls.")),
      batch_size(r.AddHistogram("adapterd_batch_size", "Rows per mixed-task forward pass.", CountBuckets())),
      batch_tasks(
          r.AddHistogram("adapterd_batch_tasks", "Distinct tasks per mixed-task forward pass.", CountBuckets())),
      batch_queue_wait_seconds(r.AddHistogram("adapterd_batch_queue_wait_seconds",
                                              "Longest wait of a batch's rows between enqueue and compute.",
                                              LatencyBuckets())),
      batch_padding_ratio(r.AddHistogram("adapterd_batch_padding_ratio",
                                         "Padding positions over all positions of a forward pass.", RatioBuckets())),
      batch_dropped_total(r.AddCounter("adapterd_batch_dropped_total",
                                       "Rows failed without being computed, by reason (deadline, shutdown).")),
      adapter_cache_hits_total(
          r.AddCounter("adapterd_adapter_cache_hits_total", "Adapter cache lookups served from the tier.")),
      adapter_cache_misses_total(
          r.AddCounter("adapterd_adapter_cache_misses_total", "Adapter cache lookups the tier could not serve.")),
      adapter_cache_evictions_total(
          r.AddCounter("adapterd_adapter_cache_evictions_total", "Adapters evicted from the tier by its LRU.")),
      adapter_cache_bytes(r.AddGauge("adapterd_adapter_cache_bytes", "Bytes of adapters held by the tier.")),
      adapter_cache_entries(r.AddGauge("adapterd_adapter_cache_entries", "Adapters held by the tier.")),
      adapter_cache_budget_bytes(r.AddGauge("adapterd_adapter_cache_budget_bytes", "Byte budget of the tier.")),
      adapter_load_seconds(r.AddHistogram("adapterd_adapter_load_seconds",
                                          "Time to load an adapter into the tier (host: RocksDB read; device: "
                                          "deserialise and convert).",
                                          LoadBuckets())),
      training_jobs(r.AddGauge("adapterd_training_jobs", "Training jobs stored, by state.")),
      training_queue_depth(
          r.AddGauge("adapterd_training_queue_depth", "Training jobs waiting in the queue, by tenant.")),
      training_steps_total(r.AddCounter("adapterd_training_steps_total", "Optimiser steps taken by training jobs.")),
      training_examples_total(
          r.AddCounter("adapterd_training_examples_total", "Training examples processed (forward and backward).")),
      executor_busy_seconds_total(r.AddCounter("adapterd_executor_busy_seconds_total",
                                               "Seconds the device executor spent running work, by kind.")),
      device_memory_bytes(
          r.AddGauge("adapterd_device_memory_bytes", "Bytes resident on the device, by kind (encoder, adapters).")),
      model_info(r.AddGauge("adapterd_model_info", "The loaded encoder (value 1).")),
      dtype_calibration_seconds(r.AddGauge(
          "adapterd_dtype_calibration_seconds",
          "Seconds per row (one text through the encoder's first layer) --dtype auto measured at start-up, by "
          "dtype; absent when it measured nothing.")),
      build_info(r.AddGauge("adapterd_build_info", "adapterd's version (value 1).")),
      serving(r.AddGauge("adapterd_serving",
                         "1 while the server answers adapterd calls; 0 while it starts (encoder loading) or drains.")),
      data_dir_available_bytes(r.AddGauge("adapterd_data_dir_available_bytes",
                                          "Bytes available to adapterd on the file system of --data_dir.")),
      data_dir_capacity_bytes(
          r.AddGauge("adapterd_data_dir_capacity_bytes", "Size in bytes of the file system of --data_dir.")),
      admission_used(r.AddGauge("adapterd_admission_used",
                                "What an admission budget holds now, all tenants together (docs/API.md, \"Limits\").")),
      admission_limit(r.AddGauge("adapterd_admission_limit", "An admission budget's server-wide limit.")),
      admission_refusals_total(
          r.AddCounter("adapterd_admission_refusals_total",
                       "Reservations an admission budget refused (a tenant's limit or the server's), by budget.")),
      backups_total(r.AddCounter("adapterd_backups_total", "Database backups taken, by result (ok, error).")),
      backup_last_success_timestamp_seconds(
          r.AddGauge("adapterd_backup_last_success_timestamp_seconds",
                     "Unix time of the last successful backup; 0 before the first one.")),
      backup_last_duration_seconds(
          r.AddGauge("adapterd_backup_last_duration_seconds", "Seconds the last backup took (successful or not).")),
      tls_certificate_not_before_timestamp_seconds(
          r.AddGauge("adapterd_tls_certificate_not_before_timestamp_seconds",
                     "Unix time from which the gRPC server's TLS certificate is valid; 0 without TLS.")),
      tls_certificate_expiry_timestamp_seconds(
          r.AddGauge("adapterd_tls_certificate_expiry_timestamp_seconds",
                     "Unix time at which the gRPC server's TLS certificate expires; 0 without TLS.")),
      process_heap_bytes(r.AddGauge("adapterd_process_heap_bytes",
                                    "Bytes of the C heap by state: in_use (allocated, not freed) and free "
                                    "(freed, kept by malloc for reuse).")),
      storage_memory_bytes(r.AddGauge("adapterd_storage_memory_bytes",
                                      "Bytes RocksDB holds in memory, by kind (memtables, table_readers, "
                                      "block_cache).")),
      process_heap_released_bytes_total(r.AddCounter(
          "adapterd_process_heap_released_bytes_total",
          "Resident bytes of freed C-heap memory returned to the kernel (--heap_release_interval_seconds).")),
      process_heap_release_seconds_total(r.AddCounter("adapterd_process_heap_release_seconds_total",
                                                      "Seconds spent returning freed C-heap memory to the kernel.")),
      process_resident_memory_bytes(r.AddGauge("process_resident_memory_bytes", "Resident memory size in bytes.")),
      process_virtual_memory_bytes(r.AddGauge("process_virtual_memory_bytes", "Virtual memory size in bytes.")),
      process_open_fds(r.AddGauge("process_open_fds", "Number of open file descriptors.")),
      process_max_fds(r.AddGauge("process_max_fds", "Maximum number of open file descriptors.")),
      process_cpu_seconds_total(
          r.AddCounter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.")),
      process_start_time_seconds(
          r.AddGauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.")) {
  AddFixedSeries();
}

void ServerMetrics::AddFixedSeries() {
  for (Family<Histogram>* h : {&batch_size, &batch_tasks, &batch_queue_wait_seconds, &batch_padding_ratio}) {
    h->Add({});
  }
  serving.Add({});
  for (const char* result : {"ok", "error"}) backups_total.Add({{"result", result}});
  backup_last_success_timestamp_seconds.Add({});
  backup_last_duration_seconds.Add({});
  tls_certificate_not_before_timestamp_seconds.Add({});
  tls_certificate_expiry_timestamp_seconds.Add({});
  training_steps_total.Add({});
  process_heap_released_bytes_total.Add({});
  process_heap_release_seconds_total.Add({});
  training_examples_total.Add({});
  for (const char* tier : {"host", "device"}) {
    adapter_cache_hits_total.Add({{"tier", tier}});
    adapter_cache_misses_total.Add({{"tier", tier}});
    adapter_cache_evictions_total.Add({{"tier", tier}});
    adapter_cache_bytes.Add({{"tier", tier}});
    adapter_cache_entries.Add({{"tier", tier}});
  }
  for (const char* reason : {"deadline", "shutdown"}) batch_dropped_total.Add({{"reason", reason}});
  for (const char* kind : {"inference", "training"}) executor_busy_seconds_total.Add({{"kind", kind}});
  build_info.Add({{"version", ADAPTERD_VERSION}}).Set(1);
}

}  // namespace adapterd::metrics
