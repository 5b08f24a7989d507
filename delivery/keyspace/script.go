package keyspace

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Script is a Lua script of wakegate: a go-redis Script built from
// embedded .lua files and registered under the path of its entry file,
// so tests can find every script (docs/design.md §14, "Lua scripts").
//
// In a test binary (testing.Testing) every call checks that its KEYS hash
// to one cluster slot, as Redis Cluster would (CROSSSLOT), and records
// that the script ran; see TestMain.
type Script struct {
	*redis.Script
	// Name is the path of the script's entry file from the module's
	// root, e.g. "delivery/inbox/deliver.lua".
	Name string
	// Parts are the sources joined, in order: the shared functions the
	// script includes, then its entry file.
	Parts []string
}

var registry = struct {
	sync.Mutex
	scripts map[string]*Script
	ran     map[string]int
}{scripts: map[string]*Script{}, ran: map[string]int{}}

// NewScript joins parts (shared functions first, the entry file last) into
// one script and registers it under name, the entry file's path from the
// module's root. A name registered twice panics.
func NewScript(name string, parts ...string) *Script {
	if len(parts) == 0 || !strings.HasSuffix(name, ".lua") {
		panic("keyspace.NewScript: " + name + ": want a .lua name and its sources")
	}
	s := &Script{Script: redis.NewScript(Join(parts...)), Name: name, Parts: parts}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.scripts[name]; dup {
		panic("keyspace.NewScript: " + name + " registered twice")
	}
	registry.scripts[name] = s
	return s
}

// Join joins Lua sources, each ending in a newline.
func Join(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p)
		if !strings.HasSuffix(p, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Scripts answers every registered script, by name.
func Scripts() []*Script {
	registry.Lock()
	defer registry.Unlock()
	out := make([]*Script, 0, len(registry.scripts))
	for _, s := range registry.scripts {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// check is run before every call in a test binary: KEYS that span slots
// fail the call as Redis Cluster would.
func (s *Script) check(ctx context.Context, keys []string) *redis.Cmd {
	if !testing.Testing() {
		return nil
	}
	if k, ok := SameSlot(keys); !ok {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(fmt.Errorf("CROSSSLOT %s: KEYS %q: %q is in slot %d, %q in slot %d",
			s.Name, keys, keys[0], Slot(keys[0]), k, Slot(k)))
		return cmd
	}
	registry.Lock()
	registry.ran[s.Name]++
	registry.Unlock()
	return nil
}

// Run runs the script (EVALSHA, then EVAL when Redis does not have it).
func (s *Script) Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	if cmd := s.check(ctx, keys); cmd != nil {
		return cmd
	}
	return s.Script.Run(ctx, c, keys, args...)
}

// RunRO is Run with EVALSHA_RO/EVAL_RO.
func (s *Script) RunRO(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	if cmd := s.check(ctx, keys); cmd != nil {
		return cmd
	}
	return s.Script.RunRO(ctx, c, keys, args...)
}

// Eval runs the script with EVAL.
func (s *Script) Eval(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	if cmd := s.check(ctx, keys); cmd != nil {
		return cmd
	}
	return s.Script.Eval(ctx, c, keys, args...)
}

// EvalRO runs the script with EVAL_RO.
func (s *Script) EvalRO(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	if cmd := s.check(ctx, keys); cmd != nil {
		return cmd
	}
	return s.Script.EvalRO(ctx, c, keys, args...)
}

// EvalSha runs the script with EVALSHA (in a pipeline, say).
func (s *Script) EvalSha(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	if cmd := s.check(ctx, keys); cmd != nil {
		return cmd
	}
	return s.Script.EvalSha(ctx, c, keys, args...)
}

// EvalShaRO runs the script with EVALSHA_RO.
func (s *Script) EvalShaRO(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	if cmd := s.check(ctx, keys); cmd != nil {
		return cmd
	}
	return s.Script.EvalShaRO(ctx, c, keys, args...)
}
