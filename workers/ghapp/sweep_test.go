package ghapp

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/providers/github/app/apptest"
)

type sweepEnv struct {
	redisEnv
	g    *apptest.GitHub
	s    *Sweeper
	logs *apptest.LogBuffer
}

func newSweepEnv(t *testing.T) *sweepEnv {
	t.Helper()
	e := &sweepEnv{redisEnv: newRedisEnv(t), g: apptest.New(t)}
	log, logs := apptest.NewLog()
	e.logs = logs
	e.s = NewSweeper(newTestClient(t, e.g), e.rdb, log, e.reg, SweepConfig{Prefix: e.prefix})
	return e
}

// add records attempts of one GUID, oldest first, at the given ages.
func (e *sweepEnv) add(guid string, attempts ...attempt) []int64 {
	var ids []int64
	now := time.Now()
	for i, a := range attempts {
		ids = append(ids, e.g.AddDelivery(apptest.Delivery{GUID: guid, DeliveredAt: now.Add(-a.ago), StatusCode: a.code, Redelivery: i > 0, Action: "opened"}))
	}
	return ids
}

type attempt struct {
	ago  time.Duration
	code int
}

func (e *sweepEnv) watermark(t *testing.T) time.Time {
	t.Helper()
	w, err := e.s.watermark(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// TestSweepRedeliversExactlyTheFailedGUIDsOnce: over several pages of
// deliveries (newest first, cursor in the Link header), exactly the GUIDs
// with no successful attempt that wakegate did not refuse on purpose are
// redelivered, each once, through their newest attempt; the watermark
// advances to the start of the sweep; a second sweep redelivers nothing,
// even for a GUID whose redelivery failed again.
func TestSweepRedeliversExactlyTheFailedGUIDsOnce(t *testing.T) {
	e := newSweepEnv(t)
	e.g.SetPageSize(2)
	ctx := context.Background()
	h := time.Hour
	e.add("g-too-old", attempt{30 * h, 503})                     // before the first window (24 h)
	g503 := e.add("g-503", attempt{3 * h, 503})                  // Redis was down: redeliver
	e.add("g-retried-ok", attempt{2 * h, 500}, attempt{h, 202})  // a later attempt succeeded
	e.add("g-signature", attempt{2 * h, 401})                    // refused on purpose
	e.add("g-too-big", attempt{90 * time.Minute, 413})           // refused on purpose
	gTimeout := e.add("g-timeout", attempt{80 * time.Minute, 0}) // no answer in time
	e.add("g-ok", attempt{70 * time.Minute, 202})
	gTwice := e.add("g-two-fails", attempt{60 * time.Minute, 502}, attempt{50 * time.Minute, 503})
	e.add("g-malformed", attempt{10 * time.Minute, 400}) // refused on purpose
	// g-timeout's redelivery fails again; the others' succeed.
	e.g.OnRedeliver(nil, func(d apptest.Delivery) int {
		if d.GUID == "g-timeout" {
			return http.StatusServiceUnavailable
		}
		return http.StatusAccepted
	})

	rep, err := e.s.Sweep(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.g.Redelivered(), map[int64]int{g503[0]: 1, gTimeout[0]: 1, gTwice[1]: 1}; !mapsEqual(got, want) {
		t.Fatalf("redelivery requests per delivery id = %v, want %v (the newest attempt of each failed GUID, once)", got, want)
	}
	if got, want := sorted(rep.Redelivered), []string{"g-503", "g-timeout", "g-two-fails"}; !slices.Equal(got, want) {
		t.Errorf("report redelivered %v, want %v", got, want)
	}
	if got, want := sorted(rep.Failed), []string{"g-503", "g-malformed", "g-signature", "g-timeout", "g-too-big", "g-two-fails"}; !slices.Equal(got, want) {
		t.Errorf("report failed %v, want %v", got, want)
	}
	refused := map[string]int{}
	for _, s := range rep.Skipped {
		if s.Reason != skipRefused {
			t.Errorf("skipped %+v, want only refusals", s)
		}
		refused[s.GUID] = s.StatusCode
	}
	if want := map[string]int{"g-signature": 401, "g-too-big": 413, "g-malformed": 400}; !mapsEqual(refused, want) {
		t.Errorf("refused on purpose %v, want %v", refused, want)
	}
	if rep.Succeeded != 2 || rep.GUIDs != 8 || rep.Scanned != 10 || rep.Pages < 5 {
		t.Errorf("report %+v: want 8 GUIDs (10 attempts) in the window over ≥ 5 pages, 2 succeeded", rep)
	}
	if w := e.watermark(t); !w.Equal(rep.Until.Truncate(time.Millisecond)) || !rep.Watermark.Equal(rep.Until) {
		t.Fatalf("watermark %v (report %v), want the sweep's start %v", w, rep.Watermark, rep.Until)
	}
	if got := counterValue(t, e.s.m.guids.WithLabelValues(skipRedelivered)); got != 3 {
		t.Errorf("redelivered metric %v, want 3", got)
	}

	// The redeliveries are new attempts: two succeeded, g-timeout's failed.
	rep2, err := e.s.Sweep(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.g.Redelivered(); !mapsEqual(got, map[int64]int{g503[0]: 1, gTimeout[0]: 1, gTwice[1]: 1}) {
		t.Fatalf("the second sweep asked again: %v", got)
	}
	if len(rep2.Redelivered) != 0 || !slices.Equal(rep2.Failed, []string{"g-timeout"}) ||
		len(rep2.Skipped) != 1 || rep2.Skipped[0].Reason != skipAlready {
		t.Fatalf("second sweep %+v: want only g-timeout, failed and already redelivered", rep2)
	}
	if !rep2.Since.Equal(rep.Until.Truncate(time.Millisecond).Add(-2 * time.Minute)) {
		t.Errorf("second sweep from %v, want the watermark minus the overlap", rep2.Since)
	}
	apptest.AssertNoSecrets(t, e.logs.String(), e.g)
}

// TestSweepRetriesAFailedRedelivery: when GitHub does not accept a
// redelivery, the GUID is not remembered and the watermark stops at its
// oldest attempt, so the next sweep asks again, and only once more.
func TestSweepRetriesAFailedRedelivery(t *testing.T) {
	e := newSweepEnv(t)
	ctx := context.Background()
	e.add("g-fine", attempt{2 * time.Hour, 202})
	flaky := e.add("g-flaky", attempt{time.Hour, 503})
	var mu sync.Mutex
	answer := http.StatusInternalServerError
	e.g.OnRedeliver(func(apptest.Delivery) int { mu.Lock(); defer mu.Unlock(); return answer }, nil)

	rep, err := e.s.Sweep(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Redelivered) != 0 || len(rep.Skipped) != 1 || rep.Skipped[0].Reason != skipRedeliverFailed || rep.Skipped[0].Error == "" {
		t.Fatalf("report %+v: want g-flaky's redelivery failed", rep)
	}
	oldest := time.Now().Add(-time.Hour).Truncate(time.Second)
	if w := e.watermark(t); w.After(oldest) || w.Before(oldest.Add(-2*time.Second)) {
		t.Fatalf("watermark %v, want g-flaky's attempt at about %v", w, oldest)
	}

	mu.Lock()
	answer = http.StatusAccepted
	mu.Unlock()
	rep, err = e.s.Sweep(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Redelivered, []string{"g-flaky"}) || e.g.Redelivered()[flaky[0]] != 2 {
		t.Fatalf("report %+v, requests %v: want g-flaky redelivered on the second try", rep, e.g.Redelivered())
	}
	if w := e.watermark(t); !w.Equal(rep.Until.Truncate(time.Millisecond)) {
		t.Fatalf("watermark %v, want %v once everything was handled", w, rep.Until)
	}
	if _, err := e.s.Sweep(ctx, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if n := e.g.Redelivered()[flaky[0]]; n != 2 {
		t.Fatalf("%d requests for g-flaky after a third sweep, want 2", n)
	}
	apptest.AssertNoSecrets(t, e.logs.String(), e.g)
}

// TestSweepSinceAndLock: an operator's since later than the watermark
// leaves the watermark (the range in between was not seen), an earlier
// one moves it; a sweep already running answers ErrBusy without calling
// GitHub; an API failure answers an error and moves nothing.
func TestSweepSinceAndLock(t *testing.T) {
	e := newSweepEnv(t)
	ctx := context.Background()
	e.add("g-1", attempt{90 * time.Minute, 503})
	old := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	if err := e.rdb.Set(ctx, e.s.k.sweepWatermark(), strconv.FormatInt(old.UnixMilli(), 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	rep, err := e.s.RedeliverFailed(ctx, time.Now().Add(-30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Scanned != 0 || !e.watermark(t).Equal(old) {
		t.Fatalf("since 30m ago: scanned %d, watermark %v; want nothing scanned and the watermark left at %v", rep.Scanned, e.watermark(t), old)
	}
	rep, err = e.s.RedeliverFailed(ctx, time.Now().Add(-3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Redelivered, []string{"g-1"}) || !e.watermark(t).Equal(rep.Until.Truncate(time.Millisecond)) {
		t.Fatalf("since 3h ago: %+v, watermark %v", rep, e.watermark(t))
	}

	l, ok, err := acquire(ctx, e.rdb, e.s.k.sweepLock(), time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	calls := e.g.Calls("list_deliveries")
	if _, err := e.s.Sweep(ctx, time.Time{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("err = %v while another sweep runs, want ErrBusy", err)
	}
	if e.g.Calls("list_deliveries") != calls {
		t.Fatal("a busy sweep called GitHub")
	}
	if err := l.release(ctx); err != nil {
		t.Fatal(err)
	}

	before := e.watermark(t)
	e.g.Fail("list_deliveries", http.StatusBadGateway)
	if _, err := e.s.Sweep(ctx, time.Time{}); err == nil {
		t.Fatal("a sweep whose listing failed reported success")
	}
	if !e.watermark(t).Equal(before) {
		t.Fatal("a failed sweep moved the watermark")
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
