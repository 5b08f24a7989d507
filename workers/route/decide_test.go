package route

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// The rules of docs/design.md §5, applied to snapshots: no Redis.

func sub(owner, delivery string) subscriptions.Subscription {
	return subscriptions.Subscription{Owner: owner, Delivery: delivery}
}

func edge(session, role, holder, scope string) supervision.Edge {
	return supervision.Edge{Session: session, Role: role, Holder: holder, Scope: scope}
}

// edges indexes es by their session.
func edges(es ...supervision.Edge) map[string][]supervision.Edge {
	out := map[string][]supervision.Edge{}
	for _, e := range es {
		out[e.Session] = append(out[e.Session], e)
	}
	return out
}

// sessionEvent is an event about session w1 (lineage: p1, then root),
// pushed by pusher ("" : by the server).
func sessionEvent(typ string, pr event.Priority, pusher string) *event.Event {
	src := event.ServerSource(ws)
	if pusher != "" {
		src += "/" + pusher
	}
	return &event.Event{Type: typ, Source: src, ID: "1", Workspace: ws, Subject: "session:w1",
		SessionID: "w1", Lineage: []string{"p1", "root"}, Priority: pr}
}

func message(from, to string) *event.Event {
	data, _ := json.Marshal(map[string]string{"source": from})
	return &event.Event{Type: "message.sent", Source: event.ServerSource(ws), ID: "m1", Workspace: ws,
		Subject: "session:" + to, SessionID: to, Priority: event.Attention, Data: data}
}

var prEvent = &event.Event{Type: "github.pull_request.checks_failed", Source: "//github/acme", ID: "9",
	Workspace: ws, Subject: "github:acme/app#7", Priority: event.Attention}

func TestDecide(t *testing.T) {
	chain := []string{"w1", "p1", "root"}
	via := func(v string) recipient { return recipient{via: v} }
	fallback := &supervision.Fallback{Party: "human:ops"}
	tests := []struct {
		name          string
		e             *event.Event
		s             snapshot
		want          map[string]recipient
		undeliverable bool
	}{
		// Subscribers.
		{name: "subscribers hear what they match, with their delivery mode",
			e: prEvent, s: snapshot{matches: []subscriptions.Subscription{sub("human:ana", "wake"), sub("session:w9", "inbox")}},
			want: map[string]recipient{"human:ana": {via: inbox.ViaSubscription, mode: "wake"},
				"session:w9": {via: inbox.ViaSubscription, mode: "inbox"}}},
		{name: "a GitHub event with no session and no subscriber is journaled only",
			e: prEvent, s: snapshot{settings: supervision.Settings{Fallback: fallback, DefaultController: "human:boss"}},
			want: map[string]recipient{}},
		{name: "the subject session hears about itself through its own subscription, as the waiter",
			e:    sessionEvent("session.blocked", event.Attention, ""),
			s:    snapshot{chain: chain, matches: []subscriptions.Subscription{sub("session:w1", "wake")}},
			want: map[string]recipient{"session:w1": {via: inbox.ViaSubscription, mode: "wake", waiter: true}}},

		// Observers.
		{name: "observers of the session, and of ancestors with scope subtree; not an ancestor's self-scoped observer",
			e: sessionEvent("session.blocked", event.Info, ""),
			s: snapshot{chain: chain, edges: edges(
				edge("w1", supervision.Observer, "human:own", supervision.ScopeSelf),
				edge("p1", supervision.Observer, "human:parent-self", supervision.ScopeSelf),
				edge("root", supervision.Observer, "human:root-tree", supervision.ScopeSubtree))},
			want: map[string]recipient{"human:own": via(inbox.ViaObserver), "human:root-tree": via(inbox.ViaObserver)}},
		{name: "an observer that also subscribes hears through its subscription",
			e: sessionEvent("session.blocked", event.Info, ""),
			s: snapshot{chain: chain, matches: []subscriptions.Subscription{sub("human:ana", "inbox")},
				edges: edges(edge("w1", supervision.Observer, "human:ana", supervision.ScopeSelf))},
			want: map[string]recipient{"human:ana": {via: inbox.ViaSubscription, mode: "inbox"}}},

		// The effective controller and its fallbacks.
		{name: "its own controller",
			e: sessionEvent("session.blocked", event.Attention, ""),
			s: snapshot{chain: chain, edges: edges(
				edge("w1", supervision.Controller, "session:p1", supervision.ScopeSelf),
				edge("root", supervision.Controller, "human:root", supervision.ScopeSubtree)),
				settings: supervision.Settings{DefaultController: "human:boss"}},
			want: map[string]recipient{"session:p1": via(inbox.ViaController)}},
		{name: "its own controller dead: the nearest ancestor's subtree controller",
			e: sessionEvent("session.blocked", event.Attention, ""),
			s: snapshot{chain: chain, edges: edges(
				edge("w1", supervision.Controller, "session:dead", supervision.ScopeSelf),
				edge("p1", supervision.Controller, "session:p1-self", supervision.ScopeSelf),
				edge("root", supervision.Controller, "human:root", supervision.ScopeSubtree)),
				dead: map[string]bool{"session:dead": true}},
			want: map[string]recipient{"human:root": via(inbox.ViaController)}},
		{name: "a dead ancestor controller: keep climbing",
			e: sessionEvent("session.blocked", event.Attention, ""),
			s: snapshot{chain: chain, edges: edges(
				edge("p1", supervision.Controller, "session:p1", supervision.ScopeSubtree),
				edge("root", supervision.Controller, "human:root", supervision.ScopeSubtree)),
				dead: map[string]bool{"session:p1": true}},
			want: map[string]recipient{"human:root": via(inbox.ViaController)}},
		{name: "no live controller up the lineage: the workspace default controller",
			e: sessionEvent("session.blocked", event.Info, ""),
			s: snapshot{chain: chain, edges: edges(edge("w1", supervision.Controller, "session:dead", supervision.ScopeSelf)),
				dead: map[string]bool{"session:dead": true}, settings: supervision.Settings{DefaultController: "human:boss"}},
			want: map[string]recipient{"human:boss": via(inbox.ViaController)}},
		{name: "the default controller dead: no controller",
			e: sessionEvent("session.blocked", event.Info, ""),
			s: snapshot{chain: chain, dead: map[string]bool{"human:boss": true},
				settings: supervision.Settings{DefaultController: "human:boss"}},
			want: map[string]recipient{}},
		{name: "a controller that subscribes hears through its subscription, as the controller (it escalates)",
			e: sessionEvent("session.blocked", event.Attention, ""),
			s: snapshot{chain: chain, matches: []subscriptions.Subscription{sub("session:p1", "wake")},
				edges: edges(edge("w1", supervision.Controller, "session:p1", supervision.ScopeSelf))},
			want: map[string]recipient{"session:p1": {via: inbox.ViaSubscription, mode: "wake", controller: true}}},
		{name: "a controller that also observes hears as the controller",
			e: sessionEvent("session.blocked", event.Attention, ""),
			s: snapshot{chain: chain, edges: edges(
				edge("w1", supervision.Observer, "human:ana", supervision.ScopeSelf),
				edge("p1", supervision.Controller, "human:ana", supervision.ScopeSubtree))},
			want: map[string]recipient{"human:ana": via(inbox.ViaController)}},
		{name: "an event about no session has no controller",
			e: prEvent, s: snapshot{edges: edges(edge("w1", supervision.Controller, "human:x", supervision.ScopeSelf)),
				settings: supervision.Settings{DefaultController: "human:boss"}},
			want: map[string]recipient{}},

		// Exclusions.
		{name: "the party that caused the event does not hear it",
			e: sessionEvent("session.blocked", event.Info, "session:p1"),
			s: snapshot{chain: chain, matches: []subscriptions.Subscription{sub("session:p1", "wake"), sub("human:ana", "wake")},
				edges: edges(edge("w1", supervision.Controller, "session:p1", supervision.ScopeSelf))},
			want: map[string]recipient{"human:ana": {via: inbox.ViaSubscription, mode: "wake"}}},
		{name: "the subject session does not hear about itself as controller or observer",
			e: sessionEvent("session.blocked", event.Info, ""),
			s: snapshot{chain: chain, edges: edges(edge("w1", supervision.Observer, "session:w1", supervision.ScopeSelf)),
				settings: supervision.Settings{DefaultController: "session:w1"}},
			want: map[string]recipient{}},

		// message.sent.
		{name: "a message reaches its target and the target's observers, not its controller, not subscribers, not the sender",
			e: message("session:p1", "w2"),
			s: snapshot{chain: []string{"w2"}, matches: []subscriptions.Subscription{sub("human:ana", "wake")},
				edges: edges(
					edge("w2", supervision.Observer, "human:watch", supervision.ScopeSelf),
					edge("w2", supervision.Observer, "session:p1", supervision.ScopeSelf),
					edge("w2", supervision.Controller, "human:ctl", supervision.ScopeSelf)),
				settings: supervision.Settings{DefaultController: "human:boss", Fallback: fallback}},
			want: map[string]recipient{"session:w2": via(inbox.ViaDirect), "human:watch": via(inbox.ViaObserver)}},
		{name: "a message to oneself reaches nobody, and no fallback",
			e: message("session:w2", "w2"), s: snapshot{chain: []string{"w2"}, settings: supervision.Settings{Fallback: fallback}},
			want: map[string]recipient{}, undeliverable: true},

		// The workspace fallback, and undeliverable.
		{name: "an attention session event that reaches nobody goes to the fallback",
			e: sessionEvent("session.blocked", event.Attention, ""), s: snapshot{chain: chain, settings: supervision.Settings{Fallback: fallback}},
			want: map[string]recipient{"human:ops": via(inbox.ViaFallback)}},
		{name: "a critical one too, when everyone else is excluded or dead",
			e: sessionEvent("session.failed", event.Critical, "session:p1"),
			s: snapshot{chain: chain, matches: []subscriptions.Subscription{sub("session:p1", "wake")},
				edges: edges(edge("w1", supervision.Controller, "session:dead", supervision.ScopeSelf)),
				dead:  map[string]bool{"session:dead": true}, settings: supervision.Settings{Fallback: fallback}},
			want: map[string]recipient{"human:ops": via(inbox.ViaFallback)}},
		{name: "the fallback is not told when someone hears",
			e:    sessionEvent("session.blocked", event.Attention, ""),
			s:    snapshot{chain: chain, matches: []subscriptions.Subscription{sub("human:ana", "inbox")}, settings: supervision.Settings{Fallback: fallback}},
			want: map[string]recipient{"human:ana": {via: inbox.ViaSubscription, mode: "inbox"}}},
		{name: "an info session event that reaches nobody: nobody, and that is fine",
			e: sessionEvent("session.idle", event.Info, ""), s: snapshot{chain: chain, settings: supervision.Settings{Fallback: fallback}},
			want: map[string]recipient{}},
		{name: "no fallback set: undeliverable",
			e: sessionEvent("session.blocked", event.Attention, ""), s: snapshot{chain: chain},
			want: map[string]recipient{}, undeliverable: true},
		{name: "the fallback caused it: undeliverable",
			e: sessionEvent("session.blocked", event.Attention, "human:ops"), s: snapshot{chain: chain, settings: supervision.Settings{Fallback: fallback}},
			want: map[string]recipient{}, undeliverable: true},
		{name: "a GitHub event of attention that reaches nobody is not undeliverable",
			e: prEvent, s: snapshot{}, want: map[string]recipient{}},

		// Never routed.
		{name: "wakegate.* events are never routed",
			e:    &event.Event{Type: "wakegate.escalated", Workspace: ws, Subject: "session:w1", SessionID: "w1", Priority: event.Critical},
			s:    snapshot{chain: []string{"w1"}, matches: []subscriptions.Subscription{sub("human:ana", "wake")}, settings: supervision.Settings{Fallback: fallback}},
			want: map[string]recipient{}},
		{name: "internal events are never routed",
			e:    &event.Event{Type: "custom.thing", Workspace: ws, Subject: "session:w1", SessionID: "w1", Priority: event.Internal},
			s:    snapshot{chain: []string{"w1"}, matches: []subscriptions.Subscription{sub("human:ana", "wake")}, settings: supervision.Settings{Fallback: fallback}},
			want: map[string]recipient{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(&tc.s, tc.e)
			if !maps.Equal(got.to, tc.want) {
				t.Errorf("to = %+v, want %+v", got.to, tc.want)
			}
			if got.undeliverable != tc.undeliverable {
				t.Errorf("undeliverable = %v, want %v", got.undeliverable, tc.undeliverable)
			}
			// gather reads the holds state and endpoint of every party
			// decide may name: mayHear must cover them all.
			may := mayHear(&tc.s, tc.e)
			for party := range got.to {
				if !slices.Contains(may, party) {
					t.Errorf("%s hears the event, but mayHear (%v) leaves it out", party, may)
				}
			}
		})
	}
}

// candidates lists who gather must read the liveness of, in the order
// EffectiveController considers them.
func TestCandidates(t *testing.T) {
	s := &snapshot{chain: []string{"w1", "p1", "root"}, edges: edges(
		edge("w1", supervision.Controller, "session:own", supervision.ScopeSelf),
		edge("w1", supervision.Observer, "human:obs", supervision.ScopeSelf),
		edge("p1", supervision.Controller, "session:p1", supervision.ScopeSelf),
		edge("root", supervision.Controller, "human:root", supervision.ScopeSubtree)),
		settings: supervision.Settings{DefaultController: "human:boss"}}
	got := candidates(s, sessionEvent("session.blocked", event.Info, ""))
	if want := []string{"session:own", "human:root", "human:boss"}; !slices.Equal(got, want) {
		t.Errorf("candidates = %v, want %v", got, want)
	}
	if got := candidates(s, message("human:x", "w1")); got != nil {
		t.Errorf("a message's candidates = %v, want none", got)
	}
}
