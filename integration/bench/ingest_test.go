package bench

import (
	"testing"
)

// TestCommandSplit: the derivation phase's commands per delivery are the
// commandstats deltas divided by the deliveries, most time first, and a
// command under 0.1 µs per delivery is left out.
func TestCommandSplit(t *testing.T) {
	before := map[string]cmdStat{"evalsha": {calls: 10, usec: 1000}, "hset": {calls: 100, usec: 500}, "get": {calls: 1, usec: 1}}
	after := map[string]cmdStat{"evalsha": {calls: 20, usec: 21000}, "hset": {calls: 500, usec: 2500}, "get": {calls: 2, usec: 2},
		"xadd": {calls: 200, usec: 4000}}
	got := commandSplit(before, after, 100)
	if want := "evalsha 200.0µs 0.10, xadd 40.0µs 2.00, hset 20.0µs 4.00"; got != want {
		t.Errorf("commandSplit = %q, want %q", got, want)
	}
}
