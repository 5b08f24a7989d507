package gateway

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/providers/event"
)

// TestPresence: PUT /v1/presence attends for "for" (or the default TTL)
// and records paused_until; GET answers the same; bad input is refused.
func TestPresence(t *testing.T) {
	e := newEpEnv(t, &outbound.Guard{AllowPrivate: true}, nil)
	a := e.do(http.MethodPut, "/v1/presence", "acme", "session:s1", "inbox", `{"attended": true, "for": "10m", "reason": "typing"}`).
		want(t, "attend", http.StatusOK)
	if a.body["attended"] != true || a.body["paused"] != false || a.str("reason") != "typing" {
		t.Fatalf("presence %s", a.raw)
	}
	until, err := time.Parse(time.RFC3339, a.str("attended_until"))
	if err != nil || until.Before(time.Now().Add(9*time.Minute)) || until.After(time.Now().Add(11*time.Minute)) {
		t.Fatalf("attended_until %q", a.str("attended_until"))
	}
	g := e.do(http.MethodGet, "/v1/presence", "acme", "session:s1", "inbox", "").want(t, "get", http.StatusOK)
	if g.body["attended"] != true {
		t.Fatalf("get %s", g.raw)
	}
	p := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	a = e.do(http.MethodPut, "/v1/presence", "acme", "session:s1", "inbox", `{"paused_until": "`+p+`"}`).want(t, "pause", http.StatusOK)
	if a.body["attended"] != false || a.body["paused"] != true {
		t.Fatalf("paused %s", a.raw)
	}
	a = e.do(http.MethodPut, "/v1/presence", "acme", "session:s2", "inbox", `{"attended": true}`).want(t, "default ttl", http.StatusOK)
	if u, _ := time.Parse(time.RFC3339, a.str("attended_until")); u.Before(time.Now().Add(29 * time.Minute)) {
		t.Fatalf("default attended_until %s", a.raw)
	}
	e.do(http.MethodPut, "/v1/presence", "acme", "session:s1", "inbox", `{"attended": true, "for": "2d"}`).want(t, "bad for", http.StatusBadRequest)
	e.do(http.MethodPut, "/v1/presence", "acme", "session:s1", "inbox", `{"attended": true, "x": 1}`).want(t, "unknown field", http.StatusBadRequest)
	e.do(http.MethodPut, "/v1/presence", "acme", "session:s1", "subscribe", `{"attended": true}`).want(t, "scope", http.StatusForbidden)
}

// TestQuietAuthorizationAndLift: quiet self needs inbox; another party or
// all needs admin or a human: caller and an until ≤ 24 h; DELETE lifts it
// and answers with the digest of what it held.
func TestQuietAuthorizationAndLift(t *testing.T) {
	e := newEpEnv(t, &outbound.Guard{AllowPrivate: true}, nil)
	soon := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	far := time.Now().Add(25 * time.Hour).UTC().Format(time.RFC3339)
	e.do(http.MethodPut, "/v1/quiet", "acme", "session:s1", "inbox", `{"scope": "self", "reason": "focus"}`).want(t, "self", http.StatusOK)
	e.do(http.MethodPut, "/v1/quiet", "acme", "session:s1", "subscribe", `{"scope": "self"}`).want(t, "self without inbox", http.StatusForbidden)
	e.do(http.MethodPut, "/v1/quiet", "acme", "session:s1", "inbox", `{"scope": "all", "until": "`+soon+`"}`).want(t, "all by a session", http.StatusForbidden)
	e.do(http.MethodPut, "/v1/quiet", "acme", "session:s1", "inbox", `{"scope": "session:s2", "until": "`+soon+`"}`).want(t, "other by a session", http.StatusForbidden)
	e.do(http.MethodPut, "/v1/quiet", "acme", "human:gera", "inbox", `{"scope": "all"}`).want(t, "all without until", http.StatusUnprocessableEntity)
	e.do(http.MethodPut, "/v1/quiet", "acme", "human:gera", "inbox", `{"scope": "all", "until": "`+far+`"}`).want(t, "all for 25h", http.StatusUnprocessableEntity)
	e.do(http.MethodPut, "/v1/quiet", "acme", "session:ops", "admin", `{"scope": "session:s2", "until": "`+soon+`"}`).want(t, "other by admin", http.StatusOK)
	e.do(http.MethodPut, "/v1/quiet", "acme", "human:gera", "", `{"scope": "all", "until": "`+soon+`"}`).want(t, "all by a human", http.StatusOK)
	e.do(http.MethodPut, "/v1/quiet", "acme", "human:gera", "inbox", `{"scope": "nobody"}`).want(t, "bad scope", http.StatusBadRequest)
	g := e.do(http.MethodGet, "/v1/quiet", "acme", "session:s1", "inbox", "").want(t, "get", http.StatusOK)
	if qs, _ := g.body["quiet"].([]any); len(qs) != 3 {
		t.Fatalf("quiet records %s", g.raw)
	}

	// Something held for session:s1 by its quiet, lifted with its digest.
	ev := &event.Event{SpecVersion: event.SpecVersion, ID: "1", Source: "//github.com/org/repo", Type: "github.pull_request.ready",
		Subject: "github:org/repo#7", Time: time.Now().UTC(), Workspace: "acme", Priority: event.Attention, Summary: "ready"}
	res, err := e.box.Deliver(t.Context(), inbox.Delivery{Workspace: "acme", Party: "session:s1", Event: ev, Via: inbox.ViaSubscription}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// all is still on: lifting self alone releases nothing for s1 yet.
	d, err := e.holds.Decide(t.Context(), holds.Request{Workspace: "acme", Party: "session:s1", Result: res, Event: ev, Now: time.Now()})
	if err != nil || d.Push || d.Reason != holds.ReasonQuiet {
		t.Fatalf("decision %+v %v", d, err)
	}
	a := e.do(http.MethodDelete, "/v1/quiet?scope=self", "acme", "session:s1", "inbox", "").want(t, "lift self", http.StatusOK)
	if ds, _ := a.body["digests"].([]any); len(ds) != 0 {
		t.Fatalf("lift self under all: %s", a.raw)
	}
	a = e.do(http.MethodDelete, "/v1/quiet?scope=all", "acme", "human:gera", "", "").want(t, "lift all", http.StatusOK)
	ds, _ := a.body["digests"].([]any)
	if len(ds) != 1 {
		t.Fatalf("lift all: %s", a.raw)
	}
	d0 := ds[0].(map[string]any)
	if d0["party"] != "session:s1" || fmt.Sprint(d0["text"]) == "" || len(d0["digest"].([]any)) != 1 {
		t.Fatalf("digest %v", d0)
	}
	e.do(http.MethodDelete, "/v1/quiet?scope=all", "acme", "human:gera", "", "").want(t, "lift again", http.StatusNotFound)
}
