package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestLandlockTmpDirOfKilledRunIsRemoved: a Landlock session's private
// TMPDIR (on the host, in /tmp/nsbox-UID) is removed by the next nsbox when the run
// that made it was SIGKILLed before it could remove it, and a live run's
// is left alone.
func TestLandlockTmpDirOfKilledRunIsRemoved(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			killed, killedDir := startLandlockTmpRun(t, u, ws, "")
			live, liveDir := startLandlockTmpRun(t, u, ws, "")
			killed.Process.Signal(syscall.SIGKILL)
			killed.Wait()
			// The next run removes what the killed one left.
			r := u.run(t, &runOpts{dir: ws}, "run", "--backend", "landlock", "--workspace", ws, "--", "/bin/true")
			expectCode(t, r, 0)
			if _, err := os.Lstat(killedDir); err == nil {
				t.Errorf("the TMPDIR %s of a SIGKILLed run (with what its command wrote) outlived the next run", killedDir)
			}
			if _, err := os.Lstat(liveDir); err != nil {
				t.Errorf("the TMPDIR %s of a live run was removed: %v", liveDir, err)
			}
			if live.ProcessState != nil {
				t.Errorf("the live run ended early: %v", live.ProcessState)
			}
		})
	}
}

// startLandlockTmpRun starts, as u, a Landlock run in ws whose command
// runs prelude (shell), writes a file into its private TMPDIR and sleeps;
// it returns the run and that TMPDIR once the file is there. The run is
// killed, and the TMPDIR removed, when the test ends.
func startLandlockTmpRun(t *testing.T, u user, ws, prelude string) (*exec.Cmd, string) {
	t.Helper()
	marker := fmt.Sprintf("nsbox-lltmp-%d", time.Now().UnixNano())
	// The sleep's argument makes its command line unique.
	cmd := exec.Command(nsboxBin(t), "run", "--backend", "landlock", "--workspace", ws, "--",
		"/bin/sh", "-c", prelude+`echo private > "$TMPDIR/$1"; exec sleep 300.$2`, "sh", marker, strconv.Itoa(int(time.Now().UnixNano()%1000000)))
	cmd.Dir = ws
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.home(), "LANG=C.UTF-8"}
	u.asUser(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// Wait for the file (a deadlock guard only, no timing).
	for i := 0; i < 1200; i++ {
		if m, _ := filepath.Glob("/tmp/nsbox-[0-9]*/nsbox-tmp-*/" + marker); len(m) == 1 {
			dir := filepath.Dir(m[0])
			t.Cleanup(func() { os.RemoveAll(dir) })
			return cmd, dir
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the session's TMPDIR with %s never appeared in /tmp/nsbox-UID", marker)
	return nil, ""
}
