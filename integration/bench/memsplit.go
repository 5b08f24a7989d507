package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// MemorySplit sums MEMORY USAGE (SAMPLES 0: every element) over every key
// of the deployment's prefix, by category: the key's first segment after
// its hash tag (raw, bm, obj, ingest, journal, em, pr, sha, settle, …).
// Keys of the bare handler's baseline are left out.
func (s *System) MemorySplit(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	var keys []string
	iter := s.Redis.Scan(ctx, 0, s.Prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	for len(keys) > 0 {
		batch := keys[:min(len(keys), 1000)]
		keys = keys[len(batch):]
		pipe := s.Redis.Pipeline()
		for _, k := range batch {
			pipe.MemoryUsage(ctx, k, 0)
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil {
			return nil, fmt.Errorf("memory usage: %w", err)
		}
		for i, k := range batch {
			rest := k[len(s.Prefix)+1:]
			if _, after, ok := strings.Cut(rest, "}:"); ok && strings.HasPrefix(rest, "{") {
				rest = after
			}
			name, _, _ := strings.Cut(rest, ":")
			if name == "baseline" {
				continue
			}
			n, _ := cmds[i].(interface{ Val() int64 })
			if n != nil {
				out[name] += n.Val()
			}
		}
	}
	return out, nil
}

// formatSplit renders a split per item, largest first, with the categories
// under 1 B per item summed as "other".
func formatSplit(split map[string]int64, n int64) string {
	type cat struct {
		name string
		b    int64
	}
	var cats []cat
	var total, other int64
	for k, v := range split {
		total += v
		if float64(v)/float64(n) < 1 {
			other += v
			continue
		}
		cats = append(cats, cat{k, v})
	}
	sort.Slice(cats, func(i, j int) bool { return cats[i].b > cats[j].b })
	var b strings.Builder
	for _, c := range cats {
		fmt.Fprintf(&b, "%s %.0f, ", c.name, float64(c.b)/float64(n))
	}
	fmt.Fprintf(&b, "other %.0f; total %.0f B (MEMORY USAGE; used_memory also counts the TTL entries and the keyspace's tables)", float64(other)/float64(n), float64(total)/float64(n))
	return b.String()
}
