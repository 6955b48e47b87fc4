package seccomp

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseValid(t *testing.T) {
	p, err := Parse([]byte(`{
		"defaultAction": "SCMP_ACT_ERRNO",
		"defaultErrnoRet": 1,
		"architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"],
		"flags": ["SECCOMP_FILTER_FLAG_LOG"],
		"syscalls": [
			{"names": ["read", "write"], "action": "SCMP_ACT_ALLOW", "comment": "io"},
			{"name": "close", "action": "SCMP_ACT_ALLOW"},
			{"names": ["clone"], "action": "SCMP_ACT_ALLOW",
			 "args": [{"index": 0, "value": 2114060288, "op": "SCMP_CMP_MASKED_EQ"}],
			 "excludes": {"caps": ["CAP_SYS_ADMIN"], "arches": ["s390x"]}},
			{"names": ["ptrace"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "4.8"}},
			{"names": ["mseal"], "action": "SCMP_ACT_ALLOW"},
			{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38,
			 "args": [{"index": 1, "value": 4294967295, "valueTwo": 21522, "op": "SCMP_CMP_MASKED_EQ"}]},
			{"names": ["ioctl"], "action": "SCMP_ACT_ALLOW",
			 "args": [{"index": 1, "value": 21505, "op": "SCMP_CMP_EQ"}]}
		]
	}`), "test.json")
	if err != nil {
		t.Fatal(err)
	}
	if p.DefaultAction != ActErrno || *p.DefaultErrnoRet != 1 || len(p.Syscalls) != 7 ||
		p.Syscalls[1].Name != "close" || p.Syscalls[2].Args[0].Value != 2114060288 ||
		p.Syscalls[2].Excludes.Caps[0] != "CAP_SYS_ADMIN" || p.Syscalls[3].Includes.MinKernel != "4.8" ||
		p.Syscalls[5].Args[0].ValueTwo != 0x5412 || p.Source != "test.json" {
		t.Fatalf("decoded wrongly: %+v", p)
	}
	f, err := Compile(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f.flags != unix.SECCOMP_FILTER_FLAG_LOG {
		t.Errorf("flags = %#x, want LOG", f.flags)
	}
}

func TestParseErrors(t *testing.T) {
	const head = `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [`
	rule := func(rules ...string) string { return head + strings.Join(rules, ",") + `]}` }
	deny := func(names string) string {
		return `{"names": [` + names + `], "action": "SCMP_ACT_ERRNO"}`
	}
	cases := []struct {
		name, doc, field, msg string
	}{
		{"empty", ``, "", "empty document"},
		{"invalid JSON", `{"defaultAction": "SCMP_ACT_ALLOW",}`, "", "invalid JSON at line 1, column 36"},
		{"truncated", `{"defaultAction": "SCMP_ACT_ALLOW"`, "", "unexpected end"},
		{"trailing data", `{"defaultAction": "SCMP_ACT_ALLOW"} {}`, "", "after the profile object"},
		{"not an object", `[]`, "", "must be an object"},
		{"unknown key", `{"defaultAction": "SCMP_ACT_ALLOW", "defaultaction": "x"}`, "defaultaction", `unknown key "defaultaction"`},
		{"unknown nested key", rule(deny(`"read"`), `{"names": ["write"], "action": "SCMP_ACT_ALLOW", "arg": []}`), "syscalls[1].arg", `unknown key "arg"`},
		{"unknown arg key", rule(`{"names": ["write"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ", "valuetwo": 1}]}`), "syscalls[0].args[0].valuetwo", "unknown key"},
		{"duplicate key", rule(`{"names": ["mount"], "action": "SCMP_ACT_ERRNO", "action": "SCMP_ACT_ALLOW"}`), "syscalls[0].action", "appears twice"},
		{"missing default", `{"syscalls": []}`, "defaultAction", "is required"},
		{"missing action", rule(`{"names": ["read"]}`), "syscalls[0].action", "is required"},
		{"unknown default action", `{"defaultAction": "SCMP_ACT_DENY"}`, "defaultAction", `unknown action "SCMP_ACT_DENY"`},
		{"unknown action", rule(`{"names": ["read"], "action": "ALLOW"}`), "syscalls[0].action", `unknown action "ALLOW"`},
		{"notify default", `{"defaultAction": "SCMP_ACT_NOTIFY"}`, "defaultAction", "cannot be the default"},
		{"unknown syscall", rule(deny(`"read"`), deny(`"write"`), deny(`"close"`), deny(`"mount", "foo"`)), "syscalls[3].names[1]", `unknown syscall "foo"`},
		{"unknown singular name", rule(`{"name": "mout", "action": "SCMP_ACT_ERRNO"}`), "syscalls[0].name", `unknown syscall "mout"`},
		{"no names", rule(`{"names": [], "action": "SCMP_ACT_ERRNO"}`), "syscalls[0].names", "no syscall named"},
		{"name and names", rule(`{"name": "read", "names": ["write"], "action": "SCMP_ACT_ERRNO"}`), "syscalls[0]", "both name and names"},
		{"empty name string", rule(deny(`""`)), "syscalls[0].names[0]", `unknown syscall ""`},
		{"unknown arch", `{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_Z80"]}`, "architectures[1]", `unknown architecture "SCMP_ARCH_Z80"`},
		{"unknown archMap arch", `{"defaultAction": "SCMP_ACT_ALLOW", "archMap": [{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["x86"]}]}`, "archMap[0].subArchitectures[0]", "unknown architecture"},
		{"architectures and archMap", `{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"], "archMap": [{"architecture": "SCMP_ARCH_X86_64"}]}`, "archMap", "use one of them"},
		{"unknown include arch", rule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "includes": {"arches": ["x86_64"]}}`), "syscalls[0].includes.arches[0]", "Go names"},
		{"bad op", rule(`{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 21522, "op": "SCMP_CMP_EQUAL"}]}`), "syscalls[0].args[0].op", `unknown operator "SCMP_CMP_EQUAL"`},
		{"bad arg index", rule(`{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 6, "value": 1, "op": "SCMP_CMP_EQ"}]}`), "syscalls[0].args[0].index", "larger than 5"},
		{"negative value", rule(`{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": -1, "op": "SCMP_CMP_EQ"}]}`), "syscalls[0].args[0].value", "not an integer"},
		{"float value", rule(`{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 1.5, "op": "SCMP_CMP_EQ"}]}`), "syscalls[0].args[0].value", "not an integer"},
		{"value too big", rule(`{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 18446744073709551616, "op": "SCMP_CMP_EQ"}]}`), "syscalls[0].args[0].value", "not an integer"},
		{"string value", rule(`{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": "1", "op": "SCMP_CMP_EQ"}]}`), "syscalls[0].args[0].value", "must be a number"},
		{"missing op", rule(`{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 1}]}`), "syscalls[0].args[0].op", "is required"},
		{"same arg twice", rule(`{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 1, "op": "SCMP_CMP_GT"}, {"index": 1, "value": 9, "op": "SCMP_CMP_LT"}]}`), "syscalls[0].args[1].index", "already compared"},
		{"masked never matches", rule(`{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 255, "valueTwo": 256, "op": "SCMP_CMP_MASKED_EQ"}]}`), "syscalls[0].args[0].valueTwo", "never match"},
		{"valueTwo without mask", rule(`{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 1, "valueTwo": 2, "op": "SCMP_CMP_EQ"}]}`), "syscalls[0].args[0].valueTwo", "only used with SCMP_CMP_MASKED_EQ"},
		{"errnoRet with allow", `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "errnoRet": 1}]}`, "syscalls[0].errnoRet", "only valid with SCMP_ACT_ERRNO"},
		{"errno zero", rule(`{"names": ["setuid"], "action": "SCMP_ACT_ERRNO", "errnoRet": 0}`), "syscalls[0].errnoRet", "not an errno"},
		{"errno too big", rule(`{"names": ["setuid"], "action": "SCMP_ACT_ERRNO", "errnoRet": 5000}`), "syscalls[0].errnoRet", "not an errno"},
		{"defaultErrnoRet with allow", `{"defaultAction": "SCMP_ACT_ALLOW", "defaultErrnoRet": 1}`, "defaultErrnoRet", "only valid with"},
		{"unknown cap", rule(`{"names": ["mount"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMN"]}}`), "syscalls[0].includes.caps[0]", `unknown capability "CAP_SYS_ADMN"`},
		{"bad minKernel", rule(`{"names": ["mount"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "5"}}`), "syscalls[0].includes.minKernel", "not a kernel version"},
		{"unknown flag", `{"defaultAction": "SCMP_ACT_ALLOW", "flags": ["SECCOMP_FILTER_FLAG_ALL"]}`, "flags[0]", "unknown flag"},
		{"conflict unconditional", rule(deny(`"read"`), `{"names": ["write", "mount"], "action": "SCMP_ACT_KILL_PROCESS"}`, deny(`"close"`), `{"names": ["mount"], "action": "SCMP_ACT_ERRNO"}`),
			"syscalls[3].names[0]", `conflicting rules for syscall "mount": SCMP_ACT_ERRNO(1) here, SCMP_ACT_KILL_PROCESS in syscalls[1]`},
		{"conflict errno values", rule(`{"names": ["mount"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}`, `{"names": ["mount"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}`), "syscalls[1].names[0]", "conflicting rules"},
		{"conflict conditional vs unconditional", rule(`{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 21522, "op": "SCMP_CMP_EQ"}]}`, `{"names": ["ioctl"], "action": "SCMP_ACT_LOG"}`), "syscalls[1].names[0]", "no argument conditions"},
		{"conflict same conditions", rule(`{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 21522, "op": "SCMP_CMP_EQ"}]}`, `{"names": ["ioctl"], "action": "SCMP_ACT_KILL", "args": [{"index": 1, "value": 21522, "op": "SCMP_CMP_EQ"}]}`), "syscalls[1].names[0]", "same argument conditions"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse([]byte(c.doc), "t.json")
			if err == nil {
				t.Fatalf("Parse accepted: %+v", p)
			}
			var pe *ProfileError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *ProfileError", err, err)
			}
			if pe.Field != c.field || pe.Source != "t.json" {
				t.Errorf("field %q source %q, want field %q", pe.Field, pe.Source, c.field)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("message %q does not contain %q", err, c.msg)
			}
			if !strings.HasPrefix(err.Error(), "seccomp profile t.json: ") {
				t.Errorf("message %q does not start with the profile name", err)
			}
		})
	}
}

// The message format users see, as given in the package contract.
func TestProfileErrorMessage(t *testing.T) {
	doc := `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
		{"names": ["read"], "action": "SCMP_ACT_ERRNO"}, {"names": ["write"], "action": "SCMP_ACT_ERRNO"},
		{"names": ["close"], "action": "SCMP_ACT_ERRNO"}, {"names": ["mount", "foo"], "action": "SCMP_ACT_ERRNO"}]}`
	_, err := Parse([]byte(doc), "default.json")
	want := `seccomp profile default.json: syscalls[3].names[1]: unknown syscall "foo"`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestParseSizeBound(t *testing.T) {
	big := make([]byte, MaxProfileSize+1)
	_, err := Parse(big, "big.json")
	var pe *ProfileError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("got %v", err)
	}
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	if _, err := Parse([]byte(`{"defaultAction": "SCMP_ACT_ALLOW", "flags": `+deep+`}`), "deep.json"); err == nil ||
		!strings.Contains(err.Error(), "nested too deeply") {
		t.Fatalf("deep nesting: %v", err)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	_, err := LoadFile(filepath.Join(dir, "missing.json"))
	if err == nil || !strings.Contains(err.Error(), "missing.json") || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := LoadFile(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("directory: %v", err)
	}
	good := filepath.Join(dir, "p.json")
	if err := os.WriteFile(good, []byte(`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["bpf"], "action": "SCMP_ACT_ERRNO"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadFile(good)
	if err != nil || p.Source != good {
		t.Fatalf("LoadFile: %v %+v", err, p)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"defaultAction": "SCMP_ACT_ALLOW", "syscals": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(bad); err == nil || !strings.Contains(err.Error(), "seccomp profile "+bad+": syscals: unknown key") {
		t.Fatalf("bad file: %v", err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("fifo: %v", err)
	}
	huge := filepath.Join(dir, "huge.json")
	if err := os.WriteFile(huge, make([]byte, MaxProfileSize+10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(huge); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("huge file: %v", err)
	}
	if os.Geteuid() != 0 {
		unreadable := filepath.Join(dir, "secret.json")
		if err := os.WriteFile(unreadable, []byte("{}"), 0o000); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadFile(unreadable); err == nil || !strings.Contains(err.Error(), "secret.json: cannot read") {
			t.Fatalf("unreadable file: %v", err)
		}
	}
}

func TestCompileRejects(t *testing.T) {
	cases := []struct{ name, doc, msg string }{
		{"notify", `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mount"], "action": "SCMP_ACT_NOTIFY"}]}`, "needs a seccomp agent"},
		{"spec allow", `{"defaultAction": "SCMP_ACT_ALLOW", "flags": ["SECCOMP_FILTER_FLAG_SPEC_ALLOW"]}`, "Speculative Store Bypass"},
		// Rules that only conflict once includes/excludes are evaluated.
		{"conflict after includes", `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [
			{"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38, "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
			{"names": ["clone3"], "action": "SCMP_ACT_ALLOW", "excludes": {"minKernel": "99.0"}}]}`, `syscalls[1].names[0]: conflicting rules for syscall "clone3"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse([]byte(c.doc), "c.json")
			if err != nil {
				t.Fatal(err)
			}
			_, err = Compile(p, Options{})
			var pe *ProfileError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want a *ProfileError containing %q", err, c.msg)
			}
		})
	}
	if _, err := Compile(nil, Options{}); !errors.Is(err, ErrCompile) {
		t.Errorf("nil profile: %v", err)
	}
	// A caller that edits a parsed profile gets it validated again.
	p, _ := Default()
	p.Syscalls[0].Names[0] = "no_such_syscall"
	if _, err := Compile(p, Options{}); err == nil || !strings.Contains(err.Error(), "unknown syscall") {
		t.Errorf("edited profile: %v", err)
	}
}

func TestDefaultProfileIsStrictlyValid(t *testing.T) {
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if p.DefaultAction != ActAllow || p.Source != "default.json" {
		t.Fatalf("default: %+v", p)
	}
	for i, r := range p.Syscalls {
		if r.Comment == "" {
			t.Errorf("syscalls[%d] (%v) has no comment naming the attack it stops", i, r.Names)
		}
		if ruleEffect(r.Action, r.ErrnoRet).permissive() {
			t.Errorf("syscalls[%d] allows in a denylist", i)
		}
	}
}

// A profile that allows by default and lets i386 through as well is warned
// about: its denials have aliases there. The shipped default kills i386.
func TestWarningsPermissiveOtherABI(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the i386 ABI is an amd64 matter")
	}
	p, err := Parse([]byte(`{"defaultAction":"SCMP_ACT_ALLOW","architectures":["SCMP_ARCH_X86_64","SCMP_ARCH_X86"],"syscalls":[{"names":["umount2"],"action":"SCMP_ACT_ERRNO"}]}`), "p.json")
	if err != nil {
		t.Fatal(err)
	}
	if w := p.Warnings(); len(w) != 1 || !strings.Contains(w[0], "x86") {
		t.Fatalf("warnings %q", w)
	}
	d, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if w := d.Warnings(); len(w) != 0 {
		t.Fatalf("default profile warnings %q", w)
	}
}
