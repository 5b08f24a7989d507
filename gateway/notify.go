package gateway

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
)

// fanout wakes in-process waiters on Redis Pub/Sub messages: one pattern
// subscription per gateway process, never a blocking Redis call per
// waiting client. keyOf names the waiters a channel's message is for.
type fanout struct {
	rdb     redis.UniversalClient
	pattern string
	keyOf   func(channel string) (string, bool)
	log     *slog.Logger

	mu sync.Mutex
	// waiters by key; the value tells a waiter that only a wake wakes
	// (waitWake): a message whose payload is inbox.UpdatePayload skips it.
	waiters map[string]map[chan struct{}]bool
}

func newFanout(rdb redis.UniversalClient, pattern string, keyOf func(string) (string, bool), log *slog.Logger) *fanout {
	return &fanout{rdb: rdb, pattern: pattern, keyOf: keyOf, log: log, waiters: map[string]map[chan struct{}]bool{}}
}

// journalFanout wakes GET /v1/events long-polls of a workspace.
func journalFanout(rdb redis.UniversalClient, channelPrefix string, log *slog.Logger) *fanout {
	return newFanout(rdb, channelPrefix+"*", func(ch string) (string, bool) {
		return strings.CutPrefix(ch, channelPrefix)
	}, log)
}

// wait returns a channel closed on the next message for key, and a
// function to stop waiting. Register before reading state, so a change
// between the read and the wait still wakes.
func (f *fanout) wait(key string) (<-chan struct{}, func()) { return f.register(key, false) }

// waitWake is wait for a waiter that only a wake concerns (a long-poll
// answers only once an entry decided a wake, docs/design.md §4): an
// inbox update that decided none (payload inbox.UpdatePayload) leaves
// it waiting, so it does not read the inbox again for nothing.
func (f *fanout) waitWake(key string) (<-chan struct{}, func()) { return f.register(key, true) }

func (f *fanout) register(key string, wakeOnly bool) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	if f.waiters[key] == nil {
		f.waiters[key] = map[chan struct{}]bool{}
	}
	f.waiters[key][ch] = wakeOnly
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		if _, ok := f.waiters[key][ch]; ok {
			delete(f.waiters[key], ch)
			if len(f.waiters[key]) == 0 {
				delete(f.waiters, key)
			}
			close(ch)
		}
		f.mu.Unlock()
	}
}

// waiting counts the waiters.
func (f *fanout) waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, set := range f.waiters {
		n += len(set)
	}
	return n
}

// wake wakes key's waiters for a message with payload: all of them,
// except those that only a wake concerns when payload is an update.
func (f *fanout) wake(key, payload string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	update := payload == inbox.UpdatePayload
	for ch, wakeOnly := range f.waiters[key] {
		if update && wakeOnly {
			continue
		}
		close(ch)
		delete(f.waiters[key], ch)
	}
	if len(f.waiters[key]) == 0 {
		delete(f.waiters, key)
	}
}

func (f *fanout) wakeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key, set := range f.waiters {
		for ch := range set {
			close(ch)
		}
		delete(f.waiters, key)
	}
}

// Run holds the subscription until ctx is cancelled, re-subscribing after
// errors; every (re)connect wakes all waiters so none misses a message
// sent while the subscription was down, and so does the stop.
func (f *fanout) Run(ctx context.Context) {
	defer f.wakeAll()
	for ctx.Err() == nil {
		sub := f.rdb.PSubscribe(ctx, f.pattern)
		if _, err := sub.Receive(ctx); err != nil {
			_ = sub.Close()
			f.log.Debug("notify subscription failed", "pattern", f.pattern, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		f.wakeAll()
		ch := sub.Channel()
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case m, ok := <-ch:
				if !ok {
					break loop
				}
				if key, ok := f.keyOf(m.Channel); ok {
					f.wake(key, m.Payload)
				}
			}
		}
		_ = sub.Close()
	}
}
