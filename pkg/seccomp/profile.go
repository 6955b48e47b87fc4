package seccomp

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// MaxProfileSize bounds how much of a profile file is read and parsed.
// Docker's default profile is about 17 KiB; 4 MiB leaves room for generated
// profiles while keeping a hostile or mistaken path (/dev/zero, a log file)
// from exhausting memory in the supervisor.
const MaxProfileSize = 4 << 20

// Action is a seccomp action name as written in OCI/Docker profiles.
type Action string

// The actions of the OCI runtime specification.
const (
	ActKill        Action = "SCMP_ACT_KILL" // kills the calling thread (OCI meaning)
	ActKillThread  Action = "SCMP_ACT_KILL_THREAD"
	ActKillProcess Action = "SCMP_ACT_KILL_PROCESS"
	ActTrap        Action = "SCMP_ACT_TRAP"
	ActErrno       Action = "SCMP_ACT_ERRNO"
	ActTrace       Action = "SCMP_ACT_TRACE"
	ActAllow       Action = "SCMP_ACT_ALLOW"
	ActLog         Action = "SCMP_ACT_LOG"
	ActNotify      Action = "SCMP_ACT_NOTIFY"
)

// Op is an argument comparison operator as written in OCI/Docker profiles.
type Op string

// The comparison operators of the OCI runtime specification. All compare
// the full 64-bit argument; SCMP_CMP_MASKED_EQ is (arg & Value) == ValueTwo.
const (
	OpNotEqual     Op = "SCMP_CMP_NE"
	OpLessThan     Op = "SCMP_CMP_LT"
	OpLessEqual    Op = "SCMP_CMP_LE"
	OpEqualTo      Op = "SCMP_CMP_EQ"
	OpGreaterEqual Op = "SCMP_CMP_GE"
	OpGreaterThan  Op = "SCMP_CMP_GT"
	OpMaskedEqual  Op = "SCMP_CMP_MASKED_EQ"
)

// Profile is a seccomp profile in the OCI runtime-spec / Docker JSON format
// (the format of Docker's and Podman's default.json), including Docker's
// extensions archMap, includes/excludes and comment.
//
// A Profile returned by Parse is valid; a caller that modifies one gets it
// validated again by Compile.
type Profile struct {
	DefaultAction    Action    `json:"defaultAction"`
	DefaultErrnoRet  *uint     `json:"defaultErrnoRet,omitempty"`
	Architectures    []string  `json:"architectures,omitempty"`
	ArchMap          []ArchMap `json:"archMap,omitempty"`
	Syscalls         []Rule    `json:"syscalls,omitempty"`
	Flags            []string  `json:"flags,omitempty"`
	ListenerPath     string    `json:"listenerPath,omitempty"`
	ListenerMetadata string    `json:"listenerMetadata,omitempty"`

	// Source names the profile in error messages: the file name given to
	// LoadFile, the source given to Parse, or "default.json".
	Source string `json:"-"`
	// Digest is the SHA-256 of the bytes Parse decoded: what a trust
	// record (nsbox trust) and the policy that named the file compare.
	Digest [32]byte `json:"-"`
}

// ArchMap is Docker's archMap entry: when Architecture is the native
// architecture, it and its SubArchitectures are filtered.
type ArchMap struct {
	Architecture     string   `json:"architecture"`
	SubArchitectures []string `json:"subArchitectures"`
}

// Rule is one entry of "syscalls": an action for a set of syscall names,
// optionally only when all argument conditions hold.
type Rule struct {
	Names    []string   `json:"names,omitempty"`
	Name     string     `json:"name,omitempty"` // Docker's older singular form
	Action   Action     `json:"action"`
	ErrnoRet *uint      `json:"errnoRet,omitempty"`
	Args     []Arg      `json:"args,omitempty"`
	Comment  string     `json:"comment,omitempty"`
	Includes *Condition `json:"includes,omitempty"`
	Excludes *Condition `json:"excludes,omitempty"`
}

// Arg is one argument condition of a Rule. Conditions of one rule are ANDed;
// rules for the same syscall and action are ORed.
type Arg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo,omitempty"`
	Op       Op     `json:"op"`
}

// Condition is Docker's includes/excludes filter on a rule. nsbox evaluates
// it for the sandbox: Caps as "no capability held" (sandboxed commands run
// with every capability dropped), Arches against the native Go architecture
// (runtime.GOARCH, as Docker does) and MinKernel against uname(2).
type Condition struct {
	Caps      []string `json:"caps,omitempty"`
	Arches    []string `json:"arches,omitempty"`
	MinKernel string   `json:"minKernel,omitempty"`
}

// ProfileError reports a problem with a profile, naming the offending field
// ("syscalls[3].names[1]"). Field is empty for problems with the document
// as a whole.
type ProfileError struct {
	Source string
	Field  string
	Msg    string
}

func (e *ProfileError) Error() string {
	src := e.Source
	if src == "" {
		src = "(unnamed)"
	}
	if e.Field == "" {
		return fmt.Sprintf("seccomp profile %s: %s", src, e.Msg)
	}
	return fmt.Sprintf("seccomp profile %s: %s: %s", src, e.Field, e.Msg)
}

// Parse decodes and validates an OCI/Docker seccomp profile. Decoding is
// strict: unknown or duplicate keys, unknown actions, operators,
// architectures, capabilities and syscall names, and rules that conflict
// are errors (*ProfileError). source names the profile in messages.
func Parse(data []byte, source string) (*Profile, error) {
	if len(data) > MaxProfileSize {
		return nil, &ProfileError{Source: source, Msg: fmt.Sprintf("larger than %d bytes", MaxProfileSize)}
	}
	p, err := decodeProfile(data, source)
	if err != nil {
		return nil, err
	}
	p.Digest = sha256.Sum256(data)
	if err := validate(p); err != nil {
		return nil, err
	}
	return p, nil
}

// LoadFile reads a profile from path (at most MaxProfileSize bytes) and
// parses it. The path is named in every error.
func LoadFile(path string) (*Profile, error) {
	// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
	// writer; it has no effect on regular files, the only kind accepted.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("seccomp profile %s: cannot read: %w", path, pathCause(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("seccomp profile %s: cannot read: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		// A FIFO or device would block or never end.
		return nil, &ProfileError{Source: path, Msg: "not a regular file"}
	}
	// Read one byte past the limit to tell "exactly at the limit" from "over".
	data, err := io.ReadAll(io.LimitReader(f, MaxProfileSize+1))
	if err != nil {
		return nil, fmt.Errorf("seccomp profile %s: cannot read: %w", path, err)
	}
	return Parse(data, path)
}

// pathCause strips the *fs.PathError wrapper, whose text would repeat the
// path, keeping the cause (errors.Is(err, fs.ErrNotExist) still works).
func pathCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// defaultSource is how the built-in profile is named in messages.
const defaultSource = "default.json"

// Default returns the built-in default profile, profiles/seccomp/default.json
// embedded in the binary. Each call returns a fresh copy. DefaultFilter
// returns it compiled, without parsing it when the binary carries it
// precompiled.
func Default() (*Profile, error) {
	data, err := defaultProfileBytes()
	if err != nil {
		return nil, err
	}
	return Parse(data, defaultSource)
}
