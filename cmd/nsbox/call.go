package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/spf13/cobra"
)

func newCallCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "call API METHOD [JSON-ARGS]",
		Short: "Call a host API from inside a sandbox (hostCall)",
		Long: `Call a host API method from inside a sandbox and print its JSON result.

The sandbox gives its commands a hostCall socket, named by NSBOX_HOSTCALL_FD,
when the policy allows host APIs (--host-api API.METHOD); the nsbox binary is
then at /run/nsbox/bin/nsbox inside. Only allowlisted methods reach the host;
anything else is refused. Exits 1 with the error message when the call fails.`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw := json.RawMessage("null")
			if len(args) == 3 {
				if !json.Valid([]byte(args[2])) {
					return &exitError{code: 2, msg: "call: JSON-ARGS is not valid JSON"}
				}
				raw = json.RawMessage(args[2])
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			out, err := sandbox.CallHost(ctx, args[0], args[1], raw)
			if err != nil {
				return &exitError{code: 1, msg: fmt.Sprintf("call %s.%s: %v", args[0], args[1], err)}
			}
			fmt.Println(string(out))
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after `DURATION`")
	return cmd
}
