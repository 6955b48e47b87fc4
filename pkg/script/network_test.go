package script

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

func TestAllowHostsFilteredNetwork(t *testing.T) {
	requireNative(t)
	requireInterp(t, "python")
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	nat := NewNative()
	nat.Base.NetFilter = &sandbox.NetFilter{Hosts: []string{"good.test:127.0.0.1"}}
	connect := func(host string, port int) string {
		return fmt.Sprintf("import socket\ns = socket.create_connection((%q, %d), timeout=30)\nprint(s.recv(2).decode())\n", host, port)
	}
	allow := []string{fmt.Sprintf("good.test:%d", port)}
	stdout, stderr, err := run(t, nat, ExecConfig{Language: "python", Script: connect("good.test", port), AllowHosts: allow})
	if err != nil || strings.TrimSpace(stdout) != "hi" {
		t.Fatalf("allowed: %q %v\n%s", stdout, err, stderr)
	}
	for _, c := range []struct {
		host, op, path string
		port           int
	}{
		{"good.test", sandbox.OpNetworkConnect, "good.test:443", 443},
		{"evil.example", sandbox.OpNetworkLookup, "evil.example", port},
		{"192.0.2.1", sandbox.OpNetworkConnect, "192.0.2.1:443", 443},
	} {
		_, stderr, err := run(t, nat, ExecConfig{Language: "python", Script: connect(c.host, c.port), AllowHosts: allow})
		var v *sandbox.ViolationError
		if !errors.Is(err, sandbox.ErrSandboxViolation) || !errors.As(err, &v) || v.Operation != c.op || v.Path != c.path {
			t.Errorf("%s:%d: err %v (%+v), want %s %s\n%s", c.host, c.port, err, v, c.op, c.path, stderr)
		}
	}
	// Without AllowHosts the script has no network, the base's pins
	// notwithstanding.
	if _, _, err := run(t, nat, ExecConfig{Language: "python", Script: connect("good.test", port)}); err == nil || errors.Is(err, sandbox.ErrSandboxViolation) {
		t.Fatalf("no network: %v", err)
	}
}
