package integration

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/providers/event"
)

// TestBadWebhooks sends refused deliveries to a serve with a 64 KB body
// limit; each must get its status and an RFC 9457 problem, and commit
// nothing (no key under the prefix is added or changed). Then the answers
// that are not refusals: an unknown event (202 ignored, nothing journaled),
// a byte-identical replay under a new GUID (200 duplicate, nothing
// committed), a form-encoded delivery (202, derived like JSON) and ping.
func TestBadWebhooks(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]string{"WAKEGATE_MAX_BODY": "64KB"})
	p := s.start("serve", "serve", nil)
	c := s.client(p)
	s.waitDerived(t, 10*time.Second) // the derive groups exist: the state is quiet

	opened := fixture(t, "octokit/pull_request/opened.payload.json")
	big := editJSON(t, opened, func(m map[string]any) { m["padding"] = strings.Repeat("x", 100<<10) })
	del := func(h string) func(*http.Request) { return func(r *http.Request) { r.Header.Del(h) } }
	set := func(h, v string) func(*http.Request) { return func(r *http.Request) { r.Header.Set(h, v) } }
	sha1Sig := func(body []byte) string {
		m := hmac.New(sha1.New, []byte(s.hookSecret))
		m.Write(body)
		return "sha1=" + hex.EncodeToString(m.Sum(nil))
	}
	chunked := func(r *http.Request) { // no Content-Length: the limit must hold while reading
		b, _ := io.ReadAll(r.Body)
		r.Body, r.ContentLength, r.GetBody = io.NopCloser(bytes.NewReader(b)), -1, nil
	}

	refused := []struct {
		name   string
		event  string
		body   []byte
		mods   []func(*http.Request)
		status int
	}{
		{"no signature", "pull_request", opened, []func(*http.Request){del("X-Hub-Signature-256")}, 401},
		{"wrong secret", "pull_request", opened, []func(*http.Request){set("X-Hub-Signature-256", sign("not-the-secret", opened))}, 401},
		{"signature of other bytes", "pull_request", opened, []func(*http.Request){set("X-Hub-Signature-256", sign(s.hookSecret, append([]byte(" "), opened...)))}, 401},
		{"sha1 only", "pull_request", opened, []func(*http.Request){del("X-Hub-Signature-256"), set("X-Hub-Signature", sha1Sig(opened))}, 401},
		{"malformed json", "pull_request", []byte(`{"action":"opened","repository":{"full_name":`), nil, 400},
		{"over max body", "pull_request", big, nil, 413},
		{"over max body, chunked", "pull_request", big, []func(*http.Request){chunked}, 413},
		{"text/plain", "pull_request", opened, []func(*http.Request){set("Content-Type", "text/plain")}, 415},
		{"missing delivery", "pull_request", opened, []func(*http.Request){del("X-GitHub-Delivery")}, 400},
		{"missing event", "pull_request", opened, []func(*http.Request){del("X-GitHub-Event")}, 400},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			guid := newGUID()
			before := s.state(t)
			r := c.mustWebhook(t, tc.event, guid, tc.body, tc.mods...)
			checkProblem(t, r, tc.status)
			s.waitDerived(t, 10*time.Second)
			after := s.state(t)
			if d := changed(before, after); len(d) > 0 {
				t.Errorf("refused with %d but Redis changed: %v", r.Status, d)
			}
			if k := after.mentioning(guid); len(k) > 0 {
				t.Errorf("refused delivery left keys: %v", k)
			}
		})
	}

	t.Run("unknown event type", func(t *testing.T) {
		guid := newGUID()
		body := []byte(`{"action":"created","starred_at":"2019-05-15T15:20:40Z","repository":{"full_name":"Codertocat/Hello-World"},"sender":{"login":"Codertocat"}}`)
		before := s.journalEvents(t)
		r := c.mustWebhook(t, "star", guid, body)
		var a deliveryAnswer
		r.decode(t, &a)
		if r.Status != 202 || a.Status != "ignored" || a.Delivery != guid || a.Reason == "" {
			t.Errorf("unknown event: %s, want 202 {delivery: %s, status: ignored, reason}", r, guid)
		}
		s.waitDerived(t, 10*time.Second)
		if n := newEvents(before, s.journalEvents(t)); len(n) > 0 {
			t.Errorf("an ignored delivery was journaled: %+v", n)
		}
	})

	t.Run("replayed body under a new GUID", func(t *testing.T) {
		body := editJSON(t, opened, func(m map[string]any) {
			m["number"] = 5
			obj(m, "pull_request")["number"] = 5
		})
		first, replay := newGUID(), newGUID()
		if r := c.mustWebhook(t, "pull_request", first, body); r.Status != 202 {
			t.Fatalf("first delivery: %s, want 202", r)
		}
		s.waitDerived(t, 10*time.Second)
		before := s.state(t)
		r := c.mustWebhook(t, "pull_request", replay, body)
		var a deliveryAnswer
		r.decode(t, &a)
		if r.Status != 200 || !a.Duplicate || a.Delivery != replay {
			t.Errorf("replay: %s, want 200 {delivery: %s, duplicate: true}", r, replay)
		}
		s.waitDerived(t, 10*time.Second)
		after := s.state(t)
		if d := changed(before, after); len(d) > 0 {
			t.Errorf("the replay committed something: %v", d)
		}
		if k := after.mentioning(replay); len(k) > 0 {
			t.Errorf("the replay left keys: %v", k)
		}
		if n := len(byType(s.journalEvents(t), "github.pull_request.opened", "github:"+repo+"#5")); n != 1 {
			t.Errorf("%d opened events for #5, want 1", n)
		}
	})

	t.Run("form-encoded", func(t *testing.T) {
		payload := editJSON(t, opened, func(m map[string]any) {
			m["number"] = 6
			obj(m, "pull_request")["number"] = 6
		})
		form := []byte("payload=" + url.QueryEscape(string(payload)))
		guid := newGUID()
		r := c.mustWebhook(t, "pull_request", guid, form, set("Content-Type", "application/x-www-form-urlencoded"))
		var a deliveryAnswer
		r.decode(t, &a)
		if r.Status != 202 || a.Status != "accepted" || a.Delivery != guid {
			t.Fatalf("form delivery: %s, want 202 {delivery: %s, status: accepted}", r, guid)
		}
		s.waitEvents(t, 15*time.Second, "the form delivery's opened event", func(evs []*event.Event) bool {
			e := find(evs, guid)
			return e != nil && e.Type == "github.pull_request.opened" && e.Subject == "github:"+repo+"#6"
		})
	})

	t.Run("ping", func(t *testing.T) {
		before := s.journalEvents(t)
		r := c.mustWebhook(t, "ping", newGUID(), []byte(`{"zen":"Design for failure.","hook_id":424242,"repository":{"full_name":"Codertocat/Hello-World"}}`))
		if r.Status != 200 {
			t.Errorf("ping: %s, want 200", r)
		}
		s.waitDerived(t, 10*time.Second)
		if n := newEvents(before, s.journalEvents(t)); len(n) > 0 {
			t.Errorf("ping was journaled: %+v", n)
		}
	})
}
