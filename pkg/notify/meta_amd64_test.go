package notify

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// legacyMetaSteps are x86-64's older calls (legacyMetaCalls).
func legacyMetaSteps(rw, ro string) []metaStep {
	// Each pointer is made in the call expression itself, so that what
	// it points to lives through the call (unsafe.Pointer rule 4).
	path := func(nr uintptr, p string, arg uintptr) func() error {
		return func() error {
			b := bytePtr(p)
			_, _, e := unix.Syscall(nr, uintptr(unsafe.Pointer(b)), arg, 0)
			return errOf(e)
		}
	}
	times := func(nr uintptr, p string, tv *[2]unix.Timeval) func() error {
		return func() error {
			b := bytePtr(p)
			_, _, e := unix.Syscall(nr, uintptr(unsafe.Pointer(b)), uintptr(unsafe.Pointer(tv)), 0)
			return errOf(e)
		}
	}
	futimesat := func(p string, tv *[2]unix.Timeval) func() error {
		return func() error {
			fdcwd := int64(unix.AT_FDCWD)
			var b *byte
			if p != "" {
				b = bytePtr(p)
			}
			_, _, e := unix.Syscall(unix.SYS_FUTIMESAT, uintptr(fdcwd), uintptr(unsafe.Pointer(b)), uintptr(unsafe.Pointer(tv)))
			return errOf(e)
		}
	}
	utime := func(p string, ub *[2]int64) func() error {
		return func() error {
			b := bytePtr(p)
			_, _, e := unix.Syscall(unix.SYS_UTIME, uintptr(unsafe.Pointer(b)), uintptr(unsafe.Pointer(ub)), 0)
			return errOf(e)
		}
	}
	tv := &[2]unix.Timeval{{Sec: 1000000000}, {Sec: 1000000000}}
	badTv := &[2]unix.Timeval{{Usec: 1000000}, {}}
	return []metaStep{
		{"legacy-chmod-rw", path(unix.SYS_CHMOD, rw+"/f", 0o600)},
		{"legacy-chmod-ro", path(unix.SYS_CHMOD, ro+"/f", 0o644)},
		{"legacy-utime-rw", utime(rw+"/f", &[2]int64{1000000000, 1000000000})},
		{"legacy-utime-ro", utime(ro+"/f", nil)},
		{"legacy-utimes-rw", times(unix.SYS_UTIMES, rw+"/f", tv)},
		{"legacy-utimes-ro", times(unix.SYS_UTIMES, ro+"/f", tv)},
		{"legacy-utimes-badusec", times(unix.SYS_UTIMES, rw+"/f", badTv)},
		{"legacy-futimesat-rw", futimesat(rw+"/f", tv)},
		{"legacy-futimesat-ro", futimesat(ro+"/f", tv)},
		{"legacy-futimesat-null", futimesat("", tv)},
	}
}

var legacyMetaWant = map[string]string{
	"legacy-chmod-rw": "ok", "legacy-chmod-ro": "EACCES",
	"legacy-utime-rw": "ok", "legacy-utime-ro": "EACCES",
	"legacy-utimes-rw": "ok", "legacy-utimes-ro": "EACCES", "legacy-utimes-badusec": "EINVAL",
	"legacy-futimesat-rw": "ok", "legacy-futimesat-ro": "EACCES", "legacy-futimesat-null": "EFAULT",
}
