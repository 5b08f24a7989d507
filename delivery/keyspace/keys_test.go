package keyspace

import "testing"

// TestKeyStrings: the builders answer the strings deployed data is stored
// under (docs/design.md §14); a change here is a data-format change and
// needs an upgrade note in docs/operations.md.
func TestKeyStrings(t *testing.T) {
	j := JournalShard("", 7)
	in := Ingest("p", 3)
	for got, want := range map[string]string{
		j.Journal():                 "wg:{j7}:journal",
		j.Eid("s", "i"):             "wg:{j7}:eid:592fbc470baa6b3a971abfd043f9199cfa0d6071",
		j.Markers(1796428800, "59"): "wg:{j7}:em:1796428800:59",
		j.MarkerEpoch():             "wg:{j7}:emepoch",
		j.Marks().Count(1796428800) + j.MarksEpoch():         "wg:{j7}:lh:1796428800wg:{j7}:lhepoch",
		j.Marks().Bucket(1796428800, 0):                      "wg:{j7}:lh:1796428800:0",
		j.Marks().Bucket(1796428800, 37):                     "wg:{j7}:lh:1796428800:37",
		in.BodyMarks().Bucket(60, 12) + in.BodyMarksEpoch():  "p:{in3}:lb:60:12p:{in3}:lbepoch",
		j.RedeliveryClaim("s", "i"):                          "wg:{j7}:eid:592fbc470baa6b3a971abfd043f9199cfa0d6071:claim",
		j.Term("ws", "pr:o/r#1"):                             "wg:{j7}:term:ws:pr:o/r#1",
		j.Lease() + j.Epoch():                                "wg:{j7}:leasewg:{j7}:epoch",
		j.Cursor() + j.Ledger():                              "wg:{j7}:cursorwg:{j7}:ledger",
		j.RoutePoison() + j.Batches():                        "wg:{j7}:route:poisonwg:{j7}:batches",
		j.Party("ws", "session:a"):                           "wg:{j7}:party:ws:session:a",
		j.Pause("ws", "session:a"):                           "wg:{j7}:pause:ws:session:a",
		j.Reviews("o/r", 12):                                 "wg:{j7}:pr:o/r#12:reviews",
		j.Index("o/r", "ab") + j.Checks("o/r", "ab"):         "wg:{j7}:sha:o/r@abwg:{j7}:checks:o/r@ab",
		j.Settle() + j.Resolved("g"):                         "wg:{j7}:settlewg:{j7}:resolved:g",
		in.Stream() + in.Poison():                            "p:{in3}:ingestp:{in3}:poison",
		in.Dedup("h", "g") + in.Body("b") + in.Raw("g", "h"): "p:{in3}:dd:h:gp:{in3}:bh:bp:{in3}:raw:g:h",
		in.BodyMarker("c") + in.Object("o"):                  "p:{in3}:bm:cp:{in3}:obj:o",
		Subscriptions("p", "ws"):                             "p:{sub:ws}",
		Supervision("p", "ws"):                               "p:{sup:ws}",
		Health("p", "ws"):                                    "p:{hl:ws}",
		Recipient("p", "ws", "human:x"):                      "p:{p:ib:ws:human:x}",
		Quiet("", "ws"):                                      "wg:{wg:hq:ws}",
		Endpoint("p", "ws", "human:x"):                       "p:{p:push:ws:human:x}",
		DeadLetters("p"):                                     "p:{p:push:dead}",
		RateLimit("p", "ws"):                                 "p:{p:rl:ws}",
		RouteWorkers("p") + SubscriptionExpiry("p"):          "p:route:workersp:sub:expiry",
		PushSent("p", "i") + PushBody("p", "i") + PushQueue("p", 0) + PushQueue("p", 3): "p:push:sent:ip:push:body:ip:pushp:push:3",
		ScheduleClaim("p", "trim", 60000):                                               "p:sched:trim:60000",
		HealthPos("p") + HealthWorkspaces("p") + GitHubApp("p"):                         "p:health:posp:health:wsp:ghapp",
		JournalNotify("p") + InboxNotify("p"):                                           "p:notify:journal:p:ib:notify:",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}
