package route

import (
	"fmt"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/providers/event"
)

// BenchmarkRoute routes one attention event about a PR linked to a
// session with two ancestors, in a workspace with 100,000 sessions and 10,
// then 10,000, subscriptions that do not match (docs/design.md §5: matching goes
// through indexes, so the second must cost at most 2× the first). The two
// worlds are routed alternately, call by call, so machine noise hits both
// alike; the metric "ratio" is the cost of 10,000 over 10.
func BenchmarkRoute(b *testing.B) {
	worlds := map[int]*world{}
	for _, n := range []int{10, 10_000} {
		w := newWorld(b)
		seedSessions(b, w, 100_000)
		seedSubscriptions(b, w, n)
		w.settings(`{"default_controller":"session:boss"}`)
		worlds[n] = w
	}
	spent := map[int]time.Duration{}
	b.ResetTimer()
	for i := range b.N {
		for _, n := range []int{10, 10_000} {
			e := benchEvent(i)
			start := time.Now()
			if err := worlds[n].r.Handle(worlds[n].ctx, 0, e); err != nil {
				b.Fatal(err)
			}
			spent[n] += time.Since(start)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(spent[10].Microseconds())/float64(b.N), "µs/route@10subs")
	b.ReportMetric(float64(spent[10_000].Microseconds())/float64(b.N), "µs/route@10ksubs")
	b.ReportMetric(float64(spent[10_000])/float64(spent[10]), "ratio")
}

func benchEvent(i int) *event.Event {
	data := []byte(`{"repo":"org/repo","number":42}`)
	return &event.Event{SpecVersion: "1.0", ID: fmt.Sprintf("bench-%d", i), Source: "//github.com/org/repo",
		Type: "github.pull_request.ready", Subject: "github:org/repo#42", Workspace: ws, SessionID: "kid",
		Lineage: []string{"mid", "root"}, Priority: event.Attention, CoalesceKey: "github:org/repo#42",
		Time: time.Now().UTC(), Seq: "0-1-0", Data: data}
}

func seedSessions(b *testing.B, w *world, n int) {
	b.Helper()
	pipe := w.rdb.Pipeline()
	for i := range n {
		pipe.HSet(w.ctx, sessions.Key(w.j, ws, fmt.Sprintf("session:s%d", i)), "seen_at", time.Now().UnixMilli(), "state", "session.turn_ended")
		if i%1000 == 999 {
			if _, err := pipe.Exec(w.ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := pipe.Exec(w.ctx); err != nil {
		b.Fatal(err)
	}
	for _, s := range []string{"kid", "mid", "root"} {
		w.rdb.HSet(w.ctx, sessions.Key(w.j, ws, "session:"+s), "labels", `["team-a"]`, "seen_at", time.Now().UnixMilli())
	}
}

func seedSubscriptions(b *testing.B, w *world, n int) {
	b.Helper()
	create := func(owner, body string) {
		sub, err := subscriptions.Parse([]byte(body))
		if err != nil {
			b.Fatal(err)
		}
		sub.Workspace, sub.Owner = ws, owner
		if _, err := w.subs.Create(w.ctx, sub, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	create("human:m1", `{"types": ["github.pull_request.ready"]}`)
	create("human:m2", `{"subjects": ["github:org/repo#*"]}`)
	create("human:m3", `{"labels": ["team-a"]}`)
	for i := range n {
		owner := fmt.Sprintf("session:n%d", i%500)
		switch i % 4 {
		case 0:
			create(owner, fmt.Sprintf(`{"types": ["app%d.event"]}`, i))
		case 1:
			create(owner, fmt.Sprintf(`{"types": ["app%d.*"]}`, i))
		case 2:
			create(owner, fmt.Sprintf(`{"subjects": ["github:org%d/repo#*"]}`, i))
		default:
			create(owner, fmt.Sprintf(`{"labels": ["team-%d"]}`, i))
		}
	}
}
