package backend_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/nsbox/nsbox/pkg/policy/backend"
	"github.com/nsbox/nsbox/pkg/sandbox"
)

// gvisor is a backend an embedding program adds: here one that would run
// sessions under a user-space kernel. Priority 5 puts it before native for
// "auto"; Available says, with the reason, when it cannot run here, and
// "auto" then moves on to native and landlock.
type gvisor struct{}

func (gvisor) Name() string   { return "gvisor" }
func (gvisor) Priority() int  { return 5 }
func (gvisor) Isolates() bool { return true }
func (gvisor) Available() error {
	return fmt.Errorf("%w: runsc is not installed", sandbox.ErrUnavailable)
}
func (gvisor) Start(ctx context.Context, p sandbox.Policy, opts ...sandbox.Option) (backend.Session, error) {
	return nil, errors.New("not implemented in this example")
}

// A backend is added once, at start-up, with Register; --backend gvisor
// and "auto" then choose it like the built-in ones.
func ExampleRegister() {
	if err := backend.Register(gvisor{}); err != nil {
		fmt.Println(err)
		return
	}
	c, _ := backend.Choose("auto", false, false)
	fmt.Print(c.Backend.Name(), " then")
	for _, b := range c.Fallbacks {
		fmt.Print(" ", b.Name())
	}
	fmt.Println()
	fmt.Println(backend.Register(gvisor{}))
	// Output:
	// gvisor then native landlock
	// a backend of that name is registered: "gvisor"
}
