package netfilter

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// ErrRefused is matched by every *Refusal.
var ErrRefused = errors.New("refused by the network filter")

// Operations a Refusal names.
const (
	OpLookup  = "lookup"  // a DNS query for a name that is not allowed
	OpConnect = "connect" // a connect the filter refused
	OpSend    = "send"    // a datagram with a destination (sendto, sendmsg)
)

// Refusal is a lookup, connect or send the filter refused. It names the
// host as the sandbox wrote it: the DNS name when the address is one nsbox
// handed out, else the literal address.
type Refusal struct {
	Op     string // OpLookup, OpConnect, OpSend
	Host   string // "evil.example" or "203.0.113.7"
	Port   uint16 // 0 for a lookup
	Reason string // for people: why, and how to allow it where that makes sense
	// Errno is what the sandboxed syscall fails with (EACCES for a
	// refused connect or send, as Landlock's TCP rules answer).
	Errno unix.Errno
	// Err is the cause when a bound refused it (a *LimitError).
	Err error
}

// Unwrap returns the cause (errors.Is(err, ErrLimit) for a bound).
func (r *Refusal) Unwrap() error { return r.Err }

func (r *Refusal) Error() string {
	return fmt.Sprintf("network filter: %s %s refused: %s", r.Op, r.Target(), r.Reason)
}

// Target is "host:port", or the host alone for a lookup.
func (r *Refusal) Target() string {
	if r.Port == 0 {
		return r.Host
	}
	return joinHostPort(r.Host, r.Port)
}

// Is makes errors.Is(err, ErrRefused) true.
func (r *Refusal) Is(target error) bool { return target == ErrRefused }

func joinHostPort(host string, port uint16) string {
	for i := 0; i < len(host); i++ {
		if host[i] == ':' {
			return "[" + host + "]:" + strconv.Itoa(int(port))
		}
	}
	return host + ":" + strconv.Itoa(int(port))
}
