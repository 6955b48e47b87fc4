// Command gen writes pkg/seccomp/precompiled/default_GOARCH*.bpf: the
// built-in default seccomp profile compiled, for the architecture gen runs
// on, with every Options variant (seccomp.GenerateDefaultFilters). It runs
// through `go generate ./pkg/seccomp/...` (or `make generate`) whenever
// profiles/seccomp/default.json or the compiler changes; the files are
// committed and embedded in nsbox.
//
// Files of this architecture that no variant produces any more are removed;
// files of other architectures are left alone (generate them on those
// architectures).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/nsbox/nsbox/pkg/seccomp"
)

func main() {
	dir := flag.String("dir", "precompiled", "directory to write the .bpf files into")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "seccomp gen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := seccomp.GenerateDefaultFilters()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "default_"+runtime.GOARCH+"*.bpf"))
	if err != nil {
		return err
	}
	setid, err := filepath.Glob(filepath.Join(dir, "setid_"+runtime.GOARCH+".bpf"))
	if err != nil {
		return err
	}
	old = append(old, setid...)
	for _, path := range old {
		if _, keep := files[filepath.Base(path)]; !keep {
			if err := os.Remove(path); err != nil {
				return err
			}
		}
	}
	for name, data := range files {
		if err := writeFile(filepath.Join(dir, name), data); err != nil {
			return err
		}
	}
	return nil
}

// writeFile replaces path atomically, and leaves it untouched (mtime
// included) when its content is already data.
func writeFile(path string, data []byte) error {
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".gen-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
