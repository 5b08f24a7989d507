package integration

// Helpers of the routing tests (routing_*_test.go): who hears what, read
// over real HTTP from real processes, with barriers read from Redis.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/providers/event"
)

// routeTimeout bounds how long an event takes to reach an inbox once
// journaled (routing is milliseconds; this is slack for a loaded machine).
const routeTimeout = 15 * time.Second

// send makes a request with an optional bearer token and body: nil (no
// body), []byte or string (sent as is), anything else JSON-encoded.
func (c *client) send(t testing.TB, method, path, token string, body any) *response {
	t.Helper()
	var rd *bytes.Reader
	switch b := body.(type) {
	case nil:
		rd = bytes.NewReader(nil)
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	r, err := c.do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// inboxPage is the answer of GET /v1/inbox.
type inboxPage struct {
	Entries []inbox.Entry `json:"entries"`
	Next    int64         `json:"next"`
}

// inbox reads GET /v1/inbox?query as token's party and fails the test on
// anything but 200.
func (c *client) inbox(t testing.TB, token, query string) inboxPage {
	t.Helper()
	r := c.get(t, "/v1/inbox?"+query, token)
	if r.Status != 200 {
		t.Fatalf("GET /v1/inbox?%s: %s", query, r)
	}
	var p inboxPage
	r.decode(t, &p)
	return p
}

// timedInbox is a long-poll: the page and how long it took.
func (c *client) timedInbox(t testing.TB, token, query string) (inboxPage, time.Duration) {
	t.Helper()
	start := time.Now()
	p := c.inbox(t, token, query)
	return p, time.Since(start)
}

// waitInbox polls GET /v1/inbox?query until cond holds for the page.
func (c *client) waitInbox(t testing.TB, token, query, what string, cond func(inboxPage) bool) inboxPage {
	t.Helper()
	var p inboxPage
	waitFor(t, routeTimeout, what, func() (bool, string) {
		p = c.inbox(t, token, query)
		return cond(p), describeEntries(p.Entries)
	})
	return p
}

// entry returns the entry of a coalesce key, or nil.
func entry(entries []inbox.Entry, ck string) *inbox.Entry {
	for i := range entries {
		if entries[i].CoalesceKey == ck {
			return &entries[i]
		}
	}
	return nil
}

// hasEntry is a waitInbox condition: an entry of the coalesce key whose
// headline type is typ ("" for any).
func hasEntry(ck, typ string) func(inboxPage) bool {
	return func(p inboxPage) bool {
		e := entry(p.Entries, ck)
		return e != nil && (typ == "" || e.Type == typ)
	}
}

func describeEntries(entries []inbox.Entry) string {
	if len(entries) == 0 {
		return "no entries"
	}
	var parts []string
	for _, e := range entries {
		parts = append(parts, fmt.Sprintf("{seq %d %s %s count %d %s kind %s wake %v wake_seq %d via %s}",
			e.Seq, e.CoalesceKey, e.Type, e.Count, e.Priority, e.Kind, e.Wake, e.WakeSeq, e.Via))
	}
	return strings.Join(parts, " ")
}

// decodeEvent decodes an entry's event JSON.
func decodeEvent(t testing.TB, raw json.RawMessage) *event.Event {
	t.Helper()
	var e event.Event
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("entry event %s: %v", raw, err)
	}
	return &e
}

// idleTurn is an idle session.turn_ended (attention).
func idleTurn(id string, extra map[string]any) []byte {
	m := map[string]any{"data": map[string]any{"idle": true}, "summary": "turn over, waiting"}
	for k, v := range extra {
		m[k] = v
	}
	return ce(id, "session.turn_ended", m)
}

// accept pushes one event and fails the test unless it was accepted (202).
func (c *client) accept(t testing.TB, token string, body []byte) pushAnswer {
	t.Helper()
	r := c.mustPush(t, token, ctEvent, body)
	if r.Status != 202 {
		t.Fatalf("push %s: %s, want 202", body, r)
	}
	var a pushAnswer
	r.decode(t, &a)
	return a
}

// agentSource is the source the server sets on a party's pushes.
func agentSource(ws, party string) string { return "//wakegate/" + ws + "/" + party }

// putSettings PUTs workspace supervision settings with an admin token.
func (c *client) putSettings(t testing.TB, admin string, patch any) {
	t.Helper()
	if r := c.send(t, http.MethodPut, "/v1/workspace/supervision", admin, patch); r.Status != 200 {
		t.Fatalf("PUT /v1/workspace/supervision %v: %s", patch, r)
	}
}

// routed is a barrier: (with webhooks) every committed delivery derived,
// then every journal shard's router cursor at the end of its stream, so
// every event journaled so far has been routed (including faults the
// routing itself appended).
func (s *stack) routed(t testing.TB, webhooks bool) {
	t.Helper()
	if webhooks {
		s.waitDerived(t, 20*time.Second)
	}
	j := s.journalLayout()
	waitFor(t, 40*time.Second, "every journal shard routed to its end", func() (bool, string) {
		for sh := range shards {
			last, err := s.rdb.XRevRangeN(bg(), j.StreamKey(sh), "+", "-", 1).Result()
			if err != nil {
				return false, fmt.Sprintf("shard %d: %v", sh, err)
			}
			if len(last) == 0 {
				continue
			}
			cur, err := s.rdb.Get(bg(), j.Tag(sh)+":cursor").Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return false, fmt.Sprintf("shard %d cursor: %v", sh, err)
			}
			if cur != last[0].ID {
				return false, fmt.Sprintf("shard %d routed up to %q of %s", sh, cur, last[0].ID)
			}
		}
		return true, ""
	})
}

// metric reads one unlabelled sample from a Prometheus text page.
func metric(t testing.TB, addr, name string) (float64, bool) {
	t.Helper()
	hc := &http.Client{Timeout: 3 * time.Second}
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// q escapes a query value.
func q(v string) string { return url.QueryEscape(v) }

// journalOf lists GET /v1/events?types=… (a read:any token), all pages.
func (c *client) journalOf(t testing.TB, token, types string) []*event.Event {
	t.Helper()
	var out []*event.Event
	after := ""
	for {
		qs := "limit=1000&types=" + q(types)
		if after != "" {
			qs += "&after=" + q(after)
		}
		p := readPage(t, c, token, qs)
		out = append(out, p.Events...)
		if len(p.Events) < 1000 {
			return out
		}
		after = p.Next
	}
}

// seqsOf lists the seqs of entries.
func seqsOf(entries []inbox.Entry) []int64 {
	out := make([]int64, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Seq)
	}
	slices.Sort(out)
	return out
}
