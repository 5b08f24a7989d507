package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHumanPushesNeverGoSilent: a human: party with a push endpoint,
// subscribed to session:x, gets turn_ended e1, e2 20 ms later and e3 5 s
// later. e2 folds into e1's entry after e1's push was decided, so the
// push's 2xx cannot ack it; it must be pushed again (docs/design.md §7: a 2xx
// leaves the party caught up with what it was sent), and e3 must then
// wake as a fresh entry. Every event reaches the endpoint and nothing is
// left unacked.
func TestHumanPushesNeverGoSilent(t *testing.T) {
	t.Parallel()
	ps := newPushStack(t)
	ops := ps.token(t, "human:ops", "default", "subscribe inbox")
	if r := ps.c.send(t, http.MethodPost, "/v1/subscriptions", ops, map[string]any{"subjects": []string{"session:silent-x"}}); r.Status != 201 {
		t.Fatalf("subscribe: %s", r)
	}
	ps.endpoint(t, "human:ops")
	w := ps.token(t, "session:silent-x", "default", "events:push")
	ps.c.accept(t, w, idleTurn("silent-e1", nil))
	time.Sleep(20 * time.Millisecond) // the gap the scenario is about, not a wait for an outcome
	ps.c.accept(t, w, idleTurn("silent-e2", nil))
	time.Sleep(5 * time.Second)
	ps.c.accept(t, w, idleTurn("silent-e3", nil))

	waitFor(t, 30*time.Second, "every event pushed and nothing unacked", func() (bool, string) {
		ps.settle(t)
		var missing []string
		for _, id := range []string{"silent-e1", "silent-e2", "silent-e3"} {
			if !ps.recv.carried(id) {
				missing = append(missing, id)
			}
		}
		pg := ps.c.inbox(t, ops, "")
		return len(missing) == 0 && len(pg.Entries) == 0,
			fmt.Sprintf("not pushed [%s]; unacked %s; pushes %v", strings.Join(missing, " "), describeEntries(pg.Entries), ps.recv.got())
	})
}
