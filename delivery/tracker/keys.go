package tracker

import "strconv"

// Key builders, the Go side of the layout tracker.lua documents. Every key
// of a repository is under the hash tag of its journal shard, so the
// scripts that update the tracker and journal what it derives run in one
// cluster slot.

func (t *Tracker) shardOf(repo string) int { return t.j.Shard("github:" + repo) }

func prKey(tag, repo string, n int) string {
	return tag + ":pr:" + repo + "#" + strconv.Itoa(n)
}

func reviewsKey(tag, repo string, n int) string { return prKey(tag, repo, n) + ":reviews" }

func checksKey(tag, repo, sha string) string { return tag + ":checks:" + repo + "@" + sha }

func settleKey(tag string) string { return tag + ":settle" }
