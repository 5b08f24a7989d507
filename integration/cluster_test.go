package integration

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/redistest"
)

// TestSmokeOnRedisCluster runs the end-to-end smoke test (agent push,
// signed webhook through the deriver and the PR tracker, routing, the
// inbox, metrics) against `serve` on a three-node Redis Cluster started
// here (`redis-server --cluster-enabled`, `redis-cli --cluster create`),
// through WAKEGATE_REDIS_URL's redis+cluster:// form: every multi-key
// script and transaction must keep to one slot, or Redis answers
// CROSSSLOT and the smoke fails.
func TestSmokeOnRedisCluster(t *testing.T) {
	t.Parallel()
	url := startRedisCluster(t)
	s := &stack{t: t, prefix: "wgc", hookSecret: "hook-secret-cluster", jwtSecret: []byte("jwt-secret-cluster-0123456789abcdef")}
	s.env = map[string]string{
		"WAKEGATE_REDIS_URL":              url,
		"WAKEGATE_REDIS_PREFIX":           s.prefix,
		"WAKEGATE_GITHUB_WEBHOOK_SECRETS": s.hookSecret,
		"WAKEGATE_JWT_HS256_SECRET":       string(s.jwtSecret),
		"WAKEGATE_INGEST_LIMITS":          "workspace=1000000/s,token=1000000/s",
		"WAKEGATE_LOG_LEVEL":              "info",
	}
	smoke(t, s)
}

// startRedisCluster starts three empty cluster-mode redis-servers on free
// loopback ports, joins them (every slot covered, no replicas) and answers
// the redis+cluster:// URL of all three. They are killed when the test
// ends, after its wakegate processes.
func startRedisCluster(t *testing.T) string {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("the cluster test starts its own redis-servers: %v", err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("the cluster test joins its servers with redis-cli: %v", err)
	}
	dir := t.TempDir()
	var addrs []string
	for i := range 3 {
		port := strconv.Itoa(redistest.FreeClusterPort(t))
		cmd := exec.Command(server, "--port", port, "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes-"+port+".conf"), "--dir", dir,
			"--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis-"+strconv.Itoa(i)+".log"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		addrs = append(addrs, "127.0.0.1:"+port)
	}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		waitFor(t, 15*time.Second, a+" answers", func() (bool, string) {
			err := c.Ping(context.Background()).Err()
			return err == nil, errString(err)
		})
		_ = c.Close()
	}
	out, err := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		waitFor(t, 15*time.Second, a+" sees the cluster ok", func() (bool, string) {
			info, err := c.ClusterInfo(context.Background()).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok"), info + errString(err)
		})
		_ = c.Close()
	}
	return "redis+cluster://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2]
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
