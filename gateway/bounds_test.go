package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/delivery/supervision"
)

// A party has at most 1,000 live subscriptions by default: the 1,001st is
// refused with 422 naming the limit, nothing stored; GET /v1/subscriptions
// pages them (limit, after → next), every one exactly once, and another
// party is not affected (docs/design.md §10).
func TestSubscriptionsCappedAndPaged(t *testing.T) {
	e := newEnv(t)
	const owner = "session:flood"
	var wg sync.WaitGroup
	errs := make(chan string, 1000)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 1000; i += 8 {
				if a := e.do("POST", "/v1/subscriptions", owner, "subscribe", fmt.Sprintf(`{"subjects": ["github:org/r#%d"]}`, i+1)); a.status != 201 {
					errs <- fmt.Sprintf("subscription %d: %d %s", i, a.status, a.raw)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	a := e.do("POST", "/v1/subscriptions", owner, "subscribe", `{"subjects": ["github:org/r#2000"]}`).want(t, 422)
	if !strings.Contains(a.str("detail"), "1000") {
		t.Fatalf("the refusal does not name the limit: %s", a.raw)
	}
	e.do("POST", "/v1/subscriptions", "session:other", "subscribe", `{"subjects": ["github:org/r#1"]}`).want(t, 201)

	seen := map[string]bool{}
	after, pages := "", 0
	for {
		a := e.do("GET", "/v1/subscriptions?limit=300&after="+after, owner, "subscribe", "").want(t, 200)
		var pg struct {
			Subscriptions []struct {
				ID       string   `json:"id"`
				Subjects []string `json:"subjects"`
			} `json:"subscriptions"`
			Next string `json:"next"`
		}
		if err := json.Unmarshal(a.raw, &pg); err != nil || len(pg.Subscriptions) > 300 {
			t.Fatalf("page %d: %v %.300s", pages, err, a.raw)
		}
		for _, s := range pg.Subscriptions {
			if seen[s.ID] {
				t.Fatalf("subscription %s listed twice", s.ID)
			}
			seen[s.ID] = true
		}
		pages++
		if pg.Next == "" {
			break
		}
		if pages > 10 {
			t.Fatal("the pages never end")
		}
		after = pg.Next
	}
	if len(seen) != 1000 || pages != 4 {
		t.Fatalf("paged %d subscriptions in %d pages, want 1000 in 4", len(seen), pages)
	}
	if a := e.do("GET", "/v1/subscriptions", owner, "subscribe", ""); strings.Count(string(a.raw), `"id"`) != 100 {
		t.Fatalf("an unpaged list answers %d subscriptions, want the default page of 100", strings.Count(string(a.raw), `"id"`))
	}
	e.do("GET", "/v1/subscriptions?after=nonsense", owner, "subscribe", "").want(t, 400)
	e.do("GET", "/v1/subscriptions?limit=1001", owner, "subscribe", "").want(t, 400)

	// Deleting one makes room for one.
	var first struct {
		Subscriptions []struct{ ID string } `json:"subscriptions"`
	}
	_ = json.Unmarshal(e.do("GET", "/v1/subscriptions?limit=1", owner, "subscribe", "").raw, &first)
	e.do("DELETE", "/v1/subscriptions/"+first.Subscriptions[0].ID, owner, "subscribe", "").want(t, 204)
	e.do("POST", "/v1/subscriptions", owner, "subscribe", `{"subjects": ["github:org/r#2000"]}`).want(t, 201)
	e.do("POST", "/v1/subscriptions", owner, "subscribe", `{"subjects": ["github:org/r#2001"]}`).want(t, 422)
}

// A party holds at most supervision.MaxEdgesPerParty edges taken through
// POST /v1/sessions/{id}/supervise — observed sessions and controller
// leases together: the next new one is refused with 422 naming the limit,
// nothing written; renewing one it has is not; releasing one makes room.
func TestSupervisionEdgesCapped(t *testing.T) {
	e := newEnv(t)
	const party = "session:watcher"
	// The edges it holds already, seeded directly: 10,000 round trips
	// would test nothing more.
	var members []any
	for i := range supervision.MaxEdgesPerParty - 2 {
		members = append(members, fmt.Sprintf("seeded-%d", i))
	}
	watch := e.prefix + ":{sup:" + tws + "}:watch:" + party // docs: package supervision's Storage
	if err := e.rdb.SAdd(e.ctx, watch, members...).Err(); err != nil {
		t.Fatal(err)
	}
	e.do("POST", "/v1/sessions/w1/supervise", party, supScope, `{"role": "observer"}`).want(t, 200)
	e.do("POST", "/v1/sessions/w2/supervise", party, supScope, `{"role": "controller"}`).want(t, 200)
	for _, body := range []string{`{"role": "observer"}`, `{"role": "controller"}`} {
		a := e.do("POST", "/v1/sessions/w3/supervise", party, supScope, body).want(t, 422)
		if !strings.Contains(a.str("detail"), fmt.Sprint(supervision.MaxEdgesPerParty)) {
			t.Fatalf("%s: the refusal does not name the limit: %s", body, a.raw)
		}
	}
	if a := e.do("GET", "/v1/sessions/w3/supervision", party, supScope, "").want(t, 200); strings.Contains(string(a.raw), party) {
		t.Fatalf("a refused edge was written: %s", a.raw)
	}
	e.do("POST", "/v1/sessions/w1/supervise", party, supScope, `{"role": "observer", "scope": "subtree"}`).want(t, 200) // renewing
	e.do("DELETE", "/v1/sessions/w1/supervise?role=observer", party, supScope, "").want(t, 204)
	e.do("POST", "/v1/sessions/w3/supervise", party, supScope, `{"role": "observer"}`).want(t, 200)
}

// A workspace holds at most holds.MaxQuietRecords quiet records (one per
// scope): a new scope beyond it is refused with 422 naming the limit;
// replacing one that exists is not (docs/design.md §10).
func TestQuietRecordsCapped(t *testing.T) {
	e := newEpEnv(t, &outbound.Guard{AllowPrivate: true}, nil)
	until := time.Now().Add(time.Hour).UTC()
	for i := range holds.MaxQuietRecords - 1 {
		if err := e.holds.SetQuiet(context.Background(), "acme", holds.Quiet{Scope: fmt.Sprintf("human:seeded-%d", i), Until: until, By: "human:gera"}); err != nil {
			t.Fatal(err)
		}
	}
	body := func(scope string) string {
		return `{"scope": "` + scope + `", "until": "` + until.Format(time.RFC3339) + `"}`
	}
	e.do(http.MethodPut, "/v1/quiet", "acme", "human:gera", "", body("session:last")).want(t, "the last one", http.StatusOK)
	a := e.do(http.MethodPut, "/v1/quiet", "acme", "human:gera", "", body("session:one-more")).want(t, "one more", http.StatusUnprocessableEntity)
	if !strings.Contains(a.str("detail"), fmt.Sprint(holds.MaxQuietRecords)) {
		t.Fatalf("the refusal does not name the limit: %s", a.raw)
	}
	e.do(http.MethodPut, "/v1/quiet", "acme", "human:gera", "", body("session:last")).want(t, "replacing", http.StatusOK)
	e.do(http.MethodPut, "/v1/quiet", "other", "human:gera", "", body("session:one-more")).want(t, "another workspace", http.StatusOK)
}
