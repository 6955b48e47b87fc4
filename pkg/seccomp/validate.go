package seccomp

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// maxRetData is the largest value SECCOMP_RET_DATA (16 bits) can carry.
const maxRetData = 0xffff

// maxErrno is the largest errno the kernel returns (MAX_ERRNO, linux/err.h);
// larger SCMP_ACT_ERRNO data is clamped by the kernel, so it is refused here.
const maxErrno = 4095

const errEPERM = 1

var knownActions = map[Action]bool{
	ActKill: true, ActKillThread: true, ActKillProcess: true, ActTrap: true,
	ActErrno: true, ActTrace: true, ActAllow: true, ActLog: true, ActNotify: true,
}

var knownOps = map[Op]bool{
	OpNotEqual: true, OpLessThan: true, OpLessEqual: true, OpEqualTo: true,
	OpGreaterEqual: true, OpGreaterThan: true, OpMaskedEqual: true,
}

// Filter flags of the OCI specification.
const (
	flagTSync           = "SECCOMP_FILTER_FLAG_TSYNC"
	flagLog             = "SECCOMP_FILTER_FLAG_LOG"
	flagSpecAllow       = "SECCOMP_FILTER_FLAG_SPEC_ALLOW"
	flagWaitKillableRcv = "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"
)

var knownFlags = map[string]bool{flagTSync: true, flagLog: true, flagSpecAllow: true, flagWaitKillableRcv: true}

var minKernelRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{1,4}\.[0-9]{1,4}$`) })

// effect is what a rule does, with the OCI defaults applied: SCMP_ACT_ERRNO
// and SCMP_ACT_TRACE without errnoRet mean EPERM, SCMP_ACT_KILL is
// SCMP_ACT_KILL_THREAD. Two rules with the same effect agree.
type effect struct {
	action Action
	data   uint
}

func (e effect) String() string {
	if e.action == ActErrno || e.action == ActTrace {
		return fmt.Sprintf("%s(%d)", e.action, e.data)
	}
	return string(e.action)
}

func ruleEffect(a Action, ret *uint) effect {
	switch a {
	case ActKill:
		return effect{action: ActKillThread}
	case ActErrno, ActTrace:
		if ret == nil {
			return effect{action: a, data: errEPERM}
		}
		return effect{action: a, data: *ret}
	}
	return effect{action: a}
}

// permissive reports whether an action lets the syscall run. SCMP_ACT_TRACE
// counts as permissive as in runc: with no tracer the kernel fails the call
// with ENOSYS, with one the tracer decides.
func (e effect) permissive() bool {
	return e.action == ActAllow || e.action == ActLog || e.action == ActTrace
}

func (p *Profile) fail(field, format string, args ...any) error {
	return &ProfileError{Source: p.Source, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ruleNames returns the rule's syscall names with their field paths.
func ruleNames(r *Rule, field string) (names, fields []string) {
	if r.Name != "" {
		names = append(names, r.Name)
		fields = append(fields, field+".name")
	}
	for j, n := range r.Names {
		names = append(names, n)
		fields = append(fields, index(field+".names", j))
	}
	return names, fields
}

// validate checks everything that can be checked without knowing where the
// profile will run. Parse and Compile both call it.
func validate(p *Profile) error {
	if !knownActions[p.DefaultAction] {
		return p.fail("defaultAction", "unknown action %q", p.DefaultAction)
	}
	if p.DefaultAction == ActNotify {
		// The kernel refuses a filter whose every unmatched call waits for an
		// agent; libseccomp refuses it as default action too.
		return p.fail("defaultAction", "SCMP_ACT_NOTIFY cannot be the default action")
	}
	if err := checkRet(p, "defaultErrnoRet", p.DefaultAction, p.DefaultErrnoRet); err != nil {
		return err
	}
	if len(p.Architectures) > 0 && len(p.ArchMap) > 0 {
		return p.fail("archMap", "both architectures and archMap are set; use one of them")
	}
	for i, a := range p.Architectures {
		if _, ok := arches[a]; !ok {
			return p.fail(index("architectures", i), "unknown architecture %q", a)
		}
	}
	for i, am := range p.ArchMap {
		f := index("archMap", i)
		if _, ok := arches[am.Architecture]; !ok {
			return p.fail(f+".architecture", "unknown architecture %q", am.Architecture)
		}
		for j, a := range am.SubArchitectures {
			if _, ok := arches[a]; !ok {
				return p.fail(index(f+".subArchitectures", j), "unknown architecture %q", a)
			}
		}
	}
	for i, fl := range p.Flags {
		if !knownFlags[fl] {
			return p.fail(index("flags", i), "unknown flag %q", fl)
		}
	}
	for i := range p.Syscalls {
		if err := validateRule(p, &p.Syscalls[i], index("syscalls", i)); err != nil {
			return err
		}
	}
	// Rules with includes/excludes may never apply together (Docker's
	// clone3 is ERRNO(ENOSYS) without CAP_SYS_ADMIN and ALLOW with it), so
	// only unconditional ones are checked here; Compile checks again after
	// evaluating includes/excludes.
	var always []indexedRule
	for i := range p.Syscalls {
		if p.Syscalls[i].Includes == nil && p.Syscalls[i].Excludes == nil {
			always = append(always, indexedRule{i: i, r: &p.Syscalls[i]})
		}
	}
	return checkConflicts(p, always)
}

func checkRet(p *Profile, field string, a Action, ret *uint) error {
	if ret == nil {
		return nil
	}
	switch a {
	case ActErrno:
		// ERRNO(0) would make a denied call report success: a refused
		// setuid() or mprotect() that "succeeds" is how privilege drops and
		// hardening get silently skipped.
		if *ret == 0 || *ret > maxErrno {
			return p.fail(field, "%d is not an errno (1 to %d)", *ret, maxErrno)
		}
	case ActTrace:
		if *ret > maxRetData {
			return p.fail(field, "%d does not fit in 16 bits", *ret)
		}
	default:
		return p.fail(field, "is only valid with SCMP_ACT_ERRNO or SCMP_ACT_TRACE, not %s", a)
	}
	return nil
}

func validateRule(p *Profile, r *Rule, field string) error {
	if r.Name != "" && len(r.Names) > 0 {
		return p.fail(field, "both name and names are set; use names")
	}
	names, fields := ruleNames(r, field)
	if len(names) == 0 {
		return p.fail(field+".names", "no syscall named")
	}
	for k, n := range names {
		if !knownSyscall(n) {
			return p.fail(fields[k], "unknown syscall %q", n)
		}
	}
	if !knownActions[r.Action] {
		return p.fail(field+".action", "unknown action %q", r.Action)
	}
	if err := checkRet(p, field+".errnoRet", r.Action, r.ErrnoRet); err != nil {
		return err
	}
	var seen [6]bool
	for k, a := range r.Args {
		f := index(field+".args", k)
		if a.Index > 5 {
			return p.fail(f+".index", "%d is not an argument index (0 to 5)", a.Index)
		}
		if seen[a.Index] {
			// libseccomp cannot test one argument twice in a rule; a range
			// needs two rules.
			return p.fail(f+".index", "argument %d is already compared in this rule", a.Index)
		}
		seen[a.Index] = true
		if !knownOps[a.Op] {
			return p.fail(f+".op", "unknown operator %q", a.Op)
		}
		if a.Op == OpMaskedEqual {
			if a.ValueTwo&^a.Value != 0 {
				return p.fail(f+".valueTwo", "%#x has bits outside the mask %#x; the rule could never match", a.ValueTwo, a.Value)
			}
		} else if a.ValueTwo != 0 {
			return p.fail(f+".valueTwo", "is only used with SCMP_CMP_MASKED_EQ")
		}
	}
	for _, c := range []struct {
		key string
		c   *Condition
	}{{"includes", r.Includes}, {"excludes", r.Excludes}} {
		if c.c == nil {
			continue
		}
		f := field + "." + c.key
		for k, cp := range c.c.Caps {
			if !capNames[cp] {
				return p.fail(index(f+".caps", k), "unknown capability %q", cp)
			}
		}
		for k, a := range c.c.Arches {
			if !goArches[a] {
				return p.fail(index(f+".arches", k), "unknown architecture %q (Docker uses Go names: amd64, arm64, ...)", a)
			}
		}
		if c.c.MinKernel != "" && !minKernelRE().MatchString(c.c.MinKernel) {
			return p.fail(f+".minKernel", "%q is not a kernel version like \"5.8\"", c.c.MinKernel)
		}
	}
	return nil
}

// checkConflicts rejects rules for the same syscall whose effects differ
// where libseccomp cannot keep both: when one of them has no argument
// conditions (it covers every call; libseccomp silently keeps one of the two
// and drops the other) or when both test exactly the same conditions. The
// error names the later rule and the earlier one it conflicts with.
func checkConflicts(p *Profile, rules []indexedRule) error {
	type seen struct {
		rule  int
		eff   effect
		conds string // canonical argument conditions; "" for none
	}
	bySyscall := map[string][]seen{}
	for _, ir := range rules {
		i, r := ir.i, ir.r
		eff := ruleEffect(r.Action, r.ErrnoRet)
		conds := canonicalArgs(r.Args)
		names, fields := ruleNames(r, index("syscalls", i))
		for k, n := range names {
			for _, s := range bySyscall[n] {
				if s.eff == eff || s.rule == i {
					continue
				}
				if s.conds == "" || conds == "" || s.conds == conds {
					why := "one of them has no argument conditions, so both cover the same calls"
					if s.conds != "" && conds != "" {
						why = "both test the same argument conditions"
					}
					return p.fail(fields[k], "conflicting rules for syscall %q: %s here, %s in syscalls[%d]; %s",
						n, eff, s.eff, s.rule, why)
				}
			}
			bySyscall[n] = append(bySyscall[n], seen{rule: i, eff: eff, conds: conds})
		}
	}
	return nil
}

func canonicalArgs(args []Arg) string {
	parts := make([]string, 0, len(args))
	for _, a := range args {
		parts = append(parts, strconv.FormatUint(uint64(a.Index), 10)+" "+string(a.Op)+" "+
			strconv.FormatUint(a.Value, 10)+" "+strconv.FormatUint(a.ValueTwo, 10))
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}
