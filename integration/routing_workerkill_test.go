package integration

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/workers/route"
)

// TestRoutingWorkerKillExactlyOnce runs a gateway and two workers sharing
// the journal shards, pushes 600 attention events about 60 sessions whose
// controller is the workspace default, SIGKILLs one worker mid-stream, and
// checks that the survivor takes every shard over and that the delivery
// ledger shows every event reaching the controller exactly once, as the
// controller's inbox does (one entry per session, counting that session's
// events once each, and exactly 600 inbox seqs assigned).
func TestRoutingWorkerKillExactlyOnce(t *testing.T) {
	t.Parallel()
	const (
		ws          = "default"
		controller  = "session:boss6"
		nSessions   = 60
		perSession  = 10
		pushers     = 12
		killAfter   = 200
		takeoverMax = 45 * time.Second
	)
	s := newStack(t, nil)
	g := s.start("gateway", "gateway", nil)
	wa := s.start("worker-a", "worker", nil)
	wb := s.start("worker-b", "worker", nil)
	c := s.client(g)
	admin := s.token(t, "human:admin", ws, "admin")
	c.putSettings(t, admin, map[string]any{"default_controller": controller})

	held := func(p *proc) float64 {
		n, _ := metric(t, p.Work, "wakegate_route_shards_held")
		return n
	}
	waitFor(t, 30*time.Second, "the two workers sharing the 16 shards 8 and 8", func() (bool, string) {
		a, b := held(wa), held(wb)
		return a == 8 && b == 8, fmt.Sprintf("worker-a %v, worker-b %v", a, b)
	})

	var (
		acks     atomic.Int64
		killNow  = make(chan struct{})
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
		ids      = map[string][]string{} // session party → event ids pushed
	)
	tokens := make([]string, nSessions)
	for sn := range nSessions {
		tokens[sn] = s.token(t, fmt.Sprintf("session:s6-%02d", sn), ws, "events:push")
	}
	for w := range pushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perSession {
				for sn := w; sn < nSessions; sn += pushers {
					party := fmt.Sprintf("session:s6-%02d", sn)
					tok := tokens[sn]
					id := fmt.Sprintf("s6-%02d-%02d", sn, i)
					r, err := c.push(tok, ctEvent, idleTurn(id, nil))
					if err != nil || r.Status != 202 {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("push %s: %v %v", id, r, err))
						mu.Unlock()
						return
					}
					mu.Lock()
					ids[party] = append(ids[party], id)
					mu.Unlock()
					if acks.Add(1) == killAfter {
						close(killNow)
					}
				}
			}
		}()
	}
	select {
	case <-killNow:
	case <-time.After(60 * time.Second):
		t.Fatalf("%d pushes acknowledged after 60s, want %d", acks.Load(), killAfter)
	}
	wa.kill()
	killedAt, atKill := time.Now(), acks.Load()
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if t.Failed() {
		t.FailNow()
	}
	if atKill >= nSessions*perSession {
		t.Errorf("every push was acknowledged before the kill: the kill was not mid-stream")
	}

	// Events left unrouted on the dead worker's shards: the takeover has
	// work to do.
	j := s.journalLayout()
	unrouted := 0
	for sh := range shards {
		cur, _ := s.rdb.Get(bg(), j.Tag(sh)+":cursor").Result()
		start := "-"
		if cur != "" {
			start = "(" + cur
		}
		n, err := s.rdb.XRange(bg(), j.StreamKey(sh), start, "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		unrouted += len(n)
	}
	t.Logf("%d journaled events not yet routed after the last push", unrouted)
	if unrouted == 0 {
		t.Errorf("nothing was left unrouted by the killed worker: the kill was not mid-routing")
	}

	// The survivor takes the dead worker's shards over.
	waitFor(t, takeoverMax, "worker-b holding all 16 shards", func() (bool, string) {
		n := held(wb)
		return n == shards, fmt.Sprintf("worker-b holds %v", n)
	})
	t.Logf("SIGKILL of worker-a after %d of %d pushes; worker-b held every shard %s later",
		atKill, nSessions*perSession, time.Since(killedAt).Round(100*time.Millisecond))
	owners := map[string]bool{}
	for sh := range shards {
		v, err := s.rdb.Get(bg(), j.Tag(sh)+":lease").Result()
		if err != nil {
			t.Fatalf("lease of shard %d: %v", sh, err)
		}
		owner, _, _ := strings.Cut(v, ":")
		owners[owner] = true
	}
	if len(owners) != 1 {
		t.Errorf("shard leases are held by %v, want one owner (worker-b)", owners)
	}
	s.routed(t, false)

	// The journal has each event once.
	count := countIDs(s.journalEvents(t))
	// The ledger, read raw: every delivery recorded, a re-run's record
	// carrying the same inbox seq.
	type key struct{ source, id string }
	ledger := map[key]map[string]map[string]bool{} // event → recipient → inbox seqs
	rawRecords := 0
	for sh := range shards {
		msgs, err := s.rdb.XRange(bg(), route.LedgerKey(j, sh), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		rawRecords += len(msgs)
		for _, m := range msgs {
			k := key{fmt.Sprint(m.Values["source"]), fmt.Sprint(m.Values["id"])}
			to := fmt.Sprint(m.Values["to"])
			if ledger[k] == nil {
				ledger[k] = map[string]map[string]bool{}
			}
			if ledger[k][to] == nil {
				ledger[k][to] = map[string]bool{}
			}
			ledger[k][to][fmt.Sprint(m.Values["inbox_seq"])] = true
		}
		// Ledger() agrees with the raw stream.
		view, err := route.Ledger(bg(), s.rdb, j, sh)
		if err != nil {
			t.Fatal(err)
		}
		for k, rec := range view {
			src, id, _ := strings.Cut(k, " ")
			for to, seq := range rec {
				if !ledger[key{src, id}][to][seq] {
					t.Errorf("route.Ledger shard %d: %s → %s at %s, not in the raw ledger", sh, k, to, seq)
				}
			}
		}
		if n, _ := s.rdb.XLen(bg(), j.Tag(sh)+":route:poison").Result(); n != 0 {
			t.Errorf("shard %d set %d events aside as poison", sh, n)
		}
	}
	t.Logf("ledger: %d records for %d events", rawRecords, len(ledger))
	inboxSeqs := map[string]string{}
	for party, list := range ids {
		for _, id := range list {
			if count[id] != 1 {
				t.Errorf("%s journaled %d times, want once", id, count[id])
			}
			rec := ledger[key{agentSource(ws, party), id}]
			switch {
			case rec == nil:
				t.Errorf("%s (pushed by %s) is not in the delivery ledger", id, party)
				continue
			case len(rec) != 1 || len(rec[controller]) != 1:
				t.Errorf("%s reached %v in the ledger, want %s once (one inbox seq)", id, rec, controller)
				continue
			}
			for seq := range rec[controller] {
				if other, dup := inboxSeqs[seq]; dup {
					t.Errorf("%s and %s were both delivered at inbox seq %s", other, id, seq)
				}
				inboxSeqs[seq] = id
			}
		}
	}
	if len(inboxSeqs) != nSessions*perSession {
		t.Errorf("%d distinct inbox seqs in the ledger, want %d", len(inboxSeqs), nSessions*perSession)
	}
	last, err := inbox.New(s.rdb, inbox.Config{Prefix: s.prefix}).Last(bg(), ws, controller)
	if err != nil {
		t.Fatal(err)
	}
	if last != nSessions*perSession {
		t.Errorf("the controller's inbox assigned %d seqs, want exactly %d (one per event)", last, nSessions*perSession)
	}

	// The controller's inbox: one entry per session, counting each of its
	// events once.
	boss := s.token(t, controller, ws, "inbox")
	pg := c.inbox(t, boss, "limit=1000")
	if len(pg.Entries) != nSessions {
		t.Errorf("the controller has %d entries, want %d (one per session)", len(pg.Entries), nSessions)
	}
	for _, e := range pg.Entries {
		want := ids[e.CoalesceKey]
		got := slices.Clone(e.FoldedIDs)
		slices.Sort(got)
		slices.Sort(want)
		if e.Count != len(want) || !slices.Equal(got, want) {
			t.Errorf("entry %s folds %v (count %d), want each of %v once", e.CoalesceKey, e.FoldedIDs, e.Count, want)
		}
	}
}
