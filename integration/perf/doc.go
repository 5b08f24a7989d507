// Package perf holds wakegate's committed performance measurements against
// real Redis ("Performance"; results in
// docs/performance.md), on serve's assembly (newStack, startWorkers, serve):
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
//   - TestWakeLatency: webhook received → wake visible to a long-polling
//     recipient, 500 deliveries/s over 500 recipients, beside the bare
//     baseline at the same rate. Long only with WAKEGATE_PERF=1.
//   - BenchmarkFanout: one event fanned out to 10 and to 1,000 recipients
//     with push endpoints on a local receiver: commit to the
//     last signed delivery, and CPU per delivery at 1,000 ÷ at 10.
//
// Everything here is in _test.go files; this file only names the package.
package perf
