package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// fakeResolver answers from a table, the way a rebinding DNS server
// would: each lookup of a name takes its next answer (the last repeats).
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	as := r.answers[host]
	if len(as) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	a := as[0]
	if len(as) > 1 {
		r.answers[host] = as[1:]
	}
	return a, nil
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// dialRecorder records the addresses a guard would dial and dials none.
type dialRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (d *dialRecorder) dial(_ context.Context, _, address string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen = append(d.seen, address)
	return nil, errors.New("recorder: not dialing")
}

func TestRefused(t *testing.T) {
	refused := []string{
		"127.0.0.1", "127.1.2.3", "::1", "10.0.0.1", "172.16.5.4", "192.168.1.1",
		"169.254.169.254", "fe80::1", "fd00:ec2::254", "fc00::1",
		"224.0.0.1", "239.255.255.250", "ff02::1", "0.0.0.0", "::", "0.1.2.3",
		"100.64.0.1", "100.100.100.200", "255.255.255.255", "240.0.0.1", "198.18.0.1",
		"::ffff:10.0.0.1", "::ffff:127.0.0.1", "::ffff:169.254.169.254",
		"64:ff9b::a00:1", "2002:a00:1::1", "::10.0.0.1",
	}
	for _, s := range refused {
		if Refused(netip.MustParseAddr(s)) == "" {
			t.Errorf("%s allowed, want refused", s)
		}
	}
	for _, s := range []string{"93.184.215.14", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"} {
		if why := Refused(netip.MustParseAddr(s)); why != "" {
			t.Errorf("%s refused (%s), want allowed", s, why)
		}
	}
}

func TestCheckURL(t *testing.T) {
	r := &fakeResolver{answers: map[string][][]netip.Addr{
		"public.example":   {addrs("93.184.215.14")},
		"internal.example": {addrs("127.0.0.1")},
		"mixed.example":    {addrs("93.184.215.14", "10.0.0.1")},
	}}
	g := &Guard{Resolver: r}
	ctx := context.Background()
	tests := []struct {
		url  string
		want error
	}{
		{"https://public.example/hook", nil},
		{"http://public.example:8443/hook?x=1", nil},
		{"http://169.254.169.254/latest/meta-data/", ErrRefused},
		{"http://10.0.0.1/", ErrRefused},
		{"http://[::1]:8080/", ErrRefused},
		{"http://[::ffff:10.0.0.1]/", ErrRefused},
		{"https://internal.example/hook", ErrRefused}, // a name resolving to 127.0.0.1
		{"https://mixed.example/hook", ErrRefused},    // one refused address refuses the name
		{"http://0.0.0.0:80/", ErrRefused},
		{"ftp://public.example/", ErrInvalid},
		{"http:///nohost", ErrInvalid},
		{"http://user:pw@public.example/", ErrInvalid},
		{"http://public.example/#frag", ErrInvalid},
		{"http://public.example:0/", ErrInvalid},
		{"::not a url", ErrInvalid},
		{"https://nx.example/", ErrInvalid},
	}
	for _, tt := range tests {
		err := g.CheckURL(ctx, tt.url)
		if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("CheckURL(%q) = %v, want %v", tt.url, err, tt.want)
		}
	}
	open := &Guard{AllowPrivate: true, Resolver: r}
	for _, u := range []string{"http://127.0.0.1:8080/", "https://internal.example/", "http://10.0.0.1/"} {
		if err := open.CheckURL(ctx, u); err != nil {
			t.Errorf("AllowPrivate: CheckURL(%q) = %v", u, err)
		}
	}
}

// TestDialRefusesResolvedAddress: a name that resolved to a public
// address when its endpoint was created and resolves to a private one at
// send time (DNS rebinding) is refused at the dial, before any packet.
func TestDialRefusesResolvedAddress(t *testing.T) {
	r := &fakeResolver{answers: map[string][][]netip.Addr{
		"rebind.example": {addrs("93.184.215.14"), addrs("10.0.0.1")},
		"meta.example":   {addrs("169.254.169.254")},
		"local.example":  {addrs("127.0.0.1")},
	}}
	rec := &dialRecorder{}
	g := &Guard{Resolver: r, Dial: rec.dial}
	ctx := context.Background()
	if err := g.CheckURL(ctx, "https://rebind.example/hook"); err != nil {
		t.Fatalf("creation: %v", err)
	}
	for _, host := range []string{"rebind.example:443", "meta.example:80", "local.example:80", "10.0.0.1:80", "[::1]:80", "169.254.169.254:80"} {
		if _, err := g.DialContext(ctx, "tcp", host); !errors.Is(err, ErrRefused) {
			t.Errorf("DialContext(%s) = %v, want refused", host, err)
		}
	}
	// Through an HTTP client as the pusher builds it.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: g.DialContext}}
	resp, err := client.Get("http://local.example/hook")
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, ErrRefused) {
		t.Errorf("GET through the guard = %v, want refused", err)
	}
	if len(rec.seen) != 0 {
		t.Fatalf("the guard dialed %v", rec.seen)
	}
	// An allowed address is dialed, as resolved.
	r.answers["public.example"] = [][]netip.Addr{addrs("93.184.215.14")}
	_, _ = g.DialContext(ctx, "tcp", "public.example:443")
	if fmt.Sprint(rec.seen) != "[93.184.215.14:443]" {
		t.Fatalf("dialed %v, want the resolved public address", rec.seen)
	}
}

// TestControlHook: the net.Dialer Control hook refuses a refused address
// whatever resolved it — checked on loopback, where the refusal comes
// before the connect.
func TestControlHook(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	g := &Guard{}
	d := &net.Dialer{Timeout: time.Second, Control: g.Control}
	if _, err := d.Dial("tcp", ln.Addr().String()); !errors.Is(err, ErrRefused) {
		t.Fatalf("dial loopback through Control = %v, want refused", err)
	}
	for _, a := range []string{"10.0.0.1:80", "[fe80::1]:80", "169.254.169.254:80", "[::ffff:10.0.0.1]:443"} {
		if err := g.Control("tcp", a, nil); !errors.Is(err, ErrRefused) {
			t.Errorf("Control(%s) = %v, want refused", a, err)
		}
	}
	if err := g.Control("tcp", "93.184.215.14:443", nil); err != nil {
		t.Errorf("Control(public) = %v", err)
	}
	open := &Guard{AllowPrivate: true}
	d = &net.Dialer{Timeout: time.Second, Control: open.Control}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("AllowPrivate dial loopback: %v", err)
	}
	c.Close()
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the allowed dial never connected")
	}
}
