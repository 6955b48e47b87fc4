package seccomp

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func compileJSON(t *testing.T, js string) *Filter {
	t.Helper()
	p, err := Parse([]byte(js), "test.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Compile(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestCheckWorkerNeedsRefusesKillingProfiles(t *testing.T) {
	for js, want := range map[string]string{
		`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["getpid"],"action":"SCMP_ACT_KILL"}]}`: "getpid (kill)",
		`{"defaultAction":"SCMP_ACT_KILL"}`: "(kill)",
		`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["wait4"],"action":"SCMP_ACT_ERRNO"}]}`:         "wait4 (errno 1)",
		`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["rt_sigreturn"],"action":"SCMP_ACT_TRAP"}]}`:   "rt_sigreturn (SIGSYS trap)",
		`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["execve"],"action":"SCMP_ACT_KILL_PROCESS"}]}`: "execve (kill)",
	} {
		err := CheckWorkerNeeds(compileJSON(t, js))
		var we *WorkerNeedError
		if !errors.Is(err, ErrWorkerNeed) || !errors.As(err, &we) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want one naming %q", js, err, want)
		}
	}
}

func TestCheckWorkerNeedsAcceptsWorkableProfiles(t *testing.T) {
	def, err := DefaultFilter(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckWorkerNeeds(def); err != nil {
		t.Fatalf("the default profile: %v", err)
	}
	docker, err := LoadFile("testdata/docker-default.json")
	if err != nil {
		t.Fatal(err)
	}
	df, err := Compile(docker, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckWorkerNeeds(df); err != nil {
		t.Fatalf("Docker's default profile: %v", err)
	}
	// Denying what the worker copes without, or what only commands use.
	for _, js := range []string{
		`{"defaultAction":"SCMP_ACT_ALLOW"}`,
		`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["clone3"],"action":"SCMP_ACT_ERRNO","errnoRet":38}]}`,
		`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["ptrace","mount"],"action":"SCMP_ACT_KILL"}]}`,
		`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["getpid"],"action":"SCMP_ACT_ERRNO"}]}`,
	} {
		if err := CheckWorkerNeeds(compileJSON(t, js)); err != nil {
			t.Errorf("%s: %v", js, err)
		}
	}
}

// The evaluator CheckWorkerNeeds uses agrees with the test interpreter on
// the default filter, for every syscall number and a spread of arguments.
func TestVerdictMatchesTestInterpreter(t *testing.T) {
	def, err := DefaultFilter(Options{})
	if err != nil {
		t.Fatal(err)
	}
	arch := nativeAudit(t)
	for nr := int32(-1); nr < 600; nr++ {
		for _, a0 := range []uint64{0, unix.CLONE_NEWUSER, cloneThread, cloneFork, 1 << 40} {
			args := [6]uint64{a0, 1, 2}
			got := def.verdict(nr, arch, args)
			want := runBPF(t, def.prog, seccompData{nr: nr, arch: arch, args: args})
			if got != want {
				t.Fatalf("nr %d arg0 %#x: verdict %s, interpreter %s", nr, a0, verdictString(got), verdictString(want))
			}
		}
	}
}
