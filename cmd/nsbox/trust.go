package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/nsbox/nsbox/pkg/policy"
	"github.com/spf13/cobra"
)

func newTrustCmd() *cobra.Command {
	var remove, list, asJSON bool
	cmd := &cobra.Command{
		Use:   "trust [--remove] FILE|DIR ... | --list",
		Short: "Trust a project's policy files (.nsbox/policy/) as they are now",
		Long: `A profile or seccomp file in a project's .nsbox/policy/ directory is read only
when you have trusted its exact contents at its path: sandboxes write next to
it, and a rewritten profile would choose the next sandbox's policy. Read the
file, then trust it; after every change, by you or anyone, trust it again.

  nsbox trust .nsbox/policy/ci.toml   trust one file as it is now
  nsbox trust .nsbox/policy           every regular file below that directory
  nsbox trust --remove PATH           forget PATH (a file or a directory)
  nsbox trust --list                  what is trusted

The records are kept in $XDG_CONFIG_HOME/nsbox/trusted.json (default
~/.config/nsbox), which every run keeps read-only. A project profile's
chain is trusted whole: a file it extends or a seccomp file it names
outside .nsbox/policy/ (in /etc too) needs a record as well. Only the
built-in profiles and files in your config directory never do; other
files that no project policy file names need none. A symlink below a
directory given is trusted at its target only when you name the link.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if list == (len(args) > 0) {
				return &exitError{code: exitNsboxFailed, msg: "nsbox trust: name the files to trust, or --list"}
			}
			h, err := hostForCLI()
			if err != nil {
				return &exitError{code: exitNsboxFailed, msg: err.Error()}
			}
			var recs []policy.TrustedFile
			verb := "trusted"
			switch {
			case list:
				recs, err = policy.TrustList(h)
			case remove:
				recs, err = policy.Untrust(h, args)
				verb = "no longer trusted"
			default:
				recs, err = policy.Trust(h, args)
			}
			if err != nil {
				return &exitError{code: exitNsboxFailed, msg: err.Error()}
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(recs)
			}
			if remove && len(recs) == 0 {
				fmt.Fprintf(msgs, "nsbox: no trust record at or below %s\n", strings.Join(args, ", "))
			}
			out := termSafe{os.Stdout}
			for _, r := range recs {
				if list {
					fmt.Fprintf(out, "%s  %s\n", r.SHA256, r.Path)
					continue
				}
				fmt.Fprintf(msgs, "nsbox: %s: %s (sha256 %.12s)\n", verb, r.Path, r.SHA256)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&remove, "remove", false, "forget the named files, or every record below a named directory")
	cmd.Flags().BoolVar(&list, "list", false, "print the trusted files: SHA-256 and path")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the records as JSON")
	cmd.MarkFlagsMutuallyExclusive("remove", "list")
	return cmd
}
