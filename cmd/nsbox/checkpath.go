package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/nsbox/nsbox/pkg/policy"
	"github.com/spf13/cobra"
)

func newCheckPathCmd() *cobra.Command {
	f := &policyFlags{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check-path [policy flags] PATH...",
		Short: "Say what a sandbox could do with PATH: read-write, read-only, hidden or invisible",
		Long: `Resolve the policy as nsbox run would with the same flags (profile, config,
--rw, --ro, --hide, --protect, --workspace, ...), start nothing, and print
for each PATH what the sandbox could do with it and the rule that decided:

  read-write  the sandbox sees the host's file and its writes reach it
  read-only   it sees the host's file and cannot change it
  hidden      the path reads as empty (a secret the policy hides)
  invisible   the host's file is not seen (a private /tmp, or not bound)

A relative PATH is taken from the current directory; symlinks in an
existing PATH are resolved first, as the kernel would. Exit status: 0, or
2 for a bad flag or path, 125 when the policy does not resolve.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			host, err := hostForCLI()
			if err != nil {
				return &exitError{code: exitNsboxFailed, msg: "check-path: " + err.Error()}
			}
			res, err := f.resolve(host)
			if err != nil {
				return &exitError{code: exitNsboxFailed, msg: "check-path: " + err.Error()}
			}
			type line struct {
				Path   string        `json:"path"`
				Access policy.Access `json:"access"`
				Rule   policy.Rule   `json:"rule"`
			}
			var out []line
			for _, a := range args {
				p, err := hostPath(a)
				if err != nil {
					return &exitError{code: 2, msg: "check-path: " + err.Error()}
				}
				access, rule, err := res.CheckPath(p)
				if err != nil {
					return &exitError{code: 2, msg: "check-path: " + err.Error()}
				}
				out = append(out, line{Path: p, Access: access, Rule: rule})
			}
			if asJSON {
				b, _ := json.Marshal(out)
				return printJSON(b)
			}
			for _, l := range out {
				fmt.Printf("%-10s  %s\n            rule: %s\n", l.Access, l.Path, l.Rule)
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().MarkHidden("dry-run")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print [{path, access, rule: {kind, dest, source, why}}] as JSON")
	return cmd
}

// hostPath makes p absolute and resolves the symlinks of its longest
// existing prefix: the mounts of a policy name resolved paths.
func hostPath(p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for dir := abs; ; dir = filepath.Dir(dir) {
		real, err := filepath.EvalSymlinks(dir)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || dir == "/" {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}
