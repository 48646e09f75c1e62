package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// openLanceHandle opens rawURL as a Lance table with a commit loop (see
// openLance for the errors); ok is true whenever err is nil.
func openLanceHandle(ctx context.Context, e *env, rawURL string) (h *table.Handle, ok bool, done func(), err error) {
	b, ok, err := openLance(ctx, rawURL)
	if err != nil || !ok {
		return nil, false, nil, err
	}
	c, err := commit.NewCommitter(commit.DefaultConfig(), b, commit.RealClock{}, commit.NewMetrics(prometheus.NewRegistry()), e.logger)
	if err == nil {
		h, err = table.New(b, c)
	}
	if err != nil {
		_ = b.Close()
		return nil, false, nil, err
	}
	return h, true, func() { _ = b.Close() }, nil
}

func printCommit(e *env, res *commit.Result, extra map[string]any) error {
	out := map[string]any{"version": res.Version, "operation": commit.OpName(res.Transaction),
		"attempts": res.Attempts, "rebased": res.Rebases}
	for k, v := range extra {
		out[k] = v
	}
	return printJSON(e.stdout, out)
}

// lanceTableDelete runs `table delete --fragment` on a Lance dataset: a
// Delete of the whole fragment, from metadata alone.
func lanceTableDelete(ctx context.Context, e *env, rawURL string, frag int64) error {
	h, done, err := openLanceWriter(ctx, e, rawURL, "table delete")
	if err != nil {
		return err
	}
	defer done()
	res, err := h.DeleteFragments(ctx, []uint64{uint64(frag)})
	if err != nil {
		return fmt.Errorf("table delete %s: %w", rawURL, err)
	}
	return printCommit(e, res, map[string]any{"deleted_fragments": []int64{frag}})
}

// lanceTableDeleteWhere runs `table delete --where`. A predicate that does
// not parse against the table's schema is a usage error.
func lanceTableDeleteWhere(ctx context.Context, e *env, rawURL, where string) error {
	h, done, err := openLanceWriter(ctx, e, rawURL, "table delete")
	if err != nil {
		return err
	}
	defer done()
	res, err := h.DeleteWhere(ctx, where)
	var pe *table.PredicateError
	if errors.As(err, &pe) {
		return usageError(fmt.Errorf("table delete --where: %w", pe))
	}
	if err != nil {
		return fmt.Errorf("table delete %s: %w", rawURL, err)
	}
	extra := map[string]any{"deleted_rows": res.Rows, "deleted_fragments": orEmpty(res.Removed),
		"updated_fragments": orEmpty(res.Updated), "replans": res.Replans}
	if res.Commit == nil {
		extra["version"], extra["operation"] = res.ReadVersion, "delete"
		return printJSON(e.stdout, extra)
	}
	return printCommit(e, res.Commit, extra)
}

func orEmpty(ids []uint64) []uint64 {
	if ids == nil {
		return []uint64{}
	}
	return ids
}

func newIndexDropCmd(e *env) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "drop URL --name N",
		Short: "Drop every segment of an index (Lance tables)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return fmt.Errorf("--name is required")
			}
			h, ok, done, err := openLanceHandle(cmd.Context(), e, args[0])
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("index drop: %s is not a Lance dataset", args[0])
			}
			defer done()
			res, err := h.DropIndex(cmd.Context(), name)
			if err != nil {
				return fmt.Errorf("index drop %s: %w", args[0], err)
			}
			return printCommit(e, res, map[string]any{"dropped_index": name})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "index name")
	return cmd
}

// openHandleOn is a Lance handle on an open bucket, for reads of the
// latest version (the caller closes the bucket).
func openHandleOn(b storage.Bucket) (*table.Handle, error) {
	c, err := commit.NewCommitter(commit.DefaultConfig(), b, commit.RealClock{}, commit.NewMetrics(prometheus.NewRegistry()), zap.NewNop())
	if err != nil {
		return nil, err
	}
	return table.New(b, c)
}
