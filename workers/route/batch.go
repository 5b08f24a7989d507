package route

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// batch is what the router shares across a whole journal batch (the
// consumer puts it in the context of every event of the batch): each
// workspace's settings, once an event has read them; the subscription
// candidates of the events that need no session labels, read in one
// script call (routing a batch of GitHub events that reach nobody thus
// costs one round trip for all of them); and the delivery ledger entries,
// which the consumer appends when it moves the shard's cursor past the
// batch.
//
// What it reads is what a per-event read would have read a few
// milliseconds earlier, with one exception it avoids: an event routed
// after a terminal event of its own subject in the same batch is matched
// afresh (the terminal event closes subscriptions; see Router.Handle).
// Each prefetched result is used once: a retried event reads again.
type batch struct {
	events []*event.Event

	once  sync.Once
	mu    sync.Mutex
	cands map[*event.Event]subscriptions.Candidates // nil: prefetch failed or not eligible

	sonce    sync.Once
	smu      sync.Mutex
	settings map[string]supervision.Settings

	lmu    sync.Mutex
	ledger [][]any // the field values of the batch's ledger entries, written with its cursor move
}

// record keeps ledger entries to be written with the batch's cursor move.
func (b *batch) record(entries [][]any) {
	b.lmu.Lock()
	defer b.lmu.Unlock()
	b.ledger = append(b.ledger, entries...)
}

type batchKey struct{}

func withBatch(ctx context.Context, events []*event.Event) context.Context {
	return context.WithValue(ctx, batchKey{}, &batch{events: events})
}

func batchFrom(ctx context.Context) *batch {
	b, _ := ctx.Value(batchKey{}).(*batch)
	return b
}

// settingsFor returns the workspace's settings if an event of this batch
// read them (a nil batch has none).
func (b *batch) settingsFor(ws string) (supervision.Settings, bool) {
	if b == nil {
		return supervision.Settings{}, false
	}
	b.smu.Lock()
	defer b.smu.Unlock()
	st, ok := b.settings[ws]
	return st, ok
}

// prefetchSettings reads, on its first call and in one round trip, the
// settings of every workspace with more than one routed event in the
// batch, and keeps them for the batch. The batch's subjects are routed
// concurrently, so without it each event of a workspace would read the
// settings itself before the first read could be kept. A workspace with
// one routed event reads them in its own gather pipeline, as before; a
// failed read keeps nothing (each event then reads, and meets the error).
func (b *batch) prefetchSettings(ctx context.Context, rdb redis.UniversalClient, sup *supervision.Store) {
	if b == nil {
		return
	}
	b.sonce.Do(func() {
		n := map[string]int{}
		var wss []string
		for _, x := range b.events {
			if !routed(x) {
				continue
			}
			if n[x.Workspace]++; n[x.Workspace] == 2 {
				wss = append(wss, x.Workspace)
			}
		}
		if len(wss) == 0 {
			return
		}
		p := rdb.Pipeline()
		reads := make([]func() (supervision.Settings, error), len(wss))
		for i, ws := range wss {
			reads[i] = sup.QueueSettings(ctx, p, ws)
		}
		_, _ = p.Exec(ctx) // each read meets its own command's error
		for i, ws := range wss {
			if st, err := reads[i](); err == nil {
				b.keepSettings(ws, st)
			}
		}
	})
}

// keepSettings keeps a workspace's settings for the rest of the batch.
func (b *batch) keepSettings(ws string, st supervision.Settings) {
	if b == nil {
		return
	}
	b.smu.Lock()
	defer b.smu.Unlock()
	if b.settings == nil {
		b.settings = map[string]supervision.Settings{}
	}
	b.settings[ws] = st
}

// prefetchable reports whether the router matches e's subscriptions with
// no session labels and before anything in this batch could have closed
// one of them: routed at all, not a message, about no session, and no
// terminal event of its subject earlier in the batch.
func prefetchable(e *event.Event) bool {
	return !strings.HasPrefix(e.Type, "wakegate.") && e.Priority != event.Internal &&
		e.Type != event.TypeMessageSent && e.SessionID == ""
}

// prefetched returns the prefetched candidates of e (reading them for the
// whole batch on the first call), once; ok is false when e must be
// matched afresh. A nil batch (no batch in the context) has none.
func (b *batch) prefetched(ctx context.Context, e *event.Event, subs *subscriptions.Store) (subscriptions.Candidates, bool) {
	if b == nil || !prefetchable(e) {
		return nil, false
	}
	b.once.Do(func() {
		var evs []*event.Event
		ended := map[string]bool{}
		for _, x := range b.events {
			if prefetchable(x) && !ended[x.Subject] {
				evs = append(evs, x)
			}
			if x.Terminal {
				ended[x.Subject] = true
			}
		}
		if len(evs) == 0 {
			return
		}
		res, err := subs.MatchCandidates(ctx, evs)
		if err != nil {
			return // each event reads its own, and meets the error there
		}
		b.cands = make(map[*event.Event]subscriptions.Candidates, len(evs))
		for i, x := range evs {
			b.cands[x] = res[i]
		}
	})
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.cands[e]
	if ok {
		delete(b.cands, e)
	}
	return c, ok
}
