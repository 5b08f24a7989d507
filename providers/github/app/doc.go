// Package app is wakegate's GitHub App side (docs/design.md §3, §11): the calls it
// makes to GitHub's REST API as the App, with go-github.
//
//   - Client signs every App request with a fresh RS256 JWT and reaches a
//     repository with an installation token, cached until shortly before
//     it expires. Neither a token nor the key is ever logged.
//   - Sweeper pages the App's webhook deliveries back to a watermark and
//     asks GitHub to redeliver each GUID that never got through and that
//     wakegate did not refuse on purpose: periodically, and on demand for
//     POST /admin/github/redeliver-failed.
//   - Required answers the PR tracker's "which checks are required for this
//     base branch": branch protection ∪ rulesets ∪ WAKEGATE_REQUIRED_CHECKS,
//     cached per (repository, base).
//   - Reconciler polls each watched repository once per tick for pull
//     requests closed since the last tick and records what webhooks missed
//     through the PR tracker, under the fact id the webhook would have had;
//     its Baseline fetches a PR wakegate has never seen when someone
//     subscribes to it.
//
// Sweeper.Tick and Reconciler.Tick are one periodic pass each; the
// worker runs them on workers/schedule, so N workers run each once per
// period. A sweep also takes a lock, so an operator's and a periodic one
// never overlap.
// It imports the event contract, the GitHub normalizer and the stores it
// records into; it must not import the gateway or the workers.
package app
