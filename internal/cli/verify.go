package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/compactord/compactord/internal/verify"
)

func init() { extraCommands = append(extraCommands, newVerifyCmd) }

// DeepCheck is installed by the index package's CLI wiring for --deep.
var deepCheck func() verify.Options

func newVerifyCmd(e *env) *cobra.Command {
	var opt verify.Options
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify URL [--version V] [--deep] [--json]",
		Short: "Check every invariant; exit 0 only when all hold",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if handled, err := lanceVerify(cmd.Context(), e, args[0], opt.Version, opt.Deep, asJSON); handled {
				return err
			}
			t, done, err := openTable(cmd.Context(), e, args[0])
			if err != nil {
				return err
			}
			defer done()
			if opt.Deep && deepCheck != nil {
				opt.DeepCheck = deepCheck().DeepCheck
			}
			rep, err := verify.Run(cmd.Context(), t.Bucket, opt)
			if err != nil {
				return err
			}
			if asJSON {
				if err := printJSON(e.stdout, rep); err != nil {
					return err
				}
			} else {
				for _, v := range rep.Violations {
					fmt.Fprintf(e.stdout, "%s: %s\n", v.Object, v.Reason)
				}
				fmt.Fprintf(e.stdout, "checked %d versions, %d files, %d live rows: %d violations\n", len(rep.Versions), rep.Files, rep.Rows, len(rep.Violations))
			}
			if !rep.OK() {
				return fmt.Errorf("%d invariant violations (first: %s: %s)", len(rep.Violations), rep.Violations[0].Object, rep.Violations[0].Reason)
			}
			return nil
		},
	}
	cmd.Flags().Uint64Var(&opt.Version, "version", 0, "check one version (default: every retained version)")
	cmd.Flags().BoolVar(&opt.Deep, "deep", false, "also resolve every index row address to a live row with the indexed key")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
