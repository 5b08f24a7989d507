// Package outbound keeps what outbound pushes need in Redis and on the wire
// (docs/design.md §8): the push endpoint of each (workspace, party) with its
// signing secret, the SSRF guard that keeps pushes off internal networks,
// Standard Webhooks signing and verification, the bodies (fixed when a
// wake is decided, under a webhook id derived from the inbox seq), the
// per-endpoint circuit breaker, and the dead letters of pushes that never
// got through.
//
// Sending, retrying and queueing are package workers/tasks; this package
// holds state and wire formats only. It imports the inbox's entry type and
// the event contract; it must not import the gateway or the workers.
//
// Keys (every one starts with the deployment prefix; one endpoint's keys
// share a hash tag, so its scripts run in one cluster slot):
//
//	<prefix>:{<prefix>:push:<ws>:<party>}:ep   hash    url, format, secret, created_at, updated_at, disabled_at, disabled_reason
//	<prefix>:{<prefix>:push:<ws>:<party>}:br   hash    breaker: fails (consecutive), open_until, probe_until (unix ms)
//	<prefix>:{<prefix>:push:<ws>:<party>}:bw   zset    breaker window: one member per attempt, scored by its time
//	<prefix>:{<prefix>:push:dead}:h            hash    dead letter id → JSON
//	<prefix>:{<prefix>:push:dead}:z            zset    dead letter id scored by when it died
//	<prefix>:push:sent:<webhook id>            string  a push that got its 2xx, kept a day
package outbound

import (
	"fmt"

	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/kind"
)

// ErrInvalid is wrapped by the error of a call with bad input (a malformed
// URL, format or secret, a party that breaks the grammar); nothing was
// written.
var ErrInvalid = kind.New(kind.Invalid, "push: invalid input")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

func prefixOr(prefix string) string {
	if prefix == "" {
		return keyspace.DefaultPrefix
	}
	return prefix
}

// Formats of an endpoint's bodies.
const (
	FormatStandard = "standard" // {"webhook_id", "kind", "party", "entry", "event"}
	FormatSlack    = "slack"    // {"text"}: what a person reads
)
