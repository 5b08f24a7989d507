package route

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wakegate/wakegate/delivery/keyspace"
)

// A worker's identity (docs/design.md §9) names it among the route
// consumers: its entry in <prefix>:route:workers and the owner part of the
// shard leases it holds. It is stable across restarts (WAKEGATE_WORKER_ID,
// else the host name, which is a pod's name), so a restarted worker finds
// its dead predecessor's leases under its own name and reclaims them at
// once instead of waiting for them to expire. Two live processes must
// never share one: each claims it in Redis, in a record holding its host,
// pid and a nonce, which it refreshes with its heartbeat. A process finds
// a name free when nobody holds it, when its holder has not refreshed it
// for a lease TTL, or when its holder ran on this host under a pid that
// is no longer alive; otherwise it tries the name with the next suffix
// (name-1, name-2, …).

// identityTTL is how long an identity record outlives its last refresh.
const identityTTL = time.Minute

// claimIdentityScript takes a worker identity when it is free. Its KEYS,
// ARGV and reply are in claim_identity.lua.
//
//go:embed claim_identity.lua
var claimIdentityLua string

var claimIdentityScript = keyspace.NewScript("workers/route/claim_identity.lua", claimIdentityLua)

// identity is this process's claim on a worker identity.
type identity struct {
	base  string // WAKEGATE_WORKER_ID or the host name
	name  string // base, or base-N: the identity held
	value string // "host pid nonce", the record's content
	host  string
	pid   int
}

func newIdentity(base string) *identity {
	host, _ := os.Hostname()
	if host == "" {
		host = "worker"
	}
	if base == "" {
		base = host
	}
	// The owner part of a lease ends at its first ':'; the ledger and
	// logs read it plainly.
	base = strings.Map(func(r rune) rune {
		if r == ':' || r <= ' ' {
			return '-'
		}
		return r
	}, base)
	var b [6]byte
	_, _ = rand.Read(b[:])
	pid := os.Getpid()
	return &identity{base: base, host: host, pid: pid,
		value: host + " " + strconv.Itoa(pid) + " " + hex.EncodeToString(b[:])}
}

// recordKey is where the identity name is claimed.
func (c *Consumer) recordKey(name string) string {
	return keyspace.RouteWorker(c.j.Config().Prefix, name)
}

// claim takes the first free name of base, base-1, base-2, ….
func (c *Consumer) claim(ctx context.Context) (string, error) {
	id := c.id
	for n := 0; n < 1000; n++ {
		name := id.base
		if n > 0 {
			name += "-" + strconv.Itoa(n)
		}
		holder, err := c.claimName(ctx, name, "")
		if err != nil {
			return "", err
		}
		if holder != "" && id.deadHere(holder) {
			// Its holder ran on this host and is gone (a SIGKILL, a
			// crash): the name is ours at once.
			if holder, err = c.claimName(ctx, name, holder); err != nil {
				return "", err
			}
		}
		if holder == "" {
			id.name = name
			return name, nil
		}
	}
	return "", errors.New("no free worker identity among 1000 suffixes")
}

// claimName claims name; it returns "" when the name is now this
// process's, else its holder's value.
func (c *Consumer) claimName(ctx context.Context, name, dead string) (string, error) {
	res, err := claimIdentityScript.Run(ctx, c.rdb, []string{c.recordKey(name)}, c.id.value,
		identityTTL.Milliseconds(), c.cfg.LeaseTTL.Milliseconds(), dead).Text()
	if err != nil {
		return "", fmt.Errorf("claim worker identity %s: %w", name, err)
	}
	if res == "OK" {
		return "", nil
	}
	return res, nil
}

// deadHere reports whether holder ("host pid nonce") ran on this host
// under another pid that no longer runs.
func (id *identity) deadHere(holder string) bool {
	f := strings.Fields(holder)
	if len(f) != 3 || f[0] != id.host {
		return false
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil || pid <= 0 || pid == id.pid {
		return false // the same pid: another pid namespace, or reused; wait for it to go stale
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
