package stack

import "github.com/wakegate/wakegate/delivery/dashboard"

// dashboardReader is what /ui/ reads (docs/design.md §11): stores only, the
// health sweep's index of sessions and PRs, and its report. It is handed
// no router, pusher or worker.
func (s *Stack) dashboardReader() *dashboard.Reader {
	return dashboard.New(dashboard.Deps{Redis: s.Redis, Sessions: s.Sessions, Sup: s.Sup, Inbox: s.Inbox,
		Index: s.Health, PRs: s.Tracker, Quiet: s.Holds, Health: s.Health}, s.dashboard)
}
