package tasks

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/keyspace"
)

// DefaultQueues is WAKEGATE_PUSH_QUEUES's default: the number of Asynq
// queues a deployment's tasks are spread over (docs/design.md §14). Each
// queue's keys share one hash tag (Asynq's `asynq:{<queue>}:…`), so each
// queue sits in one Redis Cluster slot: 8 queues land on every node of a
// three-node cluster with about an even share, while an idle worker polls
// each queue once per check (8 small scripts every 100 ms) — 16 would
// double that for a spread that three to six nodes do not need.
const DefaultQueues = 8

// MaxQueues bounds WAKEGATE_PUSH_QUEUES.
const MaxQueues = 256

// QueueName is the name of a deployment's push queue k. Asynq's keys do
// not take WAKEGATE_REDIS_PREFIX, so the name carries it, and two
// deployments on one Redis never work each other's tasks. Queue 0 keeps
// the name of the single queue of earlier versions, `<prefix>:push`, so
// tasks enqueued before an upgrade are worked after it; queue k > 0 is
// `<prefix>:push:<k>`.
func QueueName(prefix string, k int) string {
	return keyspace.PushQueue(prefix, k)
}

// Queues returns the names of a deployment's n push queues (n < 1: one).
func Queues(prefix string, n int) []string {
	n = max(n, 1)
	out := make([]string, n)
	for k := range n {
		out[k] = QueueName(prefix, k)
	}
	return out
}

// QueueIndex is the push queue, of n, of a recipient's tasks: a stable
// hash of (workspace, party), so all of one recipient's tasks — pushes,
// digests, hold releases, escalation timers — are in one queue, and a
// task id (derived from the recipient) is deduplicated there
// (docs/design.md §8).
func QueueIndex(n int, workspace, party string) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(workspace))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(party))
	return int(h.Sum32() % uint32(n))
}

// QueueFor is the name of a recipient's queue of n.
func QueueFor(prefix string, n int, workspace, party string) string {
	return QueueName(prefix, QueueIndex(n, workspace, party))
}

// isPushQueue reports whether name is one of prefix's push queues, of
// whatever count: `<prefix>:push` or `<prefix>:push:<k>`.
func isPushQueue(prefix, name string) bool {
	rest, ok := strings.CutPrefix(name, keyspace.PushQueue(prefix, 0))
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	k, ok := strings.CutPrefix(rest, ":")
	if !ok || k == "" {
		return false
	}
	n, err := strconv.Atoi(k)
	return err == nil && n > 0 && strconv.Itoa(n) == k
}

// KnownQueues returns the push queues of prefix that Asynq knows (those
// ever enqueued on, listed in its `asynq:queues` set) together with
// configured, sorted: what a worker consumes, so that tasks left in a
// queue beyond a lowered WAKEGATE_PUSH_QUEUES are still worked.
func KnownQueues(ctx context.Context, rdb redis.UniversalClient, prefix string, configured []string) ([]string, error) {
	all, err := rdb.SMembers(ctx, "asynq:queues").Result()
	if err != nil {
		return nil, fmt.Errorf("list asynq queues: %w", err)
	}
	out := slices.Clone(configured)
	for _, q := range all {
		if isPushQueue(prefix, q) && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	slices.Sort(out)
	return out, nil
}

// QueueOf is the queue of a recipient's tasks.
func (p *Pusher) QueueOf(workspace, party string) string {
	return p.queues[QueueIndex(len(p.queues), workspace, party)]
}

// Queues returns the pusher's queues (WAKEGATE_PUSH_QUEUES of them).
func (p *Pusher) Queues() []string { return slices.Clone(p.queues) }

// deleteTask deletes the task id of a recipient's queue; a task enqueued
// under another count of queues (before an upgrade, or before
// WAKEGATE_PUSH_QUEUES changed) is looked for in the other push queues.
// A task not found, or running, is left alone (nil).
func (p *Pusher) deleteTask(ctx context.Context, workspace, party, id string) error {
	insp := asynq.NewInspectorFromRedisClient(p.rdb)
	first := p.QueueOf(workspace, party)
	err := insp.DeleteTask(first, id)
	if !notFound(err) {
		return ignoreActive(err)
	}
	others, err := KnownQueues(ctx, p.rdb, p.cfg.Prefix, p.queues)
	if err != nil {
		return err
	}
	for _, q := range others {
		if q == first {
			continue
		}
		if err := insp.DeleteTask(q, id); !notFound(err) {
			return ignoreActive(err)
		}
	}
	return nil
}

func notFound(err error) bool {
	return errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound)
}

// ignoreActive: a running task cannot be deleted (it is this very task
// running, or about to find its record gone); that is not an error.
func ignoreActive(err error) error {
	if err != nil && strings.Contains(err.Error(), "active") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete push task: %w", err)
	}
	return nil
}
