package supervision

import (
	"testing"
	"time"
)

// TestQuietHoursWindow: membership and the end of the period, across
// midnight, in a time zone, and on both DST changes of Europe/Berlin in
// 2026 (29 March 02:00 CET → 03:00 CEST; 25 October 03:00 CEST → 02:00
// CET).
func TestQuietHoursWindow(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time { // a UTC instant
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name   string
		q      QuietHours
		t      string
		in     bool
		wantTo string // the period's end (RFC 3339, UTC) when in
	}{
		{"before, summer", QuietHours{"22:00", "08:00", "Europe/Berlin"}, "2026-07-01T19:59:59Z", false, ""},
		{"start is inside", QuietHours{"22:00", "08:00", "Europe/Berlin"}, "2026-07-01T20:00:00Z", true, "2026-07-02T06:00:00Z"},
		{"after midnight", QuietHours{"22:00", "08:00", "Europe/Berlin"}, "2026-07-02T01:30:00Z", true, "2026-07-02T06:00:00Z"},
		{"end is outside", QuietHours{"22:00", "08:00", "Europe/Berlin"}, "2026-07-02T06:00:00Z", false, ""},
		{"winter offset", QuietHours{"22:00", "08:00", "Europe/Berlin"}, "2026-01-10T22:00:00Z", true, "2026-01-11T07:00:00Z"},
		{"daytime window", QuietHours{"12:00", "13:00", "UTC"}, "2026-01-01T12:30:00Z", true, "2026-01-01T13:00:00Z"},
		{"daytime window, end", QuietHours{"12:00", "13:00", "UTC"}, "2026-01-01T13:00:00Z", false, ""},
		{"other zone", QuietHours{"22:00", "06:00", "America/New_York"}, "2026-07-02T03:00:00Z", true, "2026-07-02T10:00:00Z"},
		// Spring forward: the night of 28–29 March is an hour shorter;
		// the period still ends at 08:00 local, now CEST.
		{"spring night", QuietHours{"22:00", "08:00", "Europe/Berlin"}, "2026-03-28T23:30:00Z", true, "2026-03-29T06:00:00Z"},
		// An end the jump skips (02:30 does not exist on 29 March) comes
		// at the jump itself, 03:00 CEST = 01:00Z, not an hour later.
		{"end skipped", QuietHours{"22:00", "02:30", "Europe/Berlin"}, "2026-03-29T00:59:59Z", true, "2026-03-29T01:00:00Z"},
		{"end skipped, after", QuietHours{"22:00", "02:30", "Europe/Berlin"}, "2026-03-29T01:00:00Z", false, ""},
		// A start the jump skips starts at the jump.
		{"start skipped, before", QuietHours{"02:30", "06:00", "Europe/Berlin"}, "2026-03-29T00:59:59Z", false, ""},
		{"start skipped", QuietHours{"02:30", "06:00", "Europe/Berlin"}, "2026-03-29T01:00:00Z", true, "2026-03-29T04:00:00Z"},
		// Fall back: the night of 24–25 October is an hour longer; the
		// period still ends at 08:00 local, now CET.
		{"autumn night", QuietHours{"22:00", "08:00", "Europe/Berlin"}, "2026-10-25T06:30:00Z", true, "2026-10-25T07:00:00Z"},
		// An end the fall-back repeats (02:30 happens at 00:30Z and at
		// 01:30Z) ends the period at its first occurrence, for good.
		{"end repeated, first", QuietHours{"22:00", "02:30", "Europe/Berlin"}, "2026-10-25T00:29:59Z", true, "2026-10-25T00:30:00Z"},
		{"end repeated, between", QuietHours{"22:00", "02:30", "Europe/Berlin"}, "2026-10-25T01:10:00Z", false, ""},
		{"end repeated, second", QuietHours{"22:00", "02:30", "Europe/Berlin"}, "2026-10-25T01:30:00Z", false, ""},
		// A start the fall-back repeats starts at its first occurrence.
		{"start repeated", QuietHours{"02:30", "04:00", "Europe/Berlin"}, "2026-10-25T00:30:00Z", true, "2026-10-25T03:00:00Z"},
		{"nil", QuietHours{}, "2026-10-25T00:30:00Z", false, ""},
	}
	for _, tt := range tests {
		q := tt.q
		end, ok := q.Window(at(tt.t))
		if ok != tt.in {
			t.Errorf("%s: Window(%s) in = %v, want %v (end %s)", tt.name, tt.t, ok, tt.in, end)
			continue
		}
		if ok && !end.Equal(at(tt.wantTo)) {
			t.Errorf("%s: Window(%s) ends %s (%s), want %s", tt.name, tt.t, end.UTC().Format(time.RFC3339),
				end.In(berlin).Format("15:04 MST"), tt.wantTo)
		}
		if q.Contains(at(tt.t)) != ok {
			t.Errorf("%s: Contains disagrees with Window", tt.name)
		}
	}
}

// TestQuietHoursWindowEndIsExact: for every minute of two years in two
// zones, the end Window answers is the first instant it reports false,
// and every instant before it, back to the one asked about, is inside:
// a hold released at the end never meets its period again.
func TestQuietHoursWindowEndIsExact(t *testing.T) {
	for _, q := range []QuietHours{{"22:00", "02:30", "Europe/Berlin"}, {"01:30", "03:15", "America/Santiago"},
		{"23:00", "07:00", "Australia/Lord_Howe"}} {
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for ts := start; ts.Before(start.AddDate(2, 0, 0)); ts = ts.Add(13 * time.Minute) {
			end, ok := q.Window(ts)
			if !ok {
				continue
			}
			if !end.After(ts) || end.Sub(ts) > 24*time.Hour {
				t.Fatalf("%+v at %s: end %s", q, ts, end)
			}
			if _, still := q.Window(end); still {
				t.Fatalf("%+v: still inside at its own end %s (asked at %s)", q, end, ts)
			}
			if e2, in := q.Window(end.Add(-time.Second)); !in || !e2.Equal(end) {
				t.Fatalf("%+v: a second before the end %s: in %v, end %s", q, end, in, e2)
			}
		}
	}
}
