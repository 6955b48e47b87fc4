package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
	"golang.org/x/sys/unix"
)

// CallHost is the client side of hostCall, for programs inside a sandbox: it
// asks the host for api.method through the socket named by NSBOX_HOSTCALL_FD
// and returns the JSON result. Each call opens a private connection (a
// socketpair whose other end is handed to the host with a "connect"
// message), so any number of processes sharing the inherited socket can call
// at once without reading each other's replies.
func CallHost(ctx context.Context, api, method string, args json.RawMessage) (json.RawMessage, error) {
	fdStr := os.Getenv(hostCallFDEnv)
	if fdStr == "" {
		return nil, errors.New("not inside an nsbox sandbox with host APIs (NSBOX_HOSTCALL_FD is not set)")
	}
	fd, err := strconv.Atoi(fdStr)
	if err != nil || fd < 0 {
		return nil, fmt.Errorf("bad NSBOX_HOSTCALL_FD %q", fdStr)
	}
	mine, theirs, err := ipc.Socketpair()
	if err != nil {
		return nil, err
	}
	// The inherited socket is only written to: one datagram carrying the
	// new connection's fd. Dup it so the shared fd stays open for others.
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		mine.Close()
		theirs.Close()
		return nil, fmt.Errorf("NSBOX_HOSTCALL_FD %d: %v", fd, err)
	}
	data, _ := json.Marshal(ipc.Envelope{Type: ipc.TypeConnect})
	err = unix.Sendmsg(dup, data, unix.UnixRights(int(theirs.Fd())), nil, unix.MSG_NOSIGNAL)
	unix.Close(dup)
	theirs.Close()
	if err != nil {
		mine.Close()
		return nil, fmt.Errorf("reach the host: %v", err)
	}
	conn, err := ipc.NewConn(mine)
	if err != nil {
		return nil, err
	}
	peer := ipc.NewPeer(conn, ipc.Options{})
	defer peer.Close()
	go peer.Serve()
	if len(args) == 0 {
		args = json.RawMessage("null")
	}
	rep, err := peer.Call(ctx, ipc.TypeHostCall, hostCallRequest{API: api, Method: method, Args: args}, nil)
	if err != nil {
		return nil, err
	}
	var res hostCallResult
	if err := rep.Decode(&res); err != nil {
		return nil, fmt.Errorf("bad reply: %v", err)
	}
	if !res.OK {
		return nil, errors.New(res.Error)
	}
	if len(res.Result) == 0 {
		return json.RawMessage("null"), nil
	}
	return res.Result, nil
}

// callMain is `nsbox call API METHOD [JSON]` for whatever binary is bound at
// SelfPath inside the sandbox: the nsbox CLI, or a program embedding
// pkg/sandbox, which has no such command of its own. Init runs it.
func callMain(args []string) int {
	if len(args) < 2 || len(args) > 3 {
		fmt.Fprintln(os.Stderr, "usage: nsbox call API METHOD [JSON-ARGS]")
		return 2
	}
	raw := json.RawMessage("null")
	if len(args) == 3 {
		if !json.Valid([]byte(args[2])) {
			fmt.Fprintln(os.Stderr, "nsbox: call: JSON-ARGS is not valid JSON")
			return 2
		}
		raw = json.RawMessage(args[2])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := CallHost(ctx, args[0], args[1], raw)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsbox: call %s.%s: %v\n", args[0], args[1], err)
		return 1
	}
	fmt.Println(string(out))
	return 0
}
