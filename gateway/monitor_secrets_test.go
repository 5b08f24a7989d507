package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/integration/stack"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/workers/tasks"
)

// TestMonitorNeverShowsEventData (docs/design.md §10): a permission request
// whose data holds a token — plainly, nested, and inside a stringified
// JSON — wakes its controller, whose endpoint fails, so its push waits in
// the retry queue. The monitor's pages and every task list of its API,
// opened as the operator, never show the token; nor does the task as
// Redis stores it (the payload carries references, the body is stored
// apart). The endpoint itself got the token: it is the event's data.
func TestMonitorNeverShowsEventData(t *testing.T) {
	const leak = "ghp_SeCrEt0123456789leak"
	rdb, prefix := redistest.New(t)
	st, err := stack.New(rdb, stack.Config{Prefix: prefix, Shards: 4, AllowPrivateEndpoints: true,
		PushRetry: []time.Duration{time.Hour}},
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
	v, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(opSecret)})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := st.Gateway(gateway.Config{WebhookSecrets: [][]byte{[]byte("s")}, TokenSecret: []byte(opSecret),
		OperatorPassword: []byte(opPassword)}, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)

	var attempts atomic.Int64
	var got atomic.Value
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(string(b))
		attempts.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)

	worker := opToken(t, "session:w1", "events:push inbox")
	boss := opToken(t, "session:boss", "inbox supervise events:push")
	do := func(want int, method, path, tok, body string) string {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
		return string(b)
	}
	ep := do(201, http.MethodPut, "/v1/endpoints/session:boss", boss, `{"url": "`+failing.URL+`/hook"}`)
	i := strings.Index(ep, "whsec_")
	if i < 0 {
		t.Fatalf("no signing secret in %s", ep)
	}
	whsec := strings.SplitN(ep[i:], `"`, 2)[0]
	do(202, http.MethodPost, "/v1/events", worker, `{"specversion":"1.0","id":"1","source":"t","type":"session.spawned"}`)
	do(200, http.MethodPost, "/v1/sessions/w1/supervise", boss, `{"role": "controller"}`)
	do(202, http.MethodPost, "/v1/events", worker, `{"specversion":"1.0","id":"2","source":"t","type":"session.permission_requested",
		"summary":"may I run the deploy?","data":{"tool":"Bash","token":"`+leak+`","input":{"env":[{"GITHUB_TOKEN":"`+leak+`"}]},
		"raw":"{\"headers\":{\"Authorization\":\"Bearer `+leak+`\"}}"}}`)

	waitUntil(t, "the push reached the failing endpoint", func() bool { return attempts.Load() >= 1 })
	if b, _ := got.Load().(string); !strings.Contains(b, leak) {
		t.Fatalf("the push body lacks the event's data: %s", b)
	}

	q := st.Push.QueueOf("default", "session:boss") // the queue of the boss's pushes
	basic := func(r *http.Request) { r.SetBasicAuth("operator", opPassword) }
	var retry string
	waitUntil(t, "the failed push is listed in the retry queue", func() bool {
		_, _, retry = request(t, http.MethodGet, srv.URL+"/monitor/api/queues/"+q+"/retry_tasks", basic)
		return strings.Contains(retry, tasks.TypeDeliver)
	})
	if !strings.Contains(retry, "session:boss") || !strings.Contains(retry, "webhook_id") {
		t.Fatalf("the retry queue does not show the push's metadata: %s", retry)
	}
	pages := []string{"/monitor/", "/monitor/queues/" + q, "/monitor/api/queues", "/monitor/api/queues/" + q,
		"/monitor/api/queue_stats"}
	for _, state := range []string{"active", "pending", "scheduled", "retry", "archived", "completed"} {
		pages = append(pages, "/monitor/api/queues/"+q+"/"+state+"_tasks")
	}
	var taskID string
	if i := strings.Index(retry, `"id":"`); i >= 0 {
		taskID = strings.SplitN(retry[i+6:], `"`, 2)[0]
		pages = append(pages, "/monitor/api/queues/"+q+"/tasks/"+taskID)
	}
	for _, set := range []func(*http.Request){basic, bearer(opToken(t, "human:ops", "operator"))} {
		for _, p := range pages {
			status, _, body := request(t, http.MethodGet, srv.URL+p, set)
			if status != http.StatusOK {
				t.Fatalf("GET %s: %d %.300s", p, status, body)
			}
			if strings.Contains(body, leak) || strings.Contains(body, "SeCrEt") || strings.Contains(body, whsec) {
				t.Fatalf("GET %s shows the event's secret: %.2000s", p, body)
			}
		}
	}
	// The queue itself holds no copy: every key Asynq keeps for it.
	keys, err := rdb.Keys(context.Background(), "asynq:{"+q+"}:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("asynq keys of %s: %v %v", q, keys, err)
	}
	for _, k := range keys {
		var dump string
		switch rdb.Type(context.Background(), k).Val() {
		case "hash":
			for _, v := range rdb.HGetAll(context.Background(), k).Val() {
				dump += v
			}
		case "string":
			dump = rdb.Get(context.Background(), k).Val()
		}
		if strings.Contains(dump, leak) || strings.Contains(dump, whsec) {
			t.Fatalf("the queue's key %s holds the event's secret", k)
		}
	}
}
