package main

import (
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/nsbox/nsbox/pkg/policy"
	"github.com/spf13/cobra"
)

func newProfilesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profiles",
		Short: "List and show policy profiles",
		Long: `Policy profiles are TOML files: the built-in ones (workspace, strict, network,
batch and their shared base) and yours in $XDG_CONFIG_HOME/nsbox/profiles/NAME.toml,
which override a built-in profile of the same name. See docs/profiles.md.`,
	}
	var listJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the available profiles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := hostForCLI()
			if err != nil {
				return &exitError{code: exitNsboxFailed, msg: err.Error()}
			}
			infos := policy.NewLoader(h).List()
			if listJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(infos)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			for _, i := range infos {
				desc := i.Description
				if i.Error != "" {
					desc = "ERROR: " + i.Error
				}
				src := i.Source
				if i.Overrides {
					src += " (overrides the built-in one)"
				}
				fmt.Fprintf(tw, "%s\t%s\n\t  %s\n", i.Name, desc, src)
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&listJSON, "json", false, "print JSON")
	show := &cobra.Command{
		Use:   "show NAME|FILE",
		Short: "Show a profile resolved here: its chain, the policy and the mount plan (JSON)",
		Long: `Show a profile resolved against the current directory and environment, as
nsbox run --profile NAME --dry-run would, but without the config file and
flags: the extend chain, the resolved policy and the mount plan, as JSON.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := hostForCLI()
			if err != nil {
				return &exitError{code: exitNsboxFailed, msg: err.Error()}
			}
			chain, err := policy.NewLoader(h).Chain(args[0])
			if err != nil {
				return &exitError{code: exitNsboxFailed, msg: err.Error()}
			}
			res, err := policy.Resolve(h, append([]*policy.Layer{policy.Defaults()}, chain...))
			if err != nil {
				return &exitError{code: exitNsboxFailed, msg: err.Error()}
			}
			last := chain[len(chain)-1]
			res.Profile = args[0]
			printWarnings(msgs, res, true)
			out := struct {
				Name        string `json:"name"`
				Description string `json:"description"`
				Source      string `json:"source"`
				dryRun
			}{Name: args[0], Description: last.Config.Description, Source: last.Name, dryRun: dryRun{
				Profile: res.Profile, Layers: res.Layers, Backend: res.Backend, BackendFallback: res.BackendFallback,
				Workspace: res.Workspace, Policy: res.Policy, Plan: mountPlan(res), Placeholders: res.Placeholders,
				Warnings: res.Warnings,
			}}
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		},
	}
	cmd.AddCommand(list, show)
	return cmd
}
