package sandbox

// int nsbox_filter_fault_signals(void);
import "C"

import "golang.org/x/sys/unix"

// filterFaultSignals makes the worker, as PID 1, drop the fault signals
// other processes send it (faultsig.c); real faults still reach the
// runtime. Called once, on the main thread, after initSpawnC.
func filterFaultSignals() error {
	if rc := C.nsbox_filter_fault_signals(); rc != 0 {
		return unix.Errno(rc)
	}
	return nil
}
