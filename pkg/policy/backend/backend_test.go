package backend

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

func TestChoose(t *testing.T) {
	cases := []struct {
		mode         string
		fallback     bool
		want, wantFB string
	}{
		{"auto", false, "native", "landlock"},
		{"auto", true, "native", "landlock,none"},
		{"", false, "native", "landlock"},
		// required never falls back, whatever the config says.
		{"required", true, "native", ""},
		{"native", true, "native", ""},
		{"landlock", true, "landlock", ""},
		{"none", false, "none", ""},
	}
	for _, c := range cases {
		ch, err := Choose(c.mode, c.fallback, false)
		if err != nil {
			t.Fatalf("%q: %v", c.mode, err)
		}
		var names []string
		for _, b := range ch.Fallbacks {
			names = append(names, b.Name())
		}
		fb := strings.Join(names, ",")
		if (ch.Fallback == nil) != (len(ch.Fallbacks) == 0) {
			t.Errorf("%q: Fallback %v with Fallbacks %v", c.mode, ch.Fallback, fb)
		}
		if ch.Backend.Name() != c.want || fb != c.wantFB {
			t.Errorf("Choose(%q, %v) = %s/%s, want %s/%s", c.mode, c.fallback, ch.Backend.Name(), fb, c.want, c.wantFB)
		}
	}
	if _, err := Choose("bogus", false, false); !errors.Is(err, ErrUnknownBackend) {
		t.Fatalf("bogus: %v", err)
	}
	// Not an unavailability: no reason.
	if Unavailable(Native{}, errors.New("mount failed")) != nil {
		t.Fatal("an ordinary error taken for unavailability")
	}
}

func TestNoneBackend(t *testing.T) {
	b := None{}
	if b.Isolates() || b.Available() != nil {
		t.Fatal("none must always be available and never claim isolation")
	}
	ctx := context.Background()
	s, err := b.Start(ctx, sandbox.Policy{Env: []string{"PATH=/usr/bin:/bin", "ONLY=this"}, Cwd: "/"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Exec(ctx, sandbox.Command{Argv: []string{"sh", "-c", "env; pwd; exit 3"}})
	if err != nil || res.ExitCode != 3 || res.Reason != sandbox.ReasonExited {
		t.Fatalf("%+v %v", res, err)
	}
	out := string(res.Stdout)
	if !strings.Contains(out, "ONLY=this") || strings.Contains(out, "GOPATH=") || !strings.HasSuffix(out, "/\n") {
		t.Fatalf("environment or cwd not the policy's: %q", out)
	}
	_, err = s.Exec(ctx, sandbox.Command{Argv: []string{"nsbox-no-such-command"}})
	if !errors.Is(err, sandbox.ErrCommandNotFound) {
		t.Fatalf("not found: %v", err)
	}
	_, err = s.Exec(ctx, sandbox.Command{Argv: []string{"/etc/passwd"}})
	if !errors.Is(err, sandbox.ErrNotExecutable) {
		t.Fatalf("not executable: %v", err)
	}
	start := time.Now()
	res, err = s.Exec(ctx, sandbox.Command{Argv: []string{"sh", "-c", "sleep 30 & sleep 30"}, Timeout: 200 * time.Millisecond})
	var rl *sandbox.ResourceLimitError
	if !errors.As(err, &rl) || rl.Resource != "time" || res.Reason != sandbox.ReasonTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("timeout: %+v %v after %s", res, err, time.Since(start))
	}
	if _, err := b.Start(ctx, sandbox.Policy{Cwd: "/nonexistent/work"}); err == nil {
		t.Fatal("a missing working directory was accepted")
	}
}

func TestProcOvermountParsing(t *testing.T) {
	if unescape(`/proc/a\040b`) != "/proc/a b" {
		t.Fatal(unescape(`/proc/a\040b`))
	}
	_ = procOvermounts() // must not fail on this host
}
