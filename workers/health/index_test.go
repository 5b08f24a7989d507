package health_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wakegate/wakegate/workers/health"
)

// The fleet index the dashboard lists from: sessions not exited, the most
// recent first, and open PRs, which leave once the sweep sees them end.
func TestFleetIndex(t *testing.T) {
	w := newWorld(t, health.Config{})
	const repo = "org/idx"
	w.push("session:a", "a", "session.spawned", "")
	w.now = w.now.Add(time.Second)
	w.push("session:b", "b", "session.spawned", "")
	w.push("session:c", "c", "session.spawned", "")
	w.push("session:c", "c", "session.exited", "")
	w.apply(pr(repo, "opened", 1, "aaa", w.now))
	w.apply(pr(repo, "opened", 2, "bbb", w.now))
	w.sweep(w.sw, w.now)

	zs, n, err := w.sw.Sessions(w.ctx, ws, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, z := range zs {
		got = append(got, fmt.Sprint(z.Member))
	}
	if n != 2 || !slices.Equal(got, []string{"b", "a"}) {
		t.Fatalf("sessions %v (of %d), want [b a]: the exited c left out, the newest first", got, n)
	}
	if page, _, _ := w.sw.Sessions(w.ctx, ws, 1, 10); len(page) != 1 || page[0].Member != "a" {
		t.Fatalf("second page %v, want [a]", page)
	}
	prs, n, err := w.sw.PullRequests(w.ctx, ws, 0, 10)
	slices.Sort(prs)
	if err != nil || n != 2 || !slices.Equal(prs, []string{"github:org/idx#1", "github:org/idx#2"}) {
		t.Fatalf("open PRs %v (of %d) %v", prs, n, err)
	}
	w.now = w.now.Add(time.Second)
	w.apply(pr(repo, "closed", 1, "aaa", w.now))
	w.sweep(w.sw, w.now)
	if prs, _, _ := w.sw.PullRequests(w.ctx, ws, 0, 10); !slices.Equal(prs, []string{"github:org/idx#2"}) {
		t.Fatalf("open PRs after #1 closed: %v", prs)
	}
	if wss, err := w.sw.Workspaces(w.ctx, 10); err != nil || !slices.Equal(wss, []string{ws}) {
		t.Fatalf("workspaces %v %v", wss, err)
	}
}
