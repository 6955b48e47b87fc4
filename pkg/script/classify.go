package script

import (
	"regexp"
	"strings"
	"sync"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// The kernel refuses a write outside the writable places with EROFS (the
// root is a read-only bind) and each interpreter reports it in its own
// words. These patterns find the refused path in a failed script's stderr,
// so that the caller gets a typed violation naming the operation and the
// path instead of a traceback.
var violationPatterns = sync.OnceValue(func() []*regexp.Regexp {
	return []*regexp.Regexp{
		// python: OSError: [Errno 30] Read-only file system: '/etc/x'
		regexp.MustCompile(`\[Errno 30\] Read-only file system: '([^'\n]+)'`),
		// node: Error: EROFS: read-only file system, open '/etc/x'
		regexp.MustCompile(`EROFS: read-only file system, \w+ '([^'\n]+)'`),
		// ruby: Read-only file system @ rb_sysopen - /etc/x (Errno::EROFS)
		regexp.MustCompile(`Read-only file system @ \w+ - (\S+)`),
		// coreutils: touch: cannot touch '/x': Read-only file system (ASCII
		// or typographic quotes, depending on the locale)
		regexp.MustCompile(`cannot [a-z ]+ ['‘"]?([^'’":\n]+)['’"]?: Read-only file system`),
		// bash and dash redirections: "line 1: /etc/x: Read-only file system",
		// "cannot create /etc/x: Read-only file system"
		regexp.MustCompile(`(?:cannot create |: )(/[^:\n]*): Read-only file system`),
	}
})

// A write into a file the caller cannot write also ends as EACCES, which a
// read can produce too: only messages that say the operation was a write
// count as a violation.
var deniedWritePatterns = sync.OnceValue(func() []*regexp.Regexp {
	return []*regexp.Regexp{
		// coreutils: cannot create/touch/remove ...: Permission denied
		regexp.MustCompile(`cannot (?:create|touch|create directory|remove|overwrite|move) (?:regular file |directory )?['‘"]?([^'’":\n]+)['’"]?: Permission denied`),
		// dash: cannot create /etc/x: Permission denied
		regexp.MustCompile(`cannot create (/[^:\n]*): Permission denied`),
	}
})

// memoryPatterns are how interpreters die when an allocation fails under
// RLIMIT_AS (the root-less fallback for a memory limit): the kernel's OOM
// killer is not involved, so only the message tells.
var memoryPatterns = sync.OnceValue(func() []*regexp.Regexp {
	return []*regexp.Regexp{
		regexp.MustCompile(`(?m)^MemoryError\b`), // python
		regexp.MustCompile(`JavaScript heap out of memory|Fatal process out of memory|Fatal process OOM|Fatal JavaScript out of memory`), // node (V8)
		regexp.MustCompile(`failed to allocate memory \(NoMemoryError\)|\(NoMemoryError\)`),                                              // ruby
		regexp.MustCompile(`(?i)x(?:m|re)alloc: .*cannot allocate|cannot allocate memory`),                                               // bash, C
	}
})

// Classify looks at the stderr of a script that failed and returns the
// typed reason it shows, or nil: a *sandbox.ViolationError for a refused
// write, a *sandbox.ResourceLimitError for an allocation that failed under
// a memory limit (only when memoryLimit is set, as "256 MiB").
func Classify(stderr string, memoryLimit string) error {
	if memoryLimit != "" {
		for _, re := range memoryPatterns() {
			if re.MatchString(stderr) {
				return &sandbox.ResourceLimitError{Resource: "memory", Limit: memoryLimit, Enforcer: "rlimit"}
			}
		}
	}
	for _, re := range violationPatterns() {
		if m := re.FindStringSubmatch(stderr); m != nil {
			return &sandbox.ViolationError{Operation: "filesystem write", Path: strings.TrimSpace(m[1]), Detail: "read-only file system"}
		}
	}
	for _, re := range deniedWritePatterns() {
		if m := re.FindStringSubmatch(stderr); m != nil {
			return &sandbox.ViolationError{Operation: "filesystem write", Path: strings.TrimSpace(m[1]), Detail: "permission denied"}
		}
	}
	if strings.Contains(stderr, "Read-only file system") || strings.Contains(stderr, "EROFS") {
		return &sandbox.ViolationError{Operation: "filesystem write", Detail: "read-only file system"}
	}
	return nil
}
