package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/providers/event"
)

const ws = "default"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// backends runs a test on real Redis and on miniredis (the embedded serve).
var backends = redistest.Backends

// ev is an event of the vocabulary as the journal hands it to the router.
func ev(id, typ, subject string, mods ...func(*event.Event)) *event.Event {
	e := &event.Event{
		SpecVersion: event.SpecVersion,
		ID:          id,
		Source:      "//github.com/org/repo",
		Type:        typ,
		Subject:     subject,
		Time:        t0,
		Seq:         "3-1772366400000-0",
		Workspace:   ws,
		Summary:     typ + " " + id,
	}
	for _, m := range mods {
		m(e)
	}
	if e.Priority == "" {
		e.Priority = event.DefaultPriority(e.Type, e.Data)
	}
	e.Terminal = e.Terminal || event.Lookup(e.Type).Terminal
	return e
}

func withData(data string) func(*event.Event) {
	return func(e *event.Event) { e.Data = json.RawMessage(data) }
}

func withPriority(p event.Priority) func(*event.Event) {
	return func(e *event.Event) { e.Priority = p }
}

func withSource(s string) func(*event.Event) { return func(e *event.Event) { e.Source = s } }

func to(party string, e *event.Event) inbox.Delivery {
	return inbox.Delivery{Workspace: ws, Party: party, Event: e, Via: inbox.ViaSubscription}
}

func deliver(t *testing.T, b *inbox.Inbox, d inbox.Delivery) inbox.Result {
	t.Helper()
	r, err := b.Deliver(context.Background(), d, t0)
	if err != nil {
		t.Fatalf("deliver %s to %s: %v", d.Event.ID, d.Party, err)
	}
	return r
}

func list(t *testing.T, b *inbox.Inbox, party string) []inbox.Entry {
	t.Helper()
	es, _, err := b.List(context.Background(), ws, party, 0, false, inbox.MaxLimit)
	if err != nil {
		t.Fatalf("list %s: %v", party, err)
	}
	return es
}

func only(t *testing.T, b *inbox.Inbox, party string) inbox.Entry {
	t.Helper()
	es := list(t, b, party)
	if len(es) != 1 {
		t.Fatalf("%s: %d entries, want 1: %+v", party, len(es), es)
	}
	return es[0]
}

func wakeAfter(t *testing.T, b *inbox.Inbox, party string, after int64, hasAfter bool) bool {
	t.Helper()
	w, err := b.WakeAfter(context.Background(), ws, party, after, hasAfter)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestDedup(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		b := inbox.New(rdb, inbox.Config{Prefix: prefix})
		const p = "session:sup"
		e := ev("g1", "github.pull_request.opened", "github:org/repo#1")

		first := deliver(t, b, to(p, e))
		if first != (inbox.Result{Seq: 1, New: true, Wake: true, Kind: inbox.KindWake}) {
			t.Fatalf("first: %+v", first)
		}
		again := deliver(t, b, to(p, e))
		if want := (inbox.Result{Seq: 1, Duplicate: true, New: true, Wake: true, Kind: inbox.KindWake}); again != want {
			t.Fatalf("duplicate: %+v, want %+v (the original answer)", again, want)
		}
		if last, _ := b.Last(ctx, ws, p); last != 1 {
			t.Fatalf("last after a duplicate: %d", last)
		}
		if got := only(t, b, p); got.Count != 1 || got.Seq != 1 || got.Redelivered {
			t.Fatalf("entry after a duplicate: %+v", got)
		}

		// Dedup is on (source, id) per recipient.
		if r := deliver(t, b, to("session:other", e)); r.Duplicate || r.Seq != 1 {
			t.Fatalf("same event, another recipient: %+v", r)
		}
		if r := deliver(t, b, inbox.Delivery{Workspace: "other-ws", Party: p, Via: inbox.ViaSubscription,
			Event: ev("g1", "github.pull_request.opened", "github:org/repo#1", func(e *event.Event) { e.Workspace = "other-ws" })}); r.Duplicate || r.Seq != 1 {
			t.Fatalf("same party in another workspace: %+v", r)
		}
		other := ev("g1", "github.pull_request.opened", "github:org/repo#1", withSource("//github.com/org/fork"))
		if r := deliver(t, b, to(p, other)); r.Duplicate || r.New || r.Seq != 2 {
			t.Fatalf("same id, another source: %+v", r)
		}

		// An operator's redelivery passes dedup and marks the entry.
		red := to(p, e)
		red.Redelivery = true
		r := deliver(t, b, red)
		if r.Duplicate || r.New || r.Seq != 3 || !r.Wake {
			t.Fatalf("redelivery: %+v", r)
		}
		got := only(t, b, p)
		if !got.Redelivered || got.Count != 3 || got.Seq != 3 {
			t.Fatalf("redelivered entry: %+v", got)
		}

		// Acked, the event stays a duplicate: nothing comes back.
		if n, err := b.Ack(ctx, ws, p, 3, nil); err != nil || n != 1 {
			t.Fatalf("ack: %d %v", n, err)
		}
		if r := deliver(t, b, to(p, e)); !r.Duplicate {
			t.Fatalf("after ack: %+v", r)
		}
		if es := list(t, b, p); len(es) != 0 {
			t.Fatalf("acked entry came back: %+v", es)
		}
		// A redelivery after the ack starts a fresh, marked entry.
		if r := deliver(t, b, red); !r.New || r.Seq != 4 {
			t.Fatalf("redelivery after ack: %+v", r)
		}
		if got := only(t, b, p); !got.Redelivered || got.Count != 1 {
			t.Fatalf("fresh redelivered entry: %+v", got)
		}
	})
}

func TestFoldTakesNewSeq(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		b := inbox.New(rdb, inbox.Config{Prefix: prefix})
		const p, subj = "session:author", "github:org/repo#7"
		opened := ev("o", "github.pull_request.opened", subj)
		ready := ev("r", "github.pull_request.ready", subj)

		if r := deliver(t, b, to(p, opened)); r.Seq != 1 || !r.New || !r.Wake {
			t.Fatalf("opened: %+v", r)
		}
		later := t0.Add(time.Minute)
		r, err := b.Deliver(ctx, to(p, ready), later)
		if err != nil {
			t.Fatal(err)
		}
		if r != (inbox.Result{Seq: 2, Wake: true, Kind: inbox.KindWake}) {
			t.Fatalf("unread opened then ready must wake for ready: %+v", r)
		}
		got := only(t, b, p)
		if got.Seq != 2 || got.Count != 2 || got.Type != "github.pull_request.ready" || got.CoalesceKey != subj ||
			got.Subject != subj || got.Priority != event.Attention || got.Kind != inbox.KindWake || !got.Wake ||
			got.WakeSeq != 2 || got.Summary != ready.Summary || !got.FirstAt.Equal(t0) || !got.LastAt.Equal(later) ||
			strings.Join(got.FoldedIDs, ",") != "o,r" || got.Via != inbox.ViaSubscription {
			t.Fatalf("folded entry: %+v", got)
		}
		var head event.Event
		if err := json.Unmarshal(got.Event, &head); err != nil || head.ID != "r" || string(got.Latest) != string(got.Event) {
			t.Fatalf("headline %s / latest %s: %v", got.Event, got.Latest, err)
		}

		// The reader saw seq 1 only: acking it does not ack the update.
		for _, ack := range []struct {
			through int64
			seqs    []int64
		}{{1, nil}, {0, []int64{1}}} {
			if n, err := b.Ack(ctx, ws, p, ack.through, ack.seqs); err != nil || n != 0 {
				t.Fatalf("ack %+v at the old seq: %d %v", ack, n, err)
			}
		}
		if got := only(t, b, p); got.Seq != 2 {
			t.Fatalf("after acks at the old seq: %+v", got)
		}
		if n, err := b.Ack(ctx, ws, p, 2, nil); err != nil || n != 1 {
			t.Fatalf("ack through 2: %d %v", n, err)
		}
		// An acked coalesce key starts a fresh entry.
		closed := ev("c", "github.pull_request.closed", subj, withData(`{"merged":true}`))
		if r := deliver(t, b, to(p, closed)); !r.New || r.Seq != 3 {
			t.Fatalf("after ack: %+v", r)
		}
		if got := only(t, b, p); got.Count != 1 || strings.Join(got.FoldedIDs, ",") != "c" {
			t.Fatalf("fresh entry: %+v", got)
		}
	})
}

func TestChecksNeverHideFailure(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		b := inbox.New(rdb, inbox.Config{Prefix: prefix})
		const subj = "github:org/repo#9"
		check := func(i int) *event.Event {
			return ev(fmt.Sprintf("cs%d", i), "github.check_suite.completed", subj, withData(`{"conclusion":"success"}`))
		}

		// Twenty successes alone: one digest entry that wakes nobody.
		const quiet = "session:quiet"
		for i := 1; i <= 20; i++ {
			r := deliver(t, b, to(quiet, check(i)))
			if r.Wake || r.Kind != inbox.KindDigest || r.New != (i == 1) || r.Seq != int64(i) {
				t.Fatalf("check %d: %+v", i, r)
			}
		}
		got := only(t, b, quiet)
		if got.Count != 20 || got.Kind != inbox.KindDigest || got.Wake || got.WakeSeq != 0 || got.Priority != event.Info || got.Seq != 20 {
			t.Fatalf("twenty checks: %+v", got)
		}
		if wakeAfter(t, b, quiet, 0, false) {
			t.Fatal("twenty check successes decided a wake")
		}

		// checks_failed then twenty successes: the failure stays the headline.
		const p = "session:author"
		failed := ev("f", "github.pull_request.checks_failed", subj)
		if r := deliver(t, b, to(p, failed)); !r.Wake || r.Seq != 1 {
			t.Fatalf("checks_failed: %+v", r)
		}
		for i := 1; i <= 20; i++ {
			if r := deliver(t, b, to(p, check(i))); r.Wake || r.Kind != inbox.KindDigest {
				t.Fatalf("check %d after the failure: %+v", i, r)
			}
		}
		got = only(t, b, p)
		if got.Count != 21 || got.Type != failed.Type || got.Summary != failed.Summary ||
			got.Priority != event.Attention || got.Kind != inbox.KindDigest || got.Wake || got.WakeSeq != 1 || got.Seq != 21 {
			t.Fatalf("failure then checks: %+v", got)
		}
		var head, latest event.Event
		_ = json.Unmarshal(got.Event, &head)
		_ = json.Unmarshal(got.Latest, &latest)
		if head.ID != "f" || latest.ID != "cs20" {
			t.Fatalf("headline %s latest %s", head.ID, latest.ID)
		}
		// The wake is unread for a reader before seq 1, read for one at 1:
		// an info fold never ends a long-poll.
		if !wakeAfter(t, b, p, 0, false) || !wakeAfter(t, b, p, 0, true) || wakeAfter(t, b, p, 1, true) {
			t.Fatal("WakeAfter around the carried wake")
		}
	})
}

// step is one delivery of a sequence and what it must decide.
type step struct {
	e        *event.Event
	attended bool
	mode     string
	wake     bool
	kind     string
}

func TestWakeRules(t *testing.T) {
	const pr, sess = "github:org/repo#3", "session:w1"
	cases := []struct {
		name  string
		steps []step
	}{
		{"opened then ready wakes for ready", []step{
			{e: ev("1", "github.pull_request.opened", pr), wake: true, kind: "wake"},
			{e: ev("2", "github.pull_request.ready", pr), wake: true, kind: "wake"},
		}},
		{"same type again does not wake", []step{
			{e: ev("1", "github.pull_request.ready", pr), wake: true, kind: "wake"},
			{e: ev("2", "github.pull_request.ready", pr), kind: "notice"},
		}},
		{"priority rise wakes", []step{
			{e: ev("1", "cron.unhealthy", "cron:nightly"), wake: true, kind: "wake"},
			{e: ev("2", "cron.unhealthy", "cron:nightly"), kind: "notice"},
			{e: ev("3", "cron.unhealthy", "cron:nightly", withPriority(event.Critical)), wake: true, kind: "wake"},
		}},
		{"terminal wakes", []step{
			{e: ev("1", "github.pull_request.closed", pr), wake: true, kind: "wake"},
			{e: ev("2", "github.pull_request.closed", pr), wake: true, kind: "wake"},
		}},
		{"alert kind wakes again", []step{
			{e: ev("1", "github.pull_request.dequeued", pr), wake: true, kind: "wake"},
			{e: ev("2", "github.pull_request.dequeued", pr), wake: true, kind: "wake"},
		}},
		{"a change of state type wakes, a repeat does not", []step{
			{e: ev("1", "session.turn_ended", sess, withData(`{"idle":true}`)), wake: true, kind: "wake"},
			{e: ev("2", "session.turn_ended", sess, withData(`{"idle":true}`)), kind: "notice"},
			{e: ev("3", "session.awaiting_input", sess), wake: true, kind: "wake"},
			{e: ev("4", "session.turn_ended", sess), kind: "digest"},
			{e: ev("5", "session.exited", sess), kind: "digest"},
		}},
		{"info never wakes", []step{
			{e: ev("1", "github.check_run.completed", pr), kind: "digest"},
			{e: ev("2", "github.pull_request.synchronize", pr), kind: "digest"},
		}},
		{"attended: notice rides the next read, alert wakes", []step{
			{e: ev("1", "github.pull_request.ready", pr), attended: true, kind: "notice"},
			{e: ev("2", "github.pull_request.checks_failed", pr), attended: true, wake: true, kind: "alert"},
			{e: ev("3", "github.pull_request.closed", pr), attended: true, kind: "notice"},
			{e: ev("4", "github.pull_request.closed", pr, withData(`{"merged":true}`)), attended: true, wake: true, kind: "alert"},
		}},
		{"inbox mode never wakes", []step{
			{e: ev("1", "github.pull_request.checks_failed", pr), mode: inbox.ModeInbox, kind: "digest"},
			{e: ev("2", "session.crashed", pr), mode: inbox.ModeInbox, kind: "digest"},
			{e: ev("3", "github.pull_request.opened", pr), wake: true, kind: "wake"},
		}},
		{"a critical blocker message is an alert", []step{
			{e: ev("1", "message.sent", sess, withData(`{"blocker":true}`)), attended: true, wake: true, kind: "alert"},
		}},
	}
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		b := inbox.New(rdb, inbox.Config{Prefix: prefix})
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				party := fmt.Sprintf("session:r%d", i)
				var lastWake int64
				for j, s := range c.steps {
					d := to(party, s.e)
					d.Attended, d.Mode = s.attended, s.mode
					r := deliver(t, b, d)
					if r.Wake != s.wake || r.Kind != s.kind || r.Seq != int64(j+1) || r.New != (j == 0) {
						t.Fatalf("step %d (%s): %+v, want wake %v kind %s", j+1, s.e.Type, r, s.wake, s.kind)
					}
					if s.wake {
						lastWake = r.Seq
					}
					got := only(t, b, party)
					if got.Wake != s.wake || got.Kind != s.kind || got.WakeSeq != lastWake {
						t.Fatalf("step %d entry: %+v", j+1, got)
					}
					if w := wakeAfter(t, b, party, r.Seq-1, true); w != s.wake {
						t.Fatalf("step %d: WakeAfter(%d) = %v", j+1, r.Seq-1, w)
					}
				}
			})
		}
	})
}

func TestHeadline(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		b := inbox.New(rdb, inbox.Config{Prefix: prefix})
		const p, s = "session:sup", "session:w1"
		crashed := ev("1", "session.crashed", s)
		input := ev("2", "session.awaiting_input", s)
		deliver(t, b, to(p, crashed))
		if r := deliver(t, b, to(p, input)); !r.Wake {
			t.Fatalf("another type after a crash: %+v", r)
		}
		got := only(t, b, p)
		var head, latest event.Event
		_ = json.Unmarshal(got.Event, &head)
		_ = json.Unmarshal(got.Latest, &latest)
		if got.Type != crashed.Type || head.ID != "1" || latest.ID != "2" || got.Priority != event.Critical {
			t.Fatalf("a lower priority must not take the headline: %+v", got)
		}
		// Equal priority: the newest is the headline.
		deliver(t, b, to(p, ev("3", "session.crashed", s, func(e *event.Event) { e.Summary = "crashed again" })))
		got = only(t, b, p)
		_ = json.Unmarshal(got.Event, &head)
		if head.ID != "3" || got.Summary != "crashed again" || string(got.Latest) != string(got.Event) || got.Count != 3 {
			t.Fatalf("newest among equals: %+v", got)
		}
	})
}

func TestFoldedIDsKeepLast64(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		b := inbox.New(rdb, inbox.Config{Prefix: prefix})
		const p = "session:sup"
		for i := 1; i <= 70; i++ {
			deliver(t, b, to(p, ev(fmt.Sprintf("id%d", i), "github.status", "github:org/repo#1")))
		}
		got := only(t, b, p)
		if got.Count != 70 || len(got.FoldedIDs) != 64 || got.FoldedIDs[0] != "id7" || got.FoldedIDs[63] != "id70" {
			t.Fatalf("count %d, %d ids %v", got.Count, len(got.FoldedIDs), got.FoldedIDs)
		}
	})
}

func TestSettingsAndCoalesceKey(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		b := inbox.New(rdb, inbox.Config{Prefix: prefix})
		const p = "session:target"
		d := to(p, ev("m1", "message.sent", "session:target", func(e *event.Event) { e.CoalesceKey = "msg:m1" }))
		d.Settings = json.RawMessage("{\n  \"lease_mode\": \"warn\"\n}")
		d.Via, d.Waiter = inbox.ViaDirect, true
		deliver(t, b, d)
		d2 := to(p, ev("m2", "message.sent", "session:target", func(e *event.Event) { e.CoalesceKey = "msg:m2" }))
		d2.Settings, d2.SettingsCompact = json.RawMessage(`{"lease_mode":"enforce"}`), true // stored as it is
		deliver(t, b, d2)
		d3 := to(p, ev("m1-fold", "message.sent", "session:target", func(e *event.Event) { e.CoalesceKey = "msg:m1" }))
		d3.Settings = json.RawMessage(`{"lease_mode":"off"}`)
		deliver(t, b, d3)

		es := list(t, b, p)
		if len(es) != 2 || es[0].CoalesceKey != "msg:m2" || es[1].CoalesceKey != "msg:m1" {
			t.Fatalf("each message is its own entry: %+v", es)
		}
		if string(es[1].Settings) != `{"lease_mode":"warn"}` || string(es[0].Settings) != `{"lease_mode":"enforce"}` {
			t.Fatalf("settings snapshots: %s / %s", es[1].Settings, es[0].Settings)
		}
		if !es[1].Waiter || es[1].Via != inbox.ViaSubscription || es[0].Waiter {
			t.Fatalf("via and waiter: %+v", es)
		}
		// No subject and no coalesce key: its own entry.
		e := ev("x1", "agent.custom", "")
		deliver(t, b, to("session:nosubj", e))
		deliver(t, b, to("session:nosubj", ev("x2", "agent.custom", "")))
		if es := list(t, b, "session:nosubj"); len(es) != 2 {
			t.Fatalf("events without subject: %+v", es)
		}
	})
}

func TestConcurrentDeliveries(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		b := inbox.New(rdb, inbox.Config{Prefix: prefix})
		const p, n = "session:busy", 40
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			seqs    = map[int64]bool{}
			created int
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e := ev(fmt.Sprintf("e%d", i), "github.check_run.completed", "github:org/repo#1")
				r, err := b.Deliver(ctx, to(p, e), t0)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
				seqs[r.Seq] = true
				if r.New {
					created++
				}
			}()
		}
		wg.Wait()
		got := only(t, b, p)
		if len(seqs) != n || created != 1 || got.Count != n || got.Seq != n {
			t.Fatalf("%d distinct seqs, %d created, entry %+v", len(seqs), created, got)
		}
	})
}

func TestNotify(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		b := inbox.New(rdb, inbox.Config{Prefix: prefix})
		const p = "session:sup"
		sub := rdb.PSubscribe(ctx, b.NotifyPattern())
		defer sub.Close()
		if _, err := sub.Receive(ctx); err != nil { // the subscription confirmation
			t.Fatal(err)
		}
		next := func() *redis.Message {
			t.Helper()
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			m, err := sub.ReceiveMessage(c)
			if err != nil {
				t.Fatalf("no notification: %v", err)
			}
			return m
		}
		opened := ev("1", "github.pull_request.opened", "github:org/repo#1")
		deliver(t, b, to(p, opened))
		m := next()
		if m.Channel != inbox.NotifyChannel(prefix, ws, p) || m.Payload != "wake" {
			t.Fatalf("wake notification: %+v", m)
		}
		if w, pa, ok := b.ParseChannel(m.Channel); !ok || w != ws || pa != p {
			t.Fatalf("ParseChannel(%q) = %q %q %v", m.Channel, w, pa, ok)
		}
		deliver(t, b, to(p, opened)) // a duplicate publishes nothing
		deliver(t, b, to(p, ev("2", "github.check_run.completed", "github:org/repo#1")))
		if m := next(); m.Payload != "update" {
			t.Fatalf("info fold: %+v", m)
		}
		if _, _, ok := b.ParseChannel("elsewhere:ib:notify:default:session:sup"); ok {
			t.Fatal("a foreign channel parsed")
		}
	})
}

func TestBadInputWritesNothing(t *testing.T) {
	good := func() inbox.Delivery {
		return to("session:ok", ev("1", "github.pull_request.opened", "github:org/repo#1"))
	}
	cases := map[string]func(d *inbox.Delivery){
		"no event":              func(d *inbox.Delivery) { d.Event = nil },
		"bad type":              func(d *inbox.Delivery) { d.Event.Type = "Opened" },
		"no id":                 func(d *inbox.Delivery) { d.Event.ID = "" },
		"no source":             func(d *inbox.Delivery) { d.Event.Source = "" },
		"internal type":         func(d *inbox.Delivery) { d.Event.Type, d.Event.Priority = "wakegate.digest", "" },
		"internal priority":     func(d *inbox.Delivery) { d.Event.Priority = event.Internal },
		"unknown priority":      func(d *inbox.Delivery) { d.Event.Priority = "urgent" },
		"other workspace event": func(d *inbox.Delivery) { d.Event.Workspace = "elsewhere" },
		"bad workspace":         func(d *inbox.Delivery) { d.Workspace, d.Event.Workspace = "a/b", "a/b" },
		"party with a slash":    func(d *inbox.Delivery) { d.Party = "session:a/b" },
		"party with a newline":  func(d *inbox.Delivery) { d.Party = "session:a\nb" },
		"party of 200 chars":    func(d *inbox.Delivery) { d.Party = "session:" + strings.Repeat("a", 200) },
		"party of no kind":      func(d *inbox.Delivery) { d.Party = "robot:x" },
		"no via":                func(d *inbox.Delivery) { d.Via = "" },
		"unknown via":           func(d *inbox.Delivery) { d.Via = "gossip" },
		"unknown mode":          func(d *inbox.Delivery) { d.Mode = "loud" },
		"settings not JSON":     func(d *inbox.Delivery) { d.Settings = json.RawMessage(`{"a":`) },
	}
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		b := inbox.New(rdb, inbox.Config{Prefix: prefix})
		for name, mod := range cases {
			d := good()
			mod(&d)
			if r, err := b.Deliver(ctx, d, t0); !errors.Is(err, inbox.ErrInvalid) {
				t.Errorf("%s: %+v %v, want ErrInvalid", name, r, err)
			}
		}
		if _, _, err := b.List(ctx, ws, "session:a/b", 0, false, 10); !errors.Is(err, inbox.ErrInvalid) {
			t.Errorf("list of a bad party: %v", err)
		}
		if _, err := b.Ack(ctx, ws, "session:ok", -1, nil); !errors.Is(err, inbox.ErrInvalid) {
			t.Errorf("ack through -1: %v", err)
		}
		if _, err := b.Ack(ctx, ws, "session:ok", 0, []int64{0}); !errors.Is(err, inbox.ErrInvalid) {
			t.Errorf("ack seq 0: %v", err)
		}
		if _, err := b.WakeAfter(ctx, "bad ws", "session:ok", 0, false); !errors.Is(err, inbox.ErrInvalid) {
			t.Errorf("wake after in a bad workspace: %v", err)
		}
		if _, err := b.Last(ctx, ws, "human:"); !errors.Is(err, inbox.ErrInvalid) {
			t.Errorf("last of a bad party: %v", err)
		}
		if keys, err := rdb.Keys(ctx, prefix+":*").Result(); err != nil || len(keys) != 0 {
			t.Fatalf("bad input wrote %v (%v)", keys, err)
		}
		// The good delivery itself goes through.
		if r := deliver(t, b, good()); r.Seq != 1 {
			t.Fatalf("good: %+v", r)
		}
	})
}

func TestKind(t *testing.T) {
	cases := []struct {
		p        event.Priority
		k        event.Kind
		attended bool
		mode     string
		want     string
	}{
		{event.Info, event.KindAlert, false, "", inbox.KindDigest},
		{event.Info, event.KindNone, true, "", inbox.KindDigest},
		{event.Attention, event.KindNotice, false, "", inbox.KindWake},
		{event.Critical, event.KindAlert, false, inbox.ModeWake, inbox.KindWake},
		{event.Attention, event.KindNotice, true, "", inbox.KindNotice},
		{event.Attention, event.KindNone, true, "", inbox.KindNotice},
		{event.Attention, event.KindAlert, true, "", inbox.KindAlert},
		{event.Critical, event.KindAlert, false, inbox.ModeInbox, inbox.KindDigest},
		{event.Internal, event.KindNone, false, "", inbox.KindDigest},
	}
	for _, c := range cases {
		if got := inbox.Kind(c.p, c.k, c.attended, c.mode); got != c.want {
			t.Errorf("Kind(%s, %q, %v, %q) = %s, want %s", c.p, c.k, c.attended, c.mode, got, c.want)
		}
	}
	kinds := map[*event.Event]event.Kind{
		ev("1", "github.pull_request.closed", "s", withData(`{"merged":true}`)):  event.KindAlert,
		ev("2", "github.pull_request.closed", "s", withData(`{"merged":false}`)): event.KindNotice,
		ev("3", "message.sent", "s", withData(`{"blocker":true}`)):               event.KindAlert,
		ev("4", "message.sent", "s", withData(`"not an object"`)):                event.KindNotice,
		ev("5", "github.pull_request.checks_failed", "s"):                        event.KindAlert,
		ev("6", "agent.custom_thing", "s"):                                       event.KindNone,
	}
	for e, want := range kinds {
		if got := inbox.AttendedKind(e); got != want {
			t.Errorf("AttendedKind(%s %s) = %q, want %q", e.Type, e.Data, got, want)
		}
	}
}

func TestMarkerRetention(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		b := inbox.New(rdb, inbox.Config{Prefix: prefix, Retention: time.Hour})
		deliver(t, b, to("session:sup", ev("1", "github.pull_request.opened", "github:org/repo#1")))
		markers, err := rdb.Keys(ctx, prefix+":*:d:*").Result()
		if err != nil || len(markers) != 1 {
			t.Fatalf("markers %v (%v)", markers, err)
		}
		if !strings.HasPrefix(markers[0], prefix+":"+inbox.Tag(prefix, ws, "session:sup")+":d:") {
			t.Fatalf("marker %s outside the recipient's tag", markers[0])
		}
		if ttl, err := rdb.TTL(ctx, markers[0]).Result(); err != nil || ttl <= 0 || ttl > time.Hour {
			t.Fatalf("marker TTL %v (%v), want (0, 1h]", ttl, err)
		}
	})
}

func TestMarkerExpiresOnMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	b := inbox.New(rdb, inbox.Config{Prefix: "wg", Retention: time.Hour})
	e := ev("1", "github.pull_request.opened", "github:org/repo#1")
	deliver(t, b, to("session:sup", e))
	if r := deliver(t, b, to("session:sup", e)); !r.Duplicate {
		t.Fatalf("within retention: %+v", r)
	}
	mr.FastForward(time.Hour + time.Second)
	if r := deliver(t, b, to("session:sup", e)); r.Duplicate || r.Seq != 2 {
		t.Fatalf("after retention: %+v", r)
	}
}
