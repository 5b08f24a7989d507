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

//go:embed testdata/ready_entry.lua
var readyEntryTestLua string

// TestReadyEntry: ready_entry, evaluate's short way to journal a ready,
// stores the entry byte for byte as synth does, and declines (synth then
// runs) when its case is not the common one.
func TestReadyEntry(t *testing.T) {
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 1})
	s := keyspace.JournalShard(prefix, 0)
	script := redis.NewScript(keyspace.Join(journal.AppendLua, trackerLua, readyEntryTestLua))
	const sha = "0123456789abcdef0123456789abcdef01234567"
	for _, c := range []struct {
		repo, head, title, session string
		fast                       bool
		now                        string // "" for an RFC 3339 one
	}{
		{"acme/api", sha, "Add feature", "", true, ""},
		{"acme/api", sha, "Add feature", "s-1", true, ""},
		{"acme/api", sha, `say "hi" \ and / ready: x (acme/api)`, "", true, ""},
		{"acme/api", sha, "x (acme/api)", "", true, ""},
		{"acme/api", sha, "PR", "", true, ""},
		{"acme/api", sha, "7", "", true, ""},
		{"acme/api", sha, "ready", "", true, ""},
		{"acme/api", sha, " (", "", true, ""},
		{"acme/api", sha, "", "", true, ""},
		{"acme/api", sha, "tab\there ✓ é <&>", "", true, ""},
		{"Org.x/re_po-1", sha, "dots", "", true, ""},
		{"acme/api", sha, "a time cjson escapes", "", true, `2026/12/06 "06:00"`},
		{"acme/api", sha, "multi\nline", "", false, ""},
		{"acme/api", sha, "carriage\rreturn", "", false, ""},
		{"acme/api", "abc123", "short head", "", false, ""},
		{"acme/api", "0123456789ABCDEF0123456789abcdef0123456z", "not hex", "", false, ""},
		{"acme/a+pi", sha, "a repository wg_entry writes as JSON", "", false, ""},
	} {
		now := c.now
		if now == "" {
			now = "2026-12-06T06:00:00.123456789Z"
		}
		args := append(j.AppendArgs(), s.Tag(), "acme", c.repo, 7, c.head, c.title, c.session, now)
		got, err := script.Run(context.Background(), rdb, []string{s.Journal()}, args...).StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !c.fast && got[0] != "":
			t.Errorf("%q at %q: ready_entry wrote %q, want it to decline", c.title, c.head, got[0])
		case c.fast && got[0] != got[1]:
			t.Errorf("%q at %q: ready_entry wrote\n%q\nsynth\n%q", c.title, c.head, got[0], got[1])
		}
	}
}
