package gateway

import (
	"testing"
	"time"
)

func TestParseLimits(t *testing.T) {
	tests := []struct {
		spec    string
		want    Limits
		wantErr bool
	}{
		{"", Limits{5000, 1000}, false},
		{"workspace=10/s", Limits{10, 1000}, false},
		{"workspace=600/m,token=2/s", Limits{10, 2}, false},
		{"workspace=0/s,token=0/s", Limits{0, 0}, false},
		{"workspace=ten/s", Limits{}, true},
		{"tenant=1/s", Limits{}, true},
		{"token=1/h", Limits{}, true},
	}
	for _, tt := range tests {
		got, err := ParseLimits(tt.spec)
		if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
			t.Errorf("ParseLimits(%q) = %+v, %v; want %+v, err=%v", tt.spec, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestLimiterIsolatesWorkspaces(t *testing.T) {
	l := newLimiter(Limits{Workspace: 5, Token: 1000})
	now := time.Unix(1700000000, 0)
	admitted := 0
	for range 50 {
		if _, ok := l.allow("flood", "t1", 1, now); ok {
			admitted++
		}
	}
	if admitted != 11 { // a burst of twice the rate, plus one
		t.Fatalf("flooding workspace admitted %d of 50 at once, want 11", admitted)
	}
	wait, ok := l.allow("flood", "t1", 1, now)
	if ok || wait < time.Second {
		t.Fatalf("flood not refused with a Retry-After: ok=%v wait=%v", ok, wait)
	}
	if _, ok := l.allow("quiet", "t2", 1, now); !ok {
		t.Fatal("another workspace was refused because of the flood")
	}
	if _, ok := l.allow("flood", "t1", 1, now.Add(time.Second)); !ok {
		t.Fatal("the flooding workspace did not recover a token after a second")
	}
}
