package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxMessage bounds one JSON-RPC message (one line on stdin).
const DefaultMaxMessage = 16 << 20

// lineTransport is the stdio transport of the server: newline-delimited
// JSON-RPC, as the MCP stdio transport specifies. Unlike the SDK's own stdio
// transport, a bad line does not end the connection: the client gets the
// JSON-RPC error the specification prescribes (parse error, invalid
// request, request too large) and the server reads the next line.
type lineTransport struct {
	in   io.Reader
	out  io.Writer
	max  int
	conn *lineConn // nil: a new one
}

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := t.conn
	if c == nil {
		c = newLineConn(t.out)
	}
	go c.readLoop(t.in, t.max)
	return c, nil
}

func newLineConn(out io.Writer) *lineConn {
	return &lineConn{
		out:       out,
		incoming:  make(chan jsonrpc.Message),
		closed:    make(chan struct{}),
		readDone:  make(chan struct{}),
		stopping:  make(chan struct{}),
		settled:   make(chan struct{}, 1),
		pending:   map[any]string{},
		cancelled: map[any]bool{},
	}
}

// lineConn is one stdio connection.
//
// The end of the input is not the end of the work: a client may write its
// requests and close stdin at once (a pipe, a script). Read therefore
// reports the end only once every request read has been answered; until
// then the SDK keeps serving them. (The SDK, told of the end at once,
// cancels the requests in flight and can write no answer.)
type lineConn struct {
	out      io.Writer
	writeMu  sync.Mutex
	incoming chan jsonrpc.Message
	readErr  error
	readDone chan struct{} // closed when the input has ended
	closed   chan struct{}
	once     sync.Once
	stopping chan struct{} // closed by Stop: read no more requests
	stopOnce sync.Once

	mu sync.Mutex
	// pending are the requests read and not answered yet (id → method).
	pending map[any]string
	// cancelled are pending requests the client cancelled
	// (notifications/cancelled): they get no answer, as the specification
	// requires.
	cancelled map[any]bool
	// initialized: an initialize request was answered with success.
	initialized bool
	// broken: a write failed; no answer can reach the client any more.
	broken  bool
	settled chan struct{} // a pending request was answered, or broken set
}

var _ mcp.Connection = (*lineConn)(nil)

func (c *lineConn) SessionID() string { return "" }

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m := <-c.incoming:
		return m, nil
	case <-c.readDone:
		// Messages read before the end are delivered first: incoming is
		// unbuffered, so nothing is pending once readDone is closed.
		if err := c.drain(ctx); err != nil {
			return nil, err
		}
		if c.readErr != nil {
			return nil, c.readErr
		}
		return nil, io.EOF
	case <-c.stopping:
		if err := c.drain(ctx); err != nil {
			return nil, err
		}
		return nil, io.EOF
	case <-c.closed:
		return nil, io.EOF
	}
}

// drain waits until every request read has been answered (or can no
// longer be).
func (c *lineConn) drain(ctx context.Context) error {
	for {
		c.mu.Lock()
		done := len(c.pending) == 0 || c.broken
		c.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-c.settled:
		case <-c.closed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Stop reads no more requests: those already read are answered, then Read
// reports the end. Requests that arrive afterwards are refused.
func (c *lineConn) Stop() { c.stopOnce.Do(func() { close(c.stopping) }) }

func (c *lineConn) signal() {
	select {
	case c.settled <- struct{}{}:
	default:
	}
}

// track notes a request about to be delivered to the SDK; it reports false
// for an id already pending (the SDK refuses the duplicate with an answer
// that carries no id).
func (c *lineConn) track(req *jsonrpc.Request) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := req.ID.Raw()
	if _, dup := c.pending[key]; dup {
		return false
	}
	c.pending[key] = req.Method
	return true
}

func (c *lineConn) untrack(key any) {
	c.mu.Lock()
	delete(c.pending, key)
	delete(c.cancelled, key)
	c.mu.Unlock()
	c.signal()
}

// noteCancel marks the request a notifications/cancelled names, if it is
// still pending.
func (c *lineConn) noteCancel(req *jsonrpc.Request) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil || !id.IsValid() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// initialize cannot be cancelled (the specification says so).
	if m, ok := c.pending[id.Raw()]; ok && m != "initialize" {
		c.cancelled[id.Raw()] = true
	}
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		var drop bool
		if resp, drop = c.answering(resp); drop {
			return nil
		}
		msg = resp
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	return c.writeLine(data)
}

// answering settles the request resp answers. It reports drop for the
// answer of a cancelled request, and gives an error the SDK left without
// a JSON-RPC code (code 0, which clients cannot classify) one: invalid
// request before the session is initialized (a tools/call before
// initialize), internal error after.
func (c *lineConn) answering(resp *jsonrpc.Response) (_ *jsonrpc.Response, drop bool) {
	key := resp.ID.Raw()
	c.mu.Lock()
	method := c.pending[key]
	drop = c.cancelled[key]
	if method == "initialize" && resp.Error == nil {
		c.initialized = true
	}
	initialized := c.initialized
	c.mu.Unlock()
	defer c.untrack(key)
	if drop || resp.Error == nil {
		return resp, drop
	}
	var we *jsonrpc.Error
	if errors.As(resp.Error, &we) && we.Code != 0 {
		return resp, false
	}
	code := int64(jsonrpc.CodeInternalError)
	text := resp.Error.Error()
	if !initialized {
		code = jsonrpc.CodeInvalidRequest
		text = "the session is not initialized: send initialize first (" + text + ")"
	}
	out := *resp
	out.Error = &jsonrpc.Error{Code: code, Message: text}
	return &out, false
}

func (c *lineConn) writeLine(data []byte) error {
	select {
	case <-c.closed:
		return io.ErrClosedPipe
	default:
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err := c.out.Write(append(data, '\n'))
	if err != nil {
		c.mu.Lock()
		c.broken = true
		c.mu.Unlock()
		c.signal()
	}
	return err
}

// Close stops delivering messages. A read of stdin blocked in the kernel
// cannot be interrupted portably; that goroutine ends with the input or
// with the process.
func (c *lineConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// errorResponse writes a JSON-RPC error that is not the answer of a handler:
// id is the request's id when it could be read, else null.
func (c *lineConn) errorResponse(id json.RawMessage, code int64, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: msg}}
	data, err := json.Marshal(resp)
	if err != nil {
		return
	}
	c.writeLine(data)
}

func (c *lineConn) readLoop(in io.Reader, max int) {
	defer close(c.readDone)
	if max <= 0 {
		max = DefaultMaxMessage
	}
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, size, id, err := readLine(r, max)
		if len(line) > 0 || size > 0 {
			if msg := c.decode(line, size, id, max); msg != nil && !c.deliver(msg) {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				c.readErr = err
			}
			return
		}
	}
}

// deliver hands a message to the SDK; it reports false once the
// connection is closed.
func (c *lineConn) deliver(msg jsonrpc.Message) bool {
	req, _ := msg.(*jsonrpc.Request)
	tracked := false
	if req != nil {
		switch {
		case req.IsCall():
			tracked = c.track(req)
		case req.Method == "notifications/cancelled":
			c.noteCancel(req)
		}
	}
	select {
	case c.incoming <- msg:
		return true
	case <-c.closed:
		return false
	case <-c.stopping:
		// The server is shutting down: a new request is refused, not
		// started.
		if tracked {
			c.untrack(req.ID.Raw())
		}
		if req != nil && req.IsCall() {
			id, _ := json.Marshal(req.ID.Raw())
			c.errorResponse(id, jsonrpc.CodeInternalError, ErrClosed.Error())
		}
		return true
	}
}

// readLine returns the next line without its end. A line longer than max
// is not kept: it is read to its end and reported by its size, with the
// top-level "id" found by a streaming scan, so that the request can be
// answered.
func readLine(r *bufio.Reader, max int) (line []byte, size int, id json.RawMessage, err error) {
	var (
		buf  []byte
		scan *idScanner
	)
	for {
		chunk, e := r.ReadSlice('\n')
		size += len(chunk)
		switch {
		case scan != nil:
			scan.feed(chunk)
		case len(buf)+len(chunk) > max+2: // +2: the line end
			scan = &idScanner{}
			scan.feed(buf)
			scan.feed(chunk)
			buf = nil
		default:
			buf = append(buf, chunk...)
		}
		if e == bufio.ErrBufferFull {
			continue
		}
		if scan != nil {
			return nil, size, scan.result(), e
		}
		return bytes.TrimRight(buf, "\r\n"), 0, nil, e
	}
}

// decode turns one line into a message, or answers it with a JSON-RPC
// error and returns nil.
func (c *lineConn) decode(line []byte, size int, oversizeID json.RawMessage, max int) jsonrpc.Message {
	if size > 0 {
		c.errorResponse(oversizeID, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("request too large: %s (the limit is %s)", humanBytes(int64(size)), humanBytes(int64(max))))
		return nil
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil // blank lines between messages are harmless
	}
	if !json.Valid(line) {
		c.errorResponse(nil, jsonrpc.CodeParseError, "parse error: the message is not valid JSON")
		return nil
	}
	if line[0] == '[' {
		// JSON-RPC batches left MCP with protocol version 2025-06-18.
		c.errorResponse(nil, jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported; send one message per line")
		return nil
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		c.errorResponse(requestID(line), jsonrpc.CodeInvalidRequest, "invalid request: "+describeDecodeError(line))
		return nil
	}
	return msg
}

// requestID returns the id of a message that failed to decode, when it is
// a valid id (a string or a number).
func requestID(line []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	return validID(m.ID)
}

func validID(raw json.RawMessage) json.RawMessage {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return nil
	}
	switch v.(type) {
	case string, float64:
		return raw
	}
	return nil
}

// describeDecodeError says what is wrong with a JSON object that is not a
// JSON-RPC 2.0 message, in the specification's terms.
func describeDecodeError(line []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return "a message must be a JSON object"
	}
	if string(m["jsonrpc"]) != `"2.0"` {
		return `"jsonrpc" must be "2.0"`
	}
	if id, ok := m["id"]; ok && validID(id) == nil && string(id) != "null" {
		return `"id" must be a string or a number`
	}
	if meth, ok := m["method"]; ok {
		var s string
		if json.Unmarshal(meth, &s) != nil {
			return `"method" must be a string`
		}
	} else if _, ok := m["id"]; !ok {
		return `a message needs a "method" (a request or notification) or an "id" (a response)`
	}
	return "not a JSON-RPC 2.0 message"
}

// idScanner finds the top-level "id" member of a JSON object streamed
// through feed, keeping only a few bytes: it answers requests too large to
// hold.
type idScanner struct {
	depth      int
	inStr, esc bool
	expectKey  bool // the next string at depth 1 is a member name
	readingKey bool
	haveKey    bool // a member name was read, its ':' is next
	key        []byte
	capturing  bool // inside the value of the top-level "id"
	val        []byte
	done       bool
	id         json.RawMessage
}

func (s *idScanner) feed(b []byte) {
	for _, ch := range b {
		if s.done {
			return
		}
		if s.capturing {
			if !s.inStr && s.depth == 1 && (ch == ',' || ch == '}') {
				s.id = validID(bytes.TrimSpace(s.val))
				s.done = true
				return
			}
			if len(s.val) > 256 {
				s.done = true // not a valid id anyway
				return
			}
			s.val = append(s.val, ch)
		}
		if s.inStr {
			switch {
			case s.esc:
				s.esc = false
			case ch == '\\':
				s.esc = true
			case ch == '"':
				s.inStr = false
				if s.readingKey {
					s.readingKey, s.haveKey = false, true
				}
				continue
			}
			if s.readingKey && len(s.key) < 8 {
				s.key = append(s.key, ch)
			}
			continue
		}
		switch ch {
		case '"':
			s.inStr = true
			if s.depth == 1 && s.expectKey {
				s.readingKey, s.expectKey = true, false
				s.key = s.key[:0]
			}
		case '{', '[':
			s.depth++
			if s.depth == 1 && ch == '{' {
				s.expectKey = true
			}
		case '}', ']':
			s.depth--
		case ':':
			if s.depth == 1 && s.haveKey {
				s.haveKey = false
				if string(s.key) == "id" {
					s.capturing = true
				}
			}
		case ',':
			if s.depth == 1 {
				s.expectKey = true
			}
		}
	}
}

func (s *idScanner) result() json.RawMessage { return s.id }

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
