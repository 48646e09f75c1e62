package cli

import (
	"github.com/spf13/cobra"
)

func newInspectCmd(e *env) *cobra.Command {
	var version uint64
	cmd := &cobra.Command{
		Use:   "inspect URL [--version V]",
		Short: "Print one version's metadata as one JSON document",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := lanceInspect(cmd.Context(), e, args[0], version)
			return err
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "version (default latest)")
	return cmd
}
