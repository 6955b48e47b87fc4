package sandbox

import "errors"

// netTrapSupported says whether the connect trap the filtered network
// needs can run. (Wired to pkg/notify when that lands.)
func netTrapSupported() error {
	return errors.New("this build has no seccomp connect trap yet")
}

// reportViolation reports v as it happens. (Wired to WithViolations when
// that lands.)
func (s *Session) reportViolation(v *ViolationError) {}
