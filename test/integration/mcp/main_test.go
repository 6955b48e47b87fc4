// Package mcpintegration tests `nsbox mcp` as its clients see it: the built
// binary runs as a separate process and real MCP clients speak to it over
// stdio — the official Go SDK's client, the official TypeScript SDK's
// client (node/), and raw JSON-RPC lines for input no client would send.
// Each test runs as root and as an unprivileged user (uid 65534) when the
// tests run as root, and skips with nsbox's own reason when a sandbox cannot
// be built here.
package mcpintegration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// nsboxBin is the binary under test: $NSBOX_BIN, or bin/nsbox at the
// repository root.
func nsboxBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binPath = os.Getenv("NSBOX_BIN")
		if binPath == "" {
			binPath, _ = filepath.Abs("../../../bin/nsbox")
		}
		if _, err := os.Stat(binPath); err != nil {
			binErr = fmt.Errorf("nsbox binary not found at %s (run make build, or set NSBOX_BIN): %v", binPath, err)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// user is an identity the server runs as.
type user struct {
	name     string
	uid, gid int
	switchTo bool // the test runs as root and drops to uid/gid for nsbox
}

func users() []user {
	if os.Getuid() == 0 {
		return []user{{name: "root"}, {name: "rootless", uid: 65534, gid: 65534, switchTo: true}}
	}
	return []user{{name: "rootless", uid: os.Getuid(), gid: os.Getgid()}}
}

func eachUser(t *testing.T, fn func(t *testing.T, u user)) {
	t.Helper()
	for _, u := range users() {
		t.Run(u.name, func(t *testing.T) {
			requireSandbox(t, u)
			fn(t, u)
		})
	}
}

var (
	probeMu  sync.Mutex
	probeErr = map[string]error{}
)

// requireSandbox skips when nsbox cannot build a sandbox as u here, with
// nsbox's own reason.
func requireSandbox(t *testing.T, u user) {
	t.Helper()
	probeMu.Lock()
	defer probeMu.Unlock()
	err, done := probeErr[u.name]
	if !done {
		h := newHome(t, u)
		cmd := exec.Command(nsboxBin(t), "run", "--workspace", h.ws, "--", "/bin/true")
		h.setup(cmd)
		out, runErr := cmd.CombinedOutput()
		if runErr != nil {
			err = fmt.Errorf("nsbox cannot build a sandbox as %s here: %s", u.name, strings.TrimSpace(string(out)))
		}
		probeErr[u.name] = err
	}
	if err != nil {
		t.Skip(err.Error())
	}
}

// home is the private world of one server: a workspace, a config and a data
// directory, all owned by the user it runs as.
type home struct {
	u                   user
	base, ws, cfg, data string
}

func newHome(t *testing.T, u user) *home {
	t.Helper()
	base, err := os.MkdirTemp("", "nsbox-mcp-it-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	h := &home{u: u, base: base, ws: filepath.Join(base, "ws"), cfg: filepath.Join(base, "config"), data: filepath.Join(base, "data")}
	for _, d := range []string{h.ws, h.cfg, h.data} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		u.chown(t, d)
	}
	return h
}

func (u user) chown(t *testing.T, path string) {
	t.Helper()
	if os.Getuid() == 0 {
		if err := os.Lchown(path, u.uid, u.gid); err != nil {
			t.Fatal(err)
		}
	}
}

// writeFile writes a workspace file owned by the user.
func (h *home) writeFile(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(h.ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	for d := p; d != h.ws; d = filepath.Dir(d) {
		h.u.chown(t, d)
	}
}

// sysPath is the PATH servers and helper programs run with.
const sysPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// lookSys finds a program in sysPath: one the unprivileged user can run too
// (not in root's home, as a pyenv shim is).
func lookSys(name string) (string, error) {
	for _, d := range filepath.SplitList(sysPath) {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o001 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not installed in %s", name, sysPath)
}

// setup makes cmd run as the user, in the workspace, with a clean
// environment pointing at the home's config and data.
func (h *home) setup(cmd *exec.Cmd) {
	homeDir := "/root"
	if h.u.uid != 0 {
		homeDir = "/nonexistent"
	}
	cmd.Dir = h.ws
	cmd.Env = []string{
		"PATH=" + sysPath,
		"HOME=" + homeDir, "LANG=C.UTF-8",
		"XDG_CONFIG_HOME=" + h.cfg, "XDG_DATA_HOME=" + h.data,
	}
	if h.u.switchTo {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(h.u.uid), Gid: uint32(h.u.gid), Groups: []uint32{}}}
	}
}

// mcpCmd is `nsbox mcp --workspace WS ARGS...` as the user.
func (h *home) mcpCmd(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.Command(nsboxBin(t), append([]string{"mcp", "--workspace", h.ws}, args...)...)
	h.setup(cmd)
	return cmd
}

// syncBuffer collects a server's stderr.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// server is one `nsbox mcp` process with the Go SDK's client connected.
type server struct {
	t        *testing.T
	h        *home
	cmd      *exec.Cmd
	stderr   *syncBuffer
	cs       *mcp.ClientSession
	changed  chan struct{}
	progress chan *mcp.ProgressNotificationParams

	stdin   io.WriteCloser
	exited  chan struct{}
	waitErr error
}

type serverOpts struct {
	args     []string
	protocol string // "" = the SDK's newest
}

func startServer(t *testing.T, h *home, o serverOpts) *server {
	t.Helper()
	s := &server{t: t, h: h, stderr: &syncBuffer{}, changed: make(chan struct{}, 32), progress: make(chan *mcp.ProgressNotificationParams, 256)}
	s.cmd = h.mcpCmd(t, o.args...)
	s.cmd.Stderr = s.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "nsbox-it", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.changed <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			select {
			case s.progress <- r.Params:
			default:
			}
		},
	})
	// The process is ours, not the transport's: the tests close its stdin
	// themselves, while calls are in flight, which a client's Close would
	// wait for.
	stdin, err := s.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.stdin = stdin
	s.exited = make(chan struct{})
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin}, &mcp.ClientSessionOptions{ProtocolVersion: o.protocol})
	if err != nil {
		s.kill()
		t.Fatalf("connecting to nsbox mcp: %v\nstderr: %s", err, s.stderr)
	}
	s.cs = cs
	t.Cleanup(func() {
		s.stdin.Close()
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("nsbox mcp still runs 10s after its stdin was closed")
			s.kill()
		}
		go s.cs.Close()
		if t.Failed() {
			t.Logf("nsbox mcp stderr:\n%s", s.stderr)
		}
	})
	return s
}

func (s *server) kill() {
	s.cmd.Process.Kill()
	<-s.exited
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// call runs a tool and fails the test on a protocol error.
func (s *server) call(name string, args any) *mcp.CallToolResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		s.t.Fatalf("tools/call %s: %v\nstderr: %s", name, err, s.stderr)
	}
	return res
}

// ok runs a tool that must succeed and returns its result object.
func (s *server) ok(name string, args any) toolResult {
	s.t.Helper()
	res := s.call(name, args)
	r := structured(s.t, res)
	if res.IsError || !r.Success {
		s.t.Fatalf("%s %v failed: %s", name, args, text(res))
	}
	return r
}

type toolResult struct {
	Success bool            `json:"success"`
	Output  json.RawMessage `json:"output"`
	Error   *string         `json:"error"`
	Reason  string          `json:"reason"`
}

func structured(t *testing.T, res *mcp.CallToolResult) toolResult {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var r toolResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return r
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func (s *server) toolNames() []string {
	s.t.Helper()
	res, err := s.cs.ListTools(context.Background(), nil)
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	return out
}

// stop closes the server's stdin (EOF: the client is gone) and waits for
// the server to exit by itself, cleanly.
func (s *server) stop(t *testing.T) {
	t.Helper()
	start := time.Now()
	s.stdin.Close()
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.kill()
		t.Fatalf("nsbox mcp did not exit within 10s of stdin EOF\nstderr: %s", s.stderr)
	}
	t.Logf("exit %s after EOF", time.Since(start).Round(time.Millisecond))
	if s.waitErr != nil {
		t.Fatalf("nsbox mcp ended with %v\nstderr: %s", s.waitErr, s.stderr)
	}
}

// proc is a process on the host, identified across pid reuse by its start
// time.
type proc struct {
	pid   int
	start string
	cmd   string
}

func readProc(pid int) (ppid int, p proc, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, proc{}, false
	}
	// The command name is in parentheses and may contain spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, proc{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, proc{}, false
	}
	ppid, _ = strconv.Atoi(f[1])
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return ppid, proc{pid: pid, start: f[19], cmd: strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))}, true
}

func (p proc) alive() bool {
	_, q, ok := readProc(p.pid)
	return ok && q.start == p.start
}

// allProcs lists every process with its parent.
func allProcs() map[int]struct {
	ppid int
	p    proc
} {
	out := map[int]struct {
		ppid int
		p    proc
	}{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, p, ok := readProc(pid); ok {
			out[pid] = struct {
				ppid int
				p    proc
			}{ppid, p}
		}
	}
	return out
}

// descendants lists the processes below pid.
func descendants(pid int) []proc {
	all := allProcs()
	var out []proc
	want := map[int]bool{pid: true}
	for changed := true; changed; {
		changed = false
		for p, e := range all {
			if want[e.ppid] && !want[p] {
				want[p] = true
				out = append(out, e.p)
				changed = true
			}
		}
	}
	return out
}

// worker is the sandbox's PID 1 below the server (argv[0] nsbox-init).
func (s *server) worker(t *testing.T) proc {
	t.Helper()
	for _, p := range descendants(s.pid()) {
		if strings.HasPrefix(p.cmd, "nsbox-init") {
			return p
		}
	}
	t.Fatalf("no sandbox worker below the server (pid %d)", s.pid())
	return proc{}
}

// cgroupDirs are the cgroup directories of pid that nsbox made (their
// names start with nsbox), as host paths.
func cgroupDirs(pid int) []string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || !strings.Contains(parts[2], "nsbox") {
			continue
		}
		ctrl := parts[1]
		if ctrl == "" {
			out = append(out, filepath.Join("/sys/fs/cgroup", parts[2]))
			continue
		}
		ctrl = strings.TrimPrefix(ctrl, "name=")
		for _, c := range strings.Split(ctrl, ",") {
			out = append(out, filepath.Join("/sys/fs/cgroup", c, parts[2]))
		}
	}
	return out
}

// waitGone waits until none of procs is alive and none of dirs exists.
func waitGone(t *testing.T, procs []proc, dirs []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var left []string
		for _, p := range procs {
			if p.alive() {
				left = append(left, fmt.Sprintf("process %d (%s)", p.pid, p.cmd))
			}
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				left = append(left, "cgroup "+d)
			} else if !errors.Is(err, os.ErrNotExist) {
				left = append(left, fmt.Sprintf("cgroup %s (%v)", d, err))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind after the server ended: %s", strings.Join(left, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procsWithCmd finds host processes whose command line is exactly cmd.
func procsWithCmd(cmd string) []proc {
	var out []proc
	for _, e := range allProcs() {
		if e.p.cmd == cmd {
			out = append(out, e.p)
		}
	}
	return out
}
