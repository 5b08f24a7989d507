package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/wakegate/wakegate/providers/event"
)

// TestBadPushes sends refused agent pushes to a serve that accepts HS256
// tokens and an RSA public key; each must get its status and an RFC 9457
// problem and commit nothing. Controls show the accepted shapes first, so
// a refusal is about the one thing each case breaks.
func TestBadPushes(t *testing.T) {
	t.Parallel()
	key := newRSAKey(t)
	s := newStack(t, map[string]string{"WAKEGATE_JWT_PUBLIC_KEYS": key.pem})
	p := s.start("serve", "serve", nil)
	c := s.client(p)
	s.waitDerived(t, 10*time.Second)

	const scope = "events:push events:read"
	sess := func(id string) string { return s.token(t, "session:"+id, "default", scope) }
	n := 0
	body := func() []byte { n++; return ce(fmt.Sprintf("auth-%d", n), "session.turn_started", nil) }

	// expectRefused pushes and checks status, problem and that Redis is
	// unchanged and the journal lacks every id of the push.
	expectRefused := func(t *testing.T, token, ct string, b []byte, status int, ids ...string) map[string]any {
		t.Helper()
		before := s.state(t)
		r := c.mustPush(t, token, ct, b)
		prob := checkProblem(t, r, status)
		if d := changed(before, s.state(t)); len(d) > 0 {
			t.Errorf("refused with %d but Redis changed: %v", r.Status, d)
		}
		evs := s.journalEvents(t)
		for _, id := range ids {
			if e := find(evs, id); e != nil {
				t.Errorf("refused event %s is in the journal: %+v", id, e)
			}
		}
		return prob
	}
	expectAccepted := func(t *testing.T, token string, b []byte, id string) {
		t.Helper()
		r := c.mustPush(t, token, ctEvent, b)
		var a pushAnswer
		if r.Status == 202 {
			r.decode(t, &a)
		}
		if r.Status != 202 || len(a.Accepted) != 1 || a.Accepted[0].ID != id {
			t.Fatalf("push %s: %s, want 202 with %s accepted", id, r, id)
		}
	}

	t.Run("controls", func(t *testing.T) {
		expectAccepted(t, sess("auth"), ce("ctl-mint", "session.turn_started", nil), "ctl-mint")
		expectAccepted(t, signHS256(t, s.jwtSecret, claims("session:auth", "default", scope)), ce("ctl-hs", "session.turn_started", nil), "ctl-hs")
		expectAccepted(t, key.signRS256(t, claims("session:auth", "default", scope)), ce("ctl-rs", "session.turn_started", nil), "ctl-rs")
	})

	t.Run("token", func(t *testing.T) {
		now := time.Now()
		with := func(k string, v any) jwt.MapClaims {
			c := claims("session:auth", "default", scope)
			c[k] = v
			return c
		}
		confused := jwt.NewWithClaims(jwt.SigningMethodHS256, claims("session:auth", "default", scope))
		confused.Header["kid"] = key.kid // steer a naive verifier to the RSA key
		confusedTok, err := confused.SignedString([]byte(key.pem))
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name, token string
			status      int
		}{
			{"missing", "", 401},
			{"alg none", signNone(t, claims("session:auth", "default", scope)), 401},
			{"hs256 keyed with the rsa public key pem", signHS256(t, []byte(key.pem), claims("session:auth", "default", scope)), 401},
			{"hs256 keyed with the rsa public key pem, kid of the rsa key", confusedTok, 401},
			{"wrong key", signHS256(t, []byte("some-other-secret"), claims("session:auth", "default", scope)), 401},
			{"expired", signHS256(t, s.jwtSecret, with("exp", now.Add(-5*time.Minute).Unix())), 401},
			{"not yet valid", signHS256(t, s.jwtSecret, with("nbf", now.Add(5*time.Minute).Unix())), 401},
			{"wrong audience", signHS256(t, s.jwtSecret, with("aud", "someone-else")), 401},
			{"missing scope events:push", s.token(t, "session:auth", "default", "events:read inbox"), 403},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				b := body()
				var e struct{ ID string }
				_ = json.Unmarshal(b, &e)
				expectRefused(t, tc.token, ctEvent, b, tc.status, e.ID)
			})
		}
	})

	// iat is optional in a JWT (RFC 7519 §4.1.6) and the contract does not
	// require it: a token without one is valid.
	t.Run("token without iat", func(t *testing.T) {
		c := claims("session:auth", "default", scope)
		delete(c, "iat")
		expectAccepted(t, signHS256(t, s.jwtSecret, c), ce("no-iat", "session.turn_started", nil), "no-iat")
	})

	t.Run("event", func(t *testing.T) {
		a := sess("ev-a")
		cases := []struct {
			name   string
			body   []byte
			status int
		}{
			{"another workspace in the body", ce("ev-ws", "session.turn_started", map[string]any{"workspace": "other"}), 403},
			{"about another session (subject)", ce("ev-other", "session.turn_started", map[string]any{"subject": "session:ev-b"}), 403},
			{"about another session (sessionid)", ce("ev-other2", "session.turn_started", map[string]any{"sessionid": "ev-b"}), 403},
			{"github type", ce("ev-gh", "github.pull_request.ready", nil), 403},
			{"wakegate type", ce("ev-wg", "wakegate.escalated", nil), 403},
			{"not a subject of a session", ce("ev-subj", "session.turn_started", map[string]any{"subject": "github:Codertocat/Hello-World#2"}), 403},
			{"bad type", ce("ev-type", "Not A Type", nil), 422},
			{"not json", []byte(`{"specversion":"1.0",`), 400},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var e struct{ ID string }
				_ = json.Unmarshal(tc.body, &e)
				expectRefused(t, a, ctEvent, tc.body, tc.status, e.ID)
			})
		}
	})

	t.Run("batch with one invalid event", func(t *testing.T) {
		a := sess("batch")
		b := batch(ce("b-1", "session.turn_started", nil), ce("b-2", "Not A Type", nil), ce("b-3", "session.turn_ended", nil))
		prob := expectRefused(t, a, ctBatch, b, 422, "b-1", "b-2", "b-3")
		errs, _ := prob["errors"].([]any)
		var idx []int
		for _, e := range errs {
			m, _ := e.(map[string]any)
			f, _ := m["index"].(float64)
			idx = append(idx, int(f))
		}
		if !slices.Equal(idx, []int{1}) {
			t.Errorf("per-event errors %v, want one for index 1 only", prob["errors"])
		}
		// b-1 was not committed: pushing it now is new, not a duplicate.
		expectAccepted(t, a, ce("b-1", "session.turn_started", nil), "b-1")
	})

	t.Run("batch of 101", func(t *testing.T) {
		evs := make([][]byte, 101)
		for i := range evs {
			evs[i] = ce(fmt.Sprintf("big-%d", i), "session.turn_started", nil)
		}
		expectRefused(t, sess("big"), ctBatch, batch(evs...), 413, "big-0", "big-100")
	})

	t.Run("repeated id", func(t *testing.T) {
		a := sess("rep")
		expectAccepted(t, a, ce("rep-1", "session.turn_started", nil), "rep-1")
		before := s.state(t)
		r := c.mustPush(t, a, ctEvent, ce("rep-1", "session.turn_started", nil))
		var ans pushAnswer
		r.decode(t, &ans)
		if r.Status != 200 || len(ans.Accepted) != 0 || !slices.Equal(ans.Duplicates, []string{"rep-1"}) {
			t.Errorf("repeated push: %s, want 200 {accepted: [], duplicates: [rep-1]}", r)
		}
		for _, k := range changed(before, s.state(t)) {
			if !strings.Contains(k, ":party:") { // a duplicate may still record that its pusher was seen
				t.Errorf("the duplicate changed %s", k)
			}
		}
		if n := countIDs(s.journalEvents(t))["rep-1"]; n != 1 {
			t.Errorf("rep-1 journaled %d times, want 1", n)
		}
	})

	t.Run("second claim of a linked PR", func(t *testing.T) {
		claim := func(id string) []byte {
			return ce(id, "session.pr_opened", map[string]any{"data": map[string]any{"repo": repo, "number": 2}})
		}
		expectAccepted(t, sess("claim-a"), claim("claim-a-1"), "claim-a-1")
		before, beforeEvs := s.state(t), s.journalEvents(t)
		r := c.mustPush(t, sess("claim-b"), ctEvent, claim("claim-b-1"))
		prob := checkProblem(t, r, 409)
		if h, _ := prob["holder"].(string); h != "session:claim-a" {
			t.Errorf("holder %q, want session:claim-a", prob["holder"])
		}
		// Only the journal may have changed (its entry, the entry's dedup
		// marker and its period's count, the shard's marker epochs set by
		// its first lookup), and only by wakegate.link_conflict.
		for _, k := range changed(before, s.state(t)) {
			if !strings.HasSuffix(k, ":journal") && !strings.Contains(k, ":lh:") && !strings.HasSuffix(k, ":lhepoch") && !strings.HasSuffix(k, ":emepoch") {
				t.Errorf("the refused claim changed %s", k)
			}
		}
		added := newEvents(beforeEvs, s.journalEvents(t))
		if len(added) != 1 || added[0].Type != "wakegate.link_conflict" {
			t.Errorf("journaled by the refused claim: %+v, want exactly one wakegate.link_conflict", added)
		}
	})

	t.Run("parent cycle", func(t *testing.T) {
		spawned := func(id, parent string) []byte {
			return ce(id, "session.spawned", map[string]any{"data": map[string]any{"parent": parent}})
		}
		expectAccepted(t, sess("cyc-a"), spawned("cyc-a-1", "cyc-b"), "cyc-a-1")
		expectRefused(t, sess("cyc-b"), ctEvent, spawned("cyc-b-1", "cyc-a"), 422, "cyc-b-1")
	})

	// A batch is all-or-nothing: a claim in a batch refused for another
	// event must not stay applied.
	t.Run("batch with a claim and a cycle", func(t *testing.T) {
		expectAccepted(t, sess("bat-y"), ce("bat-y-1", "session.spawned", map[string]any{"data": map[string]any{"parent": "bat-x"}}), "bat-y-1")
		b := batch(
			ce("bat-x-1", "session.pr_opened", map[string]any{"data": map[string]any{"repo": repo, "number": 7}}),
			ce("bat-x-2", "session.spawned", map[string]any{"data": map[string]any{"parent": "bat-y"}}),
		)
		expectRefused(t, sess("bat-x"), ctBatch, b, 422, "bat-x-1", "bat-x-2")
		// Nothing of the refused batch stands: another session may claim #7.
		r := c.mustPush(t, sess("bat-z"), ctEvent, ce("bat-z-1", "session.pr_opened", map[string]any{"data": map[string]any{"repo": repo, "number": 7}}))
		if r.Status != 202 {
			t.Errorf("claim of #7 after a refused batch claimed it: %s, want 202", r)
		}
	})
}

// TestRateLimit floods one workspace past WAKEGATE_INGEST_LIMITS
// workspace=5/s (burst 10): pushes get 429 with Retry-After and are not
// committed, while another workspace's token is still accepted.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	const rate = 5.0
	s := newStack(t, map[string]string{"WAKEGATE_INGEST_LIMITS": "workspace=5/s,token=1000/s"})
	p := s.start("serve", "serve", nil)
	c := s.client(p)

	beta := s.token(t, "session:b", "beta", "events:push")
	var (
		mu            sync.Mutex
		acceptedIDs   []string
		limited       atomic.Int64
		betaAnswers   []*response
		firstProblems []*response
		seq           atomic.Int64
		wg            sync.WaitGroup
	)
	start := time.Now()
	for g := range 4 { // four sessions (tokens) of one workspace
		tok := s.token(t, fmt.Sprintf("session:a%d", g), "alpha", "events:push")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 15 {
				id := fmt.Sprintf("flood-%d", seq.Add(1))
				r, err := c.push(tok, ctEvent, ce(id, "session.turn_started", nil))
				if err != nil {
					continue
				}
				mu.Lock()
				switch r.Status {
				case 202:
					acceptedIDs = append(acceptedIDs, id)
				case 429:
					if limited.Add(1) == 1 {
						firstProblems = append(firstProblems, r)
						// While alpha is limited, beta is not.
						br, err := c.push(beta, ctEvent, ce("beta-1", "session.turn_started", nil))
						if err == nil {
							betaAnswers = append(betaAnswers, br)
						}
					}
				default:
					firstProblems = append(firstProblems, r)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	if limited.Load() == 0 {
		t.Fatalf("60 pushes in %s at workspace=5/s: none got 429 (%d accepted)", elapsed, len(acceptedIDs))
	}
	for _, r := range firstProblems {
		checkProblem(t, r, 429)
		if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" || strings.Trim(ra, "0123456789") != "" {
			t.Errorf("429 with Retry-After %q, want a positive number of seconds", ra)
		}
	}
	if limit := 2*rate + 1 + rate*elapsed.Seconds() + 1; float64(len(acceptedIDs)) > limit {
		t.Errorf("%d pushes accepted in %s, more than workspace=5/s with a burst of 10 allows (%.0f)", len(acceptedIDs), elapsed, limit)
	}
	if len(betaAnswers) != 1 || betaAnswers[0].Status != 202 {
		t.Errorf("another workspace's push while alpha was limited: %v, want 202", betaAnswers)
	}
	evs := s.journalEvents(t)
	var alpha []*event.Event
	for _, e := range evs {
		if e.Workspace == "alpha" {
			alpha = append(alpha, e)
		}
	}
	if len(alpha) != len(acceptedIDs) {
		t.Errorf("%d alpha events journaled, %d pushes accepted: a 429 committed something", len(alpha), len(acceptedIDs))
	}
}
