package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/nsbox/nsbox/pkg/cgroups"
	"github.com/nsbox/nsbox/pkg/policy"
	"github.com/nsbox/nsbox/pkg/policy/backend"
	"github.com/spf13/cobra"
)

func newStatusCmd() *cobra.Command {
	var asJSON bool
	var mode, profile string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what nsbox can enforce on this host, and how to fix what it cannot",
		Long: `Show the backend runs use here (and, for the landlock backend, what it does
not isolate) and, for each mechanism (user namespaces, a fresh /proc, the
outer container's settings with their Kubernetes, Docker and Podman
spelling, cgroups, how fast a command joins its cgroup, seccomp,
Landlock, pidfd, clone3 into a cgroup), whether it works for this user and,
when it does not, the exact host setting or command that would fix it
("fix:"); when it works but a host setting would make it better, that setting
("tune:"). It starts one small test sandbox, and removes the cgroups that
runs killed with SIGKILL left behind.

Exit status: 0 when a sandbox can be built here, 1 when not.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := hostForCLI()
			if err != nil {
				return &exitError{code: exitNsboxFailed, msg: err.Error()}
			}
			m, fallback, err := policy.BackendSettings(h)
			if err != nil {
				return &exitError{code: exitNsboxFailed, msg: err.Error()}
			}
			if cmd.Flags().Changed("backend") {
				m = mode
			}
			// The groups of supervisors that were killed (SIGKILL) are
			// removed here too, not only by the next run.
			if n, err := cgroups.CleanupStale(); n > 0 || err != nil {
				fmt.Fprintf(msgs, "nsbox: removed %d cgroup(s) left by killed runs", n)
				if err != nil {
					fmt.Fprintf(msgs, " (some could not be removed: %v)", err)
				}
				fmt.Fprintln(msgs)
			}
			r := backend.Inspect(context.Background(), m, fallback)
			r.Checks = append(r.Checks, identityChecks(r.Backend)...)
			ns, err := netStatus(h, profile)
			if err != nil {
				return &exitError{code: exitNsboxFailed, msg: err.Error()}
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				enc.Encode(struct {
					backend.Report
					UnixSockets unixSocketStatus `json:"unix_sockets"`
					Network     networkStatus    `json:"network"`
				}{r, socketStatus(), ns})
			} else {
				printStatus(r)
				fmt.Println(socketStatus().line())
				for _, l := range ns.lines() {
					fmt.Println(l)
				}
			}
			if r.Backend == "" || r.Backend == "none" && m != "none" {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&profile, "profile", "", "show the network of profile `NAME` (default: the config's, else workspace)")
	cmd.Flags().StringVar(&mode, "backend", "", "report for backend `MODE` (auto, required, native, landlock, none) instead of the config's")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: exitNsboxFailed, msg: "status: " + err.Error()}
	})
	return cmd
}

func printStatus(r backend.Report) {
	w := os.Stdout
	switch {
	case r.Backend == "":
		fmt.Fprintf(w, "backend: none available (mode %s): %s\n", r.Mode, r.BackendError)
	case r.Backend == "none":
		fmt.Fprintf(w, "backend: none (mode %s): commands run WITHOUT a sandbox\n", r.Mode)
	default:
		fb := "off"
		if r.Fallback {
			fb = "on"
		}
		fmt.Fprintf(w, "backend: %s (mode %s, fallback to none: %s)\n", r.Backend, r.Mode, fb)
	}
	if len(r.NotIsolated) > 0 {
		fmt.Fprintf(w, "backend %s does not isolate:\n", r.Backend)
		for _, g := range r.NotIsolated {
			fmt.Fprintf(w, "  - %s\n", g)
		}
	}
	fmt.Fprintf(w, "uid: %d\n\n", r.UID)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range r.Checks {
		mark := "ok"
		if !c.OK {
			mark = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, mark, c.Value)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, c := range r.Checks {
		fmt.Fprintf(w, "%s: %s\n", c.Name, c.Detail)
		switch {
		case c.Fix != "" && !c.OK:
			fmt.Fprintf(w, "  fix: %s\n", c.Fix)
		case c.Fix != "":
			// Works, but a host setting would make it faster or better.
			fmt.Fprintf(w, "  tune: %s\n", c.Fix)
		}
	}
	if r.Limits != nil && len(r.Limits.Enforcement) > 0 {
		var parts []string
		for _, k := range []string{"memory", "pids", "cpu", "cputime", "core"} {
			if v, ok := r.Limits.Enforcement[k]; ok {
				parts = append(parts, k+"="+v)
			}
		}
		fmt.Fprintf(w, "limits of a run here: %s (%s)\n", r.Limits.Mode, strings.Join(parts, ", "))
	}
}
