package perf

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/providers/agent"
)

const (
	pushConns    = 64
	pushSessions = 1000
)

// BenchmarkPush drives single-event agent pushes (POST /v1/events,
// application/cloudevents+json) at pushConns connections, closed loop, from
// a pool of pushSessions sessions each with its own token, every event a
// unique id; ingest limits raised; serve's workers running. It
// first measures the ingest baseline of BenchmarkIngest in the same run.
//
// Reported: "events/s" (target ≥ 5,000), "ratio" to the baseline's ops/s,
// and at the end "route_lag_s", the age of the oldest journal entry the
// router (the journal's consumer) has not routed yet, which is the
// journal lag of pushes (target < 1 s); agent events are journaled by the
// commit itself, so the run also fails unless the journal holds exactly
// b.N events. "lag_s" / "backlog" are the deriver's (nothing to derive).
//
//	go test ./integration/perf -run '^$' -bench Push -benchtime=60s
func BenchmarkPush(b *testing.B) {
	p := loadPayload(b)
	url := redistest.URL()
	b.Run("baseline", func(b *testing.B) {
		setBaseline(runBaseline(b, p, url))
	})
	b.Run("push", func(b *testing.B) {
		s := newStack(b, url, gateway.Limits{Workspace: 1e6, Token: 1e6})
		s.startWorkers(b)
		base := s.serve(b)
		c := httpClient(pushConns)
		defer c.CloseIdleConnections()
		tokens := sessionTokens(b, pushSessions)
		run := uuid.NewString()[:8]
		perSec := closedLoop(b, pushConns, func(i int64) error {
			body := fmt.Sprintf(`{"specversion":"1.0","id":"%s-%d","source":"perf","type":"session.turn_ended","summary":"turn %d ended","data":{"idle":false}}`, run, i, i)
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/events", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/cloudevents+json")
			req.Header.Set("Authorization", "Bearer "+tokens[i%int64(len(tokens))])
			return send(c, req)
		})
		b.ReportMetric(perSec, "events/s")
		reportRatios(b, perSec)
		reportLag(b, s, false)
		if n := journaled(b, s); n != int64(b.N) {
			b.Fatalf("journal holds %d events after %d accepted pushes", n, b.N)
		}
	})
}

// sessionTokens mints a session token for each of n sessions.
func sessionTokens(tb testing.TB, n int) []string {
	out := make([]string, n)
	for i := range out {
		cl := agent.Claims{Workspace: "default", Scope: "events:push events:read"}
		cl.Subject = fmt.Sprintf("session:perf-%04d", i)
		cl.ExpiresAt = jwtDate(time.Now().Add(time.Hour))
		tok, err := agent.Mint([]byte(tokenSecret), cl)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = tok
	}
	return out
}

// journaled counts the entries of every journal shard.
func journaled(tb testing.TB, s *stack) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int64
	for shard := range shards {
		l, err := s.rdb.XLen(ctx, s.j.StreamKey(shard)).Result()
		if err != nil {
			tb.Fatalf("journal length: %v", err)
		}
		n += l
	}
	return n
}
