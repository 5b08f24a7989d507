package health_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/workers/health"
)

// Every invariant of docs/design.md §9, violated on purpose and routed by the
// real router: the report names each with a count and an example; the
// periodic pass repairs I2 (the overdue unreached entry's timer scheduled
// again through the escalator) and I6 (the watch on the merged PR
// closed), and each finding clears when what caused it is fixed — a lease
// or a default taken, a sighting, an hour passing.
func TestReportNamesEveryInvariant(t *testing.T) {
	w := newWorld(t, health.Config{})
	w.settings(`{"escalate_after": "2m", "rate": {"per": "1h", "burst": 1}}`)
	const repo = "org/app"
	prSubj := event.PRSubject(repo, 5)

	w.spawn("orphan", "")                                                     // I1: a root, no default controller
	w.push("session:orphan", "orphan", "session.turn_ended", `{"idle":true}`) // I2: nobody to hear it: a fault
	// ghost never makes a request and has no endpoint: kid's turn end
	// reaches its inbox (I3, I7) and its check will be overdue (I2).
	w.spawn("kid", "ghost")
	w.push("session:kid", "kid", "session.turn_ended", `{"idle":true}`)
	// I4: driven is prompted by a person and sent control by another
	// session within the hour.
	w.spawn("driven", "ghost")
	w.push("session:driven", "driven", "session.prompted", `{"source":"human:alice"}`)
	w.message("session:boss2", "driven", "control")
	w.message("session:boss3", "driven", "info") // info: not a driver
	// I5: loud is woken three times within the hour; the rate lets two.
	for _, k := range []string{"k1", "k2", "k3"} {
		w.spawn(k, "loud")
		w.push("session:"+k, k, "session.turn_ended", `{"idle":true}`)
	}
	// I6: a watch "until never" on a PR that then merges.
	if _, err := w.subs.Create(w.ctx, subscriptions.Subscription{Workspace: ws, Owner: "session:watcher",
		Subjects: []string{prSubj}, Until: subscriptions.UntilNever}, w.now); err != nil {
		t.Fatal(err)
	}
	w.apply(pr(repo, "opened", 5, "aaa", w.now))
	w.apply(pr(repo, "closed", 5, "aaa", w.now.Add(time.Second)))
	w.routeAll()
	// loud and watcher read their inboxes: reached (no I2, no I7).
	for _, p := range []string{"session:loud", "session:watcher"} {
		if err := w.reg.Seen(w.ctx, ws, p, w.at(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}

	now := w.at(2*time.Minute + 11*time.Second) // ghost's entry due at +2m, overdue past +2m10s
	r := w.report(now)
	if r.OK || r.Workspace != ws {
		t.Fatalf("report %+v: want not ok", r)
	}
	for _, c := range []struct {
		id    string
		count int64
		names []string
	}{
		{"I1", 1, []string{`"session:orphan"`, `"resolved":"none"`}},
		{"I2", 2, []string{`"kind":"fault"`, `"subject":"session:orphan"`, `"kind":"entry"`, `"party":"session:ghost"`, `"reason":"unreached"`}},
		{"I4", 1, []string{`"session":"session:driven"`, `"human:alice"`, `"session:boss2"`}},
		{"I5", 1, []string{`"party":"session:loud"`, `"wakes_last_hour":3`, `"budget":2`}},
		{"I6", 1, []string{`"subject":"` + prSubj + `"`, `"owner":"session:watcher"`, `"ended":"github.pull_request.closed"`}},
		{"I7", 1, []string{`"party":"session:ghost"`, `"last_seen":null`}},
	} {
		row := inv(t, r, c.id)
		ex := examples(row)
		if row.Count != c.count || row.OK {
			t.Errorf("%s: count %d ok %v, want %d; examples:\n%s", c.id, row.Count, row.OK, c.count, ex)
		}
		for _, n := range c.names {
			if !strings.Contains(ex, n) {
				t.Errorf("%s examples lack %s:\n%s", c.id, n, ex)
			}
		}
		if strings.Contains(ex, "boss3") {
			t.Errorf("%s names the info message's sender:\n%s", c.id, ex)
		}
	}
	if row := inv(t, r, "I3"); !row.OK || row.Count < 3 || !strings.Contains(examples(row), `"party":"session:loud","unacked":3`) {
		t.Errorf("I3: count %d ok %v\n%s", row.Count, row.OK, examples(row))
	}
	if n := w.esc.count("session:ghost"); n != 1 { // the router's, when it armed the entry
		t.Fatalf("a report scheduled escalations: %d calls for ghost", n)
	}
	// A report writes no findings and leaves the sweep's queues: the
	// periodic pass still has every journaled subject to evaluate.
	tag := w.prefix + ":{hl:" + ws + "}"
	if n := w.rdb.Exists(w.ctx, tag+":f:I1", tag+":f:I6", tag+":due", tag+":stamp").Val(); n != 0 {
		t.Errorf("a report wrote %d of the sweep's keys", n)
	}
	if n := w.rdb.ZCard(w.ctx, tag+":dirty").Val(); n != 7 { // orphan kid driven k1 k2 k3, #5
		t.Errorf("%d dirty subjects left after a report, want the 7 journaled", n)
	}

	// The periodic pass repairs what it can.
	st := w.sweep(w.sw, now)
	if st.Repaired != 2 {
		t.Errorf("repaired %d, want 2 (ghost's overdue entry, the watch)", st.Repaired)
	}
	if n := w.esc.count("session:ghost"); n != 2 {
		t.Errorf("ghost's timer scheduled %d times, want again by the sweep", n)
	}
	if subs, err := w.subs.List(w.ctx, ws, "session:watcher"); err != nil || len(subs) != 0 {
		t.Errorf("the watch on the merged PR: %+v, %v; want closed", subs, err)
	}
	r = w.report(now.Add(time.Second))
	if row := inv(t, r, "I6"); row.Count != 0 || row.Repaired != 1 {
		t.Errorf("I6 after the sweep: count %d repaired %d\n%s", row.Count, row.Repaired, examples(row))
	}
	if row := inv(t, r, "I2"); row.Repaired != 1 || row.Count != 2 {
		t.Errorf("I2 after the sweep: count %d repaired %d (the entry stays overdue until the escalator runs)\n%s",
			row.Count, row.Repaired, examples(row))
	}
	// A second pass repairs nothing twice.
	if st := w.sweep(w.sw, now.Add(2*time.Second)); st.Repaired != 0 {
		t.Errorf("second pass repaired %d", st.Repaired)
	}

	// Fixes clear the findings: a default controller (a settings change
	// re-evaluates every session), ghost reading its inbox, the hour
	// passing for the drivers and the wakes.
	w.settings(`{"default_controller": "human:ops"}`)
	if err := w.reg.Seen(w.ctx, ws, "session:ghost", now.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	w.sweep(w.sw, now.Add(4*time.Second))
	r = w.report(now.Add(4 * time.Second))
	for id, want := range map[string]int64{"I1": 0, "I7": 0, "I2": 1} { // the fault stays a day
		if row := inv(t, r, id); row.Count != want {
			t.Errorf("%s once fixed: count %d, want %d\n%s", id, row.Count, want, examples(row))
		}
	}
	later := now.Add(time.Hour + time.Minute)
	st = w.sweep(w.sw, later)
	r = w.report(later)
	for _, id := range []string{"I4", "I5"} {
		if row := inv(t, r, id); row.Count != 0 {
			t.Errorf("%s an hour later: count %d\n%s", id, row.Count, examples(row))
		}
	}
	if st.Sessions == 0 || st.Parties == 0 {
		t.Errorf("the hour's end was not due: %+v", st)
	}
	var raw map[string]any
	b, _ := json.Marshal(r)
	if err := json.Unmarshal(b, &raw); err != nil || raw["workspace"] != ws || raw["at"] == nil || raw["invariants"] == nil {
		t.Errorf("report JSON %s", b)
	}
}
