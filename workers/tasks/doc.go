// Package tasks runs wakegate's Asynq tasks: the side effects that need
// retries or timing (docs/design.md §1). They ride WAKEGATE_PUSH_QUEUES
// queues per deployment, one recipient's tasks in one (queues.go), and one
// Asynq server per worker process (server.go), in three
// stages, one set of files each:
//
//   - deliver*.go, push:deliver (Pusher): one signed outbound push per wake
//     to a party with an endpoint, retried, dead-lettered, redelivered.
//   - release*.go, holds:release (Releaser): the end of a hold (rate cap,
//     quiet hours, PAUSED, quiet's until) as one digest push.
//   - escalate*.go, escalate:check (Escalator): a recipient's escalation
//     timer, climbing what went unreached (docs/design.md §8).
//
// Delivery (deliver.go, push:deliver) sends wakegate's outbound pushes
// (docs/design.md §8): the router enqueues one push:deliver task per wake
// to a party with an endpoint, under the task id of its webhook-id (so a re-run of the
// routing enqueues nothing twice); the handler signs the fixed body
// (Standard Webhooks), POSTs it through the SSRF guard with a 10 s
// timeout and no redirects, and decides: 2xx delivered (and, for a human:
// party, the entry acked), 410 the endpoint disabled, 429/503 with
// Retry-After retried after it, anything else retried on the
// WAKEGATE_PUSH_RETRY schedule with ±20 % jitter. A per-endpoint circuit
// breaker defers attempts to a failing endpoint without consuming them;
// after the last attempt the push is a dead letter in wakegate's own
// store, which an operator lists and redelivers.
//
// The task payload carries references — the webhook-id, the endpoint's
// (workspace, party), the inbox seq — never the body nor the secret: the
// body is stored once under the webhook-id when the wake is decided (the
// same bytes on every retry) and the secret is read at send time, so the
// queue and the monitor that shows it hold no event data (docs/design.md
// §10).
//
// The stores are elsewhere: endpoints, the breaker, dead letters and the
// wire format in delivery/outbound, holds in delivery/holds, escalation
// state in delivery/escalate.
package tasks
