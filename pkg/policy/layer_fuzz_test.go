package policy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseLayer gives the profile and config decoder any file (go test
// -run '^$' -fuzz FuzzParseLayer ./pkg/policy): a bad one is an *Error
// naming the file, never a panic, and a good one is a layer.
func FuzzParseLayer(f *testing.F) {
	if ents, err := os.ReadDir("../../profiles"); err == nil {
		for _, e := range ents {
			if filepath.Ext(e.Name()) == ".toml" {
				if b, err := os.ReadFile(filepath.Join("../../profiles", e.Name())); err == nil {
					f.Add(b)
				}
			}
		}
	}
	f.Add([]byte("network = \"host\"\n[filesystem]\nrw = [\"./x\", {path = \"y\", optional = true}]\n"))
	f.Add([]byte("[limits]\nmemory = \"1G\"\n[[mounts]]\n"))
	f.Add([]byte("a = \xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLayer(b, "fuzz.toml", KindConfig)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Source != "fuzz.toml" {
				t.Fatalf("error %T %v does not name the file", err, err)
			}
			return
		}
		if l == nil {
			t.Fatal("no layer and no error")
		}
	})
}
