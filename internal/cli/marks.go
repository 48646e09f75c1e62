package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/compactord/compactord/internal/marker"
)

func init() { tableSubcommands = append(tableSubcommands, newPauseCmd, newResumeCmd, newMarkCmd) }

func markBy() string {
	h, err := os.Hostname()
	if err != nil {
		return "compactord table"
	}
	return "compactord table on " + h
}

func writeMark(cmd *cobra.Command, e *env, url string, k marker.Kind, reason string, clear bool) error {
	b, err := openTable(cmd.Context(), url)
	if err != nil {
		return err
	}
	defer b.Close()
	if clear {
		if err := marker.Delete(cmd.Context(), b, k); err != nil {
			return err
		}
		return printJSON(e.stdout, map[string]any{"mark": k, "set": false})
	}
	m := marker.Mark{Kind: k, Reason: reason, By: markBy(), Since: e.clock.Now().UTC()}
	if err := marker.Put(cmd.Context(), b, m); err != nil {
		return err
	}
	return printJSON(e.stdout, map[string]any{"mark": k, "set": true, "reason": reason, "since": m.Since})
}

const marksNote = `The mark is an object under _markers/ in the table's bucket: every compactord instance that
watches the table honours it from its next sync (sync_interval), whichever instance owns the
table, and it survives restarts and failover. A running job finishes.`

func newPauseCmd(e *env) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "pause URL [--reason TEXT]",
		Short: "Pause every maintenance job on the table, on every instance (writes the pause mark)",
		Long:  "Pause every maintenance job on the table, on every instance.\n\n" + marksNote,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeMark(cmd, e, args[0], marker.Pause, reason, false)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the status page and the API")
	return cmd
}

func newResumeCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "resume URL",
		Short: "Remove the pause mark: jobs run again on every instance",
		Long: "Remove the pause mark: jobs run again on every instance from its next sync.\n\n" +
			"A quarantine (halted table) lives in the daemon that halted it: lift it with POST /api/v1/tables/NAME/resume.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeMark(cmd, e, args[0], marker.Pause, "", true)
		},
	}
}

func newMarkCmd(e *env) *cobra.Command {
	var reason string
	var clear bool
	cmd := &cobra.Command{
		Use:   "mark URL no-compact [--reason TEXT] [--clear]",
		Short: "Set or clear a mark on the table: no-compact keeps compaction off it (the other jobs run)",
		Long:  "Set or clear a mark on the table. no-compact keeps compaction off the table; the other jobs run.\n\n" + marksNote,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := marker.ParseKind(args[1])
			if err != nil {
				return usageError(err)
			}
			return writeMark(cmd, e, args[0], k, reason, clear)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the status page and the API")
	cmd.Flags().BoolVar(&clear, "clear", false, "remove the mark")
	return cmd
}
