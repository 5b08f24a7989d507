package tasks

import (
	"context"
	"slices"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// queueCollector reports the push queues' tasks by state (pending, active,
// scheduled, retry, archived), summed over every push queue of the
// deployment (KnownQueues), at scrape time, read through Asynq's
// inspector: pushes, hold releases and escalation timers alike.
type queueCollector struct {
	rdb    redis.UniversalClient
	in     *asynq.Inspector
	prefix string
	queues []string
	desc   *prometheus.Desc
}

// NewQueueCollector returns the collector of wakegate_push_queue_tasks
// over p's queues.
func NewQueueCollector(rdb redis.UniversalClient, p *Pusher) prometheus.Collector {
	return &queueCollector{rdb: rdb, in: asynq.NewInspectorFromRedisClient(rdb), prefix: p.cfg.Prefix, queues: p.Queues(),
		desc: prometheus.NewDesc("wakegate_push_queue_tasks",
			"Tasks of the push queues (pushes, hold releases, escalation timers) by state, summed over the queues.", []string{"state"}, nil)}
}

// info sums the queues' counts; a queue before its first task counts
// zero (Asynq knows a queue only once something was enqueued on it).
func (q *queueCollector) info() (*asynq.QueueInfo, error) {
	known, err := q.in.Queues()
	if err != nil {
		return nil, err
	}
	queues, err := KnownQueues(context.Background(), q.rdb, q.prefix, q.queues)
	if err != nil {
		return nil, err
	}
	sum := &asynq.QueueInfo{}
	for _, name := range queues {
		if !slices.Contains(known, name) {
			continue
		}
		info, err := q.in.GetQueueInfo(name)
		if err != nil {
			return nil, err
		}
		sum.Pending += info.Pending
		sum.Active += info.Active
		sum.Scheduled += info.Scheduled
		sum.Retry += info.Retry
		sum.Archived += info.Archived
	}
	return sum, nil
}

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- q.desc }

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	info, err := q.info()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(q.desc, err)
		return
	}
	for state, n := range map[string]int{"pending": info.Pending, "active": info.Active, "scheduled": info.Scheduled,
		"retry": info.Retry, "archived": info.Archived} {
		ch <- prometheus.MustNewConstMetric(q.desc, prometheus.GaugeValue, float64(n), state)
	}
}
