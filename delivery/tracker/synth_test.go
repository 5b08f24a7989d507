package tracker_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/github"
)

// TestSynthEntry: ready and checks_failed, whose data synth writes with
// the compact entry's tokens in place, are stored compact and read back
// with the data byte for byte as it was written before (cjson's JSON,
// '/' escaped), whatever the title holds and whether the head is a sha.
func TestSynthEntry(t *testing.T) {
	for _, c := range []struct{ title, head string }{
		{"Add feature", shaA},
		{`say "hi" \ and / ready: x (org/r)`, shaA},
		{"multi\nline title", "abc123"},
		{"", shaA},
	} {
		e := newEnv(t, tracker.Config{})
		e.applyGUID("g-open", e.pr("opened", 7, c.head, at(0), func(p *github.PRFact) { p.Title = c.title }))
		e.applyGUID("g-fail", e.run(c.head, "lint", github.ResultFail, at(5), 7))
		e.applyGUID("g-pass", e.run(c.head, "lint", github.ResultPass, at(10), 7))
		enc := func(s string) string { // as cjson writes it
			b, _ := json.Marshal(s)
			return strings.ReplaceAll(string(b), "/", `\/`)
		}
		common := `{"repo":` + enc(e.repo) + `,"number":7,"head":` + enc(c.head) + `,"title":` + enc(c.title) +
			`,"url":` + enc("https://github.com/"+e.repo+"/pull/7")
		for typ, want := range map[string]string{
			"github.pull_request.ready":         common + `}`,
			"github.pull_request.checks_failed": common + `,"failed":["lint"]}`,
		} {
			ev := e.wantCount(typ, 1)[0]
			if string(ev.Data) != want {
				t.Errorf("%q: %s data\n %s\nwant\n %s", c.title, typ, ev.Data, want)
			}
			shard, sid, _ := journal.ParseSeq(ev.Seq)
			msgs, err := e.rdb.XRange(e.ctx, e.j.StreamKey(shard), sid, sid).Result()
			if err != nil || len(msgs) != 1 {
				t.Fatalf("entry %s: %v", ev.Seq, err)
			}
			raw, _ := msgs[0].Values["e"].(string)
			if raw[0] != 0x01 || strings.Contains(raw, `"repo"`) {
				t.Errorf("%s stored as %q, want the compact entry with its tokens", typ, raw)
			}
		}
	}
}

// TestOwnEventOnce: a pull_request delivery's own event, appended without
// a marker lookup while its snapshot is newer than the PR's, is still
// journaled once whatever order its deliveries are applied and re-applied
// in (docs/design.md §2).
func TestOwnEventOnce(t *testing.T) {
	e := newEnv(t, tracker.Config{})
	first := e.pr("opened", 3, shaA, at(0))
	edit := e.pr("edited", 3, shaA, at(5))
	late := e.pr("labeled", 3, shaA, at(2))
	for _, step := range []struct {
		guid string
		f    *github.Fact
	}{{"g1", first}, {"g2", edit}, {"g1", first}, {"g3", late}, {"g2", edit}, {"g3", late}, {"g1", first}} {
		e.applyGUID(step.guid, step.f)
	}
	for _, typ := range []string{"github.pull_request.opened", "github.pull_request.edited", "github.pull_request.labeled"} {
		e.wantCount(typ, 1)
	}
}
