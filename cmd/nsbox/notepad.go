package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newNotepadCmd() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "notepad",
		Short: "Inspect and manage the notepad host API's documents on this host",
		Long: `Inspect the documents (tabs) sandboxed agents keep through the notepad host
API (document_overwrite, document_patch, ...). They are kept on this host in
DATA-DIR/notepad.db, where DATA-DIR is $XDG_DATA_HOME/nsbox (default
~/.local/share/nsbox). "select" and "clear" are host-only: no sandbox can
call them.`,
	}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", "", "use the stores in `DIR` instead of nsbox's data directory")
	cmd.PersistentFlags().BoolVar(&moveCorruptAside, "move-corrupt-aside", false, moveCorruptAsideHelp)

	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tabs (* marks the selected one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := hostAPIStores(dataDir)
			if err != nil {
				return opError(err)
			}
			tabs, sel, err := s.Notepad.List(context.Background())
			if err != nil {
				return opError(err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				var selected any
				if sel != "" {
					selected = sel
				}
				return writeJSON(out, map[string]any{"tabs": tabs, "selected": selected})
			}
			if len(tabs) == 0 {
				fmt.Fprintln(out, "no tabs")
				return nil
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, " \tID\tTITLE\tSIZE\tLINES\tUPDATED")
			for _, t := range tabs {
				mark := " "
				if t.Selected {
					mark = "*"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", mark, t.ID, oneLine(t.Title, 40), t.Size, t.Lines, localTime(t.Updated))
			}
			return w.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	show := &cobra.Command{
		Use:   "show [ID]",
		Short: "Print a tab's content (default: the selected tab)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := hostAPIStores(dataDir)
			if err != nil {
				return opError(err)
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			t, err := s.Notepad.Get(context.Background(), id)
			if err != nil {
				return opError(err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, t)
			}
			_, err = fmt.Fprint(out, terminalSafe(out, t.Content))
			return err
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print the tab as JSON (id, title, content, timestamps)")

	sel := &cobra.Command{
		Use:   "select ID",
		Short: "Make ID the selected tab (host-only)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := hostAPIStores(dataDir)
			if err != nil {
				return opError(err)
			}
			if err := s.Notepad.Select(context.Background(), args[0]); err != nil {
				return opError(err)
			}
			return nil
		},
	}

	closeTab := &cobra.Command{
		Use:   "close ID",
		Short: "Close (delete) a tab",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := hostAPIStores(dataDir)
			if err != nil {
				return opError(err)
			}
			if err := s.Notepad.Close(context.Background(), args[0]); err != nil {
				return opError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "closed %s\n", args[0])
			return nil
		},
	}

	var yes bool
	clear := &cobra.Command{
		Use:   "clear --yes",
		Short: "Close every tab (host-only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return &exitError{code: 2, msg: "notepad clear deletes every document: add --yes to confirm"}
			}
			s, err := hostAPIStores(dataDir)
			if err != nil {
				return opError(err)
			}
			n, err := s.Notepad.Clear(context.Background())
			if err != nil {
				return opError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "closed %d tabs\n", n)
			return nil
		},
	}
	clear.Flags().BoolVar(&yes, "yes", false, "confirm")

	cmd.AddCommand(list, show, sel, closeTab, clear)
	return cmd
}
