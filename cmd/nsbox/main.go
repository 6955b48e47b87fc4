// Command nsbox runs untrusted commands in a root-less namespace sandbox.
package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/spf13/cobra"
)

// Exit codes of nsbox itself (the command's own code passes through).
const (
	exitTimeout     = 124 // as timeout(1)
	exitNsboxFailed = 125 // nsbox could not run the command
	exitCannotExec  = 126
	exitNotFound    = 127
	exitOOMKilled   = 137 // 128 + SIGKILL, as a shell reports an OOM kill
)

// exitError carries an exit code through cobra without printing twice.
type exitError struct {
	code int
	msg  string
	// signal, when set, is the signal that interrupted nsbox: after its
	// message, nsbox dies of it (code is the fallback when it is ignored).
	signal syscall.Signal
}

func (e *exitError) Error() string { return e.msg }

func main() {
	// The sandbox worker is this same binary re-executed: it must take over
	// before anything else runs.
	sandbox.Init(sandbox.WithWorkerToolsFunc(func() sandbox.WorkerTools { return toolRegistry() }))
	defer func() {
		// No panic reaches a user as a stack dump.
		if r := recover(); r != nil {
			fmt.Fprintf(msgs, "nsbox: internal error: %v (please report this)\n", r)
			os.Exit(exitNsboxFailed)
		}
	}()

	root := newRootCmd(os.Args)
	err := root.Execute()
	if err == nil {
		return
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(msgs, "nsbox: "+ee.msg)
		}
		if ee.signal != 0 {
			dieOf(ee.signal)
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(msgs, "nsbox: "+err.Error())
	os.Exit(exitNsboxFailed)
}

// newRootCmd builds the command tree; for `nsbox run ...` (args[1]
// exactly "run") only the run command: the other commands' flag sets cost
// every cold start ~0.5 ms of CPU here and nothing in a run reaches them.
func newRootCmd(args []string) *cobra.Command {
	root := &cobra.Command{
		Use:   "nsbox",
		Short: "Run untrusted commands in a root-less namespace sandbox",
		Long: `nsbox runs commands behind a kernel boundary: new user, pid, ipc, uts, net and
mount namespaces, a read-only root with writable binds, seccomp, no
capabilities and resource limits, without root and without setuid helpers.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	if len(args) > 1 && args[1] == "run" {
		root.AddCommand(newRunCmd())
		return root
	}
	root.AddCommand(newRunCmd(), newCallCmd(), newMemoryCmd(), newNotepadCmd())
	root.AddCommand(newToolsCmd(), newScriptCmd())
	root.AddCommand(newStatusCmd(), newProfilesCmd(), newTrustCmd())
	root.AddCommand(newMCPCmd())
	root.AddCommand(newCheckPathCmd())
	root.AddCommand(newSessionCmd())
	return root
}
