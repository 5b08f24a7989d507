// Package perf holds wakegate's committed performance measurements against
// real Redis (issue 2, "Performance"; results in docs/performance.md):
//
//   - BenchmarkIngest: signed 28 KB GitHub deliveries through the real
//     gateway beside a bare baseline handler (read, HMAC, one XADD), with
//     the derive worker running and its lag reported at the end.
//   - TestOpenLoopLatency: 1,000 requests/s offered on a fixed schedule
//     against a private redis-server with AOF everysec; p50/p90/p99/max for
//     the baseline and the gateway. Long only with WAKEGATE_PERF=1.
//   - TestMemoryBudget: MEMORY USAGE of raw deliveries and journal entries,
//     asserted against the budgets.
//   - BenchmarkPush: single-event agent pushes at 64 connections beside the
//     same baseline.
//
// Everything here is in _test.go files; this file only names the package.
package perf
