package gateway_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/integration/stack"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/agent/client"
	"github.com/wakegate/wakegate/providers/event"
)

const rdWebhookSecret = "redeliver-webhook-secret"

// rdEnv is the gateway as serve assembles it (package stack) on the
// test Redis, with or without its workers running.
type rdEnv struct {
	t   *testing.T
	url string
	st  *stack.Stack
	rdb *redis.Client
}

func newRedeliverEnv(t *testing.T, workers bool) *rdEnv {
	t.Helper()
	rdb, prefix := redistest.New(t)
	st, err := stack.New(rdb, stack.Config{Prefix: prefix, Shards: 4, AllowPrivateEndpoints: true},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if workers {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		t.Cleanup(func() { cancel(); wg.Wait() })
		components, _ := st.Workers()
		for _, run := range components {
			wg.Add(1)
			go func() { defer wg.Done(); _ = run(ctx) }()
		}
	}
	v, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(opSecret)})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := st.Gateway(gateway.Config{WebhookSecrets: [][]byte{[]byte(rdWebhookSecret)}, TokenSecret: []byte(opSecret)}, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	return &rdEnv{t: t, url: srv.URL, st: st, rdb: rdb}
}

// do sends one request; requestID, when set, is its X-Request-Id.
func (e *rdEnv) do(method, path, tok, requestID string, body []byte) (int, http.Header, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// ok sends a request that must answer want, and decodes its JSON into out.
func (e *rdEnv) ok(want int, method, path, tok, requestID string, body []byte, out any) {
	e.t.Helper()
	status, _, b := e.do(method, path, tok, requestID, body)
	if status != want {
		e.t.Fatalf("%s %s: %d %s, want %d", method, path, status, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// refused sends a request that must be refused with status as
// problem+json, and returns its detail.
func (e *rdEnv) refused(status int, method, path, tok string) string {
	e.t.Helper()
	got, h, b := e.do(method, path, tok, "", nil)
	var p struct {
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if got != status || h.Get("Content-Type") != "application/problem+json" || json.Unmarshal(b, &p) != nil || p.Status != status {
		e.t.Fatalf("%s %s: %d %s %s, want %d problem+json", method, path, got, h.Get("Content-Type"), b, status)
	}
	return p.Detail
}

// webhook commits a signed GitHub delivery (no hook header: scope "0").
func (e *rdEnv) webhook(eventType, guid string, body []byte) { e.webhookOf(eventType, guid, "", body) }

// webhookOf commits a signed GitHub delivery through the webhook hook (its
// X-GitHub-Hook-ID; "" sends none).
func (e *rdEnv) webhookOf(eventType, guid, hook string, body []byte) {
	e.t.Helper()
	mac := hmac.New(sha256.New, []byte(rdWebhookSecret))
	mac.Write(body)
	req, _ := http.NewRequest(http.MethodPost, e.url+"/webhooks/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", eventType)
	req.Header.Set("X-GitHub-Delivery", guid)
	if hook != "" {
		req.Header.Set("X-GitHub-Hook-ID", hook)
	}
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		e.t.Fatalf("webhook %s: %d %s", guid, resp.StatusCode, b)
	}
}

// journalLen counts every entry of every journal shard.
func (e *rdEnv) journalLen() int64 {
	e.t.Helper()
	var n int64
	for s := range e.st.Journal.Config().Shards {
		l, err := e.rdb.XLen(context.Background(), e.st.Journal.StreamKey(s)).Result()
		if err != nil {
			e.t.Fatal(err)
		}
		n += l
	}
	return n
}

func (e *rdEnv) find(source, id string) []*event.Event {
	e.t.Helper()
	got, err := e.st.Journal.Find(context.Background(), source, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// record reads the wakegate.redelivered record at seq and checks who it
// names; it returns its data.
func (e *rdEnv) record(seq, by string, data any) *event.Event {
	e.t.Helper()
	rec, err := e.st.Journal.Get(context.Background(), seq)
	if err != nil || rec == nil {
		e.t.Fatalf("record %s: %v %v", seq, rec, err)
	}
	if rec.Type != "wakegate.redelivered" || rec.Priority != event.Internal {
		e.t.Fatalf("record %s: %s (%s), want an internal wakegate.redelivered", seq, rec.Type, rec.Priority)
	}
	var who struct {
		By string `json:"by"`
	}
	if err := json.Unmarshal(rec.Data, &who); err != nil || who.By != by || !strings.HasPrefix(rec.Summary, by+" ") {
		e.t.Fatalf("record %s names %q (%q), want %s: %s", seq, who.By, rec.Summary, by, rec.Data)
	}
	if err := json.Unmarshal(rec.Data, data); err != nil {
		e.t.Fatal(err)
	}
	return rec
}

func randomID(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

type produced struct {
	Seq, ID, Type, Subject string
}

type deliveryAnswer struct {
	GUID      string     `json:"guid"`
	Status    string     `json:"status"`
	Produced  []produced `json:"produced"`
	By        string     `json:"by"`
	RequestID string     `json:"request_id"`
	Journaled string     `json:"journaled"`
	Duplicate bool       `json:"duplicate"`
}

// TestRedeliverDelivery: a delivery committed while no deriver ran (a
// crash between the commit and its derivation) is derived by its
// redelivery, once: a second redelivery produces nothing and journals
// only its record; a retried request answers the first result again; a
// journal entry lost later is produced again, alone. Each request's
// wakegate.redelivered names the operator. Unknown and bad input are
// refused.
func TestRedeliverDelivery(t *testing.T) {
	e := newRedeliverEnv(t, false) // no workers: nothing derives the commit
	body, err := os.ReadFile("../testdata/github/octokit/pull_request/opened.payload.json")
	if err != nil {
		t.Fatal(err)
	}
	guid := randomID("rd-")
	source := event.GitHubSource("Codertocat/Hello-World")
	e.webhook("pull_request", guid, body)
	if got := e.find(source, guid); len(got) != 0 {
		t.Fatalf("journaled without a deriver: %+v", got[0])
	}
	op := opToken(t, "human:ops", "operator")
	path := "/admin/deliveries/" + guid + "/redeliver"

	var first deliveryAnswer
	e.ok(http.StatusOK, http.MethodPost, path, op, "req-first", nil, &first)
	if first.Status != "derived" || first.GUID != guid || first.By != "human:ops" || first.RequestID != "req-first" ||
		first.Duplicate || first.Journaled == "" {
		t.Fatalf("first redelivery: %+v", first)
	}
	var own *produced
	for i, p := range first.Produced {
		if p.ID == guid {
			own = &first.Produced[i]
		}
	}
	if own == nil || own.Type != "github.pull_request.opened" || own.Subject != "github:Codertocat/Hello-World#2" {
		t.Fatalf("produced %+v, want the delivery's github.pull_request.opened", first.Produced)
	}
	if got := e.find(source, guid); len(got) != 1 || got[0].Seq != own.Seq || got[0].Type != own.Type {
		t.Fatalf("journal holds %d events %s from %s, want the one produced at %s", len(got), guid, source, own.Seq)
	}
	var rec deliveryAnswer
	e.record(first.Journaled, "human:ops", &rec)
	if rec.GUID != guid || len(rec.Produced) != len(first.Produced) || rec.Produced[0] != first.Produced[0] {
		t.Fatalf("record %+v, want guid %s and what was produced %+v", rec, guid, first.Produced)
	}

	// Again, as another request: everything is there, so nothing is
	// produced; the journal gains only this request's record.
	before := e.journalLen()
	var second deliveryAnswer
	e.ok(http.StatusOK, http.MethodPost, path, op, "req-second", nil, &second)
	if second.Status != "derived" || len(second.Produced) != 0 || second.Duplicate || second.Journaled == first.Journaled {
		t.Fatalf("second redelivery: %+v, want nothing produced and its own record", second)
	}
	if n := e.journalLen(); n != before+1 {
		t.Fatalf("the journal grew by %d, want 1 (the record)", n-before)
	}
	if got := e.find(source, guid); len(got) != 1 {
		t.Fatalf("%d events %s after a second redelivery", len(got), guid)
	}

	// The first request retried (same X-Request-Id): its answer, nothing new.
	var retried deliveryAnswer
	e.ok(http.StatusOK, http.MethodPost, path, op, "req-first", nil, &retried)
	if !retried.Duplicate || retried.Journaled != first.Journaled || len(retried.Produced) != len(first.Produced) {
		t.Fatalf("retried request: %+v, want the first answer (%+v) as a duplicate", retried, first)
	}
	if n := e.journalLen(); n != before+1 {
		t.Fatalf("a retried request journaled %d entries", n-(before+1))
	}

	// A journal entry lost (its entry and dedup marker gone): produced
	// again, and only it.
	shard, sid, err := journal.ParseSeq(own.Seq)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.rdb.XDel(ctx, e.st.Journal.StreamKey(shard), sid).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Journal.ForgetMarker(ctx, shard, source, guid); err != nil {
		t.Fatal(err)
	}
	var repair deliveryAnswer
	e.ok(http.StatusOK, http.MethodPost, path, op, "req-repair", nil, &repair)
	if len(repair.Produced) != 1 || repair.Produced[0].ID != guid || repair.Produced[0].Type != "github.pull_request.opened" {
		t.Fatalf("repair produced %+v, want only the lost %s", repair.Produced, guid)
	}
	if got := e.find(source, guid); len(got) != 1 || got[0].Seq != repair.Produced[0].Seq {
		t.Fatalf("after the repair the journal holds %d events %s", len(got), guid)
	}

	// Unknown, expired or under another hook: 404. Bad input: 400.
	if d := e.refused(http.StatusNotFound, http.MethodPost, "/admin/deliveries/"+randomID("nope-")+"/redeliver", op); !strings.Contains(d, "under any hook") {
		t.Fatalf("404 detail %q does not say no hook holds it", d)
	}
	e.refused(http.StatusNotFound, http.MethodPost, path+"?hook=4242", op) // kept under "0" (no hook header)
	var underZero deliveryAnswer
	e.ok(http.StatusOK, http.MethodPost, path+"?hook=0", op, "", nil, &underZero)
	e.refused(http.StatusBadRequest, http.MethodPost, "/admin/deliveries/a%20b/redeliver", op)
	e.refused(http.StatusBadRequest, http.MethodPost, "/admin/deliveries/"+strings.Repeat("g", 129)+"/redeliver", op)
	e.refused(http.StatusBadRequest, http.MethodPost, path+"?hook=abc", op)
	e.refused(http.StatusForbidden, http.MethodPost, path, opToken(t, "human:alice", "admin"))
	e.refused(http.StatusUnauthorized, http.MethodPost, path, "")
}

// TestRedeliverByGUID: without ?hook= a delivery is found under whichever
// hook scope holds it (a repository webhook's, here): one → redelivered;
// several → 409 listing them; none → 404.
func TestRedeliverByGUID(t *testing.T) {
	e := newRedeliverEnv(t, false)
	body, err := os.ReadFile("../testdata/github/octokit/pull_request/opened.payload.json")
	if err != nil {
		t.Fatal(err)
	}
	op := opToken(t, "human:ops", "operator")
	source := event.GitHubSource("Codertocat/Hello-World")

	repoHook := randomID("rd-repo-")
	e.webhookOf("pull_request", repoHook, "98765", body)
	var one deliveryAnswer
	e.ok(http.StatusOK, http.MethodPost, "/admin/deliveries/"+repoHook+"/redeliver", op, "", nil, &one)
	if one.Status != "derived" || one.GUID != repoHook || len(e.find(source, repoHook)) != 1 {
		t.Fatalf("redelivery of a repository webhook's delivery by GUID: %+v", one)
	}

	shared := randomID("rd-both-")
	// Each copy differs by a byte: the same body for the same repository
	// is deduplicated whatever its GUID.
	e.webhookOf("pull_request", shared, "111", append(append([]byte(nil), body...), '\n'))
	e.webhookOf("pull_request", shared, "222", append(append([]byte(nil), body...), '\n', '\n'))
	status, _, b := e.do(http.MethodPost, "/admin/deliveries/"+shared+"/redeliver", op, "", nil)
	var prob struct {
		Detail string   `json:"detail"`
		Hooks  []string `json:"hooks"`
	}
	_ = json.Unmarshal(b, &prob)
	if status != http.StatusConflict || strings.Join(prob.Hooks, ",") != "111,222" || !strings.Contains(prob.Detail, "111, 222") {
		t.Fatalf("a GUID under two hooks: %d %s, want 409 listing 111 and 222", status, b)
	}
	if got := e.find(source, shared); len(got) != 0 {
		t.Fatalf("a 409 derived %d events", len(got))
	}
	var named deliveryAnswer
	e.ok(http.StatusOK, http.MethodPost, "/admin/deliveries/"+shared+"/redeliver?hook=222", op, "", nil, &named)
	if len(e.find(source, shared)) != 1 {
		t.Fatalf("?hook=222: %+v", named)
	}
	e.refused(http.StatusNotFound, http.MethodPost, "/admin/deliveries/"+randomID("rd-none-")+"/redeliver", op)
}

type delivered struct {
	Party    string `json:"party"`
	Via      string `json:"via"`
	InboxSeq int64  `json:"inbox_seq"`
	Kind     string `json:"kind"`
	Wake     bool   `json:"wake"`
	New      bool   `json:"new"`
}

type eventAnswer struct {
	Source    string      `json:"source"`
	ID        string      `json:"id"`
	Type      string      `json:"type"`
	Party     string      `json:"party"`
	Delivered []delivered `json:"delivered"`
	By        string      `json:"by"`
	Journaled string      `json:"journaled"`
	Duplicate bool        `json:"duplicate"`
}

// pushes records what a push endpoint receives, per path.
type pushes struct {
	mu     sync.Mutex
	bodies map[string][][]byte
}

func (p *pushes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.bodies[r.URL.Path] = append(p.bodies[r.URL.Path], b)
	p.mu.Unlock()
}

func (p *pushes) of(path string) [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.bodies[path]...)
}

// waitPushes waits until path has received n pushes (10 s at most).
func (p *pushes) waitPushes(t *testing.T, path string, n int) [][]byte {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := p.of(path)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s received %d pushes within 10 s, want %d", path, len(got), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRedeliverEvent: a routed, acked event redelivered lands again in
// each recipient's inbox as a new entry marked redelivered (the inbox's
// dedup bypassed) and its push goes out again; with party= only that
// party gets it (a party that was no recipient gets it direct); a retried
// request delivers nothing twice; each request's wakegate.redelivered
// names the operator. Unknown, internal and bad input are refused.
func TestRedeliverEvent(t *testing.T) {
	e := newRedeliverEnv(t, true)
	ctx := context.Background()
	recv := &pushes{bodies: map[string][][]byte{}}
	hooks := httptest.NewServer(recv)
	t.Cleanup(hooks.Close)

	clientOf := func(tok string) *client.Client {
		c, err := client.New(e.url, tok)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	toks := map[string]string{}
	for _, p := range []string{"a", "b"} {
		toks[p] = opToken(t, "session:"+p, "inbox subscribe")
		if _, err := clientOf(toks[p]).Subscribe(ctx, client.SubscriptionRequest{Subjects: []string{"session:worker"}}); err != nil {
			t.Fatal(err)
		}
		e.ok(http.StatusCreated, http.MethodPut, "/v1/endpoints/session:"+p, toks[p], "", []byte(`{"url": "`+hooks.URL+`/`+p+`"}`), nil)
	}
	worker := clientOf(opToken(t, "session:worker", "events:push"))
	const id = "ask/1" // a '/' in the id: sent as %2F
	if _, err := worker.Push(ctx, &event.Event{ID: id, Type: "session.awaiting_input", Summary: "which branch?"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "b"} {
		recv.waitPushes(t, "/"+p, 1)
	}
	// Both read and ack it: a second delivery would be a duplicate.
	ackAll := func(p string) {
		t.Helper()
		c := clientOf(toks[p])
		page, err := c.Inbox(ctx, client.InboxQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Entries) > 0 {
			if _, err := c.AckThrough(ctx, page.Next); err != nil {
				t.Fatal(err)
			}
		}
	}
	unacked := func(party string) []client.Entry {
		t.Helper()
		page, err := clientOf(opToken(t, "human:ops", "operator inbox")).Inbox(ctx, client.InboxQuery{Party: party})
		if err != nil {
			t.Fatal(err)
		}
		return page.Entries
	}
	ackAll("a")
	ackAll("b")

	op := opToken(t, "human:ops", "operator")
	source := event.AgentSource("default", "session:worker")
	path := "/admin/events/" + url.PathEscape(id) + "/redeliver?source=" + url.QueryEscape(source)
	if !strings.Contains(path, "%2F") {
		t.Fatalf("path %s does not escape the id's '/'", path)
	}

	var all eventAnswer
	e.ok(http.StatusOK, http.MethodPost, path, op, "ev-all", nil, &all)
	if all.ID != id || all.Source != source || all.By != "human:ops" || all.Duplicate || len(all.Delivered) != 2 {
		t.Fatalf("redelivery to its recipients: %+v", all)
	}
	for i, p := range []string{"session:a", "session:b"} {
		d := all.Delivered[i]
		if d.Party != p || d.Via != "subscription" || !d.New || !d.Wake || d.Kind != "wake" {
			t.Fatalf("delivered %+v, want %s via subscription as a new waking entry", d, p)
		}
		got := unacked(p)
		if len(got) != 1 || got[0].Seq != d.InboxSeq || !got[0].Redelivered || got[0].Type != "session.awaiting_input" {
			t.Fatalf("%s's inbox: %+v, want one new entry at %d marked redelivered", p, got, d.InboxSeq)
		}
	}
	for _, p := range []string{"a", "b"} {
		bodies := recv.waitPushes(t, "/"+p, 2)
		var push struct {
			Entry struct {
				Seq         int64 `json:"seq"`
				Redelivered bool  `json:"redelivered"`
			} `json:"entry"`
		}
		if err := json.Unmarshal(bodies[1], &push); err != nil || !push.Entry.Redelivered {
			t.Fatalf("second push to %s: %s, want the redelivered entry", p, bodies[1])
		}
	}
	var rec eventAnswer
	e.record(all.Journaled, "human:ops", &rec)
	if rec.ID != id || rec.Source != source || len(rec.Delivered) != 2 {
		t.Fatalf("record %+v, want the event and its two deliveries", rec)
	}

	// The same request retried: the first answer, nothing delivered again.
	var retried eventAnswer
	e.ok(http.StatusOK, http.MethodPost, path, op, "ev-all", nil, &retried)
	if !retried.Duplicate || retried.Journaled != all.Journaled || len(retried.Delivered) != 2 ||
		retried.Delivered[0].InboxSeq != all.Delivered[0].InboxSeq {
		t.Fatalf("retried request: %+v, want the first answer as a duplicate", retried)
	}
	for i, p := range []string{"session:a", "session:b"} {
		if got := unacked(p); len(got) != 1 || got[0].Seq != all.Delivered[i].InboxSeq {
			t.Fatalf("%s's inbox after a retried request: %+v, want only the entry at %d", p, got, all.Delivered[i].InboxSeq)
		}
	}

	// To one party: only session:a gets it again.
	ackAll("a")
	ackAll("b")
	var one eventAnswer
	e.ok(http.StatusOK, http.MethodPost, path+"&party=session:a", op, "ev-a", nil, &one)
	if one.Party != "session:a" || len(one.Delivered) != 1 || one.Delivered[0].Party != "session:a" || one.Delivered[0].Via != "subscription" {
		t.Fatalf("redelivery to session:a: %+v", one)
	}
	if got := unacked("session:a"); len(got) != 1 || !got[0].Redelivered || got[0].Seq != one.Delivered[0].InboxSeq {
		t.Fatalf("session:a's inbox: %+v", got)
	}
	if got := unacked("session:b"); len(got) != 0 {
		t.Fatalf("session:b got a redelivery meant for session:a only: %+v", got)
	}
	recv.waitPushes(t, "/a", 3)
	time.Sleep(300 * time.Millisecond) // a push to b enqueued beside a's would have arrived by now
	if n := len(recv.of("/b")); n != 2 {
		t.Fatalf("session:b received %d pushes, want still 2", n)
	}
	e.record(one.Journaled, "human:ops", &rec)

	// A party the event never reached: delivered direct.
	var direct eventAnswer
	e.ok(http.StatusOK, http.MethodPost, path+"&party=human:carol", op, "", nil, &direct)
	if len(direct.Delivered) != 1 || direct.Delivered[0].Party != "human:carol" || direct.Delivered[0].Via != "direct" {
		t.Fatalf("redelivery to human:carol: %+v", direct)
	}
	if got := unacked("human:carol"); len(got) != 1 || !got[0].Redelivered {
		t.Fatalf("human:carol's inbox: %+v", got)
	}

	// Refused: unknown, internal, bad input, not an operator.
	e.refused(http.StatusNotFound, http.MethodPost, "/admin/events/nope/redeliver?source="+url.QueryEscape(source), op)
	e.refused(http.StatusNotFound, http.MethodPost, "/admin/events/"+url.PathEscape(id)+"/redeliver?source=//wakegate/default/session:other", op)
	recEv, _ := e.st.Journal.Get(ctx, all.Journaled)
	e.refused(http.StatusUnprocessableEntity, http.MethodPost,
		"/admin/events/"+url.PathEscape(recEv.ID)+"/redeliver?source="+url.QueryEscape(recEv.Source), op)
	e.refused(http.StatusBadRequest, http.MethodPost, "/admin/events/"+url.PathEscape(id)+"/redeliver", op)
	e.refused(http.StatusBadRequest, http.MethodPost, path+"&party=robot:x", op)
	e.refused(http.StatusBadRequest, http.MethodPost, path+"&party=session:", op)
	e.refused(http.StatusForbidden, http.MethodPost, path, toks["a"])
	e.refused(http.StatusForbidden, http.MethodPost, path, opToken(t, "human:alice", "admin"))
}
