package cli

import (
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
			_, err := lanceVerify(cmd.Context(), e, args[0], version, deep, asJSON)
			return err
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "check one version (default: every retained version)")
	cmd.Flags().BoolVar(&deep, "deep", false, "also resolve every index row address to a live row with the indexed key")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
