package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/nsbox/nsbox/pkg/hostapi"
	"github.com/nsbox/nsbox/pkg/hostapi/memory"
	"github.com/nsbox/nsbox/pkg/hostapi/store"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// moveCorruptAside is --move-corrupt-aside of "nsbox memory" and "nsbox
// notepad".
var moveCorruptAside bool

const moveCorruptAsideHelp = "rename a store found corrupt to NAME.corrupt-TIMESTAMP, so that the next write starts a new one (default: leave it untouched and fail)"

// hostAPIStores opens the host API stores in --data-dir, or in nsbox's data
// directory ($XDG_DATA_HOME/nsbox, ~/.local/share/nsbox).
func hostAPIStores(dataDir string) (*hostapi.Stores, error) {
	if dataDir == "" {
		d, err := hostapi.DataDir(os.Getenv)
		if err != nil {
			return nil, err
		}
		dataDir = d
	} else {
		d, err := filepath.Abs(dataDir)
		if err != nil {
			return nil, fmt.Errorf("--data-dir: %v", err)
		}
		dataDir = d
	}
	return hostapi.Open(dataDir, store.Options{MoveAsideCorrupt: moveCorruptAside})
}

func newMemoryCmd() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Inspect the memory host API's store on this host",
		Long: `Inspect the memories sandboxed agents saved through the memory host API
(memory_save). They are kept on this host in DATA-DIR/memory.db, where
DATA-DIR is $XDG_DATA_HOME/nsbox (default ~/.local/share/nsbox).`,
	}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", "", "use the stores in `DIR` instead of nsbox's data directory")
	cmd.PersistentFlags().BoolVar(&moveCorruptAside, "move-corrupt-aside", false, moveCorruptAsideHelp)

	var (
		tag    string
		limit  int
		asJSON bool
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List memories, most recently updated first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := hostAPIStores(dataDir)
			if err != nil {
				return opError(err)
			}
			recs, total, err := s.Memory.List(context.Background(), tag, limit)
			if err != nil {
				return opError(err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, map[string]any{"memories": recs, "total": total})
			}
			if total == 0 {
				fmt.Fprintln(out, "no memories")
				return nil
			}
			matches := make([]memory.Match, len(recs))
			for i, r := range recs {
				matches[i] = memory.Match{Record: r}
			}
			printMemories(out, matches, false)
			if total > len(recs) {
				fmt.Fprintf(out, "(%d of %d shown; use --limit)\n", len(recs), total)
			}
			return nil
		},
	}
	list.Flags().StringVar(&tag, "tag", "", "only memories tagged `TAG`")
	list.Flags().IntVar(&limit, "limit", memory.DefaultListLimit, "show at most `N`")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	search := &cobra.Command{
		Use:   "search QUERY",
		Short: "Search memories, best match first (as memory_recall does)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := hostAPIStores(dataDir)
			if err != nil {
				return opError(err)
			}
			var tags []string
			if tag != "" {
				tags = []string{tag}
			}
			res, err := s.Memory.Recall(context.Background(), args[0], tags, limit)
			if err != nil {
				return opError(err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, map[string]any{"results": res})
			}
			if len(res) == 0 {
				fmt.Fprintln(out, "no matching memories")
				return nil
			}
			printMemories(out, res, true)
			return nil
		},
	}
	search.Flags().StringVar(&tag, "tag", "", "only memories tagged `TAG`")
	search.Flags().IntVar(&limit, "limit", 10, "show at most `N` (at most 50)")
	search.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	show := &cobra.Command{
		Use:   "show KEY",
		Short: "Print one memory",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := hostAPIStores(dataDir)
			if err != nil {
				return opError(err)
			}
			r, err := s.Memory.Get(context.Background(), args[0])
			if err != nil {
				return opError(err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, r)
			}
			fmt.Fprintf(out, "key:     %s\ntags:    %s\ncreated: %s\nupdated: %s\n\n%s\n", terminalSafe(out, r.Key), terminalSafe(out, strings.Join(r.Tags, ", ")),
				localTime(r.Created), localTime(r.Updated), terminalSafe(out, strings.TrimRight(r.Text, "\n")))
			return nil
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	del := &cobra.Command{
		Use:   "delete KEY",
		Short: "Delete one memory",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := hostAPIStores(dataDir)
			if err != nil {
				return opError(err)
			}
			if err := s.Memory.Delete(context.Background(), args[0]); err != nil {
				return opError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(list, search, show, del)
	return cmd
}

func printMemories(out io.Writer, ms []memory.Match, score bool) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if score {
		fmt.Fprintln(w, "SCORE\tKEY\tUPDATED\tTAGS\tTEXT")
	} else {
		fmt.Fprintln(w, "KEY\tUPDATED\tTAGS\tTEXT")
	}
	for _, m := range ms {
		if score {
			fmt.Fprintf(w, "%.2f\t", m.Score)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", oneLine(m.Key, 32), localTime(m.Updated), oneLine(strings.Join(m.Tags, ","), 24), oneLine(m.Text, 60))
	}
	w.Flush()
}

// oneLine shortens s to one line of at most n characters, for tables:
// stored text comes from sandboxes, so control characters are replaced
// and cannot drive the terminal.
func oneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		// The bidirectional overrides and isolates too (unsafeRune):
		// a key or text from a sandbox must not reorder what the table
		// shows (review 50).
		if r == '\n' || r == '\t' || unsafeRune(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n-1]) + "…"
	}
	return s
}

// terminalSafe removes control characters other than newline and tab from
// text a sandbox wrote when it goes to a terminal: escape sequences from a
// sandbox must not drive the user's terminal. Pipes get the text unchanged.
func terminalSafe(out io.Writer, s string) string {
	f, ok := out.(*os.File)
	if !ok {
		return s
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unsafeRune(r) { // control characters, bidirectional overrides
			return -1
		}
		return r
	}, s)
}

func localTime(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") }

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// opError is a failed store operation: exit 1 with the store's message.
func opError(err error) error { return &exitError{code: 1, msg: err.Error()} }
