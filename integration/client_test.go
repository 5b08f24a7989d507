package integration

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/event"
)

// hookID is the X-GitHub-Hook-ID of every delivery the tests send.
const hookID = "424242"

// client talks to one process's HTTP API.
type client struct {
	base       string
	hc         *http.Client
	hookSecret string
}

func (s *stack) client(p *proc) *client {
	return &client{
		base:       "http://" + p.Addr,
		hookSecret: s.hookSecret,
		hc: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
			MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second,
		}},
	}
}

// response is an HTTP answer, read whole.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r *response) String() string { return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Body)) }

// decode unmarshals the body into v or fails the test.
func (r *response) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("answer %s is not JSON: %v", r, err)
	}
}

func (c *client) do(req *http.Request) (*response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// sign is GitHub's X-Hub-Signature-256 of body under secret.
func sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// webhookRequest builds a delivery as GitHub sends it: signed body, event,
// delivery GUID, hook id, JSON content type. mods adjust it.
func (c *client) webhookRequest(eventType, guid string, body []byte, mods ...func(*http.Request)) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, c.base+"/webhooks/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/it")
	req.Header.Set("X-GitHub-Event", eventType)
	req.Header.Set("X-GitHub-Delivery", guid)
	req.Header.Set("X-GitHub-Hook-ID", hookID)
	req.Header.Set("X-Hub-Signature-256", sign(c.hookSecret, body))
	for _, m := range mods {
		m(req)
	}
	return req
}

// webhook sends a signed delivery; transport errors are returned.
func (c *client) webhook(eventType, guid string, body []byte, mods ...func(*http.Request)) (*response, error) {
	return c.do(c.webhookRequest(eventType, guid, body, mods...))
}

// mustWebhook sends a signed delivery and fails the test on a transport error.
func (c *client) mustWebhook(t testing.TB, eventType, guid string, body []byte, mods ...func(*http.Request)) *response {
	t.Helper()
	r, err := c.webhook(eventType, guid, body, mods...)
	if err != nil {
		t.Fatalf("POST /webhooks/github (%s %s): %v", eventType, guid, err)
	}
	return r
}

// push POSTs a body to /v1/events with a bearer token.
func (c *client) push(token, contentType string, body []byte) (*response, error) {
	req, _ := http.NewRequest(http.MethodPost, c.base+"/v1/events", bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return c.do(req)
}

func (c *client) mustPush(t testing.TB, token, contentType string, body []byte) *response {
	t.Helper()
	r, err := c.push(token, contentType, body)
	if err != nil {
		t.Fatalf("POST /v1/events: %v", err)
	}
	return r
}

// get GETs a path with an optional bearer token.
func (c *client) get(t testing.TB, path, token string) *response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	r, err := c.do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return r
}

// pushAnswer is the body of a 2xx push.
type pushAnswer struct {
	Accepted []struct {
		ID  string `json:"id"`
		Seq string `json:"seq"`
	} `json:"accepted"`
	Duplicates []string `json:"duplicates"`
}

// deliveryAnswer is the body of a 2xx webhook answer.
type deliveryAnswer struct {
	Delivery  string `json:"delivery"`
	Status    string `json:"status"`
	Reason    string `json:"reason"`
	Duplicate bool   `json:"duplicate"`
}

// token mints an HS256 token as `wakegate token` does.
func (s *stack) token(t testing.TB, sub, ws, scope string) string {
	t.Helper()
	c := agent.Claims{Workspace: ws, Scope: scope}
	c.Subject = sub
	c.ExpiresAt = jwtDate(time.Now().Add(time.Hour))
	tok, err := agent.Mint(s.jwtSecret, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// ce renders one agent CloudEvent; extra adds or overrides attributes.
func ce(id, typ string, extra map[string]any) []byte {
	m := map[string]any{"specversion": "1.0", "id": id, "source": "harness", "type": typ}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return b
}

// batch renders events as a JSON array.
func batch(events ...[]byte) []byte {
	return append(append([]byte("["), bytes.Join(events, []byte(","))...), ']')
}

const (
	ctEvent = "application/cloudevents+json"
	ctBatch = "application/cloudevents-batch+json"
)

// fixture reads a file under the fixtures directory or fails the test.
func fixture(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixturesDir, rel))
	if err != nil {
		t.Fatalf("fixture %s: %v", rel, err)
	}
	return b
}

// editJSON decodes a fixture (numbers kept exact), lets edit change it and
// encodes it again: the result is a distinct, validly signed body.
func editJSON(t testing.TB, body []byte, edit func(m map[string]any)) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("fixture is not a JSON object: %v", err)
	}
	edit(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func obj(m map[string]any, key string) map[string]any {
	v, _ := m[key].(map[string]any)
	return v
}

func newGUID() string { return uuid.NewString() }

// checkProblem asserts an RFC 9457 answer with the given status.
func checkProblem(t testing.TB, r *response, status int) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Errorf("status %d, want %d; body %s", r.Status, status, bytes.TrimSpace(r.Body))
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", r.Header.Get("Content-Type"))
	}
	var p map[string]any
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Errorf("problem body is not JSON: %s", r.Body)
		return nil
	}
	if s, _ := p["type"].(string); s == "" {
		t.Errorf("problem without type: %s", r.Body)
	}
	if s, _ := p["title"].(string); s == "" {
		t.Errorf("problem without title: %s", r.Body)
	}
	if n, _ := p["status"].(float64); int(n) != status {
		t.Errorf("problem status %v, want %d: %s", p["status"], status, r.Body)
	}
	return p
}

// ---- reading what was committed -------------------------------------------

// shards is the journal and ingest shard count the processes run with
// (WAKEGATE_JOURNAL_SHARDS is left at its default).
const shards = 16

func (s *stack) journalLayout() *journal.Journal {
	return journal.New(s.rdb, journal.Config{Prefix: s.prefix, Shards: shards})
}

// journalEvents reads every journal entry of every shard and workspace,
// straight from Redis.
func (s *stack) journalEvents(t testing.TB) []*event.Event {
	t.Helper()
	j := s.journalLayout()
	var out []*event.Event
	for sh := range shards {
		msgs, err := s.rdb.XRange(bg(), j.StreamKey(sh), "-", "+").Result()
		if err != nil {
			t.Fatalf("read journal shard %d: %v", sh, err)
		}
		for _, m := range msgs {
			e, err := journal.Decode(sh, m)
			if err != nil {
				t.Fatalf("journal entry: %v", err)
			}
			out = append(out, e)
		}
	}
	return out
}

// byType keeps the events of one type (and, when subject is not "", of
// one subject).
func byType(evs []*event.Event, typ, subject string) []*event.Event {
	var out []*event.Event
	for _, e := range evs {
		if e.Type == typ && (subject == "" || e.Subject == subject) {
			out = append(out, e)
		}
	}
	return out
}

// countIDs counts journal entries per event id.
func countIDs(evs []*event.Event) map[string]int {
	n := map[string]int{}
	for _, e := range evs {
		n[e.ID]++
	}
	return n
}

// waitEvents polls the journal until want holds for it.
func (s *stack) waitEvents(t testing.TB, timeout time.Duration, what string, want func([]*event.Event) bool) []*event.Event {
	t.Helper()
	var evs []*event.Event
	waitFor(t, timeout, what, func() (bool, string) {
		evs = s.journalEvents(t)
		return want(evs), fmt.Sprintf("%d journal entries: %s", len(evs), summarize(evs))
	})
	return evs
}

func summarize(evs []*event.Event) string {
	count := map[string]int{}
	for _, e := range evs {
		count[e.Type]++
	}
	var parts []string
	for k, v := range count {
		parts = append(parts, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// waitDerived waits until the derive consumers of every ingest shard have
// read and acknowledged every committed delivery record: a barrier after
// which every accepted delivery has been derived into the journal.
func (s *stack) waitDerived(t testing.TB, timeout time.Duration) {
	t.Helper()
	store := ingest.New(s.rdb, s.journalLayout())
	waitFor(t, timeout, "every committed delivery derived", func() (bool, string) {
		for sh := range shards {
			key := store.StreamKey(sh)
			groups, err := s.rdb.XInfoGroups(bg(), key).Result()
			if err != nil {
				return false, fmt.Sprintf("ingest shard %d: %v", sh, err)
			}
			info, err := s.rdb.XInfoStream(bg(), key).Result()
			if err != nil {
				return false, fmt.Sprintf("ingest shard %d: %v", sh, err)
			}
			found := false
			for _, g := range groups {
				if g.Name != "derive" {
					continue
				}
				found = true
				if g.Pending != 0 || (info.Length > 0 && g.LastDeliveredID != info.LastGeneratedID) {
					return false, fmt.Sprintf("ingest shard %d: pending %d, delivered up to %s of %s",
						sh, g.Pending, g.LastDeliveredID, info.LastGeneratedID)
				}
			}
			if !found {
				return false, fmt.Sprintf("ingest shard %d: no derive group yet", sh)
			}
		}
		return true, ""
	})
}

// state is every key under the test's prefix with a rendering of its value:
// two equal states mean nothing was committed in between. Keys of
// background coordination and of routing are left out (see background):
// they change on their own (lease renewals, worker heartbeats) or only as
// a consequence of journal appends, which the journal streams themselves
// show.
type state map[string]string

// background matches keys that are not commits: journal-consumer leases,
// fencing epochs and cursors, worker heartbeats, what routing derives
// from journal entries (delivery ledgers, inboxes), and the ingest rate
// limits' state (`:rl:`), which every request draws on before it is
// checked, so that a flood of refused requests is limited too.
var background = regexp.MustCompile(`:(lease|epoch|cursor|ledger)$|:route:|:ib:|:\{sup:|heartbeat|:rl:`)

func (s *stack) state(t testing.TB) state {
	t.Helper()
	ctx := bg()
	out := state{}
	iter := s.rdb.Scan(ctx, 0, s.prefix+":*", scanCount).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if background.MatchString(k) {
			continue
		}
		typ, err := s.rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatalf("TYPE %s: %v", k, err)
		}
		var v string
		switch typ {
		case "none": // expired between SCAN and TYPE
			continue
		case "string":
			v, _ = s.rdb.Get(ctx, k).Result()
		case "hash":
			h, _ := s.rdb.HGetAll(ctx, k).Result()
			v = renderMap(h)
		case "set":
			m, _ := s.rdb.SMembers(ctx, k).Result()
			sort.Strings(m)
			v = strings.Join(m, ",")
		case "zset":
			z, _ := s.rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
			v = fmt.Sprint(z)
		case "list":
			l, _ := s.rdb.LRange(ctx, k, 0, -1).Result()
			v = strings.Join(l, ",")
		case "stream":
			n, _ := s.rdb.XLen(ctx, k).Result()
			last, _ := s.rdb.XRevRangeN(ctx, k, "+", "-", 1).Result()
			id := ""
			if len(last) > 0 {
				id = last[0].ID
			}
			v = fmt.Sprintf("len=%d last=%s", n, id)
		default:
			v = typ
		}
		out[k] = typ + ":" + v
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	return out
}

func renderMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s;", k, m[k])
	}
	return b.String()
}

// changed lists the keys added, removed or changed from a to b.
func changed(a, b state) []string {
	var out []string
	for k, v := range b {
		if old, ok := a[k]; !ok {
			out = append(out, "+"+k)
		} else if old != v {
			out = append(out, "~"+k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, "-"+k)
		}
	}
	sort.Strings(out)
	return out
}

// newEvents returns the journal entries of after that before lacks.
func newEvents(before, after []*event.Event) []*event.Event {
	seen := map[string]bool{}
	for _, e := range before {
		seen[e.Seq] = true
	}
	var out []*event.Event
	for _, e := range after {
		if !seen[e.Seq] {
			out = append(out, e)
		}
	}
	return out
}

// mentioning lists the keys of the state whose name contains sub.
func (st state) mentioning(sub string) []string {
	var keys []string
	for k := range st {
		if strings.Contains(k, sub) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// scanCount is the SCAN batch: a prefix match walks the whole database,
// which the suites sharing the test Redis may have filled.
const scanCount = 100_000
