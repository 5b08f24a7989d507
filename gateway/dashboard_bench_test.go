package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/dashboard"
	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
	"github.com/wakegate/wakegate/workers/health"
)

// BenchmarkDashboard renders the fleet page of a workspace of 1,000
// sessions (a tree ten wide, a person controlling its root) and 200 open
// PRs over 10 repositories, on real Redis with the real health sweep as the
// index, server time only (the handler, no network); beside it, in the
// same run, the JSON brief of the same person as the baseline
// (docs/performance.md records the ratio).
func BenchmarkDashboard(b *testing.B) {
	const ws, sessionsN, prsN, repos = "bench", 1000, 200, 10
	ctx := context.Background()
	rdb, prefix := redistest.New(b)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 16})
	reg := sessions.New(rdb, j, time.Hour)
	store := ingest.New(rdb, j)
	subs := subscriptions.New(rdb, prefix)
	box := inbox.New(rdb, inbox.Config{Prefix: prefix})
	sup := supervision.New(rdb, prefix, func(ctx context.Context, ws, party string) (bool, error) {
		s, err := reg.Get(ctx, ws, party, time.Now())
		return err == nil && s.Liveness == sessions.Dead, err
	})
	tr := tracker.New(rdb, j, tracker.Config{})
	hs := holds.New(rdb, prefix)
	sweeper := health.New(health.Deps{Redis: rdb, Journal: j, Sessions: reg, Subs: subs, Sup: sup, Inbox: box,
		Tracker: tr, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: prometheus.NewRegistry()},
		health.Config{Prefix: prefix})
	now := time.Now()

	// The fleet: s0 the root, s<i>'s parent s<(i-1)/10>; a turn each.
	types := []string{"session.turn_started", "session.turn_ended", "session.awaiting_input", "session.permission_requested"}
	for lo := 0; lo < sessionsN; lo += 100 {
		var items []ingest.Item
		for i := lo; i < lo+100; i++ {
			id := fmt.Sprintf("s%d", i)
			for k, typ := range []string{"session.spawned", types[i%len(types)]} {
				ev := &event.Event{SpecVersion: "1.0", ID: fmt.Sprintf("%s-%d", id, k), Source: event.AgentSource(ws, "session:"+id),
					Type: typ, Subject: event.SessionSubject(id), Workspace: ws, SessionID: id, Time: now.UTC(),
					Priority: event.DefaultPriority(typ, nil)}
				items = append(items, ingest.Item{Event: ev, Journal: true})
			}
		}
		if _, err := store.CommitEvents(ctx, ws, "session:s0", items, now); err != nil {
			b.Fatal(err)
		}
	}
	for i := 1; i < sessionsN; i++ {
		if err := reg.SetParent(ctx, ws, fmt.Sprintf("s%d", i), fmt.Sprintf("s%d", (i-1)/10), now); err != nil {
			b.Fatal(err)
		}
		if err := reg.Seen(ctx, ws, fmt.Sprintf("session:s%d", i), now); err != nil {
			b.Fatal(err)
		}
	}
	if _, _, err := sup.Supervise(ctx, ws, "s0", "human:alice", supervision.Controller, supervision.ScopeSubtree, false, false, now); err != nil {
		b.Fatal(err)
	}
	// 200 open PRs with two checks each, one pending; 40 unacked entries.
	for n := 1; n <= prsN; n++ {
		repo := fmt.Sprintf("org/repo%d", n%repos)
		head := fmt.Sprintf("%040x", n)
		data, _ := json.Marshal(map[string]any{"repo": repo, "number": n, "action": "opened", "head": head})
		f := &github.Fact{Event: "pull_request", Action: "opened", Repo: repo, Type: "github.pull_request.opened",
			Subject: event.PRSubject(repo, n), Time: now, Summary: "opened", Data: data, Priority: event.Attention,
			PR: &github.PRFact{Number: n, Action: "opened", State: "open", Head: head, Base: "main", Author: "octocat",
				Title: fmt.Sprintf("Change %d", n), UpdatedAt: now}}
		if _, err := tr.Apply(ctx, ws, fmt.Sprintf("g%d", n), f, now); err != nil {
			b.Fatal(err)
		}
		for k, res := range []string{"pass", "pending"} {
			c := &github.Fact{Event: "check_run", Repo: repo, Time: now, Type: "github.check_run.completed", Priority: event.Info,
				Check: &github.CheckFact{SHA: head, Name: fmt.Sprintf("check%d", k), Result: res, At: now, PRs: []int{n}}}
			if _, err := tr.Apply(ctx, ws, fmt.Sprintf("c%d-%d", n, k), c, now); err != nil {
				b.Fatal(err)
			}
		}
		if n <= 40 {
			e := &event.Event{SpecVersion: "1.0", ID: fmt.Sprintf("e%d", n), Source: "//t", Type: "github.pull_request.opened",
				Subject: event.PRSubject(repo, n), Workspace: ws, Priority: event.Attention, Time: now.UTC(), Seq: fmt.Sprintf("0-%d-0", n)}
			if _, err := box.Deliver(ctx, inbox.Delivery{Workspace: ws, Party: "human:alice", Event: e, Via: inbox.ViaController}, now); err != nil {
				b.Fatal(err)
			}
		}
	}
	for range 50 { // file the journal into the sweep's index
		st, err := sweeper.Sweep(ctx, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if !st.Behind {
			break
		}
	}

	v, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(testSecret)})
	if err != nil {
		b.Fatal(err)
	}
	reader := dashboard.New(dashboard.Deps{Redis: rdb, Sessions: reg, Sup: sup, Inbox: box, Index: sweeper, PRs: tr,
		Quiet: hs, Health: sweeper}, dashboard.Config{})
	s, err := New(Config{WebhookSecrets: [][]byte{[]byte(testSecret)}}, Deps{
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Redis: rdb, Journal: j, Ingest: store,
		Sessions: reg, Linker: tr, Verifier: v, Subs: subs, Sup: sup, Inbox: box, Holds: hs, Health: sweeper, Dashboard: reader,
	})
	if err != nil {
		b.Fatal(err)
	}
	c := agent.Claims{Workspace: ws, Scope: "inbox"}
	c.Subject = "human:alice"
	c.ExpiresAt = jwtTime(time.Now().Add(time.Hour))
	tok, _ := agent.Mint([]byte(testSecret), c)
	h := s.Handler()
	get := func(b *testing.B, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("GET %s: %d %.300s", path, rec.Code, rec.Body.String())
		}
		return rec
	}
	page := get(b, "/ui/").Body.String()
	for _, want := range []string{`data-session="s999"`, `org/repo9`, "1000 of 1000 sessions", "200 open"} {
		if !contains(page, want) {
			b.Fatalf("the fleet page lacks %q", want)
		}
	}
	b.Run("fleet_page", func(b *testing.B) {
		for b.Loop() {
			get(b, "/ui/")
		}
		b.ReportMetric(float64(len(page)), "page-bytes")
	})
	b.Run("brief_json", func(b *testing.B) {
		for b.Loop() {
			get(b, "/v1/brief")
		}
	})
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
