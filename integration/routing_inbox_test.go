package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestRoutingInboxContract: ack-through after a coalesced update does not
// acknowledge the update its reader never saw; bad input is answered with
// problem+json and the right status, and nothing of it is applied.
func TestRoutingInboxContract(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	p := s.start("serve", "serve", nil)
	c := s.client(p)

	t.Run("ack_through_a_fold", func(t *testing.T) {
		t.Parallel()
		const ws = "ackfold"
		admin := s.token(t, "human:admin", ws, "admin")
		c.putSettings(t, admin, map[string]any{"default_controller": "session:reader7"})
		reader := s.token(t, "session:reader7", ws, "inbox")
		other := s.token(t, "session:other7", ws, "events:push")
		subj := s.token(t, "session:subj7", ws, "events:push")
		c.accept(t, other, idleTurn("other7-turn", nil))
		c.waitInbox(t, reader, "", "other7's entry", hasEntry("session:other7", ""))
		c.accept(t, subj, idleTurn("subj7-turn", nil))
		seen := c.waitInbox(t, reader, "", "subj7's entry", hasEntry("session:subj7", ""))
		s1 := entry(seen.Entries, "session:subj7").Seq
		o := entry(seen.Entries, "session:other7").Seq
		if o >= s1 {
			t.Fatalf("other7's entry at seq %d is not before subj7's at %d", o, s1)
		}
		// The reader has read through s1. Another event folds subj7's entry
		// to a new seq.
		c.accept(t, subj, ce("subj7-ask", "session.awaiting_input", map[string]any{"summary": "which branch?"}))
		pg := c.waitInbox(t, reader, "", "subj7's entry folded to a new seq", func(p inboxPage) bool {
			e := entry(p.Entries, "session:subj7")
			return e != nil && e.Seq > s1
		})
		s2 := entry(pg.Entries, "session:subj7").Seq
		ackN := func(body any) int {
			t.Helper()
			r := c.send(t, http.MethodPost, "/v1/inbox/ack", reader, body)
			var a struct {
				Acked *int `json:"acked"`
			}
			if r.Status != 200 || json.Unmarshal(r.Body, &a) != nil || a.Acked == nil {
				t.Fatalf("POST /v1/inbox/ack %v: %s, want 200 {acked}", body, r)
			}
			return *a.Acked
		}
		if n := ackN(map[string]any{"seqs": []int64{s1}}); n != 0 {
			t.Errorf("ack of the old seq %d of an entry now at %d acked %d, want 0", s1, s2, n)
		}
		if n := ackN(map[string]any{"through_seq": s1}); n != 1 {
			t.Errorf("ack through %d acked %d, want 1 (other7's entry only)", s1, n)
		}
		pg = c.inbox(t, reader, "")
		e := entry(pg.Entries, "session:subj7")
		if len(pg.Entries) != 1 || e == nil || e.Seq != s2 || e.Count != 2 || e.Type != "session.awaiting_input" {
			t.Fatalf("after ack through %d the inbox is %s; want only subj7's entry, unacked at seq %d, count 2, headline awaiting_input",
				s1, describeEntries(pg.Entries), s2)
		}
		if n := ackN(map[string]any{"through_seq": s2}); n != 1 {
			t.Errorf("ack through %d acked %d, want 1", s2, n)
		}
		if pg = c.inbox(t, reader, ""); len(pg.Entries) != 0 {
			t.Errorf("after ack through %d: %s, want empty", s2, describeEntries(pg.Entries))
		}
	})

	t.Run("bad_input", func(t *testing.T) {
		t.Parallel()
		const ws = "badin"
		admin := s.token(t, "human:admin", ws, "admin")
		op := s.token(t, "human:operator", ws, "inbox operator")
		sub := s.token(t, "session:sub8", ws, "subscribe inbox")
		acker := s.token(t, "session:acker8", ws, "inbox")
		c.putSettings(t, admin, map[string]any{"default_controller": "session:acker8"})
		for i := 1; i <= 2; i++ {
			tok := s.token(t, fmt.Sprintf("session:root8-%d", i), ws, "events:push")
			c.accept(t, tok, idleTurn(fmt.Sprintf("root8-%d-turn", i), nil))
		}
		pg := c.waitInbox(t, acker, "", "two entries for acker8", func(p inboxPage) bool { return len(p.Entries) == 2 })
		last := pg.Entries[1].Seq
		entriesBefore := describeEntries(pg.Entries)

		long := strings.Repeat("x", 200)
		subs := []struct {
			name   string
			body   string
			status int
		}{
			{"type glob in the middle", `{"types": ["github.*.opened"]}`, 400},
			{"bare star type", `{"types": ["*"]}`, 400},
			{"type glob without dot", `{"types": ["github.pull_request*"]}`, 400},
			{"empty type segment", `{"types": ["github..*"]}`, 400},
			{"repository-wide subject glob", `{"subjects": ["github:org/*"]}`, 400},
			{"number prefix glob", `{"subjects": ["github:org/repo#1*"]}`, 400},
			{"session subject glob", `{"subjects": ["session:*"]}`, 400},
			{"session filter with a slash", `{"session": {"id": "a/b"}}`, 400},
			{"session filter with a newline", `{"session": {"id": "a\nb"}}`, 400},
			{"session filter of 200 characters", `{"session": {"id": "` + long + `"}}`, 400},
			{"subject_terminal on a glob", `{"subjects": ["github:org/repo#*"], "until": "subject_terminal"}`, 422},
			{"subject_terminal on two subjects", `{"subjects": ["github:org/repo#1", "github:org/repo#2"], "until": "subject_terminal"}`, 422},
			{"subject_terminal without a subject", `{"types": ["github.pull_request.*"], "until": "subject_terminal"}`, 422},
		}
		for _, tc := range subs {
			r := c.send(t, http.MethodPost, "/v1/subscriptions", sub, tc.body)
			if r.Status != tc.status {
				t.Errorf("%s: POST /v1/subscriptions %s → %s, want %d", tc.name, tc.body, r, tc.status)
				continue
			}
			checkProblem(t, r, tc.status)
		}
		// A subscription without the subscribe scope.
		r := c.send(t, http.MethodPost, "/v1/subscriptions", acker, `{"types": ["session.*"]}`)
		checkProblem(t, r, 403)
		for _, tok := range []string{sub, s.token(t, "session:acker8", ws, "subscribe")} {
			lr := c.get(t, "/v1/subscriptions", tok)
			var list struct {
				Subscriptions []json.RawMessage `json:"subscriptions"`
			}
			lr.decode(t, &list)
			if lr.Status != 200 || len(list.Subscriptions) != 0 {
				t.Errorf("refused subscriptions were stored: %s", lr)
			}
		}

		// ?party= that breaks the grammar, with the operator scope.
		for _, party := range []string{"session:a/b", "session:a\nb", "session:" + long, "robot:x", "session:"} {
			for _, path := range []string{"/v1/inbox", "/v1/brief", "/v1/inbox/stream"} {
				checkProblem(t, c.get(t, path+"?party="+q(party), op), 400)
			}
			checkProblem(t, c.send(t, http.MethodPost, "/v1/inbox/ack?party="+q(party), op, `{"through_seq": 1}`), 400)
		}
		// ?party= without the operator scope.
		checkProblem(t, c.get(t, "/v1/inbox?party="+q("session:acker8"), sub), 403)
		checkProblem(t, c.send(t, http.MethodPost, "/v1/inbox/ack?party="+q("session:acker8"), sub, `{"through_seq": 1}`), 403)

		// Acks beyond the last seq, malformed ones, one without the scope.
		for _, body := range []string{
			fmt.Sprintf(`{"through_seq": %d}`, last+1),
			fmt.Sprintf(`{"seqs": [%d, %d]}`, pg.Entries[0].Seq, last+5),
			`{"through_seq": 0}`,
			`{"through_seq": -1}`,
			`{"seqs": []}`,
			`{}`,
			`{"through_seq": 1, "seqs": [1]}`,
			`{"through_seq": "1"}`,
		} {
			checkProblem(t, c.send(t, http.MethodPost, "/v1/inbox/ack", acker, body), 400)
		}
		checkProblem(t, c.send(t, http.MethodPost, "/v1/inbox/ack", s.token(t, "session:acker8", ws, "events:push"), `{"through_seq": 1}`), 403)
		if got := describeEntries(c.inbox(t, acker, "").Entries); got != entriesBefore {
			t.Errorf("refused acks changed the inbox: %s, was %s", got, entriesBefore)
		}

		// wait over 60 s, and malformed reads.
		for _, path := range []string{"/v1/inbox?wait=61s", "/v1/inbox?wait=2m", "/v1/inbox?wait=61", "/v1/inbox/stream?wait=61s",
			"/v1/events?wait=61s", "/v1/inbox?after=-1", "/v1/inbox?after=x", "/v1/inbox?limit=1001", "/v1/inbox?wait=-1s"} {
			tok := acker
			if strings.HasPrefix(path, "/v1/events") {
				tok = s.token(t, "session:acker8", ws, "events:read")
			}
			checkProblem(t, c.get(t, path, tok), 400)
		}

		// Missing scopes.
		noScope := s.token(t, "session:acker8", ws, "events:read")
		checkProblem(t, c.get(t, "/v1/inbox", noScope), 403)
		checkProblem(t, c.get(t, "/v1/brief", noScope), 403)
		checkProblem(t, c.get(t, "/v1/subscriptions", noScope), 403)
		checkProblem(t, c.send(t, http.MethodPost, "/v1/sessions/root8-1/supervise", noScope, `{"role": "controller"}`), 403)
		checkProblem(t, c.send(t, http.MethodPost, "/v1/sessions/root8-1/messages", noScope, `{"text": "hi", "intent": "info"}`), 403)
		checkProblem(t, c.get(t, "/v1/workspace/supervision", op), 403)

		// Workspace settings: without admin, and a PUT with one bad field,
		// apply nothing.
		settingsBefore := c.get(t, "/v1/workspace/supervision", admin)
		checkProblem(t, c.send(t, http.MethodPut, "/v1/workspace/supervision", op, `{"default_controller": "session:intruder"}`), 403)
		checkProblem(t, c.send(t, http.MethodPut, "/v1/workspace/supervision", admin, `{"default_controller": "session:intruder", "lease_mode": "sometimes"}`), 400)
		checkProblem(t, c.send(t, http.MethodPut, "/v1/workspace/supervision", admin, `{"default_controller": "session:a/b"}`), 400)
		checkProblem(t, c.send(t, http.MethodPut, "/v1/workspace/supervision", admin, `{"escalate_after": "10ms"}`), 400)
		settingsAfter := c.get(t, "/v1/workspace/supervision", admin)
		var sb, sa map[string]any
		settingsBefore.decode(t, &sb)
		settingsAfter.decode(t, &sa)
		if !reflect.DeepEqual(sb, sa) || sa["default_controller"] != "session:acker8" {
			t.Errorf("refused settings changed them: %s, was %s", settingsAfter, settingsBefore)
		}
		// Supervision with a party id that breaks the grammar in the path.
		sup := s.token(t, "session:sub8", ws, "supervise")
		checkProblem(t, c.send(t, http.MethodPost, "/v1/sessions/"+long+"/supervise", sup, `{"role": "controller"}`), 400)
		checkProblem(t, c.send(t, http.MethodPost, "/v1/sessions/a%0Ab/supervise", sup, `{"role": "controller"}`), 400)
		checkProblem(t, c.send(t, http.MethodPost, "/v1/sessions/root8-1/supervise", sup, `{"role": "boss"}`), 400)
	})
}
