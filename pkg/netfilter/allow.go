package netfilter

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// DefaultPorts are the ports a pattern without ":PORT" allows: HTTP and
// HTTPS, what package registries and their mirrors serve on.
var DefaultPorts = []uint16{80, 443}

// MaxPatterns bounds an allow or deny list: a policy is written by a
// person, and a list this long is a mistake (or an attempt to make every
// lookup slow).
const MaxPatterns = 4096

// ErrPattern is matched by every *PatternError.
var ErrPattern = errors.New("invalid host pattern")

// PatternError says why a host pattern or a host pin was refused.
type PatternError struct {
	Pattern string // as written
	Msg     string
}

func (e *PatternError) Error() string {
	return fmt.Sprintf("host pattern %q: %s", e.Pattern, e.Msg)
}

// Is makes errors.Is(err, ErrPattern) true.
func (e *PatternError) Is(target error) bool { return target == ErrPattern }

// Pattern is one entry of an allow or deny list: a DNS name, or "*." and a
// suffix that matches every name below it (not the suffix itself), with the
// ports it covers.
type Pattern struct {
	// Name is the lower-case name without a trailing dot; for a wildcard
	// it is the suffix after "*.".
	Name string
	// Wildcard: "*.Name" matches "a.Name", "a.b.Name", not "Name".
	Wildcard bool
	// Ports the pattern covers; nil means every port (deny patterns
	// written without a port).
	Ports []uint16
	// Bare: written without ":PORT" (Ports are the default ones).
	Bare bool
}

// String renders the pattern in the form ParsePattern reads.
func (p Pattern) String() string {
	s := p.Name
	if p.Wildcard {
		s = "*." + s
	}
	if p.Ports != nil && !slices.Equal(p.Ports, DefaultPorts) {
		ps := make([]string, len(p.Ports))
		for i, n := range p.Ports {
			ps[i] = strconv.Itoa(int(n))
		}
		s += ":" + strings.Join(ps, ",")
	}
	return s
}

// MatchName reports whether the pattern covers name (already normalized
// with NormalizeName), on any of its ports.
func (p Pattern) MatchName(name string) bool {
	if !p.Wildcard {
		return name == p.Name
	}
	// "*.example.com" must not match "evilexample.com": the suffix is
	// compared with its leading dot.
	return len(name) > len(p.Name)+1 && strings.HasSuffix(name, p.Name) && name[len(name)-len(p.Name)-1] == '.'
}

// Match reports whether the pattern covers name on port.
func (p Pattern) Match(name string, port uint16) bool {
	return p.MatchName(name) && (p.Ports == nil || slices.Contains(p.Ports, port))
}

// ParsePattern reads "NAME", "*.SUFFIX", "NAME:PORT" or "NAME:P1,P2". A
// pattern without a port covers defaultPorts (nil: every port). Names are
// compared case-insensitively; a trailing dot is dropped. IP addresses are
// refused: the filter allows names, and a sandbox must not be able to reach
// an address nsbox did not hand out (pin a name with a host pin instead).
func ParsePattern(s string, defaultPorts []uint16) (Pattern, error) {
	bad := func(format string, a ...any) (Pattern, error) {
		return Pattern{}, &PatternError{Pattern: s, Msg: fmt.Sprintf(format, a...)}
	}
	if s == "" {
		return bad("empty")
	}
	if len(s) > 300 {
		return bad("longer than a DNS name can be")
	}
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") > 1 {
		return bad("an IPv6 address is not a host name; the filter allows names only (pin a name to an address with --add-host NAME:IP)")
	}
	host, portStr, hasPort := strings.Cut(s, ":")
	p := Pattern{Ports: defaultPorts, Bare: !hasPort}
	if hasPort {
		ports, err := parsePorts(portStr)
		if err != nil {
			return bad("%s", err)
		}
		p.Ports = ports
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		p.Wildcard, host = true, rest
	}
	if host == "*" || host == "" {
		return bad("a pattern must name a domain: \"*\" alone would allow every name (use --net host for an open network)")
	}
	if strings.Contains(host, "*") {
		return bad("\"*\" is allowed only as the whole first label (\"*.example.com\")")
	}
	name, err := NormalizeName(host)
	if err != nil {
		return bad("%s", err)
	}
	if looksNumeric(name) {
		return bad("an IP address is not a host name; the filter allows names only (pin a name to an address with --add-host NAME:IP)")
	}
	if p.Wildcard && !strings.Contains(name, ".") {
		return bad("\"*.%s\" would allow a whole top-level domain; name at least two labels", name)
	}
	p.Name = name
	return p, nil
}

// looksNumeric reports whether name's last label is all digits, as in an
// IPv4 address (also the forms inet_aton(3) reads, "01.2.3.4", "127.1"):
// no top-level domain is numeric (RFC 3696 section 2), so such a name can
// only be an address in disguise.
func looksNumeric(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}

func parsePorts(s string) ([]uint16, error) {
	if s == "" {
		return nil, errors.New("empty port after \":\"")
	}
	var out []uint16
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.ParseUint(f, 10, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%q is not a port (1-65535)", f)
		}
		if !slices.Contains(out, uint16(n)) {
			out = append(out, uint16(n))
		}
		if len(out) > 64 {
			return nil, errors.New("more than 64 ports; write separate patterns")
		}
	}
	slices.Sort(out)
	return out, nil
}

// NormalizeName checks a DNS host name (RFC 1123 labels; "_" is accepted, as
// service names use it) and returns it in lower case without a trailing dot.
func NormalizeName(s string) (string, error) {
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return "", errors.New("empty name")
	}
	if len(s) > 253 {
		return "", errors.New("a DNS name has at most 253 characters")
	}
	b := []byte(s)
	label := 0
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z':
			b[i] = c + 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
		case c == '-':
			if label == 0 || i+1 == len(b) || b[i+1] == '.' {
				return "", errors.New("a label cannot start or end with \"-\"")
			}
		case c == '.':
			if label == 0 {
				return "", errors.New("empty label (\"..\" or a leading dot)")
			}
			label = 0
			continue
		default:
			return "", fmt.Errorf("character %q is not allowed in a host name", c)
		}
		label++
		if label > 63 {
			return "", errors.New("a label has at most 63 characters")
		}
	}
	if label == 0 {
		return "", errors.New("empty label (\"..\" at the end)")
	}
	return string(b), nil
}

// Allowlist is the parsed allow and deny lists of a session. Deny wins.
type Allowlist struct {
	Allow []Pattern
	Deny  []Pattern
}

// ParseAllowlist parses both lists. Allow patterns without a port cover
// DefaultPorts; deny patterns without a port cover every port. The error
// names the first bad entry.
func ParseAllowlist(allow, deny []string) (*Allowlist, error) {
	if len(allow) > MaxPatterns || len(deny) > MaxPatterns {
		return nil, &PatternError{Pattern: "...", Msg: fmt.Sprintf("more than %d patterns", MaxPatterns)}
	}
	a := &Allowlist{}
	for _, s := range allow {
		p, err := ParsePattern(s, DefaultPorts)
		if err != nil {
			return nil, err
		}
		a.Allow = append(a.Allow, p)
	}
	for _, s := range deny {
		p, err := ParsePattern(s, nil)
		if err != nil {
			return nil, err
		}
		a.Deny = append(a.Deny, p)
	}
	return a, nil
}

// Resolvable reports whether nsbox may resolve name for the sandbox: an
// allow pattern covers it on some port and no port-less deny pattern covers
// it. A name that is not resolvable gets NXDOMAIN without any upstream
// query, so made-up names cannot carry data out through DNS.
func (a *Allowlist) Resolvable(name string) bool {
	for _, d := range a.Deny {
		if d.Ports == nil && d.MatchName(name) {
			return false
		}
	}
	for _, p := range a.Allow {
		if p.MatchName(name) {
			return true
		}
	}
	return false
}

// Allowed reports whether a connection to name:port is allowed: an allow
// pattern covers it and no deny pattern does (deny wins).
func (a *Allowlist) Allowed(name string, port uint16) bool {
	for _, d := range a.Deny {
		if d.Match(name, port) {
			return false
		}
	}
	for _, p := range a.Allow {
		if p.Match(name, port) {
			return true
		}
	}
	return false
}

// UnderCheckSNI returns the lists as a session with CheckSNI applies them:
// an allow pattern written without a port covers only those of its
// default ports the SNI check covers (sniPorts: 443 by default), not 80.
// On port 80 a CDN routes by the HTTP Host header, in clear and
// unchecked: the fronting --check-sni is asked to stop would go on
// there (found by review: TestReviewDNSCheckSNILeavesPort80Fronted). A
// port written in the pattern (NAME:80) stays allowed, unchecked.
func (a *Allowlist) UnderCheckSNI(sniPorts []uint16) *Allowlist {
	out := &Allowlist{Deny: a.Deny, Allow: make([]Pattern, len(a.Allow))}
	for i, p := range a.Allow {
		if p.Bare {
			var ports []uint16
			for _, n := range p.Ports {
				if slices.Contains(sniPorts, n) {
					ports = append(ports, n)
				}
			}
			// Not nil: nil would mean every port.
			p.Ports = append(make([]uint16, 0, len(ports)), ports...)
		}
		out.Allow[i] = p
	}
	return out
}

// Describe renders the allow list with the ports each pattern covers,
// written out ("registry.npmjs.org:80,443"), and under checkSNI (with
// DefaultSNIPorts) as UnderCheckSNI applies it, saying which connections
// have their TLS server name checked. For dry runs and status output.
func (a *Allowlist) Describe(checkSNI bool) []string {
	if checkSNI {
		a = a.UnderCheckSNI(DefaultSNIPorts)
	}
	var out []string
	for _, p := range a.Allow {
		s := p.Name
		if p.Wildcard {
			s = "*." + s
		}
		ps := make([]string, len(p.Ports))
		var checked []string
		for i, n := range p.Ports {
			ps[i] = strconv.Itoa(int(n))
			if checkSNI && slices.Contains(DefaultSNIPorts, n) {
				checked = append(checked, ps[i])
			}
		}
		s += ":" + strings.Join(ps, ",")
		if len(checked) > 0 {
			s += " (TLS server name checked on " + strings.Join(checked, ",") + ")"
		}
		out = append(out, s)
	}
	return out
}

// Strings renders the lists as ParsePattern reads them (for status output).
func (a *Allowlist) Strings() (allow, deny []string) {
	for _, p := range a.Allow {
		allow = append(allow, p.String())
	}
	for _, p := range a.Deny {
		s := p.String()
		deny = append(deny, s)
	}
	return allow, deny
}

// HostPin is one --add-host NAME:IP: the address nsbox dials when the
// sandbox connects to NAME, instead of what the upstream resolver says.
type HostPin struct {
	Name string
	Addr netip.Addr
}

// ParseHostPin reads "NAME:IP" as Docker's --add-host does (the IP may be an
// IPv6 address, "name:::1", or bracketed, "name:[::1]"; "NAME=IP" is read
// too).
func ParseHostPin(s string) (HostPin, error) {
	bad := func(format string, a ...any) (HostPin, error) {
		return HostPin{}, &PatternError{Pattern: s, Msg: fmt.Sprintf(format, a...)}
	}
	sep := strings.IndexAny(s, ":=")
	if sep <= 0 {
		return bad("want NAME:IP")
	}
	name, ip := s[:sep], s[sep+1:]
	ip = strings.TrimSuffix(strings.TrimPrefix(ip, "["), "]")
	n, err := NormalizeName(name)
	if err != nil {
		return bad("%s", err)
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return bad("%q is not an IP address", ip)
	}
	if addr.Zone() != "" {
		return bad("an address with a zone is not supported")
	}
	return HostPin{Name: n, Addr: addr.Unmap()}, nil
}

// String renders the pin as ParseHostPin reads it.
func (h HostPin) String() string { return h.Name + ":" + h.Addr.String() }
