package journal_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/delivery/redistest"
)

//go:embed testdata/entry_loop.lua
var entryLoopLua string

// BenchmarkEntryLua: Redis's time to render a delivery's two events
// (pull_request.opened, 28 KB example, and its ready) as the PR tracker
// wrote them before (JSON, wg_json) and as compact entries (wg_entry), in
// a loop of 1,000 inside one script call so that the script call itself
// weighs nothing; ns/op is per delivery:
// go test -run '^$' -bench EntryLua ./delivery/journal
func BenchmarkEntryLua(b *testing.B) {
	ctx := context.Background()
	rdb, prefix := redistest.New(b)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 1})
	script := redis.NewScript(keyspace.Join(journal.AppendLua, entryLoopLua))
	pr := func(id, typ, tm, summary, data string) string {
		in, _ := json.Marshal(luaEvent{ID: id, Source: "//github.com/Codertocat/Hello-World", Type: typ,
			Subject: "github:Codertocat/Hello-World#123456", Time: tm, Priority: "attention", Summary: summary, Data: data})
		return string(in)
	}
	opened := pr("72d3162e-cc78-11e3-81ab-4c9367dc0958", "github.pull_request.opened", "2019-05-15T15:20:33Z",
		"PR #123456 opened: Update the README with new information. (Codertocat/Hello-World)",
		`{"repo":"Codertocat/Hello-World","number":123456,"action":"opened","title":"Update the README with new information.","url":"https://github.com/Codertocat/Hello-World/pull/123456","author":"Codertocat","head":"ec26c3e57ca3a959ca5aad62de7213c562f8c821","base":"master","state":"open","draft":false,"merged":false,"labels":["bug"]}`)
	ready := pr("pr/123456/ready/ec26c3e57ca3a959ca5aad62de7213c562f8c821", "github.pull_request.ready", "2026-12-05T03:35:46.137549154Z",
		"PR #123456 ready: Update the README with new information. (Codertocat/Hello-World)",
		`{"repo":"Codertocat\/Hello-World","title":"Update the README with new information.","head":"ec26c3e57ca3a959ca5aad62de7213c562f8c821","url":"https:\/\/github.com\/Codertocat\/Hello-World\/pull\/123456","number":123456}`)
	for _, form := range []string{"json", "entry"} {
		b.Run(form, func(b *testing.B) {
			var bytes int64
			for b.Loop() {
				n, err := script.Run(ctx, rdb, []string{j.StreamKey(0)}, opened, ready, 1000, form).Int64()
				if err != nil {
					b.Fatal(err)
				}
				bytes = n / 1000
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/delivery")
			b.ReportMetric(float64(bytes), "B/delivery")
		})
	}
}

// The entries of a pull_request.opened delivery and its ready, as the PR
// tracker wrote them before the compact entry (JSON) and as it writes
// them now (docs/design.md §14 "Journal entries").
var benchEntries = map[string][2]string{
	"json": {
		`{"id":"72d3162e-cc78-11e3-81ab-4c9367dc0958","source":"\/\/github.com\/Codertocat\/Hello-World","type":"github.pull_request.opened","subject":"github:Codertocat\/Hello-World#2","time":"2019-05-15T15:20:33Z","priority":"attention","summary":"PR #2 opened: Update the README with new information. (Codertocat\/Hello-World)","data":{"repo":"Codertocat/Hello-World","number":2,"action":"opened","title":"Update the README with new information.","url":"https://github.com/Codertocat/Hello-World/pull/2","author":"Codertocat","head":"ec26c3e57ca3a959ca5aad62de7213c562f8c821","base":"master","state":"open","draft":false,"merged":false,"labels":["bug"]}}`,
		`{"id":"pr\/2\/ready\/ec26c3e57ca3a959ca5aad62de7213c562f8c821","source":"\/\/github.com\/Codertocat\/Hello-World","type":"github.pull_request.ready","subject":"github:Codertocat\/Hello-World#2","time":"2026-12-05T03:35:46.137549154Z","priority":"attention","summary":"PR #2 ready: Update the README with new information. (Codertocat\/Hello-World)","data":{"repo":"Codertocat\/Hello-World","title":"Update the README with new information.","head":"ec26c3e57ca3a959ca5aad62de7213c562f8c821","url":"https:\/\/github.com\/Codertocat\/Hello-World\/pull\/2","number":2}}`,
	},
	"compact": {
		"\x01Codertocat/Hello-World\x00Update the README with new information.\x00\x00\x05\"72d3162e-cc78-11e3-81ab-4c9367dc0958\"\x06\aopened\"\b\x02#2\"\v2019-05-15T15:20:33Z\"\f\x10PR #2 opened: \x04 (\x03)\"\x11{\"repo\":\"\x02\",\"number\":2,\"action\":\"opened\",\"title\":\"\x04\",\x13\x02/pull/2\",\"author\":\"Codertocat\",\"head\":\"ec26c3e57ca3a959ca5aad62de7213c562f8c821\",\"base\":\"master\",\"state\":\"open\",\x15\"bug\"]}}",
		"\x01Codertocat/Hello-World\x00Update the README with new information.\x00ec26c3e57ca3a959ca5aad62de7213c562f8c821\x00\x05\"pr\\/2\\/ready\\/\x01\"\x06\aready\"\b\x02#2\"\v2026-12-05T03:35:46.137549154Z\"\f\x10PR #2 ready: \x04 (\x03)\"\x11{\"repo\":\"\x03\",\"title\":\"\x04\",\"head\":\"\x01\",\x14\x03\\/pull\\/2\",\"number\":2}}",
	},
}

// BenchmarkDecode: decoding a delivery's two entries, in the JSON form
// and the compact one (every router and the health feed decode every
// entry): go test -run '^$' -bench Decode -benchmem ./delivery/journal
func BenchmarkDecode(b *testing.B) {
	for _, form := range []string{"json", "compact"} {
		b.Run(form, func(b *testing.B) {
			ms := []redis.XMessage{
				{ID: "1796441022278-0", Values: map[string]any{"e": benchEntries[form][0], "w": "default"}},
				{ID: "1796441022410-0", Values: map[string]any{"e": benchEntries[form][1], "w": "default"}},
			}
			b.ReportAllocs()
			for b.Loop() {
				for _, m := range ms {
					if _, err := journal.Decode(2, m); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestBenchEntriesAgree: the two forms of BenchmarkDecode decode alike.
func TestBenchEntriesAgree(t *testing.T) {
	for i := range 2 {
		a, err1 := journal.Decode(0, redis.XMessage{ID: "1-0", Values: map[string]any{"e": benchEntries["json"][i], "w": "w"}})
		c, err2 := journal.Decode(0, redis.XMessage{ID: "1-0", Values: map[string]any{"e": benchEntries["compact"][i], "w": "w"}})
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		ja, _ := a.MarshalJSON()
		jc, _ := c.MarshalJSON()
		if string(ja) != string(jc) {
			t.Errorf("entry %d:\n%s\n%s", i, ja, jc)
		}
	}
}
