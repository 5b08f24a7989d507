package event

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bytedance/sonic"
)

// Lineage is one string attribute (docs/design.md §2): the ancestors'
// ids, nearest first, single spaces; the stored array form still reads.
func TestLineageIsOneString(t *testing.T) {
	e := Event{SpecVersion: SpecVersion, ID: "1", Source: "//x", Type: "session.spawned",
		Time: time.Unix(0, 0).UTC(), Workspace: "ws", Lineage: Lineage{"parent", "grand"}}
	b, err := json.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"lineage":"parent grand"`) {
		t.Fatalf("lineage not one string: %s", b)
	}
	for _, raw := range []string{
		string(b),
		`{"specversion":"1.0","id":"1","lineage":["parent","grand"]}`, // stored before the change
	} {
		var got Event
		if err := json.Unmarshal([]byte(raw), &got); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if !reflect.DeepEqual(got.Lineage, Lineage{"parent", "grand"}) {
			t.Errorf("%s: lineage %q", raw, got.Lineage)
		}
		var viaSonic Event
		if err := sonic.ConfigStd.UnmarshalFromString(raw, &viaSonic); err != nil || !reflect.DeepEqual(viaSonic.Lineage, got.Lineage) {
			t.Errorf("sonic %s: %q %v", raw, viaSonic.Lineage, err)
		}
	}
	old := []byte(`{"specversion":"1.0","id":"1","lineage":["a","b"],"data":{"x":1}}`)
	if c := string(Canonical(old)); !strings.Contains(c, `"lineage":"a b"`) || !strings.Contains(c, `"data":{"x":1}`) {
		t.Errorf("Canonical: %s", c)
	}
	e.Lineage = nil
	if b, _ := json.Marshal(e); strings.Contains(string(b), "lineage") {
		t.Errorf("empty lineage written: %s", b)
	}
}

// Extension attributes and binary data survive a round trip beside the
// other attributes.
func TestExtensionsAndBinaryRoundTrip(t *testing.T) {
	e := Event{SpecVersion: SpecVersion, ID: "1", Source: "//x", Type: "a.b", Time: time.Unix(0, 0).UTC(),
		Workspace: "ws", DataContentType: "application/octet-stream", DataBase64: []byte("hello"),
		Extensions: map[string]json.RawMessage{"traceparent": json.RawMessage(`"00-abc-def-01"`), "count": json.RawMessage(`3`)}}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{`"data_base64":"aGVsbG8="`, `"count":3,"traceparent":"00-abc-def-01"}`} {
		if !strings.Contains(s, want) {
			t.Errorf("%s lacks %s", s, want)
		}
	}
	var got Event
	if err := sonic.ConfigStd.UnmarshalFromString(s, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, e)
	}
	if got.Extension("traceparent") != "00-abc-def-01" || got.Extension("count") != "" {
		t.Errorf("Extension: %q %q", got.Extension("traceparent"), got.Extension("count"))
	}
}

func TestMembers(t *testing.T) {
	var names, vals []string
	err := Members([]byte(` { "a" : "x\"}" , "b":{"c":[1,"]"]},"d":true,"e":-1.5e3 } `), func(n string, v []byte) error {
		names, vals = append(names, n), append(vals, string(v))
		return nil
	})
	if err != nil || strings.Join(names, ",") != "a,b,d,e" || strings.Join(vals, "|") != `"x\"}"|{"c":[1,"]"]}|true|-1.5e3` {
		t.Fatalf("Members: %v %q %q", err, names, vals)
	}
	if Members([]byte(`[1]`), func(string, []byte) error { return nil }) == nil {
		t.Error("array accepted")
	}
}
