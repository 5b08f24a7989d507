package supervision

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func settingsJSON(t *testing.T, st Settings) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSettingsDefaults(t *testing.T) {
	s, _ := newStore(t)
	st, err := s.Settings(context.Background(), "ws")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"escalate_after":"2m","escalate_unacked":[],"lease_mode":"off","rate":{"per":"30s","burst":3}}`
	if got := settingsJSON(t, st); got != want {
		t.Fatalf("defaults\n got %s\nwant %s", got, want)
	}
}

func TestMergeSettings(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	// The docs/design.md §6 example.
	st, err := s.MergeSettings(ctx, "ws", []byte(`{
	  "default_controller": "session:boss",
	  "fallback": {"party": "human:ops"},
	  "escalate_after": "2m",
	  "escalate_unacked": ["critical"],
	  "quiet_hours": {"start": "22:00", "end": "08:00", "tz": "Europe/Berlin"},
	  "lease_mode": "warn",
	  "rate": {"per": "30s", "burst": 3}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	full := `{"default_controller":"session:boss","fallback":{"party":"human:ops"},"escalate_after":"2m",` +
		`"escalate_unacked":["critical"],"quiet_hours":{"start":"22:00","end":"08:00","tz":"Europe/Berlin"},` +
		`"lease_mode":"warn","rate":{"per":"30s","burst":3}}`
	if got := settingsJSON(t, st); got != full {
		t.Fatalf("example\n got %s\nwant %s", got, full)
	}
	if got, _ := s.Settings(ctx, "ws"); settingsJSON(t, got) != full {
		t.Fatalf("read back %s", settingsJSON(t, got))
	}
	if got, _ := s.Settings(ctx, "other"); settingsJSON(t, got) != settingsJSON(t, Defaults()) {
		t.Fatalf("another workspace sees %s", settingsJSON(t, got))
	}

	// Only the fields given change; objects merge field by field.
	st, err = s.MergeSettings(ctx, "ws", []byte(`{"lease_mode": "enforce", "rate": {"burst": 5}, "escalate_after": "1h30m"}`))
	if err != nil {
		t.Fatal(err)
	}
	if st.LeaseMode != LeaseEnforce || st.Rate.Burst != 5 || time.Duration(st.Rate.Per) != 30*time.Second ||
		time.Duration(st.EscalateAfter) != 90*time.Minute || st.DefaultController != "session:boss" || st.QuietHours == nil {
		t.Fatalf("partial merge: %s", settingsJSON(t, st))
	}
	// null resets a field to its default.
	st, err = s.MergeSettings(ctx, "ws", []byte(`{"default_controller": null, "quiet_hours": null, "rate": null, "escalate_after": null}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"fallback":{"party":"human:ops"},"escalate_after":"2m","escalate_unacked":["critical"],` +
		`"lease_mode":"enforce","rate":{"per":"30s","burst":3}}`
	if got := settingsJSON(t, st); got != want {
		t.Fatalf("after nulls\n got %s\nwant %s", got, want)
	}
	// An empty object changes nothing.
	if st2, err := s.MergeSettings(ctx, "ws", []byte(`{}`)); err != nil || settingsJSON(t, st2) != want {
		t.Fatalf("empty patch: %s %v", settingsJSON(t, st2), err)
	}
}

func TestMergeSettingsRefusesAndAppliesNothing(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.MergeSettings(ctx, "ws", []byte(`{"lease_mode": "warn", "default_controller": "session:boss"}`)); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Settings(ctx, "ws")
	cases := []struct{ patch, field string }{
		{`{"escalate_after": "500ms"}`, "escalate_after"},
		{`{"escalate_after": "0s"}`, "escalate_after"},
		{`{"escalate_after": "-2m"}`, "escalate_after"},
		{`{"escalate_after": "soon"}`, "escalate_after"},
		{`{"escalate_after": 120}`, "escalate_after"},
		{`{"rate": {"per": "0.5s"}}`, "rate"},
		{`{"rate": {"burst": 0}}`, "rate"},
		{`{"rate": {"burst": "3"}}`, "rate"},
		{`{"rate": {"every": "1s"}}`, "rate"},
		{`{"rate": 3}`, "rate"},
		{`{"default_controller": "session:a/b"}`, "default_controller"},
		{`{"default_controller": "boss"}`, "default_controller"},
		{`{"default_controller": "session:` + strings.Repeat("x", 200) + `"}`, "default_controller"},
		{`{"fallback": {"party": "human:o\nps"}}`, "fallback"},
		{`{"fallback": {}}`, "fallback"},
		{`{"fallback": {"party": "human:ops", "via": "sms"}}`, "fallback"},
		{`{"escalate_unacked": ["urgent"]}`, "escalate_unacked"},
		{`{"escalate_unacked": "critical"}`, "escalate_unacked"},
		{`{"quiet_hours": {"start": "24:00", "end": "08:00", "tz": "UTC"}}`, "quiet_hours"},
		{`{"quiet_hours": {"start": "22:00", "end": "8:00", "tz": "UTC"}}`, "quiet_hours"},
		{`{"quiet_hours": {"start": "22:00", "end": "08:00", "tz": "Mars/Olympus"}}`, "quiet_hours"},
		{`{"quiet_hours": {"start": "22:00", "end": "08:00"}}`, "quiet_hours"},
		{`{"quiet_hours": {"start": "22:00", "end": "22:00", "tz": "UTC"}}`, "quiet_hours"},
		{`{"lease_mode": "strict"}`, "lease_mode"},
		{`{"lease_mode": 1}`, "lease_mode"},
		{`{"leasemode": "off"}`, "leasemode"},
		{`[]`, "object"},
		{`null`, "object"},
		{`{"lease_mode": "off"} {}`, "object"},
		{`{`, "object"},
	}
	for _, c := range cases {
		// Each refused patch also carries a valid change, which must not land.
		patch := c.patch
		if strings.HasPrefix(patch, "{\"") && !strings.Contains(patch, "lease_mode") {
			patch = `{"lease_mode": "enforce", ` + patch[1:]
		}
		_, err := s.MergeSettings(ctx, "ws", []byte(patch))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: got %v, want ErrInvalid naming %s", patch, err, c.field)
		}
		if after, _ := s.Settings(ctx, "ws"); settingsJSON(t, after) != settingsJSON(t, before) {
			t.Fatalf("%s applied something: %s", patch, settingsJSON(t, after))
		}
	}
}

func TestConcurrentMergesAllLand(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	patches := []string{`{"lease_mode": "warn"}`, `{"escalate_after": "5m"}`, `{"rate": {"burst": 7}}`,
		`{"fallback": {"party": "human:ops"}}`, `{"default_controller": "session:boss"}`, `{"escalate_unacked": ["critical"]}`}
	errs := make(chan error, len(patches))
	for _, p := range patches {
		go func() {
			_, err := s.MergeSettings(ctx, "ws", []byte(p))
			errs <- err
		}()
	}
	for range patches {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st, _ := s.Settings(ctx, "ws")
	want := `{"default_controller":"session:boss","fallback":{"party":"human:ops"},"escalate_after":"5m",` +
		`"escalate_unacked":["critical"],"lease_mode":"warn","rate":{"per":"30s","burst":7}}`
	if got := settingsJSON(t, st); got != want {
		t.Fatalf("concurrent merges\n got %s\nwant %s", got, want)
	}
}

func TestQuietHoursContains(t *testing.T) {
	q := QuietHours{Start: "22:00", End: "08:00", TZ: "Europe/Berlin"}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for hm, want := range map[string]bool{"21:59": false, "22:00": true, "23:30": true, "00:00": true, "07:59": true, "08:00": false, "12:00": false} {
		at, _ := time.ParseInLocation("2006-01-02 15:04", "2026-07-01 "+hm, berlin)
		if got := q.Contains(at.UTC()); got != want {
			t.Errorf("%s Berlin: got %v", hm, got)
		}
	}
	day := QuietHours{Start: "12:00", End: "13:00", TZ: "UTC"}
	if !day.Contains(time.Date(2026, 1, 1, 12, 30, 0, 0, time.UTC)) || day.Contains(time.Date(2026, 1, 1, 13, 0, 0, 0, time.UTC)) {
		t.Error("daytime window")
	}
}

func TestDurationJSON(t *testing.T) {
	for d, want := range map[time.Duration]string{2 * time.Minute: `"2m"`, time.Hour: `"1h"`, 90 * time.Minute: `"1h30m"`,
		30 * time.Second: `"30s"`, 90 * time.Second: `"1m30s"`, time.Hour + time.Second: `"1h0m1s"`} {
		b, _ := json.Marshal(Duration(d))
		if string(b) != want {
			t.Errorf("%v: %s, want %s", d, b, want)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || time.Duration(back) != d {
			t.Errorf("%s read back as %v (%v)", b, time.Duration(back), err)
		}
	}
}
