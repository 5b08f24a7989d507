package stack

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisURLForms: WAKEGATE_REDIS_URL's single-node, Sentinel and
// Cluster forms give go-redis the right options, each with wakegate's
// timeouts, one retry and the pool for the shards; a bad scheme names the
// accepted forms; no error quotes the password. No Sentinel or Cluster
// runs here: the clients are built, never dialled.
func TestRedisURLForms(t *testing.T) {
	common := func(t *testing.T, dial, read, write time.Duration, retries, pool int, ctxTimeout bool, protocol int) {
		t.Helper()
		if dial != time.Second || read != 2*time.Second || write != 2*time.Second || retries != 1 || pool != 64+2*8 || !ctxTimeout || protocol != 2 {
			t.Fatalf("dial %v read %v write %v retries %d pool %d ctx %v protocol %d; want 1s 2s 2s 1 %d true 2", dial, read, write, retries, pool, ctxTimeout, protocol, 64+2*8)
		}
	}
	t.Run("single node", func(t *testing.T) {
		o := mustOptions[*redis.Options](t, "redis://u:pw@cache.internal:6380/2?client_name=wg&read_timeout=30s")
		if o.Addr != "cache.internal:6380" || o.DB != 2 || o.Username != "u" || o.Password != "pw" || o.ClientName != "wg" || o.TLSConfig != nil {
			t.Fatalf("options %+v", o)
		}
		common(t, o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetries, o.PoolSize, o.ContextTimeoutEnabled, o.Protocol) // the URL's read_timeout does not win
		if o := mustOptions[*redis.Options](t, "redis://cache:6379?protocol=3"); o.Protocol != 3 {
			t.Fatalf("protocol=3 asked for, got %d", o.Protocol)
		}
		if o := mustOptions[*redis.Options](t, "rediss://cache:6379"); o.TLSConfig == nil || o.TLSConfig.ServerName != "cache" {
			t.Fatalf("rediss: TLS %+v", o.TLSConfig)
		}
	})
	t.Run("sentinel", func(t *testing.T) {
		o := mustOptions[*redis.FailoverOptions](t,
			"redis+sentinel://su:spw@s1:26379/3?master_name=mymaster&addr=s2:26379&addr=s3:26380&password=masterpw")
		if o.MasterName != "mymaster" || !slices.Equal(o.SentinelAddrs, []string{"s1:26379", "s2:26379", "s3:26380"}) ||
			o.SentinelUsername != "su" || o.SentinelPassword != "spw" || o.Password != "masterpw" || o.DB != 3 || o.TLSConfig != nil {
			t.Fatalf("options %+v", o)
		}
		common(t, o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetries, o.PoolSize, o.ContextTimeoutEnabled, o.Protocol)
		if o := mustOptions[*redis.FailoverOptions](t, "REDISS+SENTINEL://s1:26379?master_name=m"); o.TLSConfig == nil {
			t.Fatal("rediss+sentinel: no TLS")
		}
	})
	t.Run("cluster", func(t *testing.T) {
		o := mustOptions[*redis.ClusterOptions](t, "redis+cluster://u:pw@n1:7000?addr=n2:7001&addr=n3:7002&client_name=wg")
		if !slices.Equal(o.Addrs, []string{"n1:7000", "n2:7001", "n3:7002"}) || o.Username != "u" || o.Password != "pw" ||
			o.ClientName != "wg" || o.ReadOnly || o.TLSConfig != nil {
			t.Fatalf("options %+v", o)
		}
		common(t, o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetries, o.PoolSize, o.ContextTimeoutEnabled, o.Protocol)
		if o := mustOptions[*redis.ClusterOptions](t, "rediss+cluster://n1:7000/0"); o.TLSConfig == nil {
			t.Fatal("rediss+cluster: no TLS")
		}
	})
	t.Run("clients", func(t *testing.T) {
		for url, want := range map[string]string{
			"redis://127.0.0.1:1":                              "*redis.Client",
			"redis+sentinel://127.0.0.1:1?master_name=m":       "*redis.Client",
			"redis+cluster://127.0.0.1:1?addr=127.0.0.1:2":     "*redis.ClusterClient",
			"unix:///var/run/redis.sock":                       "*redis.Client",
			"rediss+cluster://127.0.0.1:1?max_redirects=3":     "*redis.ClusterClient",
			"rediss+sentinel://127.0.0.1:1?master_name=m&db=1": "*redis.Client",
		} {
			c, err := NewClient(url, 8)
			if err != nil {
				t.Fatalf("%s: %v", url, err)
			}
			if got := typeName(c); got != want {
				t.Errorf("%s: %s, want %s", url, got, want)
			}
			_ = c.Close()
		}
	})
	t.Run("refused", func(t *testing.T) {
		for _, tt := range []struct{ url, want string }{
			{"", "no scheme"},
			{"cache:6379", "no scheme"},
			{"http://cache:6379", `unknown scheme "http"`},
			{"redis+proxy://cache:6379", `unknown scheme "redis+proxy"`},
			{"unix+sentinel:///x.sock", `unknown scheme "unix+sentinel"`},
			{"redis+sentinel://s1:26379", "master_name"},
			{"redis+sentinel://s1:26379?master_name=m&replica_only=true", "master only"},
			{"redis+sentinel://s1:26379?master_name=m&route_randomly=true", "master only"},
			{"redis+cluster://n1:7000?read_only=true", "masters only"},
			{"redis+cluster://n1:7000/3", "database 0 only"},
			{"redis+cluster://n1:7000?bogus=1", "unexpected option: bogus"},
			{"redis+sentinel://s1:26379?master_name=m&addr=nohost", "addr"},
			{"redis://u:s3cret@cache:notaport", "WAKEGATE_REDIS_URL"},
			{"redis://u:s3cret@cache:6379/x", "database number"},
		} {
			_, err := NewClient(tt.url, 8)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%q: err = %v, want one containing %q", tt.url, err, tt.want)
				continue
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%q: the error quotes the password: %v", tt.url, err)
			}
			if strings.Contains(tt.want, "scheme") {
				for _, form := range []string{"redis://", "rediss://", "redis+sentinel://", "redis+cluster://"} {
					if !strings.Contains(err.Error(), form) {
						t.Errorf("%q: the error does not name %s: %v", tt.url, form, err)
					}
				}
			}
		}
	})
}

func mustOptions[T any](t *testing.T, url string) T {
	t.Helper()
	o, err := redisOptions(url, 8)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	v, ok := o.(T)
	if !ok {
		t.Fatalf("%s: options are %T", url, o)
	}
	return v
}

func typeName(c redis.UniversalClient) string {
	switch c.(type) {
	case *redis.Client:
		return "*redis.Client"
	case *redis.ClusterClient:
		return "*redis.ClusterClient"
	default:
		return "other"
	}
}
