// Package netfilter is nsbox's filtered network: egress by a domain
// allowlist, with no proxy settings inside the sandbox.
//
// A session's Filter does three things, all in the supervisor (the host's
// network namespace):
//
//   - It answers DNS for the sandbox (ServeDNS) on sockets bound inside the
//     sandbox's network namespace (BindResolver, run by the worker during
//     setup). A name the allowlist covers is resolved on the host (or taken
//     from a host pin) and answered with a virtual address of nsbox's
//     choosing from 198.18.0.0/15; any other name gets NXDOMAIN and no
//     upstream query is made.
//   - It decides each connect the seccomp user-notification handler traps
//     (Connect): a TCP connect to a virtual address it handed out, on a port
//     the allowlist covers, is dialled from the host's namespace to the real
//     address, and the connected socket is returned for the handler to
//     install in place of the sandbox's (SECCOMP_IOCTL_NOTIF_ADDFD with
//     SECCOMP_ADDFD_FLAG_SETFD). Data then flows through the kernel.
//   - It refuses everything else with a *Refusal naming the host and port.
//
// The package is a leaf: it imports no other nsbox package.
package netfilter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the bounds in Config.
const (
	DefaultMaxNames       = 1024
	DefaultMaxConns       = 1024
	DefaultMaxQueries     = 32
	DefaultConnectTimeout = 30 * time.Second
	DefaultLookupTimeout  = 5 * time.Second
)

// VirtualPrefix is where the virtual addresses come from: 198.18.0.0/15,
// reserved for benchmarking (RFC 2544, RFC 6890) and routed nowhere. Not a
// 127.0.0.0/8 address: the sandbox's loopback is its own, and a service a
// program inside binds there must not be shadowed by a name nsbox answers.
// Should the connect trap ever not run, a connect to one of these fails with
// ENETUNREACH in the sandbox's namespace (it holds only lo): fail closed.
var VirtualPrefix = netip.MustParsePrefix("198.18.0.0/15")

// ResolverAddr is where the sandbox's resolver listens, inside the
// sandbox's own network namespace (on its lo), as systemd-resolved's stub
// does on a host.
var ResolverAddr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 53}), 53)

// ErrClosed is returned by a Filter used after Close.
var ErrClosed = errors.New("network filter closed")

// ErrLimit is matched by every *LimitError.
var ErrLimit = errors.New("network filter limit reached")

// LimitError is a per-session bound the sandbox reached.
type LimitError struct {
	What  string // "names", "connections"
	Limit int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("network filter: the session's limit of %d %s is reached", e.Limit, e.What)
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// Config is a session's filter.
type Config struct {
	// Allow is the parsed allow and deny lists (ParseAllowlist).
	Allow *Allowlist
	// Pins map names to addresses (--add-host NAME:IP); a pinned name is
	// never looked up upstream. A pin does not allow a name: the allowlist
	// still decides.
	Pins []HostPin
	// Upstream are the resolvers allowed names are looked up at; empty
	// means the host's (/etc/resolv.conf through Go's resolver).
	Upstream []netip.AddrPort
	// MaxNames bounds the virtual address table (names handed out).
	MaxNames int
	// MaxConns bounds the connections made for the sandbox that are still
	// open on the host.
	MaxConns int
	// MaxQueries bounds the DNS queries being answered at once.
	MaxQueries int
	// ConnectTimeout bounds a blocking connect made for the sandbox.
	ConnectTimeout time.Duration
	// LookupTimeout bounds one upstream lookup.
	LookupTimeout time.Duration
	// CheckSNI relays connections to port 443 through the supervisor and
	// lets one go on only when its TLS ClientHello names the allowed name
	// it was opened for (domain fronting is refused). Off by default: the
	// data path is then the kernel's alone. With it, an allow pattern
	// written without a port covers SNIPorts among DefaultPorts (443)
	// only (Allowlist.UnderCheckSNI).
	CheckSNI bool
	// SNIPorts are the ports CheckSNI applies to (nil: DefaultSNIPorts).
	SNIPorts []uint16
	// OnRefusal, when set, is called for every refused query or
	// connection (from the goroutine that refused it).
	OnRefusal func(*Refusal)
}

// Filter is one session's filtered network.
type Filter struct {
	cfg      Config
	resolver *net.Resolver
	pins     map[string]netip.Addr

	mu      sync.Mutex
	byName  map[string]*entry
	byAddr  map[netip.Addr]*entry
	next    uint32  // offset of the next virtual address in VirtualPrefix
	live    liveSet // connections made, still open in the sandbox
	spares  hostSockets
	dialing int // connections being dialled
	closed  bool
	// counted are the names that took a slot of MaxNames: every
	// distinct name looked up upstream (found or not) or pinned; byName
	// holds those found.
	counted map[string]struct{}
	// missing are the names found not to exist upstream, and when.
	missing map[string]time.Time
	// failed are the names whose last lookup failed (SERVFAIL, REFUSED,
	// a timeout) or was refused (errLocalAnswer), with the error and
	// until when it is answered again without a lookup (failedLookup).
	// Bounded as missing is: only a name holding a slot of MaxNames
	// (counted) is ever looked up, so only such a name gets here.
	failed map[string]failedLookup
	// looking are the names being looked up; closed when done.
	looking map[string]chan struct{}
	// reported are the refused names already reported (bounded).
	reported map[string]struct{}
	tcpConns map[net.Conn]struct{}
	// relays are the SNI relay's connections (both ends).
	relays map[net.Conn]struct{}
	// relayIDs are the running relays, by the id their installed end is
	// registered under in live (addRelay).
	relayIDs  map[uint64]struct{}
	relayNext uint64

	queries chan struct{} // semaphore: queries being answered
	// ctx ends the lookups in flight when the filter closes.
	ctx     context.Context
	cancel  context.CancelFunc
	servers sync.WaitGroup
	closers []func() error
	stats   counters
}

type entry struct {
	name    string
	virtual netip.Addr
	// real is replaced, never changed in place, under Filter.mu; readers
	// take a copy of the entry (lookupVirtual).
	real []netip.Addr
	// looked is when real was last looked up upstream (zero: pinned).
	looked time.Time
}

// relookAfter is how long an upstream answer is kept, found or not
// (NXDOMAIN, no address): queries for a name within it are answered
// without a lookup, so a loop of queries for one allowed name is not a
// loop of upstream queries (found by review: each query made two).
const relookAfter = 30 * time.Second

// failHoldDown is how long a failed lookup (SERVFAIL, REFUSED, a timeout,
// no upstream reachable) is answered from its record, SERVFAIL again,
// without asking upstream. RFC 9520 section 3.2 asks a resolver to cache
// such failures for at least 1 s and at most 5 min. 30 s, as relookAfter:
// a query loop for an allowed name whose zone fails (or one the sandbox can
// make fail under a wildcard) then costs upstream one lookup per name per
// 30 s, the same rate a found name costs, instead of a lookup per query
// (found by review: TestReview2DNSUpstreamFailureNotCached); and a passing
// outage of the host's resolver heals within half a minute, before a
// build's own retries give up.
const failHoldDown = 30 * time.Second

// failedLookup is the record of a failed or refused lookup: the error
// the lookup gave, answered again until until.
type failedLookup struct {
	err   error
	until time.Time
}

// errLocalAnswer is an upstream answer that names only addresses of the
// host itself or its link (localAnswer).
type errLocalAnswer struct{ addrs []netip.Addr }

func (e *errLocalAnswer) Error() string {
	return fmt.Sprintf("the name resolves upstream only to %v, an address of the host or its link: pin it with --add-host NAME:IP to reach it", e.addrs)
}

// localAnswer reports whether an address from upstream is one the filter
// never dials: the host's loopback, an unspecified or "this network"
// address, link-local (169.254.169.254, a cloud's metadata service, among
// them), multicast, or nsbox's own virtual range. An allowed name whose
// zone answers with one would otherwise lead the sandbox to the host's
// own services (DNS rebinding; found by review). A name pinned with
// --add-host may name any address: that is the user's choice.
func localAnswer(a netip.Addr) bool {
	return a.IsLoopback() || a.IsUnspecified() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || thisNetwork.Contains(a) || VirtualPrefix.Contains(a)
}

// hostAddrs returns the addresses of the host's own interfaces (this
// process's network namespace: the supervisor's). An upstream answer
// naming one of them leads to every host service listening on 0.0.0.0,
// as 127.0.0.1 would (found by review). An error gives none: the answer
// is then judged by localAnswer alone. Private ranges (10/8, fc00::/7 …)
// that are not the host's stay allowed: an internal registry is a common
// allowed name; docs/security.md says what that lets a zone's owner do.
func hostAddrs() map[netip.Addr]bool {
	ifas, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	own := make(map[netip.Addr]bool, len(ifas))
	for _, ifa := range ifas {
		if p, err := netip.ParsePrefix(ifa.String()); err == nil {
			own[p.Addr().Unmap()] = true
		}
	}
	return own
}

// embedsLocal reports whether the IPv6 address a carries an IPv4 address
// that localAnswer or own refuses: an IPv4-compatible address
// (::a.b.c.d, deprecated, RFC 4291 2.5.5.1), 6to4 (2002:AABB:CCDD::/48,
// RFC 3056) or NAT64's well-known prefix (64:ff9b::/96, RFC 6052). A
// host that routes these (a sit tunnel, a 6to4 relay, a local NAT64)
// would carry an upstream answer of ::127.0.0.1 to its own loopback
// (review 74; theoretical on a host with none of them).
func embedsLocal(a netip.Addr, own map[netip.Addr]bool) bool {
	if !a.Is6() || a.Is4In6() {
		return false
	}
	b := a.As16()
	var v4 [4]byte
	switch {
	case nat64.Contains(a):
		copy(v4[:], b[12:16])
	case sixToFour.Contains(a):
		copy(v4[:], b[2:6])
	case b == [16]byte{} || b == [16]byte{15: 1}:
		return false // :: and ::1, which localAnswer judges
	case [12]byte(b[:12]) == [12]byte{}:
		copy(v4[:], b[12:16]) // IPv4-compatible
	default:
		return false
	}
	e := netip.AddrFrom4(v4)
	return localAnswer(e) || own[e]
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// thisNetwork is 0.0.0.0/8 ("this host on this network", RFC 1122).
var thisNetwork = netip.MustParsePrefix("0.0.0.0/8")

type counters struct {
	queries, upstream, nxdomain, connects, refused atomic.Int64
}

// Stats are a Filter's counters.
type Stats struct {
	Queries   int64 // DNS queries answered
	Upstream  int64 // lookups sent upstream (allowed names only)
	NXDomain  int64 // queries answered NXDOMAIN without a lookup
	Connects  int64 // connections made for the sandbox
	Refused   int64 // connects and sends refused
	Names     int   // names in the address table
	OpenConns int   // connections made for the sandbox still open on the host
}

// New checks cfg and returns a Filter. It starts nothing: ServeDNS serves.
func New(cfg Config) (*Filter, error) {
	if cfg.Allow == nil {
		cfg.Allow = &Allowlist{}
	}
	if cfg.MaxNames <= 0 {
		cfg.MaxNames = DefaultMaxNames
	}
	if maxAddrs := 1 << (32 - VirtualPrefix.Bits()); cfg.MaxNames > maxAddrs/2 {
		cfg.MaxNames = maxAddrs / 2
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxQueries <= 0 {
		cfg.MaxQueries = DefaultMaxQueries
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.SNIPorts == nil {
		cfg.SNIPorts = DefaultSNIPorts
	}
	if cfg.CheckSNI {
		// A pattern without a port allows the checked ports only (443,
		// not plain HTTP's 80, where the Host header fronts unchecked).
		cfg.Allow = cfg.Allow.UnderCheckSNI(cfg.SNIPorts)
	}
	if cfg.LookupTimeout <= 0 {
		cfg.LookupTimeout = DefaultLookupTimeout
	}
	f := &Filter{
		cfg:      cfg,
		pins:     map[string]netip.Addr{},
		byName:   map[string]*entry{},
		byAddr:   map[netip.Addr]*entry{},
		live:     liveSet{ep: -1},
		tcpConns: map[net.Conn]struct{}{},
		relays:   map[net.Conn]struct{}{},
		relayIDs: map[uint64]struct{}{},
		counted:  map[string]struct{}{},
		missing:  map[string]time.Time{},
		failed:   map[string]failedLookup{},
		looking:  map[string]chan struct{}{},
		queries:  make(chan struct{}, cfg.MaxQueries),
		spares:   hostSockets{wake: make(chan struct{}, 1)},
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	for _, p := range cfg.Pins {
		if !cfg.Allow.Resolvable(p.Name) {
			return nil, &PatternError{Pattern: p.String(), Msg: fmt.Sprintf("%s is not allowed: a pin only says where an allowed name leads (add --allow-host %s)", p.Name, p.Name)}
		}
		f.pins[p.Name] = p.Addr
	}
	f.resolver = &net.Resolver{PreferGo: true, StrictErrors: true}
	if len(cfg.Upstream) > 0 {
		up := cfg.Upstream
		var n atomic.Uint32
		f.resolver.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			// The resolver's own choice of server (the host's
			// resolv.conf) is replaced by the configured ones, in turn.
			a := up[int(n.Add(1)-1)%len(up)]
			var d net.Dialer
			return d.DialContext(ctx, network, a.String())
		}
	}
	return f, nil
}

// Stats returns the counters.
func (f *Filter) Stats() Stats {
	f.mu.Lock()
	names, open := len(f.byName), f.live.n
	f.mu.Unlock()
	return Stats{
		Queries: f.stats.queries.Load(), Upstream: f.stats.upstream.Load(),
		NXDomain: f.stats.nxdomain.Load(), Connects: f.stats.connects.Load(),
		Refused: f.stats.refused.Load(), Names: names, OpenConns: open,
	}
}

// Close stops the DNS servers and waits for them. Connections already
// installed in the sandbox belong to it and end with its processes.
func (f *Filter) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.live.close()
	closers := f.closers
	f.closers = nil
	for c := range f.tcpConns {
		closers = append(closers, c.Close)
	}
	for c := range f.relays {
		closers = append(closers, c.Close)
	}
	f.mu.Unlock()
	f.cancel()
	var errs []error
	for _, c := range closers {
		if err := c(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	f.servers.Wait()
	return errors.Join(errs...)
}

// resolve returns the table entry of an allowed name, looking it up (or
// taking its pin) and handing out a virtual address the first time. ok is
// false when the name does not exist upstream.
func (f *Filter) resolve(ctx context.Context, name string) (e *entry, ok bool, err error) {
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return nil, false, ErrClosed
		}
		if e := f.byName[name]; e != nil && (e.looked.IsZero() || time.Since(e.looked) < relookAfter) {
			f.mu.Unlock()
			return e, true, nil // pinned, or looked up lately
		}
		// A name found missing upstream lately is answered so again
		// without a lookup, as a found one is: a loop of queries for
		// it is not a loop of upstream queries (found by review:
		// TestReviewDNSNonexistentNameNotCached).
		if at, missing := f.missing[name]; missing && time.Since(at) < relookAfter {
			f.mu.Unlock()
			return nil, false, nil
		}
		// A name whose lookup failed or was refused lately gets the
		// same error again without a lookup, for failHoldDown (or
		// relookAfter): neither a loop of queries nor the queries that
		// waited on that lookup (below) turn into upstream queries
		// (RFC 9520; found by review: TestReview2DNSUpstreamFailureNotCached,
		// TestReview2DNSLocalAnswerNotCached).
		if fl, failed := f.failed[name]; failed && time.Now().Before(fl.until) {
			f.mu.Unlock()
			return nil, false, fl.err
		}
		// One lookup of a name at a time: the others wait for its
		// answer (cached above) instead of each sending their own.
		if wait, busy := f.looking[name]; busy {
			f.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, false, ctx.Err()
			}
		}
		// Every distinct name that is looked up upstream (or pinned)
		// takes one of MaxNames slots before the lookup, found or not:
		// names are what carries data out through an allowed wildcard
		// ("<data>.zone"), whether the zone knows them or not, so past
		// the bound nothing new goes upstream. Reserved under mu: queries
		// in flight at once cannot pass the bound together (found by
		// review: TestReviewDNSWildcardMadeUpNamesUnbounded).
		if _, counted := f.counted[name]; !counted {
			if len(f.counted) >= f.cfg.MaxNames {
				f.mu.Unlock()
				return nil, false, &LimitError{What: "names", Limit: f.cfg.MaxNames}
			}
			f.counted[name] = struct{}{}
		}
		done := make(chan struct{})
		f.looking[name] = done
		f.mu.Unlock()
		e, ok, err = f.lookup(ctx, name)
		f.mu.Lock()
		delete(f.looking, name)
		f.mu.Unlock()
		close(done)
		return e, ok, err
	}
}

// lookup looks name up upstream (or takes its pin) and enters it in the
// table; a name that does not exist upstream is remembered as missing.
// The caller reserved its slot (resolve).
func (f *Filter) lookup(ctx context.Context, name string) (*entry, bool, error) {
	var real []netip.Addr
	var looked time.Time
	if a, pinned := f.pins[name]; pinned {
		real = []netip.Addr{a}
	} else {
		f.stats.upstream.Add(1)
		ctx, cancel := context.WithTimeout(ctx, f.cfg.LookupTimeout)
		defer cancel()
		// The trailing dot makes the name absolute: the host's search
		// domains are not appended, so no other name is sent upstream.
		addrs, lerr := f.resolver.LookupNetIP(ctx, "ip", name+".")
		var dnsErr *net.DNSError
		if errors.As(lerr, &dnsErr) && dnsErr.IsNotFound {
			f.setMissing(name)
			return nil, false, nil
		}
		if lerr != nil {
			// Recorded, so that the next query for the name is answered
			// from the record (resolve), not sent upstream again; not when
			// the filter is closing (its context ended the lookup).
			if f.ctx.Err() == nil {
				f.setFailed(name, lerr, failHoldDown)
			}
			return nil, false, lerr
		}
		var local []netip.Addr
		own := hostAddrs()
		for _, a := range addrs {
			if a = a.Unmap(); localAnswer(a) || own[a] || embedsLocal(a, own) {
				local = append(local, a)
				continue
			}
			real = append(real, a)
		}
		if len(real) == 0 && len(local) > 0 {
			// An answer, refused: kept as long as a found one is.
			err := &errLocalAnswer{addrs: local}
			f.setFailed(name, err, relookAfter)
			return nil, false, err
		}
		if len(real) == 0 {
			f.setMissing(name)
			return nil, false, nil
		}
		looked = time.Now()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, false, ErrClosed
	}
	delete(f.missing, name)
	delete(f.failed, name)
	if e := f.byName[name]; e != nil {
		e.real, e.looked = real, looked // replaced: a reader holds a copy
		return e, true, nil
	}
	e := &entry{name: name, virtual: f.allocLocked(), real: real, looked: looked}
	f.byName[name] = e
	f.byAddr[e.virtual] = e
	return e, true, nil
}

// setMissing remembers that name does not exist upstream (bounded: only
// names holding a slot, MaxNames, get here).
func (f *Filter) setMissing(name string) {
	f.mu.Lock()
	f.missing[name] = time.Now()
	delete(f.failed, name)
	f.mu.Unlock()
}

// setFailed records that name's lookup failed with err, to be answered so
// for hold (bounded as setMissing is: only names holding a slot get here).
func (f *Filter) setFailed(name string, err error, hold time.Duration) {
	f.mu.Lock()
	f.failed[name] = failedLookup{err: err, until: time.Now().Add(hold)}
	f.mu.Unlock()
}

// allocLocked returns the next virtual address, skipping those ending in
// .0 and .255 (some programs take them for network and broadcast).
func (f *Filter) allocLocked() netip.Addr {
	base := VirtualPrefix.Addr().As4()
	b := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	for {
		f.next++
		v := b + f.next
		if low := byte(v); low == 0 || low == 255 {
			continue
		}
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
}

// lookupVirtual returns a copy of the entry a virtual address was handed
// out for (resolve replaces an entry's addresses under mu: the copy is
// what a connect dials, without a race; found by review).
func (f *Filter) lookupVirtual(a netip.Addr) *entry {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.byAddr[a]
	if e == nil {
		return nil
	}
	cp := *e
	return &cp
}

// Names returns the names handed out so far and their virtual addresses.
func (f *Filter) Names() map[string]netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]netip.Addr, len(f.byName))
	for n, e := range f.byName {
		out[n] = e.virtual
	}
	return out
}

// portNotAllowed says why a connect to an allowed name's port is refused.
func (f *Filter) portNotAllowed(name string, port uint16) string {
	why := fmt.Sprintf("port %d of %s is not allowed (allow it with --allow-host %s:%d", port, name, name, port)
	if f.cfg.CheckSNI && slices.Contains(DefaultPorts, port) && !slices.Contains(f.cfg.SNIPorts, port) {
		why += "; with --check-sni a pattern without a port allows 443 only, and a port named so is not checked"
	}
	return why + ")"
}

func (f *Filter) refuse(r *Refusal) *Refusal {
	f.stats.refused.Add(1)
	if f.cfg.OnRefusal != nil {
		f.cfg.OnRefusal(r)
	}
	return r
}
