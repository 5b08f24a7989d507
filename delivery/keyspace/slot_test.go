package keyspace

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/redistest"
)

// TestSlot checks Slot against the values Redis answers to CLUSTER
// KEYSLOT (the vector of the Redis Cluster specification, and its hash
// tag examples).
func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":            12739, // CRC16/XMODEM("123456789") = 0x31C3
		"":                     0,
		"foo":                  12182,
		"{user1000}.following": Slot("user1000"),
		"foo{}{bar}":           Slot("foo{}{bar}"), // an empty tag: the whole key
		"foo{{bar}}zap":        Slot("{bar"),       // the tag is "{bar"
		"foo{bar}{zap}":        Slot("bar"),        // the first tag only
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if Slot("{user1000}.following") != Slot("{user1000}.followers") {
		t.Error("{user1000}.following and {user1000}.followers are in different slots")
	}
	if Slot("foo{}{bar}") == Slot("bar") {
		t.Error("foo{}{bar} hashed by its second tag")
	}
	if _, ok := SameSlot([]string{"wg:{j1}:journal", "wg:{j1}:eid:x", "wg:{j2}:journal"}); ok {
		t.Error("SameSlot: keys of {j1} and {j2} reported in one slot")
	}
	if k, ok := SameSlot([]string{"wg:{j1}:journal", "wg:{j1}:eid:x"}); !ok {
		t.Errorf("SameSlot: %q not in {j1}'s slot", k)
	}
}

// TestSlotAgainstRedisCluster compares Slot with CLUSTER KEYSLOT of a
// cluster-mode redis-server started here (as integration's cluster test
// does), over the vectors and the keys of wakegate's layout.
func TestSlotAgainstRedisCluster(t *testing.T) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("this test starts a cluster-mode redis-server: %v", err)
	}
	port := redistest.FreeClusterPort(t)
	dir := t.TempDir()
	cmd := exec.Command(server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
		"--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--dir", dir, "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Ping(ctx).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %d does not answer", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
	keys := []string{"123456789", "", "foo", "{user1000}.following", "{user1000}.followers", "foo{}{bar}",
		"foo{{bar}}zap", "foo{bar}{zap}", "{", "}", "{}", "a{b", "a}b{c}", "wg:{j3}:journal", "wg:{wg:ib:acme:session:s1}:n",
		"wg:{sup:acme}:ctl:s1", "wg:route:workers", "é{ü}"}
	for i := range 200 {
		keys = append(keys, fmt.Sprintf("wgt%x:{in%d}:raw:%d", i*7919, i%16, i))
	}
	for _, k := range keys {
		want, err := rdb.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
		}
		if got := Slot(k); int64(got) != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
		}
	}
}
