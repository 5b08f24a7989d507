package tracker

import (
	"context"
	_ "embed"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/delivery/redistest"
)

//go:embed testdata/keys.lua
var keysTestLua string

// TestLuaKeysAreKeyspaces: the names tracker.lua and journal.lua build
// from a shard's tag are keyspace.Shard's, which the Go side reads
// (docs/design.md §14: one layout).
func TestLuaKeysAreKeyspaces(t *testing.T) {
	rdb, prefix := redistest.New(t)
	s := keyspace.JournalShard(prefix, 3)
	const repo, n, sha, guid, source, id, ws, subject = "acme/api", 12345678901, "0123abcd", "g-1", "github:acme/api", "d-1", "acme", "pr:acme/api#7"
	script := redis.NewScript(keyspace.Join(journal.AppendLua, trackerLua, keysTestLua))
	got, err := script.Run(context.Background(), rdb, []string{s.Journal()}, s.Tag(), repo, n, sha, guid, source, id, ws, subject).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{s.PR(repo, n), s.Reviews(repo, n), s.Index(repo, sha), s.Checks(repo, sha), s.Settle(), s.Resolved(guid),
		s.Eid(source, id), s.Term(ws, subject)}
	if !slices.Equal(got, want) {
		t.Fatalf("Lua builds\n%q\nkeyspace builds\n%q", got, want)
	}
}
