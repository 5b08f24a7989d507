package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/wakegate/wakegate/providers/kind"
)

// ErrRefused is wrapped by the error of a URL or a dial the SSRF guard
// refuses: the address is loopback, private, link-local (the cloud
// metadata service among them), multicast, unspecified, shared (CGNAT)
// or otherwise not a public unicast address.
var ErrRefused = kind.New(kind.Invalid, "address refused")

// refusedPrefixes are the ranges that are not public unicast (besides what
// netip's predicates catch): the IANA special-purpose registries' entries
// that a webhook has no business reaching.
var refusedPrefixes = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"100.64.0.0/10",   // shared address space (CGNAT); Alibaba's metadata at 100.100.100.200
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // TEST-NET-1
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // TEST-NET-2
		"203.0.113.0/24",  // TEST-NET-3
		"240.0.0.0/4",     // reserved, and the broadcast address
		"::/96",           // IPv4-compatible (deprecated)
		"100::/64",        // discard-only
		"2001:db8::/32",   // documentation
		"fec0::/10",       // site-local (deprecated)
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
)

// embeddedV4 returns the IPv4 address an IPv6 transition address carries
// (NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4 2002::/16), so a private
// IPv4 address cannot be reached through one.
func embeddedV4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case nat64.Contains(a), nat64Local.Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// Refused says why a push may not reach address a, or "" when it may.
// IPv4-mapped IPv6 addresses (::ffff:10.0.0.1) are judged as the IPv4
// address they map.
func Refused(a netip.Addr) string {
	a = a.Unmap()
	if v4, ok := embeddedV4(a); ok {
		if why := Refused(v4); why != "" {
			return why + " (embedded in " + a.String() + ")"
		}
	}
	switch {
	case !a.IsValid():
		return "invalid address"
	case a.IsUnspecified():
		return "unspecified address"
	case a.IsLoopback():
		return "loopback address"
	case a.IsPrivate():
		return "private address"
	case a.IsLinkLocalUnicast():
		return "link-local address (cloud metadata lives here)"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast address"
	}
	for _, p := range refusedPrefixes {
		if p.Contains(a) {
			return "reserved address " + p.String()
		}
	}
	return ""
}

// Resolver looks host names up; *net.Resolver is one. Tests give the
// guard a fake that answers what a rebinding DNS server would.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard keeps pushes off internal networks (docs/design.md §8): CheckURL at
// endpoint creation, and DialContext on the resolved address of every
// connection, so a name that resolves elsewhere later (DNS rebinding) is
// refused too. It is safe for concurrent use.
type Guard struct {
	// AllowPrivate lets pushes reach every address
	// (WAKEGATE_ALLOW_PRIVATE_ENDPOINTS): tests and development only.
	AllowPrivate bool
	// Resolver resolves host names. Default net.DefaultResolver.
	Resolver Resolver
	// Dial connects to an address the guard has accepted, an IP literal
	// and a port. Default: a net.Dialer with a 5 s timeout whose Control
	// hook checks the address once more.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

func (g *Guard) resolver() Resolver {
	if g.Resolver == nil {
		return net.DefaultResolver
	}
	return g.Resolver
}

// check refuses a when the guard does not allow it.
func (g *Guard) check(a netip.Addr) error {
	if g.AllowPrivate {
		return nil
	}
	if why := Refused(a); why != "" {
		return fmt.Errorf("%w: %s is a %s", ErrRefused, a, why)
	}
	return nil
}

// resolve returns the addresses of host (an IP literal or a name), every
// one checked: a name with one refused address is refused.
func (g *Guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{a}, g.check(a)
	}
	// What a name resolved to is never said, in an error or a log line:
	// an endpoint owner must not learn internal DNS through it (an oracle
	// for any inbox token), nor the resolver's own address.
	addrs, err := g.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return nil, fmt.Errorf("%s does not resolve", host)
		}
		return nil, fmt.Errorf("%s could not be resolved", host)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s does not resolve", host)
	}
	for _, a := range addrs {
		if err := g.check(a); err != nil {
			return nil, fmt.Errorf("%w: %s resolves to a refused address class (loopback, private, link-local, multicast or reserved)", ErrRefused, host)
		}
	}
	return addrs, nil
}

// CheckURL validates an endpoint URL: http or https, a host, no
// credentials, no fragment, and every address its host resolves to
// allowed. Errors wrap ErrInvalid (a malformed URL) or ErrRefused.
func (g *Guard) CheckURL(ctx context.Context, raw string) error {
	if len(raw) > 2048 {
		return invalid("url longer than 2048 bytes")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return invalid("url: %v", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return invalid("url scheme must be http or https")
	case u.Hostname() == "":
		return invalid("url has no host")
	case u.User != nil:
		return invalid("url must not carry credentials: pushes are signed")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return invalid("url must not have a fragment")
	}
	if p := u.Port(); p != "" {
		if _, err := net.LookupPort("tcp", p); err != nil || p == "0" {
			return invalid("url port %q", p)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := g.resolve(ctx, u.Hostname()); err != nil {
		if errors.Is(err, ErrRefused) {
			return err
		}
		return invalid("%v", err) // a host that does not resolve is the caller's to fix
	}
	return nil
}

// DialContext resolves address with the guard's resolver, refuses it when
// any address is refused, then dials the first that answers. It is the
// DialContext of push transports.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	dial := g.Dial
	if dial == nil {
		d := &net.Dialer{Timeout: 5 * time.Second, Control: g.Control}
		dial = d.DialContext
	}
	var firstErr error
	for _, a := range addrs {
		c, err := dial(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// Control is a net.Dialer Control hook: it refuses to connect to a
// refused address, whatever resolved it.
func (g *Guard) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse %q", ErrRefused, address)
	}
	return g.check(ap.Addr())
}
