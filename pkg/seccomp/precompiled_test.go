package seccomp

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"reflect"
	"runtime"
	"strings"
	"testing"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// regenerate is the instruction every staleness failure ends with.
const regenerate = "run `go generate ./pkg/seccomp/...` (or `make generate`) and commit pkg/seccomp/precompiled"

func defaultSum(t testing.TB) profileSum {
	t.Helper()
	sum, err := sumDefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestPrecompiledDefault is the staleness check: the embedded filter for
// this architecture must give the same verdict as default.json compiled now,
// for every input verdictInputs lists. Bytes may differ (another libseccomp
// lays the program out differently); verdicts may not.
func TestPrecompiledDefault(t *testing.T) {
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	inputs := verdictInputs(t, p)
	for _, v := range defaultVariants {
		name := precompiledName(runtime.GOARCH, v.suffix)
		t.Run(name, func(t *testing.T) {
			data, err := precompiledFS.ReadFile("precompiled/" + name)
			if errors.Is(err, fs.ErrNotExist) {
				if runtime.GOARCH == "amd64" {
					t.Fatalf("precompiled/%s is missing: %s", name, regenerate)
				}
				t.Skipf("no precompiled filter for %s: DefaultFilter compiles at run time (run `go generate ./pkg/seccomp/...` on %s to add one)",
					runtime.GOARCH, runtime.GOARCH)
			}
			if err != nil {
				t.Fatal(err)
			}
			embedded, err := decodePrecompiled(data, defaultSum(t))
			if err != nil {
				t.Fatalf("precompiled/%s: %v: %s", name, err, regenerate)
			}
			// DefaultFilter takes this filter, not a run-time compile.
			got := precompiledDefault(runtime.GOARCH, v.opts)
			if got == nil || !bytes.Equal(got.Bytes(), embedded.Bytes()) {
				t.Fatalf("DefaultFilter(%+v) does not use precompiled/%s", v.opts, name)
			}
			fresh, err := Compile(p, v.opts)
			if err != nil {
				t.Fatal(err)
			}
			if embedded.flags != fresh.flags {
				t.Fatalf("precompiled/%s has flags %#x, default.json compiles to %#x: %s", name, embedded.flags, fresh.flags, regenerate)
			}
			var diffs []string
			for _, d := range inputs {
				a, b := runBPF(t, embedded.prog, d), runBPF(t, fresh.prog, d)
				if a != b {
					diffs = append(diffs, fmt.Sprintf("arch %#x nr %d args %#x: embedded %s, compiled now %s",
						d.arch, d.nr, d.args, verdictString(a), verdictString(b)))
				}
			}
			if len(diffs) > 0 {
				if len(diffs) > 10 {
					diffs = append(diffs[:10], fmt.Sprintf("... and %d more", len(diffs)-10))
				}
				t.Fatalf("precompiled/%s does not match profiles/seccomp/default.json compiled now with libseccomp %s (%d inputs checked):\n\t%s\n%s",
					name, Version(), len(inputs), strings.Join(diffs, "\n\t"), regenerate)
			}
			if !bytes.Equal(embedded.Bytes(), fresh.Bytes()) {
				t.Logf("precompiled/%s: same verdicts, different program than libseccomp %s builds (%d vs %d instructions)",
					name, Version(), embedded.Len(), fresh.Len())
			}
		})
	}
}

// Every file in precompiled/, whatever its architecture, must be named for
// a variant and come from the current default.json.
func TestPrecompiledFilesCurrent(t *testing.T) {
	entries, err := precompiledFS.ReadDir("precompiled")
	if err != nil {
		t.Fatal(err)
	}
	sum := defaultSum(t)
	n := 0
	for _, e := range entries {
		name := e.Name()
		if name == "README.md" {
			continue
		}
		n++
		if precompiledArch(name) == "" {
			t.Errorf("precompiled/%s is not the name of a default filter variant: %s", name, regenerate)
			continue
		}
		data, err := precompiledFS.ReadFile("precompiled/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodePrecompiled(data, sum); err != nil {
			t.Errorf("precompiled/%s: %v: %s", name, err, regenerate)
		}
	}
	if n == 0 {
		t.Errorf("no precompiled filters: %s", regenerate)
	}
}

// precompiledArch is the GOARCH of a file named precompiledName(goarch,
// suffix) for one variant, or "".
func precompiledArch(name string) string {
	if arch, ok := strings.CutPrefix(strings.TrimSuffix(name, ".bpf"), "setid_"); ok && goArches[arch] && setIDName(arch) == name {
		return arch
	}
	rest, ok := strings.CutPrefix(name, "default_")
	if !ok {
		return ""
	}
	if rest, ok = strings.CutSuffix(rest, ".bpf"); !ok {
		return ""
	}
	for _, v := range defaultVariants {
		arch, ok := strings.CutSuffix(rest, v.suffix)
		if ok && goArches[arch] && precompiledName(arch, v.suffix) == name {
			return arch
		}
	}
	return ""
}

// Options may only hold booleans, and defaultVariants must list every
// combination: a new option would otherwise be served a filter generated
// without it. (precompiledDefault also compares whole structs, so an
// unlisted combination is compiled at run time rather than mismatched.)
func TestPrecompiledVariantsCoverOptions(t *testing.T) {
	typ := reflect.TypeOf(Options{})
	for i := 0; i < typ.NumField(); i++ {
		if f := typ.Field(i); f.Type.Kind() != reflect.Bool {
			t.Fatalf("Options.%s is a %s: defaultVariants and GenerateDefaultFilters enumerate boolean options only", f.Name, f.Type)
		}
	}
	seen := map[Options]bool{}
	suffixes := map[string]bool{}
	for _, v := range defaultVariants {
		if seen[v.opts] || suffixes[v.suffix] {
			t.Fatalf("variant %+v %q listed twice", v.opts, v.suffix)
		}
		seen[v.opts], suffixes[v.suffix] = true, true
	}
	if want := 1 << typ.NumField(); len(seen) != want {
		t.Fatalf("defaultVariants lists %d Options combinations, Options has %d: add the missing ones, then %s",
			len(seen), want, regenerate)
	}
	if !seen[Options{}] || defaultVariants[0].opts != (Options{}) || defaultVariants[0].suffix != "" {
		t.Fatalf("the first variant must be the zero Options with no suffix")
	}
}

func TestPrecompiledRejected(t *testing.T) {
	sum := defaultSum(t)
	f := compileDefault(t, Options{})
	good := encodePrecompiled(sum, f)
	if got, err := decodePrecompiled(good, sum); err != nil || !bytes.Equal(got.Bytes(), f.Bytes()) {
		t.Fatalf("round trip: %v", err)
	}

	other := sum
	other[0] ^= 1
	if _, err := decodePrecompiled(good, other); !errors.Is(err, errPrecompiledStale) {
		t.Errorf("another default.json: %v, want errPrecompiledStale", err)
	}
	for _, bad := range [][]byte{nil, good[:precompiledHeaderLen-1], append([]byte("NSBXPRE0"), good[8:]...)} {
		if _, err := decodePrecompiled(bad, sum); !errors.Is(err, errPrecompiledFormat) {
			t.Errorf("%q: %v, want errPrecompiledFormat", bad, err)
		}
	}
	corrupt := append([]byte(nil), good...)
	last := len(corrupt) - 8 // the final return becomes an unknown opcode
	corrupt[last], corrupt[last+1] = 0xff, 0xff
	if _, err := decodePrecompiled(corrupt, sum); !errors.Is(err, ErrInvalidFilter) {
		t.Errorf("corrupt program: %v, want ErrInvalidFilter", err)
	}
	if _, err := decodePrecompiled(good[:len(good)-8], sum); !errors.Is(err, ErrInvalidFilter) {
		t.Errorf("truncated program: %v, want ErrInvalidFilter", err)
	}

	if precompiledDefault("nosucharch", Options{}) != nil {
		t.Errorf("a filter for an architecture that has no file")
	}
}

// GenerateDefaultFilters writes one file per variant and the set-id
// filter, named for this architecture, each decoding to the filter
// compiled now.
func TestGenerateDefaultFilters(t *testing.T) {
	files, err := GenerateDefaultFilters()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(defaultVariants)+1 {
		t.Fatalf("%d files for %d variants and the set-id filter", len(files), len(defaultVariants))
	}
	sum := defaultSum(t)
	def, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	sp, err := setIDProfile(def)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := Compile(sp, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodePrecompiled(files[setIDName(runtime.GOARCH)], sum); err != nil || !bytes.Equal(got.Bytes(), fresh.Bytes()) {
		t.Errorf("generated set-id filter differs from Compile's (%v)", err)
	}
	// SetIDFilter serves the embedded one, and it is current.
	if runtime.GOARCH == "amd64" {
		if f := precompiledSetID(runtime.GOARCH); f == nil || !bytes.Equal(f.Bytes(), fresh.Bytes()) {
			t.Errorf("precompiled/%s is missing or stale: %s", setIDName(runtime.GOARCH), regenerate)
		}
	}
	for _, v := range defaultVariants {
		data, ok := files[precompiledName(runtime.GOARCH, v.suffix)]
		if !ok {
			t.Fatalf("no file for %+v", v.opts)
		}
		got, err := decodePrecompiled(data, sum)
		if err != nil {
			t.Fatal(err)
		}
		if want := compileDefault(t, v.opts); !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("%+v: generated filter differs from Compile's", v.opts)
		}
	}
}

// verdictInputs lists the seccomp_data on which two compilations of p must
// agree: every syscall number 0..1023 on the native ABI, as x32 (bit 30) and
// under foreign and unknown audit arches, with a spread of arguments; and,
// for every syscall that a rule of p tests arguments of, values on both
// sides of each condition (each bit of a mask flipped, high bits set, rules
// of one syscall combined) and random ones.
func verdictInputs(t testing.TB, p *Profile) []seccompData {
	t.Helper()
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		t.Fatal(err)
	}
	audit := archInfoOf(native).audit
	rng := rand.New(rand.NewSource(4))
	var out []seccompData

	arches := []uint32{audit, auditArchX86_64, auditArchI386, auditArchAARCH64, auditArchARM, 0, 0xffffffff}
	generic := append([][6]uint64{}, argPatterns...)
	for i := 0; i < 2; i++ {
		var a [6]uint64
		for k := range a {
			a[k] = rng.Uint64() >> uint(rng.Intn(64))
		}
		generic = append(generic, a)
	}
	var nrs []int32
	for nr := int32(0); nr < 1024; nr++ {
		nrs = append(nrs, nr, nr|x32SyscallBit)
	}
	nrs = append(nrs, -1, 0x3fffffff, x32SyscallBit|0x3fffffff, 0x7fffffff, -2, -0x80000000)
	for _, arch := range arches {
		for _, nr := range nrs {
			for _, args := range generic {
				out = append(out, seccompData{nr: nr, arch: arch, args: args})
			}
		}
	}

	// Argument values per syscall number and argument index, from the rules.
	type key struct {
		nr  int32
		idx uint
	}
	vals := map[key][]uint64{}
	masked := map[key][]uint64{} // the values masked-equal conditions look for
	for _, r := range p.Syscalls {
		names, _ := ruleNames(&r, "")
		for _, name := range names {
			nr, _, ok := syscallNr(name, native)
			if !ok {
				continue
			}
			for _, a := range r.Args {
				k := key{nr, a.Index}
				vals[k] = append(vals[k], argCandidates(a)...)
				if a.Op == OpMaskedEqual {
					masked[k] = append(masked[k], a.ValueTwo)
				}
			}
		}
	}
	// Requests, flag combinations and socket families worth checking whether
	// or not a rule tests them today.
	extra := map[string]map[uint][]uint64{
		"ioctl":  {1: {unix.TIOCSTI, unix.TIOCLINUX, unix.TIOCSETD, unix.TCGETS, unix.TIOCSTI | 0xffffffff00000000}},
		"clone":  {0: {unix.CLONE_NEWUSER | unix.CLONE_NEWNET, uint64(unix.SIGCHLD), unix.CLONE_VM | unix.CLONE_THREAD}},
		"socket": {0: nil},
	}
	for af := uint64(0); af <= 64; af++ {
		extra["socket"][0] = append(extra["socket"][0], af)
	}
	for name, byIdx := range extra {
		nr, _, ok := syscallNr(name, native)
		if !ok {
			continue
		}
		for idx, v := range byIdx {
			vals[key{nr, idx}] = append(vals[key{nr, idx}], v...)
		}
	}
	for k, ms := range masked {
		// Several conditions at once (CLONE_NEWUSER|CLONE_NEWNET, ...).
		var all uint64
		for i, a := range ms {
			all |= a
			for _, b := range ms[i+1:] {
				vals[k] = append(vals[k], a|b)
			}
		}
		vals[k] = append(vals[k], all)
	}
	for k, vs := range vals {
		for _, v := range vs {
			for _, fill := range []uint64{0, ^uint64(0)} {
				d := seccompData{nr: k.nr, arch: audit}
				for i := range d.args {
					d.args[i] = fill
				}
				d.args[k.idx] = v
				out = append(out, d)
			}
		}
		for i := 0; i < 2000; i++ {
			d := seccompData{nr: k.nr, arch: audit}
			for j := range d.args {
				d.args[j] = rng.Uint64() >> uint(rng.Intn(64))
			}
			if i%2 == 0 {
				d.args[k.idx] = uint64(rng.Uint32())
			}
			out = append(out, d)
		}
	}
	return out
}

// argCandidates are values on both sides of one argument condition.
func argCandidates(a Arg) []uint64 {
	if a.Op != OpMaskedEqual {
		v := a.Value
		return []uint64{v - 1, v, v + 1, v | 1<<32, v ^ 1<<63, 0, ^uint64(0)}
	}
	mask, want := a.Value, a.ValueTwo
	c := []uint64{want, want | ^mask, want | 0xffffffff00000000, want | 1<<32, 0, ^uint64(0)}
	for b := 0; b < 64; b++ {
		c = append(c, want^(1<<b))
	}
	return c
}
