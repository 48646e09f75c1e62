package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/lancewal"
)

func init() { extraCommands = append(extraCommands, newIndexCmd) }

func newIndexCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "index", Short: "Create, catch up, remap, drop and query scalar indices"}
	cmd.AddCommand(newIndexCreateCmd(e), newIndexCatchupCmd(e), newIndexRemapCmd(e), newIndexLookupCmd(e), newIndexDropCmd(e), newIndexTrimFRICmd(e))
	return cmd
}

func newIndexCreateCmd(e *env) *cobra.Command {
	var name, column, typ string
	cmd := &cobra.Command{
		Use:   "create URL --name N --column C --type btree|bitmap",
		Short: "Build a scalar index over the whole table and commit it, as LanceDB's createIndex does (an index of that name that exists is kept)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if typ != lancewal.BTree && typ != lancewal.Bitmap {
				return fmt.Errorf("--type %q: want btree or bitmap", typ)
			}
			// Refuse what is not a Lance table before writing anything.
			b, _, err := openLance(ctx, args[0])
			if err != nil {
				return err
			}
			_ = b.Close()
			u, err := normalizeURL(args[0])
			if err != nil {
				return err
			}
			t, err := lancewal.OpenTable(ctx, u)
			if err != nil {
				return fmt.Errorf("index create %s: %w", args[0], err)
			}
			defer t.Close()
			if err := t.CreateIndex(ctx, name, column, typ); err != nil {
				return fmt.Errorf("index create %s: %w", args[0], err)
			}
			b, _, err = openLance(ctx, args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			v, _, err := meta.Latest(ctx, b)
			if err != nil {
				return err
			}
			return printJSON(e.stdout, map[string]any{"version": v, "operation": "create_index", "name": name, "column": column, "type": typ})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "index name")
	cmd.Flags().StringVar(&column, "column", "", "column to index")
	cmd.Flags().StringVar(&typ, "type", "", "btree or bitmap (low-cardinality columns)")
	for _, f := range []string{"name", "column", "type"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

func newIndexCatchupCmd(e *env) *cobra.Command {
	var names string
	cmd := &cobra.Command{
		Use:   "catchup URL [--indices N1,N2]",
		Short: "Index the fragments each index does not cover yet (delta segments)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := runLanceCatchup(cmd, e, args[0], names)
			return err
		},
	}
	cmd.Flags().StringVar(&names, "indices", "", "only these indices (default all)")
	addLanceCatchupFlags(cmd)
	return cmd
}

func newIndexRemapCmd(e *env) *cobra.Command {
	var names string
	cmd := &cobra.Command{
		Use:   "remap URL [--indices N1,N2]",
		Short: "Rewrite index segments through the fragment-reuse index, then trim the versions every index absorbed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := runLanceRemap(cmd, e, args[0], names)
			return err
		},
	}
	cmd.Flags().StringVar(&names, "indices", "", "only these indices (default all)")
	addLanceRemapFlags(cmd)
	return cmd
}

func newIndexLookupCmd(e *env) *cobra.Command {
	var name, key string
	var version uint64
	var indexOnly, addrs bool
	cmd := &cobra.Command{
		Use:   "lookup URL --name N --key K [--version V]",
		Short: "Print the rows whose indexed column equals K, as JSON lines",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := runLanceLookup(cmd, e, args[0], name, key, version, indexOnly, addrs)
			return err
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "index name")
	cmd.Flags().StringVar(&key, "key", "", "value to look up (typed like the column)")
	cmd.Flags().Uint64Var(&version, "version", 0, "version to read (default latest)")
	cmd.Flags().BoolVar(&indexOnly, "index-only", false, "do not scan fragments the index does not cover yet")
	cmd.Flags().BoolVar(&addrs, "addresses", false, "add _fragment and _offset to each row")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}
