package route

import "time"

// WithClock makes the router read the time from now (tests that need a
// given wall clock, such as quiet hours); the default is time.Now. It
// returns r.
func (r *Router) WithClock(now func() time.Time) *Router {
	r.now = now
	return r
}
