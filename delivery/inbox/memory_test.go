package inbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/providers/event"
)

// prEvent is a realistic journaled PR event (≈ 600 bytes of JSON).
func prEvent(i, fold int) *event.Event {
	return ev(fmt.Sprintf("72d3162e-cc78-11e3-81ab-%012d/%d", i, fold), "github.pull_request.opened",
		fmt.Sprintf("github:wakegate-org/wakegate-service#%d", i), func(e *event.Event) {
			e.SessionID = "w-7f3a9c"
			e.Lineage = []string{"sup-1", "root"}
			e.Summary = fmt.Sprintf("PR #%d opened by octocat: Add a retry budget to the webhook relay", i)
			e.Data = json.RawMessage(fmt.Sprintf(`{"number":%d,"title":"Add a retry budget to the webhook relay",`+
				`"author":"octocat","head":"6dcb09b5b57875f334f61aebed695e2e4193db5e","base":"main",`+
				`"url":"https://github.com/wakegate-org/wakegate-service/pull/%d","draft":false}`, i, i))
		})
}

// usage sums MEMORY USAGE (every element sampled) over the prefix's keys,
// per key role (the part after the hash tag, markers together).
func usage(t *testing.T, rdb *redis.Client, prefix string) (total int64, byRole map[string]int64) {
	t.Helper()
	ctx := context.Background()
	byRole = map[string]int64{}
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		n, err := rdb.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			t.Fatalf("memory usage %s: %v", k, err)
		}
		role := k[strings.LastIndex(k, "}")+1:]
		if strings.HasPrefix(role, ":d:") {
			role = ":d:<sha1>"
		}
		total += n
		byRole[role] += n
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return total, byRole
}

// eventCopies is the bytes of event JSON the unacked entries hold: the
// headline, and the latest when it is another event.
func eventCopies(t *testing.T, b *inbox.Inbox, party string) (bytes int64, entries int) {
	t.Helper()
	var after int64
	for {
		es, next, err := b.List(context.Background(), ws, party, after, true, inbox.MaxLimit)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			bytes += int64(len(e.Event))
			if string(e.Latest) != string(e.Event) {
				bytes += int64(len(e.Latest))
			}
		}
		entries += len(es)
		if len(es) == 0 {
			return bytes, entries
		}
		after = next
	}
}

func report(t *testing.T, what string, total, events int64, entries int, byRole map[string]int64) int64 {
	t.Helper()
	per := (total - events) / int64(entries)
	roles := make([]string, 0, len(byRole))
	for r := range byRole {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	var parts []string
	for _, r := range roles {
		parts = append(parts, fmt.Sprintf("%s %d B/entry", r, byRole[r]/int64(entries)))
	}
	t.Logf("%s: %d entries, %d B in Redis, %d B of event copies → %d B/entry beyond the events (%s)",
		what, entries, total, events, per, strings.Join(parts, ", "))
	return per
}

// TestMemoryPerEntry: at most 1 KB of Redis memory per unacked entry
// beyond the event copies it holds, every key of the recipient (indexes,
// dedup markers and the escalation timer index) included, on real Redis
// (MEMORY USAGE ... SAMPLES 0). The escalation timer itself is one Asynq
// task per recipient, not per entry (package escalate).
func TestMemoryPerEntry(t *testing.T) {
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	b := inbox.New(rdb, inbox.Config{Prefix: prefix})
	const party, n = "session:supervisor-1", 2000
	for i := 1; i <= n; i++ {
		// Attention, unattended, via the controller: every entry wakes and
		// is armed to escalate, so it is in every index.
		if _, err := b.Deliver(ctx, armed(to(party, prEvent(i, 0)), t0.Add(time.Duration(i)*time.Millisecond)), t0); err != nil {
			t.Fatal(err)
		}
	}
	total, byRole := usage(t, rdb, prefix)
	events, entries := eventCopies(t, b, party)
	if entries != n {
		t.Fatalf("%d entries, want %d", entries, n)
	}
	if per := report(t, "distinct coalesce keys", total, events, entries, byRole); per > 1024 {
		t.Fatalf("%d bytes per unacked entry beyond its event copies, want ≤ 1024", per)
	}
}

// TestMemoryFoldedEntries logs what heavily folded entries cost: each
// holds two event copies and 64 folded ids, beyond the 1 KB of an entry.
func TestMemoryFoldedEntries(t *testing.T) {
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	b := inbox.New(rdb, inbox.Config{Prefix: prefix})
	const party, n, folds = "session:supervisor-1", 100, 70
	for f := range folds {
		for i := 1; i <= n; i++ {
			e := prEvent(i, f)
			if f == 0 {
				e.Type = "github.pull_request.checks_failed" // the headline stays; the latest moves
			} else {
				e.Type, e.Priority = "github.check_run.completed", event.Info
			}
			if _, err := b.Deliver(ctx, to(party, e), t0); err != nil {
				t.Fatal(err)
			}
		}
	}
	total, byRole := usage(t, rdb, prefix)
	events, entries := eventCopies(t, b, party)
	if entries != n {
		t.Fatalf("%d entries, want %d", entries, n)
	}
	report(t, fmt.Sprintf("%d folds each (%d dedup markers per entry, 64 folded ids)", folds, folds), total, events, entries, byRole)
}
