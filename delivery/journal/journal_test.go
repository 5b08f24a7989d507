package journal_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/providers/event"
)

func ev(ws, subject, id string) *event.Event {
	return &event.Event{SpecVersion: "1.0", ID: id, Source: event.AgentSource(ws, subject), Type: "session.turn_ended",
		Subject: subject, Workspace: ws, Time: time.Unix(1700000000, 0).UTC(), Priority: event.Info}
}

// backends runs a test on real Redis and on miniredis (the embedded serve).
var backends = redistest.Backends

func TestAppendIdempotentAndRead(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
		var seqs []string
		for i := range 30 {
			e := ev("ws1", fmt.Sprintf("session:s%d", i%7), fmt.Sprint(i))
			seq, added, err := j.Append(ctx, e)
			if err != nil || !added {
				t.Fatalf("append %d: added=%v err=%v", i, added, err)
			}
			again, added, err := j.Append(ctx, e)
			if err != nil || added || again != seq {
				t.Fatalf("re-append %d: seq %s vs %s, added=%v err=%v", i, again, seq, added, err)
			}
			seqs = append(seqs, seq)
		}
		if _, _, err := j.Append(ctx, ev("ws2", "session:other", "x")); err != nil {
			t.Fatal(err)
		}
		// Page through ws1 in pages of 7: every event once, none of ws2.
		cur := make(journal.Cursor, 4)
		seen := map[string]bool{}
		for page := 0; page < 20; page++ {
			evs, next, err := j.Read(ctx, cur, journal.Filter{Workspace: "ws1"}, 7)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				if e.Workspace != "ws1" || seen[e.ID] {
					t.Fatalf("unexpected or repeated event %+v", e)
				}
				seen[e.ID] = true
			}
			parsed, err := journal.ParseCursor(next.String(), 4)
			if err != nil {
				t.Fatal(err)
			}
			cur = parsed
			if len(evs) == 0 {
				break
			}
		}
		if len(seen) != 30 {
			t.Fatalf("read %d distinct events, want 30", len(seen))
		}
		got, err := j.Get(ctx, seqs[3])
		if err != nil || got == nil || got.ID != "3" || got.Seq != seqs[3] {
			t.Fatalf("Get(%s) = %+v, %v", seqs[3], got, err)
		}
		evs, _, err := j.Read(ctx, make(journal.Cursor, 4), journal.Filter{Workspace: "ws1", Subjects: []string{"session:s1"}}, 100)
		if err != nil || len(evs) != 5 {
			t.Fatalf("subject filter: %d events, %v", len(evs), err)
		}
	})
}

func TestParseCursorRefusesGarbage(t *testing.T) {
	for _, s := range []string{"%%%", "AAAA", journal.Cursor{"1-1", "2-2"}.String()} {
		if _, err := journal.ParseCursor(s, 4); !errors.Is(err, journal.ErrBadCursor) {
			t.Errorf("ParseCursor(%q) err = %v, want ErrBadCursor", s, err)
		}
	}
	c := journal.Cursor{"", "17-3", "", "1700000000000-12"}
	got, err := journal.ParseCursor(c.String(), 4)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(c) {
		t.Fatalf("round trip: %v %v", got, err)
	}
}

func FuzzParseCursor(f *testing.F) {
	f.Add(journal.Cursor{"", "17-3", "", "1700000000000-12"}.String())
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := journal.ParseCursor(s, 4)
		if err != nil {
			if !errors.Is(err, journal.ErrBadCursor) {
				t.Fatalf("error not ErrBadCursor: %v", err)
			}
			return
		}
		if len(c) != 4 {
			t.Fatalf("cursor of %d shards", len(c))
		}
	})
}
