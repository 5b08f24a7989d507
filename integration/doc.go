// Package integration holds wakegate's black-box integration tests: they
// build the real binary once, start real `serve`, `gateway` and `worker`
// processes against the real Redis of WAKEGATE_TEST_REDIS_URL (default
// redis://127.0.0.1:6379/0) under a fresh key prefix per test, and talk to
// them only over HTTP, reading Redis to check what was (not) committed.
//
// Run with plain `go test ./integration/` (CI: `go test -race -count=1 ./...`);
// WAKEGATE_IT_BINARY=<path> runs them against a binary built elsewhere.
// The GitHub fixtures are read from testdata/github at the repository root;
// a missing fixture fails the run, it is never skipped.
package integration
