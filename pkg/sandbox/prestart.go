package sandbox

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/pkg/ipc"
	"github.com/nsbox/nsbox/pkg/namespaces"
)

// Prestarted is a worker process started before its policy is known. Most
// of a sandbox's start-up is the worker's process start: clone(2) with the
// namespaces, the exec of this binary and the Go runtime's start. Begun
// with Prestart while the caller is still resolving its policy, that time
// overlaps the caller's own work instead of following it.
//
// A prestarted worker has done nothing but start: it holds no mount, no
// host path and no policy, and waits for its handshake on its channel. The
// namespaces it was created in are its only commitment, so Start adopts it
// only for a policy that asks for the same ones (PrestartHint); any other
// policy gets a fresh worker and this one is discarded.
//
// Pass a Prestarted to Start with WithPrestarted, which takes ownership of
// it whatever Start returns, or end it with Discard. Both are safe to call
// more than once; only the first use counts.
type Prestarted struct {
	// hint is what the worker was created with, as opposed to what it is
	// told in the handshake: clone(2) fixes the namespaces and the
	// capability set for good.
	hint PrestartHint
	// ready is closed once the worker's start is over; startErr (nil when
	// it runs) may be read after that, any number of times.
	ready    chan struct{}
	startErr error

	mu   sync.Mutex
	used bool // taken by Start or discarded

	s         *Session // pid, exited and waitErr are set by startWorker
	supEnd    *os.File
	workerEnd *os.File // nil once the worker holds its only copy
}

// PrestartHint is what a worker must be created with: the parts of a
// Policy that clone(2) fixes.
type PrestartHint struct {
	HostNetwork     bool // Policy.Network == NetworkHost
	AllowPrivileged bool // Policy.AllowPrivileged
}

// HintFor returns the hint under which a prestarted worker suits p.
func HintFor(p Policy) PrestartHint {
	return PrestartHint{HostNetwork: p.Network == NetworkHost, AllowPrivileged: p.AllowPrivileged}
}

// Prestart begins starting a worker in the background and returns at once.
// It never fails: a worker that could not start is not adopted, and Start
// then starts one itself and reports the error.
func Prestart(h PrestartHint) *Prestarted {
	w := &Prestarted{
		hint:  h,
		ready: make(chan struct{}),
		s:     &Session{exited: make(chan struct{})},
	}
	sup, wk, err := ipc.Socketpair()
	if err != nil {
		close(w.s.exited)
		w.startErr = err
		close(w.ready)
		return w
	}
	w.supEnd, w.workerEnd = sup, wk
	go func() {
		err := w.s.startWorker(w.hint, wk)
		if err != nil {
			// startWorker closed exited: there is no process to wait for.
			sup.Close()
			wk.Close()
		}
		w.startErr = err
		close(w.ready)
	}()
	return w
}

// Pid is the worker's process id on the host, once its clone and exec are
// done; 0 when it could not start. It does not say whether the worker is
// still running.
func (w *Prestarted) Pid() int {
	if w.started() != nil {
		return 0
	}
	return w.s.pid
}

// started waits for the worker's start to be over and returns its error.
func (w *Prestarted) started() error {
	<-w.ready
	return w.startErr
}

// AdoptWorker wraps a worker the program spawned itself, before its Go
// runtime started (nsbox's own CLI does, from an ELF constructor): pid must
// be the caller's child, started by namespaces.Spawn or its C half
// (nsbox_spawn) with the namespaces h describes, running this binary
// (/proc/self/exe) with argv {"nsbox-init"} and environment
// {"_NSBOX_INIT=1"}; channel is the supervisor's end of the SOCK_SEQPACKET
// socketpair whose other end is the worker's fd 3.
// Its parent death signal belongs to the thread that spawned it.
func AdoptWorker(pid int, channel *os.File, h PrestartHint) *Prestarted {
	return adoptWorker(pid, channel, h, nil)
}

// AdoptStagedWorker is AdoptWorker for a worker made inside the identity
// holder's user namespace by a stage (namespaces.SpawnInHolder's C half:
// the stage stagePid, the caller's child too, whose first report, the
// worker's pid, has been read from stageConn). The stage writes the
// worker's maps; AdoptStagedWorker owns it and stageConn whatever happens.
func AdoptStagedWorker(pid int, channel *os.File, h PrestartHint, stagePid int, stageConn *os.File) *Prestarted {
	return adoptWorker(pid, channel, h, namespaces.AdoptStage(stagePid, stageConn))
}

func adoptWorker(pid int, channel *os.File, h PrestartHint, st *namespaces.Stage) *Prestarted {
	w := &Prestarted{
		hint:   h,
		ready:  make(chan struct{}),
		s:      &Session{exited: make(chan struct{})},
		supEnd: channel,
	}
	defer close(w.ready)
	// Our own unreaped child: FindProcess holds it by pidfd.
	proc, err := os.FindProcess(pid)
	if err != nil {
		if st != nil {
			st.Close()
		}
		// Still our unreaped child: its pid cannot be anyone else's yet.
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
		channel.Close()
		close(w.s.exited)
		w.startErr = err
		return w
	}
	w.s.pid, w.s.proc = pid, proc
	w.s.holdWorker()
	// A root-less full range without a holder yet starts one for the
	// starts to come (prespawn.c found none, or it would have staged).
	maps := startMaps(pid, nil, st, st == nil && os.Geteuid() != 0 && os.Getenv(EnvIDHolder) != "off")
	w.s.maps = maps
	go func() {
		// Not reaped while newuidmap may still write to /proc/PID.
		maps.wait()
		w.s.reaped(waitExit(proc))
	}()
	return w
}

// WithPrestarted lets Start adopt w (see Prestarted). Start owns w from
// then on, whether it adopts it, discards it or fails.
func WithPrestarted(w *Prestarted) Option { return func(o *options) { o.prestarted = w } }

// take hands w to Start when it runs, is unused, was created as h asks
// and its maps suit the policy (singleID: Policy.SingleID); otherwise it
// discards w and returns nil. It waits for the worker's clone
// and exec to finish, which Start would otherwise wait for itself.
func (w *Prestarted) take(h PrestartHint, singleID bool) *Prestarted {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.used {
		return nil
	}
	w.used = true
	if w.started() != nil {
		return nil
	}
	select {
	case <-w.s.exited:
		// Killed from outside since it started: a fresh worker serves
		// better than a handshake that fails.
		w.end()
		return nil
	default:
	}
	if w.hint != h || !w.s.maps.suits(singleID) {
		w.end()
		return nil
	}
	return w
}

// Discard ends w if Start has not taken it: the worker is killed and
// reaped, and its channel closed. It is a no-op after Start or Discard.
func (w *Prestarted) Discard() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.used {
		return
	}
	w.used = true
	if w.started() != nil {
		return
	}
	w.end()
}

// end kills a started, untaken worker and waits until it is reaped.
func (w *Prestarted) end() {
	w.supEnd.Close()
	if w.workerEnd != nil {
		w.workerEnd.Close()
	}
	w.s.kill()
	<-w.s.exited
}
