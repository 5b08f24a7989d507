// Package redistest gives tests a client on the real Redis the suite runs
// against (WAKEGATE_TEST_REDIS_URL, default redis://127.0.0.1:6379/0) and
// a fresh key prefix, so tests share one Redis without crosstalk. A Redis
// that is not there fails the test: it is never skipped.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	mrand "math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// URL is the Redis the tests use.
func URL() string {
	if u := os.Getenv("WAKEGATE_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// Prefix returns a fresh key prefix.
func Prefix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "wgt" + hex.EncodeToString(b)
}

// New returns a client on the test Redis and a fresh prefix whose keys are
// deleted when the test ends.
func New(t testing.TB) (*redis.Client, string) {
	t.Helper()
	opt, err := redis.ParseURL(URL())
	if err != nil {
		t.Fatalf("WAKEGATE_TEST_REDIS_URL: %v", err)
	}
	rdb := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("the tests need Redis at %s (.ci/run starts one): %v", URL(), err)
	}
	prefix := Prefix()
	t.Cleanup(func() {
		Flush(rdb, prefix)
		_ = rdb.Close()
	})
	return rdb, prefix
}

// Backends runs f on the test Redis (a fresh prefix) and on a miniredis,
// the embedded Redis `wakegate serve` runs by default, as subtests.
func Backends(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, prefix string)) {
	t.Run("redis", func(t *testing.T) {
		rdb, prefix := New(t)
		f(t, rdb, prefix)
	})
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		f(t, rdb, Prefix())
	})
}

// Flush deletes every key under prefix.
func Flush(rdb redis.UniversalClient, prefix string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 500 {
			rdb.Unlink(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		rdb.Unlink(ctx, keys...)
	}
}

// RoundTrips is a client hook (AddHook) that counts round trips to Redis:
// a command or a pipeline each, but not the commands that set a new
// connection up.
type RoundTrips struct{ n atomic.Int64 }

// Count is the round trips counted so far.
func (c *RoundTrips) Count() int64 { return c.n.Load() }

func (c *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}

func (c *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 {
			c.add(cmds[0])
		}
		return next(ctx, cmds)
	}
}

func (c *RoundTrips) add(first redis.Cmder) {
	if name := first.Name(); name != "hello" && name != "client" {
		c.n.Add(1)
	}
}

// FreeClusterPort is a free loopback port whose cluster bus port (the
// port + 10000, which redis-server also binds) is free too, both below
// Linux's ephemeral range (32768 up), where the tests' own client
// connections could take the bus port before the server binds it.
func FreeClusterPort(t testing.TB) int {
	t.Helper()
	for range 100 {
		port := 10000 + mrand.IntN(10000)
		a, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		_ = a.Close()
		if err != nil {
			continue
		}
		_ = b.Close()
		return port
	}
	t.Fatal("no free port pair in 10000–30000")
	return 0
}

// MarkerPeriod is the start of the marker period Redis's clock is in now,
// for a journal of that retention (periods of half of it, rounded up).
func MarkerPeriod(t testing.TB, rdb redis.UniversalClient, retention time.Duration) int64 {
	t.Helper()
	tm, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	period := int64(retention/time.Second+1) / 2
	return tm.Unix() - tm.Unix()%period
}

// MarkerBuckets checks a period's marker set (docs/design.md §14) after n
// markers went into it: its count key holds n, and it has 1 + n/fill
// buckets "<count>:<b>" holding the n markers besides each bucket's
// sentinel, every one a listpack hash (hash) or an intset within Redis
// 7's defaults (128 fields, 512 members) whatever the server's setting.
// It returns the buckets' keys.
func MarkerBuckets(t testing.TB, rdb redis.UniversalClient, count string, n, fill int, hash bool) []string {
	t.Helper()
	ctx := context.Background()
	if got, _ := rdb.Get(ctx, count).Int(); got != n {
		t.Fatalf("%s counts %d markers, want %d (the test straddled a period?)", count, got, n)
	}
	keys, err := rdb.Keys(ctx, count+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + n/fill; len(keys) != want {
		t.Errorf("%d buckets, want %d", len(keys), want)
	}
	enc, limit := "intset", int64(512)
	if hash {
		enc, limit = "listpack", 128
	}
	members := 0
	for _, k := range keys {
		size := rdb.SCard(ctx, k).Val()
		if hash {
			size = rdb.HLen(ctx, k).Val()
		}
		members += int(size) - 1 // the sentinel
		if got, _ := rdb.ObjectEncoding(ctx, k).Result(); got != enc || size > limit {
			t.Errorf("%s is a %s of %d: more than Redis 7's default %s limit (%d)", k, got, size, enc, limit)
		}
	}
	if members != n {
		t.Errorf("%d markers in the buckets, want %d", members, n)
	}
	return keys
}
