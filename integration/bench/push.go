package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

func init() {
	scenarios["push"] = &scenario{
		about:    "single-event agent pushes from --sessions sessions, closed loop at --conns: events/s against the bare handler's throughput, route lag, every accepted event journaled",
		defaults: Options{Duration: 60 * time.Second, Warmup: 3 * time.Second, Conns: 64, Sessions: 1000},
		run:      runPush,
	}
}

func runPush(ctx context.Context, r *runner) error {
	sys, err := r.start(ctx)
	if err != nil {
		return err
	}
	defer sys.Stop()
	bl, err := r.baseline(ctx, sys, Loop{})
	if err != nil {
		return err
	}
	c := newHTTPClient(r.o.Conns)
	defer c.CloseIdleConnections()
	o := r.o

	tokens := make([]string, o.Sessions)
	for k := range tokens {
		tokens[k] = token(fmt.Sprintf("session:bench-%05d", k), "events:push", o.Duration+o.Warmup)
	}
	run := randomHex(4)
	mem0, _ := sys.UsedMemory(ctx)
	var accepted atomic.Int64
	l := Loop{Name: "push, closed loop", Conns: o.Conns, Duration: o.Duration, Warmup: o.Warmup}
	l.Do = func(ctx context.Context, i int64) error {
		n := strconv.FormatInt(i, 10)
		body := []byte(`{"specversion":"1.0","id":"` + run + "-" + n + `","source":"bench","type":"session.turn_ended","summary":"turn ` + n + ` ended","data":{"idle":false}}`)
		_, err := send(c, pushRequest(ctx, sys.Gateways[int(i)%len(sys.Gateways)], tokens[int(i)%len(tokens)], body), http.StatusAccepted)
		if err == nil {
			accepted.Add(1)
		}
		return err
	}
	pu := r.measure(ctx, sys, l, false)
	lag, err := sys.Lag(ctx)
	if err != nil {
		return fmt.Errorf("read the lag: %w", err)
	}
	journaled, err := sys.Journaled(ctx)
	if err != nil {
		return err
	}
	mem1, _ := sys.UsedMemory(ctx)

	rep := r.rep
	rep.row(fmt.Sprintf("single-event agent pushes, %d conns closed loop, workers running: ≥ 5,000 events/s", o.Conns),
		pu.Achieved, "events/s", bl.Achieved, pu.Achieved/bl.Achieved, verdict(pu.Achieved >= 5000 && errorCount(pu) == 0))
	rep.row(fmt.Sprintf("route lag at the end of the %s run < 1 s", o.Duration), lag.Route.Seconds(), "s", 0, 0, verdict(lag.Route < time.Second))
	rep.row("accepted pushes in the journal, each once (journaled ÷ accepted = 1)", float64(journaled), "events", float64(accepted.Load()),
		float64(journaled)/float64(max(accepted.Load(), 1)), verdict(journaled == accepted.Load()))
	if n := accepted.Load(); n > 0 && mem1 > mem0 {
		rep.row(fmt.Sprintf("Redis memory per retained agent event (journal entry, idempotency key, session state; no recipient; %d events)", n),
			float64(mem1-mem0)/float64(n), "B", 0, 0, nil)
	}
	return nil
}
