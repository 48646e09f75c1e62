package cli

import (
	"context"
	"fmt"

	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/verify"
	"github.com/spf13/cobra"
)

func init() { extraCommands = append(extraCommands, newVerifyCmd) }

func newVerifyCmd(e *env) *cobra.Command {
	var version uint64
	var deep, asJSON bool
	cmd := &cobra.Command{
		Use:   "verify URL [--version V] [--deep] [--json]",
		Short: "Check every invariant; exit 0 only when all hold",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := runVerify(cmd.Context(), e, args[0], version, deep, asJSON)
			return err
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "check one version (default: every retained version)")
	cmd.Flags().BoolVar(&deep, "deep", false, "also decode every page of every data, deletion and index file, WAL entries and unmerged generations, and check every index's content against the data of the newest version checked")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// runVerify runs `verify` on a Lance dataset. The report goes to stdout (one line per violation and
// warning, then a summary, or one JSON document with --json); any violation
// makes the command fail with one line naming the first, so scripts need
// only the exit code and operators see what to look at.
func runVerify(ctx context.Context, e *env, rawURL string, version uint64, deep, asJSON bool) error {
	b, err := openTable(ctx, rawURL)
	if err != nil {
		return err
	}
	defer b.Close()
	rep, err := verify.Run(ctx, b, verify.Options{Version: version, Deep: deep, IndexContent: index.ContentChecker})
	if err != nil {
		return fmt.Errorf("verify %s: %w", rawURL, err)
	}
	if asJSON {
		if err := printJSON(e.stdout, rep); err != nil {
			return err
		}
	} else {
		for _, v := range rep.Violations {
			fmt.Fprintf(e.stdout, "violation: %s\n", v)
		}
		for _, w := range rep.Warnings {
			fmt.Fprintf(e.stdout, "warning: %s\n", w)
		}
		fmt.Fprintf(e.stdout, "checked %d versions, %d objects, %d live rows: %d violations, %d warnings\n",
			len(rep.Versions), rep.Objects, rep.Rows, len(rep.Violations), len(rep.Warnings))
	}
	switch n := len(rep.Violations); n {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("1 invariant violation: %s", rep.Violations[0])
	default:
		return fmt.Errorf("%d invariant violations (first: %s)", n, rep.Violations[0])
	}
}
