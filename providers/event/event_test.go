package event

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDefaultPriority(t *testing.T) {
	tests := []struct {
		typ, data string
		want      Priority
	}{
		{"session.turn_ended", `{"idle":true}`, Attention},
		{"session.turn_ended", `{"idle":false}`, Info},
		{"session.crashed", ``, Critical},
		{"message.sent", `{"blocker":true}`, Critical},
		{"message.sent", `{}`, Attention},
		{"github.pull_request_review.submitted", `{"state":"approved"}`, Attention},
		{"github.pull_request_review.submitted", `{"state":"commented"}`, Info},
		{"github.deployment_status", `{"state":"failure"}`, Attention},
		{"github.deployment_status", `{"state":"success"}`, Info},
		{"github.installation.created", ``, Info},
		{"custom.thing", `[1]`, Info},
		{"wakegate.anything", ``, Internal},
	}
	for _, tt := range tests {
		if got := DefaultPriority(tt.typ, json.RawMessage(tt.data)); got != tt.want {
			t.Errorf("DefaultPriority(%s, %s) = %s, want %s", tt.typ, tt.data, got, tt.want)
		}
	}
	if !Lookup("session.exited").Terminal || !Lookup("github.pull_request.closed").Terminal || Lookup("session.crashed").Terminal {
		t.Error("terminal column wrong")
	}
}

func TestParseParty(t *testing.T) {
	for _, ok := range []string{"session:abc", "human:ops", "session:a.b_c-1"} {
		if _, err := ParseParty(ok); err != nil {
			t.Errorf("ParseParty(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "abc", "robot:x", "session:", "session:a/b", "session:a\nb", "human:" + strings.Repeat("x", 129)} {
		if _, err := ParseParty(bad); err == nil {
			t.Errorf("ParseParty(%q) accepted", bad)
		}
	}
	if Party("session:abc").Session() != "abc" || Party("human:x").Session() != "" {
		t.Error("Session()")
	}
}

func TestShardKey(t *testing.T) {
	// Everything of one repository shares a shard; sessions are per workspace.
	same := []string{ShardKey("ws", "github:o/r#1"), ShardKey("ws", "github:o/r#2"), ShardKey("other", "github:o/r@abc")}
	for _, k := range same[1:] {
		if k != same[0] {
			t.Fatalf("repository subjects split: %v", same)
		}
	}
	if ShardKey("a", "session:x") == ShardKey("b", "session:x") {
		t.Fatal("session:x of two workspaces share a shard key")
	}
}
