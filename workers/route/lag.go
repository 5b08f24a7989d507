package route

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
)

// lagCollector reports, at scrape time, how far routing is behind on
// each journal shard: the age of the oldest entry past the shard's
// cursor (0 when none). Read at scrape, it does not freeze when routing
// stops — which is when it matters.
type lagCollector struct {
	rdb  redis.UniversalClient
	j    *journal.Journal
	desc *prometheus.Desc
}

// NewLagCollector returns the collector of wakegate_journal_shard_lag_seconds.
func NewLagCollector(rdb redis.UniversalClient, j *journal.Journal) prometheus.Collector {
	return &lagCollector{rdb: rdb, j: j, desc: prometheus.NewDesc("wakegate_journal_shard_lag_seconds",
		"Age of the oldest journal entry not yet routed, per shard (0 when routing is caught up).", []string{"shard"}, nil)}
}

func (l *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- l.desc }

func (l *lagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	lags, err := ShardLags(ctx, l.rdb, l.j, time.Now())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(l.desc, err)
		return
	}
	for shard, lag := range lags {
		ch <- prometheus.MustNewConstMetric(l.desc, prometheus.GaugeValue, lag.Seconds(), strconv.Itoa(shard))
	}
}

// ShardLags answers, per journal shard, the age at now of the oldest
// entry past the router's cursor: two pipelined round trips in all.
func ShardLags(ctx context.Context, rdb redis.UniversalClient, j *journal.Journal, now time.Time) ([]time.Duration, error) {
	n := j.Config().Shards
	pipe := rdb.Pipeline()
	cursors := make([]*redis.StringCmd, n)
	for shard := range n {
		cursors[shard] = pipe.Get(ctx, cursorKey(j, shard))
	}
	_, _ = pipe.Exec(ctx)
	pipe = rdb.Pipeline()
	next := make([]*redis.XMessageSliceCmd, n)
	for shard := range n {
		cursor, err := cursors[shard].Result()
		if errors.Is(err, redis.Nil) {
			cursor = "0-0"
		} else if err != nil {
			return nil, err
		}
		next[shard] = pipe.XRangeN(ctx, j.StreamKey(shard), "("+cursor, "+", 1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := make([]time.Duration, n)
	for shard, cmd := range next {
		if msgs := cmd.Val(); len(msgs) > 0 {
			out[shard] = max(0, now.Sub(streamTime(msgs[0].ID)))
		}
	}
	return out, nil
}
