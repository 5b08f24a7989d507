// Package ghapp runs the GitHub App's periodic work (docs/design.md §3,
// §11), with the App client of package providers/github/app:
//
//   - Sweeper pages the App's webhook deliveries back to a watermark and
//     asks GitHub to redeliver each GUID that never got through and that
//     wakegate did not refuse on purpose: periodically, and on demand for
//     POST /admin/github/redeliver-failed.
//   - Reconciler polls each watched repository once per tick for pull
//     requests closed since the last tick and records what webhooks missed
//     through the PR tracker, under the fact id the webhook would have had
//     (app.ClosedFact); its Baseline fetches a PR wakegate has never seen
//     when someone subscribes to it.
//
// Sweeper.Tick and Reconciler.Tick are one periodic pass each; the
// worker runs them on workers/schedule, so N workers run each once per
// period. A sweep also takes a lock, so an operator's and a periodic one
// never overlap. It imports the event contract, the App client and the
// stores it records into; it must not import the gateway.
package ghapp
