package sandbox_test

import (
	"context"
	"fmt"
	"os"

	"github.com/nsbox/nsbox/pkg/ipc"
	"github.com/nsbox/nsbox/pkg/sandbox"
)

// An embedding program calls sandbox.Init first thing in main: the sandbox
// worker is the program's own binary re-executed, and Init is where it takes
// over (it returns at once in the normal process).
func Example() {
	sandbox.Init()

	h := sandbox.NewHandlers()
	h.Handle("greeter", "hello", func(ctx context.Context, c sandbox.HostCall) (ipc.Value, error) {
		return ipc.String("hello from the host"), nil
	})
	wd, _ := os.Getwd()
	s, err := sandbox.Start(context.Background(), sandbox.Policy{
		Mounts:   []sandbox.Mount{{Kind: sandbox.MountBind, Source: wd, Dest: wd}},
		Cwd:      wd,
		HostAPIs: []string{"greeter.hello"},
	}, sandbox.WithHandlers(h))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(125)
	}
	defer s.Close()
	res, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"make", "test"}})
	fmt.Println(res.ExitCode, err)
}
