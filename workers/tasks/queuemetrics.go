package tasks

import (
	"slices"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// queueCollector reports the push queue's tasks by state (pending, active,
// scheduled, retry, archived) at scrape time, read through Asynq's
// inspector: pushes, hold releases and escalation timers alike.
type queueCollector struct {
	in    *asynq.Inspector
	queue string
	desc  *prometheus.Desc
}

// NewQueueCollector returns the collector of wakegate_push_queue_tasks.
func NewQueueCollector(rdb redis.UniversalClient, queue string) prometheus.Collector {
	return &queueCollector{in: asynq.NewInspectorFromRedisClient(rdb), queue: queue,
		desc: prometheus.NewDesc("wakegate_push_queue_tasks",
			"Tasks of the push queue (pushes, hold releases, escalation timers) by state.", []string{"state"}, nil)}
}

// info reads the queue's counts; all zero before its first task (Asynq
// knows a queue only once something was enqueued on it).
func (q *queueCollector) info() (*asynq.QueueInfo, error) {
	queues, err := q.in.Queues()
	if err != nil {
		return nil, err
	}
	if !slices.Contains(queues, q.queue) {
		return &asynq.QueueInfo{}, nil
	}
	return q.in.GetQueueInfo(q.queue)
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
