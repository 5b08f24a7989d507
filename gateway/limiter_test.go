package gateway

import (
	"testing"
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
