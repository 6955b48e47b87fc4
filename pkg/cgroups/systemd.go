package cgroups

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// busInfo says how to reach a systemd manager.
type busInfo struct {
	addr    string // D-Bus address ("unix:path=...")
	private bool   // a direct connection to systemd (its "private" socket): no Hello
	user    bool   // the user manager (else the system manager)
}

// scopeTimeout bounds each D-Bus job (start, stop of the scope).
const scopeTimeout = 10 * time.Second

// findSystemd looks for a systemd manager for uid without connecting: the
// socket must exist. Root uses the system manager, other uids their user
// manager.
func findSystemd(uid int) (busInfo, bool) {
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if uid == 0 {
		if !exists("/run/systemd/system") { // systemd is PID 1
			return busInfo{}, false
		}
		if exists("/run/systemd/private") {
			return busInfo{addr: "unix:path=/run/systemd/private", private: true}, true
		}
		if exists("/run/dbus/system_bus_socket") {
			return busInfo{addr: "unix:path=/run/dbus/system_bus_socket"}, true
		}
		return busInfo{}, false
	}
	rt := os.Getenv("XDG_RUNTIME_DIR")
	if rt == "" {
		rt = "/run/user/" + strconv.Itoa(uid)
	}
	if p := filepath.Join(rt, "systemd", "private"); exists(p) {
		return busInfo{addr: "unix:path=" + p, private: true, user: true}, true
	}
	if a := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); a != "" {
		return busInfo{addr: a, user: true}, true
	}
	if p := filepath.Join(rt, "bus"); exists(p) {
		return busInfo{addr: "unix:path=" + p, user: true}, true
	}
	return busInfo{}, false
}

// systemdControllers guesses which controllers a scope of ours will have:
// for root, those of the root cgroup; for a user, those delegated to its
// user manager (user@<uid>.service), or systemd's default (memory pids).
func systemdControllers(h hostMounts, uid int, rootCtrls []string) []string {
	if uid == 0 {
		return rootCtrls
	}
	if h.v2 != nil && h.v2.root == "/" {
		p := filepath.Join(h.v2.point, "user.slice", fmt.Sprintf("user-%d.slice", uid), fmt.Sprintf("user@%d.service", uid), "cgroup.controllers")
		if f := readFields(p); f != nil {
			return f
		}
	}
	return intersect([]string{ctrlMemory, ctrlPids}, rootCtrls)
}

// scopeProperties are the transient scope's properties: the worker pid,
// Delegate=yes (the group is ours to write: cgroup.kill, counters) and the
// limits, applied by systemd.
func scopeProperties(pid int, ctrls []string, l Limits) []sddbus.Property {
	prop := func(n string, v any) sddbus.Property { return sddbus.Property{Name: n, Value: dbus.MakeVariant(v)} }
	ps := []sddbus.Property{
		sddbus.PropDescription("nsbox sandbox"),
		sddbus.PropPids(uint32(pid)),
		prop("Delegate", true),
		prop("DefaultDependencies", false),
	}
	if contains(ctrls, ctrlMemory) && l.Memory > 0 {
		ps = append(ps, prop("MemoryAccounting", true), prop("MemoryMax", uint64(l.Memory)), prop("MemorySwapMax", uint64(0)))
	}
	if contains(ctrls, ctrlPids) && l.Pids > 0 {
		ps = append(ps, prop("TasksAccounting", true), prop("TasksMax", uint64(l.Pids)))
	}
	if contains(ctrls, ctrlCPU) && l.CPU > 0 {
		// µs of CPU per second of wall time; systemd rounds to 10 ms steps.
		ps = append(ps, prop("CPUAccounting", true), prop("CPUQuotaPerSecUSec", uint64(l.cpuQuota())*10))
	}
	return ps
}

// optionalScopeProperties are newer systemd properties, dropped on retry if
// an old manager rejects them.
func optionalScopeProperties() []sddbus.Property {
	return []sddbus.Property{
		// One OOM kill must not stop the scope (and the session with it).
		{Name: "OOMPolicy", Value: dbus.MakeVariant("continue")},
		// A scope that ended "failed" is garbage-collected, not left behind.
		{Name: "CollectMode", Value: dbus.MakeVariant("inactive-or-failed")},
	}
}

// scopeBackend is a transient systemd scope, created by AddProcess with the
// worker as its first process (systemd refuses empty scopes, and the
// supervisor itself must not move into it).
type scopeBackend struct {
	unit string
	plan *v2Plan
	l    Limits
	conn *sddbus.Conn
	v2   *v2Backend // once the scope exists
	gone bool
	mode Mode
}

func newScope(name string, p *v2Plan, l Limits) (*scopeBackend, error) {
	b := &scopeBackend{unit: name + ".scope", plan: p, l: l, mode: v2Mode()}
	conn, err := dialSystemd(p.bus)
	if err != nil {
		return nil, &SetupError{Mode: b.mode, Step: "connect to systemd", Path: p.bus.addr, Err: err}
	}
	b.conn = conn
	return b, nil
}

func dialSystemd(bi busInfo) (*sddbus.Conn, error) {
	return sddbus.NewConnection(func() (*dbus.Conn, error) {
		c, err := dbus.Dial(bi.addr)
		if err != nil {
			return nil, err
		}
		// EXTERNAL auth with the numeric uid: no user name lookup.
		if err := c.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
			c.Close()
			return nil, err
		}
		if !bi.private {
			if err := c.Hello(); err != nil {
				c.Close()
				return nil, err
			}
		}
		return c, nil
	})
}

func (b *scopeBackend) fd() (int, bool) {
	if b.v2 == nil {
		return -1, false
	}
	return b.v2.fd()
}

func (b *scopeBackend) add(pid int) error {
	if b.gone {
		return ErrDestroyed
	}
	if b.v2 != nil {
		return b.v2.add(pid)
	}
	props := scopeProperties(pid, b.plan.ctrls, b.l)
	err := b.startScope(append(props, optionalScopeProperties()...))
	if err != nil && strings.Contains(err.Error(), "property") {
		err = b.startScope(props) // an older systemd: without the optional ones
	}
	if err != nil {
		return &SetupError{Mode: b.mode, Step: "start scope " + b.unit, Err: err}
	}
	pc, err := readProcCgroups(strconv.Itoa(pid))
	if err != nil {
		return &SetupError{Mode: b.mode, Step: "locate scope", Err: err}
	}
	dir, ok := hostDir(b.plan.mount, pc.v2)
	if !ok || filepath.Base(dir) != b.unit {
		return &SetupError{Mode: b.mode, Step: "locate scope", Path: pc.v2, Err: errors.New("the process is not in the new scope")}
	}
	v := &v2Backend{mode: b.mode, dir: dir, fdv: -1} // not owned: systemd removes it
	if err := v.attach(b.plan.mount); err != nil {
		return err
	}
	b.v2 = v
	return nil
}

func (b *scopeBackend) startScope(props []sddbus.Property) error {
	ctx, cancel := context.WithTimeout(context.Background(), scopeTimeout)
	defer cancel()
	ch := make(chan string, 1)
	if _, err := b.conn.StartTransientUnitContext(ctx, b.unit, "fail", props, ch); err != nil {
		return err
	}
	select {
	case s := <-ch:
		if s != "done" {
			return fmt.Errorf("systemd job for %s ended %q", b.unit, s)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("systemd did not start %s within %v", b.unit, scopeTimeout)
	}
}

func (b *scopeBackend) events() (Events, error) {
	if b.v2 == nil {
		return Events{}, nil
	}
	return b.v2.events()
}

func (b *scopeBackend) kill() error {
	if b.v2 == nil {
		return nil
	}
	return b.v2.kill()
}

func (b *scopeBackend) destroy() error {
	if b.gone {
		return nil
	}
	if b.v2 != nil {
		if err := b.v2.destroy(); err != nil {
			return err
		}
		// An empty scope stops by itself; stopping it explicitly makes the
		// cgroup go now. Errors here (already gone) do not matter.
		ctx, cancel := context.WithTimeout(context.Background(), scopeTimeout)
		ch := make(chan string, 1)
		if _, err := b.conn.StopUnitContext(ctx, b.unit, "replace", ch); err == nil {
			select {
			case <-ch:
			case <-ctx.Done():
			}
		}
		cancel()
	}
	if b.conn != nil {
		b.conn.Close()
	}
	b.gone = true
	return nil
}
