package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
	"github.com/spf13/cobra"
)

func newCallCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "call API METHOD [JSON-ARGS]",
		Short: "Call a host API from inside a sandbox (hostCall)",
		Long: `Call a host API method from inside a sandbox and print its JSON result.

The sandbox gives its commands a hostCall socket, named by NSBOX_HOSTCALL_FD,
when the policy allows host APIs (--host-api API.METHOD). Only allowlisted
methods reach the host; anything else is refused. Exits 1 with the error
message when the call fails.`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw := json.RawMessage("null")
			if len(args) == 3 {
				if !json.Valid([]byte(args[2])) {
					return &exitError{code: 2, msg: "call: JSON-ARGS is not valid JSON"}
				}
				raw = json.RawMessage(args[2])
			}
			out, err := hostCall(args[0], args[1], raw, timeout)
			if err != nil {
				return &exitError{code: 1, msg: err.Error()}
			}
			fmt.Println(string(out))
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after `DURATION`")
	return cmd
}

func hostCall(api, method string, args json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	fdStr := os.Getenv("NSBOX_HOSTCALL_FD")
	if fdStr == "" {
		return nil, fmt.Errorf("call: not inside an nsbox sandbox with host APIs (NSBOX_HOSTCALL_FD is not set)")
	}
	fd, err := strconv.Atoi(fdStr)
	if err != nil || fd < 0 {
		return nil, fmt.Errorf("call: bad NSBOX_HOSTCALL_FD %q", fdStr)
	}
	conn, err := ipc.NewConn(os.NewFile(uintptr(fd), "hostcall"))
	if err != nil {
		return nil, fmt.Errorf("call: %v", err)
	}
	peer := ipc.NewPeer(conn, ipc.Options{})
	defer peer.Close()
	go peer.Serve()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rep, err := peer.Call(ctx, ipc.TypeHostCall, map[string]any{"api": api, "method": method, "args": args}, nil)
	if err != nil {
		return nil, fmt.Errorf("call %s.%s: %v", api, method, err)
	}
	var res struct {
		OK     bool            `json:"ok"`
		Result json.RawMessage `json:"result"`
		Error  string          `json:"error"`
	}
	if err := rep.Decode(&res); err != nil {
		return nil, fmt.Errorf("call %s.%s: bad reply: %v", api, method, err)
	}
	if !res.OK {
		return nil, fmt.Errorf("call %s.%s: %s", api, method, res.Error)
	}
	if len(res.Result) == 0 {
		return json.RawMessage("null"), nil
	}
	return res.Result, nil
}
