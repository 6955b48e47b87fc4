package main

// --isolation per-call: the pool of fresh sandboxes that serves the calls
// of a connection, and the policy it is built from.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nsbox/nsbox/pkg/hostapi"
	"github.com/nsbox/nsbox/pkg/mcpserver"
	"github.com/nsbox/nsbox/pkg/policy"
	"github.com/nsbox/nsbox/pkg/sandbox"
)

// startMCPPool starts the pool of fresh sandboxes that serves the calls of
// a connection with --isolation per-call. The policy is resolved under a
// hold of its writable roots kept for the pool's life (as
// startToolSession does for one session), and every sandbox of the pool
// is built from that resolution until a build fails: the host's files
// may have changed under it (a hidden .env removed, a --rw directory
// recreated), or a call may have made a directory unreadable (chmod 000
// on its own files). The pool then asks poolPlan.replan, which repairs
// and resolves again under a new hold, and builds from that (a session
// does the same in its start). A first sandbox is started and ended
// before the pool, so that a policy or backend that cannot start fails
// the start, once, instead of every call; it also chooses the backend
// (auto falls back to landlock as for a session).
func startMCPPool(ctx context.Context, f *mcpFlags, host policy.Host, opts []sandbox.Option, defs json.RawMessage, logger *slog.Logger) (mcpserver.Session, error) {
	pv, err := f.peek(host)
	if err != nil {
		return nil, err
	}
	probe, err := startToolSession(ctx, pv, opts)
	if err != nil {
		return nil, err
	}
	// The probe's hold and resolution become the pool's: they are
	// released when the pool closes, not when the probe does.
	plan := &poolPlan{pv: pv, logger: logger, first: probe.res, firstRecorded: probe.auditRecorded, hold: probe.hold, roots: probe.res.Roots(), placeholders: probe.res.Placeholders, placeholdersDone: probe.placeholdersDone}
	landlock := probe.Session.Landlock() != nil
	// The policy as startToolSession built it from the resolution, not
	// the probe session's copy, which a backend adapts to that one
	// sandbox (landlock sets its own TMPDIR).
	p := probeSessionPolicy(probe.res)
	if err := probe.Session.Close(); err != nil {
		logger.Warn("closing the first sandbox", "error", err)
	}
	failures := &poolFailureLog{logger: logger}
	popts := append(opts[:len(opts):len(opts)], sandbox.WithProcFallback())
	if landlock {
		popts = append(opts[:len(opts):len(opts)], sandbox.WithLandlock())
	}
	popts = append(popts, sandbox.WithPoolReplan(plan.replan), sandbox.WithPoolErrors(failures.log), sandbox.WithPoolBuilt(plan.built), sandbox.WithPoolEnded(plan.quarantineCreated))
	pool, err := sandbox.NewPool(p, f.poolSize, popts...)
	if err != nil {
		plan.done()
		return nil, err
	}
	logger.Info("sandbox pool started", "size", f.poolSize)
	return mcpserver.PerCall(&heldPool{Pool: pool, plan: plan}, defs), nil
}

// probeSessionPolicy is the policy a tool sandbox is built from for res:
// the resolution's, with the memory and notepad host APIs.
func probeSessionPolicy(res *policy.Result) sandbox.Policy {
	p := res.Policy
	p.HostAPIs = mergeStrings(p.HostAPIs, hostapi.Methods())
	return p
}

// heldPool releases the policy holds once every sandbox of the pool is
// gone, then runs the git audits.
type heldPool struct {
	*sandbox.Pool
	plan *poolPlan
}

func (h *heldPool) Close() error {
	err := h.Pool.Close() // every sandbox of the pool is gone after it
	h.plan.done()
	return err
}

// poolPlan is a per-call pool's policy: the resolution it started from
// and the newest one, made after a build failed (replan). A sandbox built
// from an older resolution may still be running a call, so what each one
// relies on stays until the pool closes: one hold keeps the writable roots
// of them all, and the placeholders of them all are removed (and
// recorded for a later nsbox meanwhile) together.
type poolPlan struct {
	pv     *policy.Preview
	logger *slog.Logger

	mu sync.Mutex
	// first is the resolution the pool started from; its git audit
	// covers every call (a repository made since it is not one it
	// knows); latest, if any, the newest one's.
	first, latest                 *policy.Result
	firstRecorded, latestRecorded func() // end the audits' records (audit.go)
	// hold keeps roots, the writable roots of every resolution so far;
	// placeholders are theirs, recorded under placeholdersDone's record.
	hold             *policy.Hold
	roots            []string
	placeholders     []policy.Placeholder
	placeholdersDone func()
	// recordDue: a replan added placeholders that the next build makes;
	// built records them all then.
	recordDue bool
	closed    bool
	// created serializes quarantineCreated's runs.
	created sync.Mutex
}

// quarantineCreated runs the agent-file part of the pool's audits
// (GitAudit.CreatedOnly) once a call's sandbox has ended (the pool's
// WithPoolEnded): what the call made of the agent files the protect
// patterns name (pkgs/x/.vscode/tasks.json, .cargo/config.toml), left
// under its name until the pool closes (hours later), would wait on the
// host for the user's editor or cargo in the same workspace (found by
// review). Not as the call returns: a process the call detached still
// writes until the teardown has killed it, and would plant the file
// again after the audit (review 24). The repositories a call made stay
// for the close (poolPlan.replan says why).
func (pp *poolPlan) quarantineCreated() {
	pp.created.Lock()
	defer pp.created.Unlock()
	pp.mu.Lock()
	first, latest, closed := pp.first, pp.latest, pp.closed
	pp.mu.Unlock()
	if closed {
		return
	}
	for _, res := range []*policy.Result{first, latest} {
		if res == nil {
			continue
		}
		a := res.GitAudit.CreatedOnly()
		if a == nil {
			continue
		}
		qs, err := a.Run()
		// Bounded, as the replan's repair is: a call that makes hundreds
		// of agent files or unreadable directories must not flood the
		// log at every call (second review).
		printQuarantined(qs, 10)
		if err == nil {
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		if errors.Is(err, policy.ErrGitAuditIncomplete) {
			pp.logger.Error("the audit of agent files after a call is incomplete", "count", len(lines), "first", lines[0])
		} else {
			pp.logger.Warn("the audit of agent files after a call", "count", len(lines), "first", lines[0])
		}
	}
}

// built is the pool's WithPoolBuilt: the first sandbox built after a
// replan has made its placeholders; every placeholder of the pool is
// recorded anew (with the identities they have now), then the older
// record ends.
func (pp *poolPlan) built() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if !pp.recordDue || pp.closed {
		return
	}
	pp.recordDue = false
	done := recordPlaceholders(&policy.Result{Placeholders: pp.placeholders}, pp.hold)
	pp.placeholdersDone()
	pp.placeholdersDone = done
}

// replan is the pool's WithPoolReplan: a build failed with cause, so the
// policy is resolved again from the same preview, under a new hold, and
// the pool builds from that, as startToolSession's retry does.
func (pp *poolPlan) replan(ctx context.Context, cause error) (sandbox.Policy, error) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.closed {
		return sandbox.Policy{}, sandbox.ErrPoolClosed
	}
	pp.logger.Info("a sandbox of the pool could not be built; resolving the policy again", "cause", cause)
	// First the repair a sandbox's end makes (the first part of the git
	// audit): a directory a call made unreadable (chmod 000 on its own
	// files, above a hidden .env or a nested repository, or on the
	// workspace itself) would fail every later build, and is given
	// u+rwx back. Nothing is quarantined now: other calls may still be
	// running in repositories they made (second review); the first
	// audit, at the pool's close, quarantines every repository a call
	// made, also one the new resolution protects as if it were the
	// user's. The audits stay armed for the pool's close.
	pp.repair()
	peek := func(policy.Host) (*policy.Preview, error) { return pp.pv, nil }
	res, hold, err := resolveHeld(peek, policy.Host{})
	if err == nil {
		// The new hold takes over the older roots before the old hold
		// goes: no moment without a lock on a root a running sandbox
		// of the pool may rely on.
		err = hold.Add(pp.roots)
		if err != nil {
			hold.Release(nil)
		}
	}
	if err != nil {
		return sandbox.Policy{}, err
	}
	pp.roots = mergeStrings(pp.roots, res.Roots())
	seen := map[string]bool{}
	for _, ph := range pp.placeholders {
		seen[ph.Path] = true
	}
	for _, ph := range res.Placeholders {
		if !seen[ph.Path] {
			pp.placeholders = append(pp.placeholders, ph)
		}
	}
	// The old hold's release (removing nothing): the new one holds its
	// roots. The placeholders are recorded again once a sandbox is built
	// from the new resolution (built): the record holds each one's
	// identity, and one only the new resolution needs exists from that
	// build on, not now (a record written here missed it, and a SIGKILL
	// then left it for good: second review). The old record stays until
	// then.
	pp.hold.Release(nil)
	pp.hold = hold
	pp.recordDue = true
	// The first audit covers every call; one more, the newest, is kept
	// (its roots as resolved now), not one per replan.
	if pp.latestRecorded != nil {
		pp.latestRecorded()
	}
	pp.latest, pp.latestRecorded = res, recordAudit(res.GitAudit)
	return probeSessionPolicy(res), nil
}

// repair runs the repair of the git audits (GitAudit.Repair), its
// reports summed up in one log line: a call that makes hundreds of
// directories unreadable must not flood the log at every replan.
func (pp *poolPlan) repair() {
	var n int
	var first error
	for _, res := range []*policy.Result{pp.first, pp.latest} {
		if res == nil {
			continue
		}
		if err := res.GitAudit.Repair(); err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if n++; first == nil {
					first = errors.New(line)
				}
			}
		}
	}
	if n > 0 {
		pp.logger.Warn("directories the sandbox made unreadable were looked at again", "count", n, "first", first)
	}
}

// audit runs the git audits.
func (pp *poolPlan) audit() {
	for _, res := range []*policy.Result{pp.first, pp.latest} {
		if res == nil {
			continue
		}
		if _, err := auditGit(res); errors.Is(err, policy.ErrGitAuditIncomplete) {
			fmt.Fprintf(msgs, "nsbox: error: %v\n", err)
		}
	}
}

// done releases the hold and runs the git audits, once, after the pool
// closed.
func (pp *poolPlan) done() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.closed {
		return
	}
	pp.closed = true
	pp.hold.Release(pp.placeholders)
	pp.placeholdersDone()
	pp.audit()
	for _, f := range []func(){pp.firstRecorded, pp.latestRecorded} {
		if f != nil {
			f()
		}
	}
}

// poolFailureLog logs the failures a per-call pool meets (a refill that
// could not start, a sandbox lost while idle), so that the operator learns
// of them before the pool runs dry: the first at once, then at most one
// per poolFailureEvery, with the count of those not logged.
type poolFailureLog struct {
	logger     *slog.Logger
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

const poolFailureEvery = 10 * time.Second

func (l *poolFailureLog) log(f *sandbox.PoolFailure) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < poolFailureEvery {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	args := []any{"op", f.Op, "error", f.Err}
	if n > 0 {
		args = append(args, "failures_not_logged", n)
	}
	l.logger.Warn(poolFailureMessage(f.Op), args...)
}

// poolFailureMessage says what a pool failure means for the calls.
func poolFailureMessage(op string) string {
	switch op {
	case "refill":
		return "per-call pool: a sandbox could not be started in the background; the policy is resolved again and the start retried, with a growing delay while it fails"
	case "start":
		return "per-call pool: a sandbox could not be started for a call; the policy is resolved again and the start tried once more"
	case "replan":
		return "per-call pool: the policy could not be resolved again; tool calls fail until the cause is fixed"
	case "lost":
		return "per-call pool: an idle sandbox ended before use; another is started"
	case "lost-in-call":
		return "per-call pool: a sandbox ended under a tool call (killed from outside); the call failed"
	}
	return "per-call pool: failure"
}
