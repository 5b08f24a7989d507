// Package app is wakegate's GitHub App side (docs/design.md §3, §11): the calls it
// makes to GitHub's REST API as the App, with go-github.
//
//   - Client signs every App request with a fresh RS256 JWT and reaches a
//     repository with an installation token, cached until shortly before
//     it expires. Neither a token nor the key is ever logged.
//   - Required answers the PR tracker's "which checks are required for this
//     base branch": branch protection ∪ rulesets ∪ WAKEGATE_REQUIRED_CHECKS,
//     cached per (repository, base).
//   - ClosedFact turns a closed pull request as the REST API returns it into
//     the fact its pull_request.closed webhook would have given.
//
// The periodic work done with the App — the missed-delivery sweep and the
// reconciliation of watched pull requests — is package workers/ghapp.
// This package imports the event contract and the GitHub normalizer only;
// it must not import delivery/, the gateway or the workers.
package app
