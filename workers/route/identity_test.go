package route

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
)

// deadPid is the pid of a process that has exited.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no `true` to run:", err)
	}
	return cmd.Process.Pid
}

// TestIdentityIsNotShared: live processes never share an identity — a
// second consumer given the same worker id takes the next suffix, and a
// name whose holder is alive on this host is left alone; a stopped
// consumer frees its name.
func TestIdentityIsNotShared(t *testing.T) {
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 2})
	cfg := ConsumerConfig{LeaseTTL: time.Second, WorkerID: "w"}
	host, _ := os.Hostname()
	// "w-1" is held by a live process of this host (our parent).
	rdb.Set(context.Background(), prefix+":route:worker:w-1", host+" "+strconv.Itoa(os.Getppid())+" n", time.Minute)
	a := NewConsumer(rdb, j, newRecorder().handle, quiet(), prometheus.NewRegistry(), cfg)
	b := NewConsumer(rdb, j, newRecorder().handle, quiet(), prometheus.NewRegistry(), cfg)
	ctxA, stopA := context.WithCancel(context.Background())
	doneA := make(chan struct{})
	go func() { _ = a.Run(ctxA); close(doneA) }()
	waitFor(t, "a to take its shards", func() bool { return len(a.Held()) > 0 })
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	go func() { _ = b.Run(ctxB) }()
	waitFor(t, "b to take its shards", func() bool { return len(b.Held()) > 0 })
	if a.owner != "w" || b.owner != "w-2" {
		t.Errorf("identities %q and %q, want w and w-2 (w-1 is held by a live process)", a.owner, b.owner)
	}
	stopA()
	<-doneA
	if n := rdb.Exists(context.Background(), prefix+":route:worker:w").Val(); n != 0 {
		t.Error("a stopped consumer kept its identity record")
	}
	if s, _ := rdb.ZScore(context.Background(), prefix+":route:workers", "w").Result(); s != 0 {
		t.Error("a stopped consumer stayed in the worker set")
	}
}

// TestRestartedWorkerReclaimsItsShards: a worker restarted under its
// identity, whose predecessor (a dead pid of this host) still holds the
// lease with a long TTL, takes the shard at once with a new epoch.
func TestRestartedWorkerReclaimsItsShards(t *testing.T) {
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 1})
	host, _ := os.Hostname()
	ctx := context.Background()
	rdb.Set(ctx, prefix+":route:worker:w", host+" "+strconv.Itoa(deadPid(t))+" n", time.Minute)
	c := NewConsumer(rdb, j, newRecorder().handle, quiet(), prometheus.NewRegistry(), ConsumerConfig{LeaseTTL: time.Second, WorkerID: "w"})
	rdb.Set(ctx, c.epochKey(0), 7, 0)
	rdb.Set(ctx, c.leaseKey(0), "w:7", time.Minute)
	// A lease of another identity is not taken.
	other := NewConsumer(rdb, j, newRecorder().handle, quiet(), prometheus.NewRegistry(), ConsumerConfig{LeaseTTL: time.Second, WorkerID: "x"})
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = other.Run(rctx) }()
	waitFor(t, "x to join the worker set", func() bool { return rdb.ZScore(ctx, prefix+":route:workers", "x").Val() > 0 })
	if len(other.Held()) != 0 {
		t.Fatal("a worker took a lease held under another identity")
	}
	started := time.Now()
	go func() { _ = c.Run(rctx) }()
	waitFor(t, "the restarted worker to reclaim its shard", func() bool { return len(c.Held()) == 1 })
	if took := time.Since(started); took > 30*time.Second {
		t.Errorf("reclaimed after %v: the old lease expired first", took)
	}
	if c.owner != "w" {
		t.Errorf("identity %q, want w (its predecessor is dead)", c.owner)
	}
	if v := rdb.Get(ctx, c.leaseKey(0)).Val(); v != "w:8" {
		t.Errorf("lease %q, want w:8 (a new epoch fences the predecessor)", v)
	}
}
