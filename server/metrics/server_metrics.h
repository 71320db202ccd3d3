// ServerMetrics: every adapterd metric (docs/METRICS.md), registered on
// one Registry. docs/METRICS.md documents each: name, type, labels, meaning.
//
// Label rules: method, code, tenant, tier, reason, kind, state, device; never
// a task, job or request id (unbounded cardinality).
//
// Thread safety: the families are thread-safe (see metrics.h). Ownership:
// references into the registry, which must outlive this struct.
#ifndef ADAPTERD_SERVER_METRICS_SERVER_METRICS_H_
#define ADAPTERD_SERVER_METRICS_SERVER_METRICS_H_

#include "server/metrics/metrics.h"

namespace adapterd::metrics {

// Bucket layouts, chosen for what each histogram measures.
// Latency of a call or a batch wait: 0.5 ms .. 30 s, roughly x2.5 per step.
BucketBoundaries LatencyBuckets();
// Rows or tasks per forward pass: powers of two up to 512.
BucketBoundaries CountBuckets();
// A ratio in [0, 1]: steps of 0.1.
BucketBoundaries RatioBuckets();
// An adapter load (RocksDB read or deserialisation): 0.1 ms .. 10 s.
BucketBoundaries LoadBuckets();

struct ServerMetrics {
  explicit ServerMetrics(Registry& registry);

  Family<Counter>& requests_total;                 // {method, code, tenant}
  Family<Histogram>& request_duration_seconds;     // {method, tenant}
  Family<Counter>& predict_texts_total;            // {tenant}
  Family<Histogram>& batch_size;                   // rows per forward pass
  Family<Histogram>& batch_tasks;                  // distinct tasks per forward pass
  Family<Histogram>& batch_queue_wait_seconds;     // longest row wait per batch
  Family<Histogram>& batch_padding_ratio;          // padding / all positions
  Family<Counter>& batch_dropped_total;            // {reason}
  Family<Counter>& adapter_cache_hits_total;       // {tier}
  Family<Counter>& adapter_cache_misses_total;     // {tier}
  Family<Counter>& adapter_cache_evictions_total;  // {tier}
  Family<Gauge>& adapter_cache_bytes;              // {tier}
  Family<Gauge>& adapter_cache_entries;            // {tier}
  Family<Gauge>& adapter_cache_budget_bytes;       // {tier}
  Family<Histogram>& adapter_load_seconds;         // {tier}
  Family<Gauge>& training_jobs;                    // {state}
  Family<Gauge>& training_queue_depth;             // {tenant}
  Family<Counter>& training_steps_total;
  Family<Counter>& training_examples_total;
  Family<Counter>& executor_busy_seconds_total;  // {kind}
  Family<Gauge>& device_memory_bytes;            // {device, kind}
  Family<Gauge>& model_info;                     // 1; {fingerprint, device, dtype, layers, hidden}
  Family<Gauge>& dtype_calibration_seconds;      // {dtype}: per row, --dtype auto's start-up timing
  Family<Gauge>& build_info;                     // 1; {version}
  Family<Gauge>& serving;                        // 1 serving, 0 starting or draining
  Family<Gauge>& data_dir_available_bytes;       // file system of --data_dir
  Family<Gauge>& data_dir_capacity_bytes;
  // Admission budgets (common/usage_ledger.h), at scrape time.
  Family<Gauge>& admission_used;              // {budget}: held now, all tenants
  Family<Gauge>& admission_limit;             // {budget}: the server-wide limit (absent when unlimited)
  Family<Counter>& admission_refusals_total;  // {budget}: reservations refused (a tenant's limit or the server's)
  Family<Counter>& backups_total;             // {result: ok, error}
  Family<Gauge>& backup_last_success_timestamp_seconds;
  Family<Gauge>& backup_last_duration_seconds;
  // The gRPC server's TLS certificate (0 without TLS).
  Family<Gauge>& tls_certificate_not_before_timestamp_seconds;
  Family<Gauge>& tls_certificate_expiry_timestamp_seconds;
  // Memory by owner, where process_resident_memory_bytes goes.
  Family<Gauge>& process_heap_bytes;                    // {state: in_use, free}: glibc malloc
  Family<Gauge>& storage_memory_bytes;                  // {kind: memtables, table_readers, block_cache}
  Family<Counter>& process_heap_released_bytes_total;   // resident bytes given back (ReleaseFreeHeap)
  Family<Counter>& process_heap_release_seconds_total;  // time spent giving them back
  // The process, under the names every Prometheus client library uses.
  Family<Gauge>& process_resident_memory_bytes;
  Family<Gauge>& process_virtual_memory_bytes;
  Family<Gauge>& process_open_fds;
  Family<Gauge>& process_max_fds;
  Family<Counter>& process_cpu_seconds_total;
  Family<Gauge>& process_start_time_seconds;

 private:
  // The constructor's second step: the series known up front (unlabelled
  // families, and each label value a family always has) exist from the
  // start, at 0, so rate() works from the first scrape.
  void AddFixedSeries();
};

}  // namespace adapterd::metrics

#endif  // ADAPTERD_SERVER_METRICS_SERVER_METRICS_H_
