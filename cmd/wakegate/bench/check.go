package bench

import "fmt"

// Check is the delivery ledger and the journal read against what the
// tool sent and what its supervisors saw.
type Check struct {
	Sent       int `json:"sent"`       // facts acknowledged (2xx) by the gateway
	Journaled  int `json:"journaled"`  // of those, in the journal
	Expected   int `json:"expected"`   // (event, recipient) deliveries the routing rules call for
	Delivered  int `json:"delivered"`  // of those, in the delivery ledger exactly once
	Lost       int `json:"lost"`       // expected and not in the ledger (or a sent fact not journaled)
	Duplicated int `json:"duplicated"` // in the ledger more than once (distinct inbox seqs), or journaled twice
	Misrouted  int `json:"misrouted"`  // delivered to a party the rules do not name
	// Examples name a few of each problem.
	Examples []string `json:"examples,omitempty"`
}

func (c *Check) String() string {
	return fmt.Sprintf("ledger check: %d facts sent, %d journaled; %d deliveries expected, %d delivered once; lost %d, duplicated %d, misrouted %d",
		c.Sent, c.Journaled, c.Expected, c.Delivered, c.Lost, c.Duplicated, c.Misrouted)
}

// OK says nothing was lost, duplicated or misrouted.
func (c *Check) OK() bool { return c.Lost == 0 && c.Duplicated == 0 && c.Misrouted == 0 }
