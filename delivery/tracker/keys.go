package tracker

import "github.com/wakegate/wakegate/delivery/keyspace"

// Key builders, the Go side of the layout tracker.lua documents. Every key
// of a repository is under the hash tag of its journal shard, so the
// scripts that update the tracker and journal what it derives run in one
// cluster slot.

func (t *Tracker) shardOf(repo string) int { return t.j.Shard("github:" + repo) }

func prKey(tag, repo string, n int) string { return keyspace.Shard(tag).PR(repo, n) }

func reviewsKey(tag, repo string, n int) string { return keyspace.Shard(tag).Reviews(repo, n) }

func checksKey(tag, repo, sha string) string { return keyspace.Shard(tag).Checks(repo, sha) }

func settleKey(tag string) string { return keyspace.Shard(tag).Settle() }
