package route

import (
	"context"
	"strings"
	"sync"

	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// batch is what the router reads once for a whole journal batch instead
// of once per event (the consumer puts it in the context of every event
// of the batch): each workspace's settings, and the subscription
// candidates of the events that need no session labels, read in one
// script call. Routing a batch of GitHub events that reach nobody thus
// costs one round trip for all of them instead of two per event.
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

	smu      sync.Mutex
	settings map[string]*settingsMemo
}

type settingsMemo struct {
	done chan struct{}
	val  supervision.Settings
	err  error
}

type batchKey struct{}

func withBatch(ctx context.Context, events []*event.Event) context.Context {
	return context.WithValue(ctx, batchKey{}, &batch{events: events})
}

func batchFrom(ctx context.Context) *batch {
	b, _ := ctx.Value(batchKey{}).(*batch)
	return b
}

// settingsOf returns the workspace's settings, read once per batch (an
// error is not kept: the next caller reads again).
func (b *batch) settingsOf(ctx context.Context, ws string, read func(context.Context, string) (supervision.Settings, error)) (supervision.Settings, error) {
	b.smu.Lock()
	if b.settings == nil {
		b.settings = map[string]*settingsMemo{}
	}
	m, ok := b.settings[ws]
	if !ok {
		m = &settingsMemo{done: make(chan struct{})}
		b.settings[ws] = m
		b.smu.Unlock()
		m.val, m.err = read(ctx, ws)
		if m.err != nil {
			b.smu.Lock()
			delete(b.settings, ws)
			b.smu.Unlock()
		}
		close(m.done)
		return m.val, m.err
	}
	b.smu.Unlock()
	select {
	case <-m.done:
	case <-ctx.Done():
		return supervision.Settings{}, ctx.Err()
	}
	if m.err != nil {
		return read(ctx, ws)
	}
	return m.val, nil
}

// prefetchable reports whether the router matches e's subscriptions with
// no session labels and before anything in this batch could have closed
// one of them: routed at all, not a message, about no session, and no
// terminal event of its subject earlier in the batch.
func prefetchable(e *event.Event) bool {
	return !strings.HasPrefix(e.Type, "wakegate.") && e.Priority != event.Internal &&
		e.Type != "message.sent" && e.SessionID == ""
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
