package cli

import (
	"context"
	"fmt"

	"github.com/compactord/compactord/internal/inspect"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/spf13/cobra"
)

func newInspectCmd(e *env) *cobra.Command {
	var version uint64
	cmd := &cobra.Command{
		Use:   "inspect URL [--version V]",
		Short: "Print one version's metadata as one JSON document",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := runInspect(cmd.Context(), e, args[0], version)
			return err
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "version (default latest)")
	return cmd
}

// openTable opens rawURL (a plain path or any storage URL) as a Lance
// dataset. A location without a table, or with a table of another format
// (compactord's retired private format), is a one-line error and nothing
// stays open.
func openTable(ctx context.Context, rawURL string) (storage.Bucket, error) {
	b, err := openBucket(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	ok, err := meta.CheckLance(ctx, b)
	if err == nil && !ok {
		err = meta.ErrNoTable
	}
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("%s: %w", rawURL, err)
	}
	return b, nil
}

// runInspect runs `inspect` on a Lance dataset.
func runInspect(ctx context.Context, e *env, rawURL string, version uint64) error {
	b, err := openTable(ctx, rawURL)
	if err != nil {
		return err
	}
	defer b.Close()
	doc, err := inspect.Build(ctx, b, version)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", rawURL, err)
	}
	return printJSON(e.stdout, doc)
}
