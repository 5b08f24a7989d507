package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/integration/stack"
)

// sdkEnv is the stack as serve assembles it, pushes allowed to loopback,
// with a push receiver that keeps every body and its tracing headers.
type sdkEnv struct {
	*mcpEnv
	mu     sync.Mutex
	pushes []sdkPush
	hook   *httptest.Server
}

type sdkPush struct {
	body        []byte
	traceparent string
	tracestate  string
}

func newSDKEnv(t *testing.T) *sdkEnv {
	t.Helper()
	rdb, prefix := redistest.New(t)
	st, err := stack.New(rdb, stack.Config{Prefix: prefix, Shards: 4, AllowPrivateEndpoints: true},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	components, _ := st.Workers()
	for _, run := range components {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	gw := mcpGateway(t, st)
	wg.Add(1)
	go func() { defer wg.Done(); _ = gw.Run(ctx) }()
	waitUntil(t, "the gateway listens", func() bool { return gw.Addr() != "" })
	e := &sdkEnv{mcpEnv: &mcpEnv{t: t, url: "http://" + gw.Addr()}}
	e.hook = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.pushes = append(e.pushes, sdkPush{b, r.Header.Get("Traceparent"), r.Header.Get("Tracestate")})
		e.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(e.hook.Close)
	return e
}

// sdkClient is the official SDK's HTTP client sending to /v1/events.
func (e *sdkEnv) sdkClient(tok string) cloudevents.Client {
	e.t.Helper()
	c, err := cloudevents.NewClientHTTP(cehttp.WithTarget(e.url+"/v1/events"), cehttp.WithRoundTripper(withBearer{tok}))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// send sends one event with the SDK, in binary mode (the SDK's default)
// or structured, and fails unless it was acknowledged.
func (e *sdkEnv) send(c cloudevents.Client, ev cloudevents.Event, structured bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if structured {
		ctx = cloudevents.WithEncodingStructured(ctx)
	} else {
		ctx = cloudevents.WithEncodingBinary(ctx)
	}
	if res := c.Send(ctx, ev); !cloudevents.IsACK(res) {
		e.t.Fatalf("SDK send %s (structured %v): %v", ev.ID(), structured, res)
	}
}

func sdkEvent(t *testing.T, id, typ string, data any) cloudevents.Event {
	t.Helper()
	ev := cloudevents.NewEvent()
	ev.SetID(id)
	ev.SetSource("harness")
	ev.SetType(typ)
	if data != nil {
		if err := ev.SetData(cloudevents.ApplicationJSON, data); err != nil {
			t.Fatal(err)
		}
	}
	return ev
}

// asSDK unmarshals one event the server emitted with the official SDK and
// validates it.
func asSDK(t *testing.T, where string, raw json.RawMessage) cloudevents.Event {
	t.Helper()
	var ev cloudevents.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatalf("%s: the SDK cannot read %s: %v", where, raw, err)
	}
	if err := ev.Validate(); err != nil {
		t.Fatalf("%s: the SDK finds %s invalid: %v", where, raw, err)
	}
	return ev
}

const sdkTrace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// TestCloudEventsSDK: the official Go SDK sends to /v1/events in binary
// and structured mode and both are journaled; every shape the server
// emits (journal read, inbox entry, push body, SSE data, MCP result)
// unmarshals and validates with it, lineage one string attribute.
func TestCloudEventsSDK(t *testing.T) {
	e := newSDKEnv(t)
	root := mcpToken(t, "default", "session:root", "events:push inbox")
	mid := mcpToken(t, "default", "session:mid", "events:push inbox events:read")
	kid := mcpToken(t, "default", "session:kid", "events:push")
	admin := mcpToken(t, "default", "human:admin", "admin")
	if status, b := e.rest(http.MethodPut, "/v1/endpoints/session:mid", admin, "application/json",
		[]byte(`{"url":"`+e.hook.URL+`/hook"}`)); status != http.StatusCreated {
		t.Fatalf("PUT endpoint: %d %s", status, b)
	}

	e.send(e.sdkClient(root), sdkEvent(t, "root-spawned", "session.spawned", nil), true)
	e.send(e.sdkClient(mid), sdkEvent(t, "mid-spawned", "session.spawned", map[string]any{"parent": "root"}), false)
	kc := e.sdkClient(kid)
	e.send(kc, sdkEvent(t, "kid-spawned", "session.spawned", map[string]any{"parent": "mid"}), true)
	blob := sdkEvent(t, "kid-blob", "kid.blob", nil)
	_ = blob.SetData("application/octet-stream", []byte{0, 1, 2, 0xff})
	e.send(kc, blob, true) // structured: data_base64
	blob.SetID("kid-blob-binary")
	e.send(kc, blob, false) // binary: the body is the bytes
	turn := sdkEvent(t, "kid-turn", "session.turn_ended", map[string]any{"idle": true})
	turn.SetExtension("traceparent", sdkTrace)
	turn.SetExtension("tracestate", "wg=1")
	turn.SetExtension("attempt", 2)
	e.send(kc, turn, false)

	// The journal, read by mid (kid is in its subtree).
	var page struct {
		Events []json.RawMessage `json:"events"`
	}
	byID := map[string]cloudevents.Event{}
	waitUntil(t, "the SDK's six events journaled", func() bool {
		status, b := e.rest(http.MethodGet, "/v1/events?limit=100", mid, "", nil)
		if status != http.StatusOK || json.Unmarshal(b, &page) != nil {
			return false
		}
		for _, raw := range page.Events {
			ev := asSDK(t, "GET /v1/events", raw)
			byID[ev.ID()] = ev
		}
		return len(byID) >= 5 // mid reads its subtree: mid and kid (root is above it)
	})
	for _, id := range []string{"mid-spawned", "kid-spawned", "kid-blob", "kid-blob-binary", "kid-turn"} {
		if _, ok := byID[id]; !ok {
			t.Fatalf("journal lacks %s: %v", id, page.Events)
		}
	}
	if l := byID["kid-turn"].Extensions()["lineage"]; l != "mid root" {
		t.Errorf("kid's lineage %v, want the string \"mid root\"", l)
	}
	for _, id := range []string{"kid-blob", "kid-blob-binary"} {
		ev := byID[id]
		if string(ev.Data()) != "\x00\x01\x02\xff" || ev.DataContentType() != "application/octet-stream" {
			t.Errorf("%s: data %q type %q, want the bytes as application/octet-stream", id, ev.Data(), ev.DataContentType())
		}
	}
	if ev := byID["kid-turn"]; ev.Extensions()["traceparent"] != sdkTrace || ev.Extensions()["attempt"] != "2" && ev.Extensions()["attempt"] != int32(2) {
		t.Errorf("kid-turn extensions %v", ev.Extensions())
	}

	// The inbox entry at mid (kid's controller) and its push.
	var inbox struct {
		Entries []struct {
			Event  json.RawMessage `json:"event"`
			Latest json.RawMessage `json:"latest"`
		} `json:"entries"`
	}
	waitUntil(t, "kid's turn end in mid's inbox", func() bool {
		status, b := e.rest(http.MethodGet, "/v1/inbox", mid, "", nil)
		return status == http.StatusOK && json.Unmarshal(b, &inbox) == nil && len(inbox.Entries) > 0 &&
			strings.Contains(string(inbox.Entries[0].Event), "kid-turn")
	})
	for _, en := range inbox.Entries {
		asSDK(t, "inbox entry event", en.Event)
		asSDK(t, "inbox entry latest", en.Latest)
	}
	var push sdkPush
	waitUntil(t, "the push of kid's turn end to mid's endpoint", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, p := range e.pushes {
			if strings.Contains(string(p.body), "kid-turn") {
				push = p
				return true
			}
		}
		return false
	})
	var body struct {
		Event json.RawMessage `json:"event"`
		Entry struct {
			Event json.RawMessage `json:"event"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(push.body, &body); err != nil {
		t.Fatal(err)
	}
	if ev := asSDK(t, "push body event", body.Event); ev.Extensions()["lineage"] != "mid root" {
		t.Errorf("pushed lineage %v", ev.Extensions()["lineage"])
	}
	asSDK(t, "push body entry event", body.Entry.Event)
	if push.traceparent != sdkTrace || push.tracestate != "wg=1" {
		t.Errorf("push headers traceparent %q tracestate %q, want the event's", push.traceparent, push.tracestate)
	}

	// SSE: the stream's first entry.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/v1/inbox/stream", nil)
	req.Header.Set("Authorization", "Bearer "+mid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var data string
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = d
			break
		}
	}
	resp.Body.Close()
	var sse struct {
		Event json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal([]byte(data), &sse); err != nil {
		t.Fatalf("SSE data %q: %v", data, err)
	}
	asSDK(t, "SSE entry event", sse.Event)

	// MCP: events_read and inbox_list.
	cs := e.client(mid)
	var read struct {
		Events []json.RawMessage `json:"events"`
	}
	ok(t, cs, "events_read", map[string]any{"limit": 100}, &read)
	if len(read.Events) == 0 {
		t.Fatal("events_read: no events")
	}
	for _, raw := range read.Events {
		asSDK(t, "MCP events_read", raw)
	}
	var list struct {
		Entries []struct {
			Event json.RawMessage `json:"event"`
		} `json:"entries"`
	}
	ok(t, cs, "inbox_list", map[string]any{}, &list)
	for _, en := range list.Entries {
		asSDK(t, "MCP inbox_list", en.Event)
	}
}

// TestPushModesRefusals: an empty batch is accepted with nothing in it;
// refusals name what was wrong in the request's own terms.
func TestPushModesRefusals(t *testing.T) {
	e := newMCPEnv(t)
	tok := mcpToken(t, "default", "session:modes", "events:push")
	post := func(h map[string]string, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/events", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, b := post(map[string]string{"Content-Type": "application/cloudevents-batch+json"}, " [] "); status != http.StatusAccepted ||
		!strings.Contains(b, `"accepted":[]`) || !strings.Contains(b, `"duplicates":[]`) {
		t.Errorf("empty batch: %d %s, want 202 with nothing accepted", status, b)
	}
	bin := func(extra map[string]string) map[string]string {
		h := map[string]string{"Content-Type": "application/json", "Ce-Specversion": "1.0", "Ce-Id": "m1", "Ce-Source": "x", "Ce-Type": "a.b"}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	for _, tc := range []struct {
		name   string
		h      map[string]string
		body   string
		status int
		want   string
	}{
		{"binary, old specversion", bin(map[string]string{"Ce-Specversion": "0.3"}), `{}`, 422, "header ce-specversion must be"},
		{"binary, no id", bin(map[string]string{"Ce-Id": ""}), `{}`, 422, "header ce-id is required"},
		{"binary, bad extension name", bin(map[string]string{"Ce-Trace_id": "x"}), `{}`, 422, "header ce-trace_id"},
		{"binary, body not an object", bin(nil), `[1]`, 422, "the body (the event's data)"},
		{"binary, body not JSON", bin(nil), `{`, 400, "Content-Type application/json"},
		{"structured with ce headers", bin(map[string]string{"Content-Type": "application/cloudevents+json"}), `{"id":"m1"}`, 422,
			"structured-mode request"},
		{"neither", map[string]string{"Content-Type": "text/plain"}, `hello`, 415, "ce-specversion"},
	} {
		if status, b := post(tc.h, tc.body); status != tc.status || !strings.Contains(b, tc.want) {
			t.Errorf("%s: %d %s, want %d naming %q", tc.name, status, b, tc.status, tc.want)
		}
	}
}
