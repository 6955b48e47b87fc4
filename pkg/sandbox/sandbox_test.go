package sandbox

import (
	"errors"
	"reflect"
	"testing"
)

func TestPolicyValidateNamesTheField(t *testing.T) {
	cases := map[string]Policy{
		"mounts[0].dest":   {Mounts: []Mount{{Kind: MountTmpfs, Dest: "rel"}}},
		"mounts[0].source": {Mounts: []Mount{{Kind: MountBind, Source: "", Dest: "/x"}}},
		"mounts[0].kind":   {Mounts: []Mount{{Kind: "weird", Dest: "/x"}}},
		"network":          {Network: "wifi"},
		"env[0]":           {Env: []string{"NOEQUALS"}},
		"limits.memory":    {Limits: Limits{Memory: 1024}},
		"limits.pids":      {Limits: Limits{Pids: 1}},
		"hostAPIs[0]":      {HostAPIs: []string{"nodot"}},
		"cwd":              {Cwd: "relative"},
	}
	for field, p := range cases {
		err := p.Validate()
		var pe *PolicyError
		if !errors.As(err, &pe) || pe.Field != field || !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%s: got %v", field, err)
		}
	}
	if err := (&Policy{Mounts: []Mount{{Kind: MountBind, Source: "/a", Dest: "/b"}}}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"PATH=/bin", "HOME=/h"}, []string{"HOME=/x", "A=1"})
	want := []string{"PATH=/bin", "HOME=/x", "A=1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%v", got)
	}
}

func TestBaseEnvKeepsOnlyTheMinimalSet(t *testing.T) {
	env := map[string]string{"PATH": "/p", "HOME": "/h", "TERM": "t", "LANG": "l", "AWS_SECRET_ACCESS_KEY": "x"}
	got := BaseEnv(func(k string) string { return env[k] })
	if !reflect.DeepEqual(got, []string{"PATH=/p", "HOME=/h", "TERM=t", "LANG=l"}) {
		t.Fatalf("%v", got)
	}
}

func TestRedact(t *testing.T) {
	in := map[string]any{"user": "a", "api_key": "k", "nested": []any{map[string]any{"Password": "p", "ok": 1}}}
	out := Redact(in).(map[string]any)
	if out["api_key"] != "[REDACTED]" || out["user"] != "a" {
		t.Fatalf("%v", out)
	}
	n := out["nested"].([]any)[0].(map[string]any)
	if n["Password"] != "[REDACTED]" || n["ok"] != 1 {
		t.Fatalf("%v", n)
	}
}

func TestRlimitEncoding(t *testing.T) {
	in := []rlimit{{Resource: 9, Cur: 1, Max: 2}, {Resource: 6, Cur: 100, Max: 100}}
	out, err := decodeRlimits(encodeRlimits(in))
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("%v %v", out, err)
	}
	for _, bad := range []string{"1:2", "a:b:c", "1:2:3:4"} {
		if _, err := decodeRlimits(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestLookPath(t *testing.T) {
	if p, err := lookPath("sh", "/nonexistent:/bin:/usr/bin"); err != nil || p == "" {
		t.Fatalf("%q %v", p, err)
	}
	if _, err := lookPath("no-such-command-nsbox", "/bin"); err == nil {
		t.Fatal("found a missing command")
	}
}
