package seccomp

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/nsbox/nsbox/profiles"
)

func FuzzParse(f *testing.F) {
	for _, path := range []string{"testdata/docker-default.json"} {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	if data, err := profiles.Seccomp.ReadFile("seccomp/default.json"); err == nil {
		f.Add(data)
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"defaultAction": "SCMP_ACT_ALLOW"}`,
		`{"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1, "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW"}]}`,
		`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 4294967295, "valueTwo": 21522, "op": "SCMP_CMP_MASKED_EQ"}]}]}`,
		`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mount"], "action": "SCMP_ACT_ERRNO"}, {"names": ["mount"], "action": "SCMP_ACT_LOG"}]}`,
		`{"defaultAction": "SCMP_ACT_ERRNO", "archMap": [{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]}], "syscalls": [{"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38, "excludes": {"caps": ["CAP_SYS_ADMIN"], "minKernel": "5.3"}}]}`,
		`{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"], "syscalls": [{"names": ["open_tree_attr", "uretprobe"], "action": "SCMP_ACT_KILL_PROCESS"}]}`,
		`{"defaultAction": "SCMP_ACT_ALLOW", "defaultAction": "SCMP_ACT_KILL"}`,
		`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"name": "read", "names": null, "action": "SCMP_ACT_TRACE", "errnoRet": 65535}]}`,
		`{"defaultAction": 1e400}`, `{"a": [[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]}`, "{\"defaultAction\": \"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data, "fuzz.json")
		if err != nil {
			if _, ok := err.(*ProfileError); !ok {
				t.Fatalf("error %v is %T, not *ProfileError", err, err)
			}
			return
		}
		// A parsed profile survives a round trip through encoding/json.
		js, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := Parse(js, "fuzz.json")
		if err != nil {
			t.Fatalf("re-encoded profile rejected: %v\n%s", err, js)
		}
		if js2, _ := json.Marshal(q); !bytes.Equal(js, js2) {
			t.Fatalf("round trip changed the profile:\n%s\n%s", js, js2)
		}
		if len(data) > 4<<10 {
			return // keep cgo work per input bounded
		}
		flt, err := Compile(p, Options{AllowUserns: len(data)%2 == 0})
		if err != nil {
			return
		}
		if _, err := FilterFromBytes(flt.Bytes()); err != nil {
			t.Fatalf("compiled filter does not decode: %v", err)
		}
	})
}

func FuzzFilterFromBytes(f *testing.F) {
	p, err := Default()
	if err != nil {
		f.Fatal(err)
	}
	flt, err := Compile(p, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(flt.Bytes())
	f.Add([]byte("NSBXBPF1\x00\x00\x00\x00\x01\x00\x00\x00\x06\x00\x00\x00\x00\x00\xff\x7f"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := FilterFromBytes(b)
		if err != nil {
			return
		}
		if !bytes.Equal(g.Bytes(), b) {
			t.Fatal("accepted bytes do not round-trip")
		}
	})
}
