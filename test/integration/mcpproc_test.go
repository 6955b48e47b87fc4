package integration

import (
	"bufio"
	"bytes"
	"os/exec"
	"testing"
	"time"
)

// mcpProc is a running `nsbox mcp` with a client on its stdio.
type mcpProc struct {
	*mcpClient
	cmd    *exec.Cmd
	stderr *bytes.Buffer
}

// startMCP starts `nsbox mcp args...` as u in dir and initializes
// the MCP session; the process ends with the test.
func startMCP(t *testing.T, u user, dir string, args ...string) *mcpProc {
	t.Helper()
	cmd := exec.Command(nsboxBin(t), append([]string{"mcp"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + u.home(), "LANG=C.UTF-8"}
	u.asUser(cmd)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		in.Close()
		select {
		case <-done:
		case <-time.After(time.Minute): // a deadlock guard only
			cmd.Process.Kill()
			<-done
		}
	})
	c := &mcpClient{t: t, in: in, out: bufio.NewReaderSize(outp, 1<<20)}
	c.send("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "nsbox-integration", "version": "1"}}, false)
	c.send("notifications/initialized", map[string]any{}, true)
	return &mcpProc{mcpClient: c, cmd: cmd, stderr: stderr}
}
