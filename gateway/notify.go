package gateway

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
)

// notifier fans journal appends out to long-polls: one Pub/Sub
// subscription per gateway process, never a blocking Redis call per
// waiting client.
type notifier struct {
	rdb    redis.UniversalClient
	prefix string
	log    *slog.Logger

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{} // workspace → waiters
}

func newNotifier(rdb redis.UniversalClient, j *journal.Journal, log *slog.Logger) *notifier {
	return &notifier{rdb: rdb, prefix: j.NotifyChannel(""), log: log, waiters: map[string]map[chan struct{}]struct{}{}}
}

// wait returns a channel closed on the next append in workspace, and a
// function to stop waiting.
func (n *notifier) wait(workspace string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	n.mu.Lock()
	if n.waiters[workspace] == nil {
		n.waiters[workspace] = map[chan struct{}]struct{}{}
	}
	n.waiters[workspace][ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		if _, ok := n.waiters[workspace][ch]; ok {
			delete(n.waiters[workspace], ch)
			close(ch)
		}
		n.mu.Unlock()
	}
}

func (n *notifier) wake(workspace string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.waiters[workspace] {
		close(ch)
	}
	delete(n.waiters, workspace)
}

func (n *notifier) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ws, set := range n.waiters {
		for ch := range set {
			close(ch)
		}
		delete(n.waiters, ws)
	}
}

// Run keeps the subscription until ctx is cancelled, re-subscribing after
// errors; waiters are woken on every reconnect so none misses an append.
func (n *notifier) Run(ctx context.Context) {
	defer n.wakeAll()
	for ctx.Err() == nil {
		sub := n.rdb.PSubscribe(ctx, n.prefix+"*")
		if _, err := sub.Receive(ctx); err != nil {
			_ = sub.Close()
			n.log.Debug("journal notify subscription failed", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		n.wakeAll()
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
				n.wake(strings.TrimPrefix(m.Channel, n.prefix))
			}
		}
		_ = sub.Close()
	}
}
