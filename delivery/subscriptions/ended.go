package subscriptions

import (
	"context"
	"fmt"
	"slices"
)

// What the health sweep (workers/health, docs/design.md §9 I6) needs to find and
// close watches left on subjects that have ended.

// OnSubject returns the live subscriptions of workspace that name subject
// exactly among their subjects, oldest first: every one whose subjects are
// all exact is indexed under each of them (a subscription with a subject
// pattern never ends). One script call.
func (s *Store) OnSubject(ctx context.Context, workspace, subject string) ([]Subscription, error) {
	subs, err := s.readSet(ctx, workspace, s.ixKey(workspace, ixSubj, subject))
	if err != nil {
		return nil, fmt.Errorf("subscriptions on %s: %w", subject, err)
	}
	now := s.now()
	live := subs[:0]
	for _, sub := range subs {
		if !sub.expired(now) && slices.Contains(sub.Subjects, subject) {
			live = append(live, sub)
		}
	}
	sortSubs(live)
	return live, nil
}

// Close removes the subscriptions of workspace with these ids from the
// record and every index, whoever owns them, and returns the ones it
// removed (ids gone already are skipped). The health sweep closes with it
// the watches that can never match again.
func (s *Store) Close(ctx context.Context, workspace string, ids []string) ([]Subscription, error) {
	out, err := s.remove(ctx, workspace, ids)
	if err != nil {
		return out, fmt.Errorf("close subscriptions: %w", err)
	}
	sortSubs(out)
	return out, nil
}
