package mcpserver

import (
	"context"
	"net"
	"net/http"
	"slices"
	"sync"
)

// connPools bounds the connections Serve holds open, in two pools, so that
// clients without the token cannot starve the one that has it.
//
// A bound counted at accept (netutil.LimitListener, as before) cannot tell
// the two apart: any local user, or anyone who reaches an address served
// with --token-file, held every slot with tokenless connections and the
// client with the token waited in the kernel's accept queue (found by
// review: TestReview2HostHTTPUnauthenticatedHoldsConnSlots). So:
//
//   - A connection is unauthenticated from accept until a request on it
//     passes the Host check and the bearer check (promote); at most
//     maxUnauth (MaxConns) are open. A refused request (401, 403)
//     closes its connection (closeRefused), so a tokenless connection holds
//     its slot for one request at most, or for ReadHeaderTimeout while it
//     sends no complete request.
//   - When that pool is full, a new connection does not wait behind the
//     ones that hold it: the oldest unauthenticated connection that is not
//     being served (its request's headers not all read: a silent or slow
//     client, what a slot holder is) is closed to make room. A client with
//     the token sends its headers as soon as it connects and is promoted by
//     its first request; a tokenless client that wants to keep it out must
//     open new connections faster than that (maxUnauth of them within the
//     time one request's headers take), and can no longer hold them.
//   - An authenticated connection moves to the other pool (maxAuth, also
//     MaxConns), which no tokenless connection can enter and from
//     which none is ever closed to make room: a client with the token keeps
//     its keep-alive connections, event streams and long calls whatever the
//     tokenless ones do. Past maxAuth a connection stays in the first pool.
//
// Both pools together hold at most twice MaxConns descriptors (the bound
// on what a new sandbox may be starved of: 512 by default, as before).
type connPools struct {
	mu        sync.Mutex
	maxUnauth int
	maxAuth   int
	auth      int         // authenticated connections open
	unauth    []*poolConn // unauthenticated connections, oldest first
}

func newConnPools(maxConns int) *connPools {
	return &connPools{maxUnauth: maxConns, maxAuth: maxConns}
}

// poolConn is a connection Serve accepted, counted in a pool until closed.
type poolConn struct {
	net.Conn
	p    *connPools
	once sync.Once
	// Under p.mu: authed, it counts in the authenticated pool; serving, a
	// handler runs for a request read whole from it.
	authed  bool
	serving bool
}

// Close gives the connection's slot back (once) and closes it.
func (c *poolConn) Close() error {
	c.once.Do(func() {
		c.p.mu.Lock()
		if c.authed {
			c.p.auth--
		} else if i := slices.Index(c.p.unauth, c); i >= 0 {
			c.p.unauth = slices.Delete(c.p.unauth, i, i+1)
		}
		c.p.mu.Unlock()
	})
	return c.Conn.Close()
}

// poolListener counts every connection it accepts in the unauthenticated
// pool, making room as connPools says.
type poolListener struct {
	net.Listener
	p *connPools
}

func (l *poolListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		pc := &poolConn{Conn: c, p: l.p}
		victim, ok := l.p.admit(pc)
		if victim != nil {
			victim.Close()
		}
		if ok {
			return pc, nil
		}
		// Every unauthenticated slot is being served (each such request
		// ends within its handler's checks, or is a call of a client with
		// the token past maxAuth): the new one is refused, the bound holds.
		c.Close()
	}
}

// admit enters c in the unauthenticated pool; when the pool is full it
// takes out the oldest connection not being served, for the caller to
// close. ok is false when there is none: c is not entered.
func (p *connPools) admit(c *poolConn) (victim *poolConn, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.unauth) >= p.maxUnauth {
		i := slices.IndexFunc(p.unauth, func(o *poolConn) bool { return !o.serving })
		if i < 0 {
			return nil, false
		}
		// The oldest connection that has not sent a whole request makes
		// room: a silent or slow slot holder cannot keep a new client
		// (the token holder's among them) waiting in the accept queue.
		victim = p.unauth[i]
		p.unauth = slices.Delete(p.unauth, i, i+1)
		// Closed by the caller: its Close finds it in no pool.
	}
	p.unauth = append(p.unauth, c)
	return victim, true
}

// promote moves c to the authenticated pool when that has room.
func (p *connPools) promote(c *poolConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.authed || p.auth >= p.maxAuth {
		return
	}
	i := slices.Index(p.unauth, c)
	if i < 0 {
		return // taken out to be closed
	}
	// Out of reach of tokenless clients from here: never taken to make
	// room (admit looks in unauth only).
	p.unauth = slices.Delete(p.unauth, i, i+1)
	p.auth++
	c.authed = true
}

func (p *connPools) setServing(c *poolConn, on bool) {
	p.mu.Lock()
	c.serving = on
	p.mu.Unlock()
}

type poolConnKey struct{}

// connOf returns the poolConn a request came on (nil when the handler is
// served by something other than Serve, as in tests).
func connOf(r *http.Request) *poolConn {
	c, _ := r.Context().Value(poolConnKey{}).(*poolConn)
	return c
}

// withPoolConn is Serve's ConnContext: it gives each request its
// connection.
func withPoolConn(ctx context.Context, c net.Conn) context.Context {
	if pc, ok := c.(*poolConn); ok {
		return context.WithValue(ctx, poolConnKey{}, pc)
	}
	return ctx
}

// promoted is put right behind the bearer check: a request that reaches it
// passed the Host check and carries the token, and its connection moves to
// the authenticated pool.
func promoted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := connOf(r); c != nil {
			c.p.promote(c)
		}
		next.ServeHTTP(w, r)
	})
}

// closeRefused is the outermost handler. It marks the connection as being
// served for as long as the request is (connPools does not close it to make
// room), and a refusal (401 from the bearer check, 403 from the Host
// check or the SDK) closes the connection after the answer (Connection:
// close, RFC 9112 section 9.6): a client without the token gets one
// answer per connection, and a connection it keeps open holds a slot only
// until ReadHeaderTimeout (found by review:
// TestReview2HostHTTPUnauthenticatedHoldsConnSlots).
func closeRefused(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := connOf(r); c != nil {
			c.p.setServing(c, true)
			defer c.p.setServing(c, false)
		}
		next.ServeHTTP(&refusalWriter{ResponseWriter: w}, r)
	})
}

// refusalWriter adds Connection: close to a 401 or 403 answer.
type refusalWriter struct {
	http.ResponseWriter
}

func (w *refusalWriter) WriteHeader(code int) {
	if code == http.StatusUnauthorized || code == http.StatusForbidden {
		// One refused request per connection: a tokenless client cannot
		// keep a slot alive with a refused request every few seconds.
		w.Header().Set("Connection", "close")
	}
	w.ResponseWriter.WriteHeader(code)
}

// Flush and Unwrap let the SDK flush each event through the wrapper
// (http.ResponseController).
func (w *refusalWriter) Flush() {
	if fl, ok := w.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
