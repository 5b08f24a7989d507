package holds

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/providers/event"
)

// TestItemJSON: an item's hand-written JSON is json.Marshal's, byte for
// byte when its event has nothing json.Marshal would escape again, and
// decodes to the same item when it has (<, >, &, U+2028 and U+2029 in the
// event are written as the event's own JSON has them).
func TestItemJSON(t *testing.T) {
	at := time.Date(2026, 12, 6, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	for _, e := range []*event.Event{
		{SpecVersion: event.SpecVersion, ID: "1", Source: "//t", Type: "github.pull_request.closed", Subject: "github:o/r#1",
			Workspace: "acme", Time: at, Data: []byte(`{"merged": true, "n": 1}`)},
		{SpecVersion: event.SpecVersion, ID: "id \"2\"\n", Source: "//t", Type: "session.turn_ended", Subject: "session:s",
			Workspace: "acme", Time: at, Summary: "é \u2028 tab\t", Priority: event.Critical, Data: []byte(`{"merged":false}`)},
		{SpecVersion: event.SpecVersion, ID: "3", Source: "//t", Type: "session.awaiting_input", Subject: "session:s",
			Workspace: "acme", Time: at, Summary: "a <b> & c", Data: []byte(`{"html":"<i>"}`)},
	} {
		for _, res := range []inbox.Result{{}, {Seq: 42, Kind: inbox.KindWake}} {
			it, err := itemOf(e, res, at, "")
			if err != nil {
				t.Fatal(err)
			}
			got := it.appendJSON(nil)
			want, err := json.Marshal(it)
			if err != nil {
				t.Fatal(err)
			}
			var back Item
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("%s: %v", got, err)
			}
			if !reflect.DeepEqual(compact(t, back), compact(t, it)) {
				t.Errorf("%s decodes to %+v, want %+v", got, back, it)
			}
			if !bytes.ContainsAny(it.Event, "<>&\u2028\u2029") && !bytes.Equal(got, want) {
				t.Errorf("appendJSON = %s\njson.Marshal = %s", got, want)
			}
			tail, err := ItemTail(e, at, "")
			if err != nil {
				t.Fatal(err)
			}
			if head := []byte(`{"seq":0,"kind":"",`); res.Seq == 0 && !bytes.Equal(got, append(head, tail...)) {
				t.Errorf("ItemTail %s is not the item's JSON %s after its seq and kind", tail, got)
			}
		}
	}
}

// compact is it with its event compacted and its time in UTC, as a decode
// compares them.
func compact(t *testing.T, it Item) Item {
	var buf bytes.Buffer
	if err := json.Compact(&buf, it.Event); err != nil {
		t.Fatal(err)
	}
	var ev any
	if err := json.Unmarshal(buf.Bytes(), &ev); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(ev)
	it.Event, it.At = b, it.At.UTC()
	return it
}
