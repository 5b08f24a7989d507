package ghapp

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github/app"
	"github.com/wakegate/wakegate/providers/github/app/apptest"
)

// The tests run on real Redis (redistest, a fresh key prefix per test)
// against apptest's fake GitHub API, which fails the test on any request
// GitHub would refuse for its credentials.

// newTestClient is a client of the fake's App.
func newTestClient(t *testing.T, g *apptest.GitHub) *app.Client {
	t.Helper()
	_, pem := apptest.Key()
	c, err := app.NewClient(app.Config{AppID: apptest.AppID, PrivateKey: pem, APIURL: g.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// redisEnv is a Redis client and prefix for one test.
type redisEnv struct {
	rdb    *redis.Client
	prefix string
	reg    *prometheus.Registry
}

func newRedisEnv(t *testing.T) redisEnv {
	t.Helper()
	rdb, prefix := redistest.New(t)
	return redisEnv{rdb: rdb, prefix: prefix, reg: prometheus.NewRegistry()}
}

// journaled returns every event of the journal, shard by shard.
func journaled(t *testing.T, rdb redis.UniversalClient, j *journal.Journal) []*event.Event {
	t.Helper()
	var out []*event.Event
	for s := range j.Config().Shards {
		msgs, err := rdb.XRange(context.Background(), j.StreamKey(s), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			e, err := journal.Decode(s, m) // the journal's one reader (entries may be in compact form)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
	}
	return out
}

// closedFixture is the derived fixture of a merge webhook
// (pull_request.closed with merged: true; Codertocat/Hello-World#2, base
// master), its closed_at, merged_at and updated_at moved to at.
func closedFixture(t *testing.T, at time.Time) []byte {
	t.Helper()
	path := filepath.Join("..", "..", "testdata", "github", "derived", "pull_request.closed.merged.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the GitHub fixture is required: %v", err)
	}
	const was = "2019-05-15T15:21:18Z"
	if !bytes.Contains(raw, []byte(`"closed_at": "`+was+`"`)) {
		t.Fatalf("%s: closed_at is no longer %s", path, was)
	}
	return bytes.ReplaceAll(raw, []byte(was), []byte(at.UTC().Format(time.RFC3339)))
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
