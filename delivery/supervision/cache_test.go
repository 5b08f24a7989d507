package supervision

import (
	"context"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/redistest"
)

func TestSettingsCache(t *testing.T) {
	rdb, prefix := redistest.New(t)
	s := New(rdb, prefix, nil)
	ctx := context.Background()
	now := time.Unix(1700000000, 0)
	c := s.Cached(time.Second)
	c.now = func() time.Time { return now }
	if st, err := c.Settings(ctx, "ws"); err != nil || st.LeaseMode != LeaseOff {
		t.Fatalf("defaults: %+v %v", st, err)
	}
	if _, err := s.MergeSettings(ctx, "ws", []byte(`{"lease_mode":"enforce"}`)); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Settings(ctx, "ws"); st.LeaseMode != LeaseOff {
		t.Fatalf("re-read within the TTL: %s", st.LeaseMode)
	}
	now = now.Add(time.Second)
	if st, _ := c.Settings(ctx, "ws"); st.LeaseMode != LeaseEnforce {
		t.Fatalf("not re-read after the TTL: %s", st.LeaseMode)
	}
}
