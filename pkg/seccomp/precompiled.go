package seccomp

import (
	"bytes"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"

	"github.com/nsbox/nsbox/profiles"
)

// The precompiled default filter.
//
// Parsing default.json and compiling it with libseccomp costs several
// milliseconds in a fresh process, on every sandbox start, for a result that
// depends only on the profile, the Options and the architecture. `go
// generate ./pkg/seccomp/...` (internal/gen) compiles it once per Options
// variant for the architecture it runs on and writes precompiled/*.bpf,
// which are committed and embedded in the binary. DefaultFilter returns the
// embedded filter when there is one for this architecture and these
// Options; everything else (other profiles, other architectures) is
// compiled at run time as before.
//
// There is deliberately no cache on disk: a compiled filter in a directory
// a sandbox may have writable could be replaced from inside one sandbox and
// weaken the next. The embedded filter is part of the executable.
//
// Staleness: each file records the length and CRC-32 of the default.json
// it was compiled from, and a file whose record differs from the embedded
// default.json is never used (DefaultFilter compiles instead). A checksum,
// not a cryptographic hash, is enough here: both inputs are part of the
// same binary, so the check guards against a forgotten `go generate`, not
// against an attacker (whoever can change default.json in the binary can
// change the filter too). CRC-32 detects every change confined to 32
// consecutive bits with certainty, and costs ~40 µs in a fresh process
// where SHA-256 costs ~0.1 ms. The compiled result also depends on libseccomp and
// on nsbox's compiler (Compile, the ENOSYS stub): TestPrecompiledDefault
// compiles the profile with the linked libseccomp and checks, with the BPF
// interpreter, that the embedded filter gives the same verdict for every
// syscall number, ABI and the arguments the profile's rules test.
//
// File format (little-endian, as Filter.Bytes):
//
//	"NSBXPRE1"  magic and format version
//	u32         length of profiles/seccomp/default.json
//	u32         its CRC-32 (IEEE)
//	the rest    Filter.Bytes()

//go:generate go run ./internal/gen -dir precompiled

// The whole directory, so that the package builds before the first
// `go generate` (README.md is always there).
//
//go:embed precompiled
var precompiledFS embed.FS

var precompiledMagic = []byte("NSBXPRE1")

const precompiledHeaderLen = 8 + len(profileSum{})

// profileSum identifies the default.json a precompiled filter was compiled
// from: its length and CRC-32.
type profileSum [8]byte

// sumDefaultProfile sums the embedded default.json, reading it through a
// small buffer rather than copying the whole profile.
func sumDefaultProfile() (profileSum, error) {
	var s profileSum
	f, err := profiles.Seccomp.Open("seccomp/" + defaultSource)
	if err != nil {
		return s, fmt.Errorf("seccomp: built-in profile %s missing from the binary: %w", defaultSource, err)
	}
	defer f.Close()
	h := crc32.NewIEEE()
	var buf [4096]byte
	n, err := io.CopyBuffer(h, f, buf[:])
	if err != nil {
		return s, fmt.Errorf("seccomp: reading built-in profile %s: %w", defaultSource, err)
	}
	binary.LittleEndian.PutUint32(s[0:], uint32(n))
	binary.LittleEndian.PutUint32(s[4:], h.Sum32())
	return s, nil
}

// defaultVariants are the Options values a policy can ask for, each with
// the suffix of its file. Every combination of Options' fields must be
// listed (TestPrecompiledVariantsCoverOptions). A lookup compares the whole
// Options struct, so an Options value that is not listed (a field added
// without regenerating) is compiled at run time, never served a filter
// built for other options.
var defaultVariants = []struct {
	suffix string
	opts   Options
}{
	{"", Options{}},
	{"_userns", Options{AllowUserns: true}},
}

// precompiledName is the file name, in precompiled/, of the default profile
// compiled for goarch with the variant whose suffix is given.
func precompiledName(goarch, suffix string) string {
	return "default_" + goarch + suffix + ".bpf"
}

var (
	// errPrecompiledStale: the file was compiled from another default.json.
	errPrecompiledStale = errors.New("compiled from another version of default.json")
	// errPrecompiledFormat: not a file written by GenerateDefaultFilters.
	errPrecompiledFormat = errors.New("not a precompiled filter file")
)

// defaultProfileBytes is the embedded profiles/seccomp/default.json.
func defaultProfileBytes() ([]byte, error) {
	data, err := profiles.Seccomp.ReadFile("seccomp/" + defaultSource)
	if err != nil {
		return nil, fmt.Errorf("seccomp: built-in profile %s missing from the binary: %w", defaultSource, err)
	}
	return data, nil
}

func encodePrecompiled(sum profileSum, f *Filter) []byte {
	b := append([]byte(nil), precompiledMagic...)
	b = append(b, sum[:]...)
	return append(b, f.Bytes()...)
}

// decodePrecompiled returns the filter in data if it was compiled from the
// profile whose sum is sum. The program is validated as FilterFromBytes
// validates any filter.
func decodePrecompiled(data []byte, sum profileSum) (*Filter, error) {
	if len(data) < precompiledHeaderLen || !bytes.Equal(data[:len(precompiledMagic)], precompiledMagic) {
		return nil, errPrecompiledFormat
	}
	if !bytes.Equal(data[len(precompiledMagic):precompiledHeaderLen], sum[:]) {
		return nil, errPrecompiledStale
	}
	return FilterFromBytes(data[precompiledHeaderLen:])
}

// precompiledDefault returns the embedded filter for goarch and o, or nil
// when there is none that matches the embedded default.json.
func precompiledDefault(goarch string, o Options) *Filter {
	suffix, ok := "", false
	for _, v := range defaultVariants {
		if v.opts == o {
			suffix, ok = v.suffix, true
			break
		}
	}
	if !ok {
		return nil
	}
	return embeddedFilter(precompiledName(goarch, suffix))
}

// embeddedFilter is the filter in precompiled/name, or nil when there is
// none (nothing generated for this architecture) or it was compiled from
// another default.json.
func embeddedFilter(name string) *Filter {
	data, err := precompiledFS.ReadFile("precompiled/" + name)
	if err != nil {
		return nil
	}
	sum, err := sumDefaultProfile()
	if err != nil {
		return nil
	}
	// Only a filter compiled from this default.json is used: a profile
	// edited without `go generate` is compiled at run time, so a rule added
	// to it is never silently missing from the filter.
	f, err := decodePrecompiled(data, sum)
	if err != nil {
		return nil
	}
	return f
}

// setIDName is the file name, in precompiled/, of the set-id filter
// (SetIDFilter) compiled for goarch.
func setIDName(goarch string) string { return "setid_" + goarch + ".bpf" }

// precompiledSetID returns the embedded set-id filter for goarch, or nil
// when there is none that matches the embedded default.json (whose rules
// it is made of).
func precompiledSetID(goarch string) *Filter { return embeddedFilter(setIDName(goarch)) }

// DefaultFilter returns the built-in default profile compiled with o.
//
// When the binary carries a filter precompiled by `go generate` from the
// same default.json for this architecture and these Options, that filter is
// returned: no JSON parse, no libseccomp call. Otherwise the profile is
// parsed and compiled (Default, Compile).
func DefaultFilter(o Options) (*Filter, error) {
	// The precompiled filter is as trusted as the binary itself: it is
	// embedded in the executable (go:embed), never read from the file
	// system, so nothing a sandbox can write can change it; it is used only
	// for the default.json bytes it was compiled from.
	if f := precompiledDefault(runtime.GOARCH, o); f != nil {
		return f, nil
	}
	p, err := Default()
	if err != nil {
		return nil, err
	}
	return Compile(p, o)
}

// GenerateDefaultFilters compiles the built-in default profile with every
// Options variant for the architecture it runs on, and the set-id filter
// taken from it, and returns the files of precompiled/ for that
// architecture by name ("default_amd64.bpf", ..., "setid_amd64.bpf").
// It is the body of `go generate ./pkg/seccomp/...` (internal/gen); nsbox
// does not call it at run time.
func GenerateDefaultFilters() (map[string][]byte, error) {
	src, err := defaultProfileBytes()
	if err != nil {
		return nil, err
	}
	p, err := Parse(src, defaultSource)
	if err != nil {
		return nil, err
	}
	// A minKernel condition is decided by the kernel that compiles the
	// profile: a precompiled filter would carry the generating machine's
	// answer to every machine that runs the binary.
	for i, r := range p.Syscalls {
		for _, c := range []*Condition{r.Includes, r.Excludes} {
			if c != nil && c.MinKernel != "" {
				return nil, p.fail(index("syscalls", i), "minKernel cannot be precompiled: the filter would depend on the kernel of the machine running go generate")
			}
		}
	}
	sum, err := sumDefaultProfile()
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(defaultVariants))
	for _, v := range defaultVariants {
		f, err := Compile(p, v.opts)
		if err != nil {
			return nil, err
		}
		out[precompiledName(runtime.GOARCH, v.suffix)] = encodePrecompiled(sum, f)
	}
	sp, err := setIDProfile(p)
	if err != nil {
		return nil, err
	}
	f, err := Compile(sp, Options{})
	if err != nil {
		return nil, err
	}
	out[setIDName(runtime.GOARCH)] = encodePrecompiled(sum, f)
	return out, nil
}
