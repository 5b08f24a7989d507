package stack

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// RedisURLForms names the forms of WAKEGATE_REDIS_URL NewClient accepts.
const RedisURLForms = "redis://[user:pass@]host:port[/db] (rediss:// for TLS, unix:///path.sock), " +
	"redis+sentinel://[user:pass@]sentinel:port[/db]?master_name=NAME[&addr=sentinel2:port…][&password=…] (rediss+sentinel:// for TLS), " +
	"redis+cluster://[user:pass@]node:port[?addr=node2:port…] (rediss+cluster:// for TLS)"

// NewClient opens the Redis client every wakegate process uses: short
// timeouts and one retry, so that ingress answers 503 within 3 s when
// Redis is away, and a pool sized for the shards' consumers (per node for
// a cluster). rawURL is WAKEGATE_REDIS_URL in one of three forms:
//
//   - redis://[user:pass@]host:port[/db] — one node (rediss:// with TLS;
//     unix:///path/to.sock also works);
//   - redis+sentinel://[user:pass@]host:port[/db]?master_name=NAME&addr=host2:port…
//     — Redis Sentinel: the host and each addr are sentinels, the
//     userinfo authenticates to the sentinels, the query's
//     username=/password= to the master (go-redis's ParseFailoverURL);
//     commands always go to the master (rediss+sentinel:// with TLS);
//   - redis+cluster://[user:pass@]host:port?addr=host2:port… — Redis
//     Cluster seed nodes, database 0 only (go-redis's ParseClusterURL);
//     every command goes to the slot's master (rediss+cluster:// with TLS).
//
// Every key a wakegate script touches shares one hash tag, so the scripts
// run unchanged on a cluster. Other go-redis options may be given in the
// query (client_name=, pool_size=…), except the timeouts, retries and pool
// size set here, and the options that would read from replicas. Errors
// never quote the URL (it may hold a password).
func NewClient(rawURL string, shards int) (redis.UniversalClient, error) {
	opt, err := redisOptions(rawURL, shards)
	if err != nil {
		return nil, err
	}
	switch o := opt.(type) {
	case *redis.FailoverOptions:
		return redis.NewFailoverClient(o), nil
	case *redis.ClusterOptions:
		return redis.NewClusterClient(o), nil
	default:
		return redis.NewClient(o.(*redis.Options)), nil
	}
}

// redisOptions parses rawURL into *redis.Options, *redis.FailoverOptions
// or *redis.ClusterOptions with wakegate's timeouts, retries and pool.
func redisOptions(rawURL string, shards int) (any, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("WAKEGATE_REDIS_URL: no scheme; want one of %s", RedisURLForms)
	}
	if shards <= 0 {
		shards = 16 // journal.Config's default
	}
	const (
		dial = time.Second
		rw   = 2 * time.Second
	)
	pool := 64 + 2*shards
	base, kind, _ := strings.Cut(strings.ToLower(scheme), "+")
	if base != "redis" && base != "rediss" && !(base == "unix" && kind == "") {
		return nil, fmt.Errorf("WAKEGATE_REDIS_URL: unknown scheme %q; want one of %s", scheme, RedisURLForms)
	}
	plain := base + "://" + rest
	switch kind {
	case "":
		opt, err := redis.ParseURL(plain)
		if err != nil {
			return nil, redisURLError(err)
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = dial, rw, rw
		opt.MaxRetries = 1
		opt.ContextTimeoutEnabled = true
		opt.PoolSize = pool
		opt.Protocol = resp(opt.Protocol)
		return opt, nil
	case "sentinel":
		opt, err := redis.ParseFailoverURL(plain)
		if err != nil {
			return nil, redisURLError(err)
		}
		if opt.MasterName == "" {
			return nil, errors.New("WAKEGATE_REDIS_URL: a redis+sentinel:// URL needs ?master_name= (the name the sentinels monitor)")
		}
		if opt.RouteByLatency || opt.RouteRandomly || opt.ReplicaOnly || opt.UseDisconnectedReplicas {
			return nil, errors.New("WAKEGATE_REDIS_URL: wakegate reads and writes the master only; drop route_by_latency, route_randomly, replica_only and use_disconnected_replicas")
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = dial, rw, rw
		opt.MaxRetries = 1
		opt.ContextTimeoutEnabled = true
		opt.PoolSize = pool
		opt.Protocol = resp(opt.Protocol)
		return opt, nil
	case "cluster":
		if u, err := url.Parse(plain); err == nil && strings.Trim(u.Path, "/") != "" && strings.Trim(u.Path, "/") != "0" {
			return nil, errors.New("WAKEGATE_REDIS_URL: Redis Cluster has database 0 only; drop the /db path")
		}
		opt, err := redis.ParseClusterURL(plain)
		if err != nil {
			return nil, redisURLError(err)
		}
		if opt.ReadOnly || opt.RouteByLatency || opt.RouteRandomly {
			return nil, errors.New("WAKEGATE_REDIS_URL: wakegate reads and writes the masters only; drop read_only, route_by_latency and route_randomly")
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = dial, rw, rw
		opt.MaxRetries = 1
		opt.ContextTimeoutEnabled = true
		opt.PoolSize = pool
		opt.Protocol = resp(opt.Protocol)
		return opt, nil
	default:
		return nil, fmt.Errorf("WAKEGATE_REDIS_URL: unknown scheme %q; want one of %s", scheme, RedisURLForms)
	}
}

// resp is the protocol a client speaks: RESP2 unless the URL asks for
// another (?protocol=3). wakegate uses nothing of RESP3, and go-redis
// checks a RESP3 connection for pending push notifications on every
// command: 10 % of a worker's CPU and 6 % of a gateway's under the fleet
// load (wakegate bench fleet --profile).
func resp(fromURL int) int {
	if fromURL != 0 {
		return fromURL
	}
	return 2
}

// redisURLError wraps a go-redis parse error without the URL net/url
// quotes in its errors (it may hold a password).
func redisURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("WAKEGATE_REDIS_URL: %w", err)
}

// redisUp is the gauge wakegate_redis_up: 1 when rdb answers a PING within
// a second at scrape time, else 0 — what /readyz checks first, for alerts.
func redisUp(rdb redis.UniversalClient) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "wakegate_redis_up",
		Help: "1 when Redis answered a PING from this process at scrape time, else 0."}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if rdb.Ping(ctx).Err() != nil {
			return 0
		}
		return 1
	})
}
