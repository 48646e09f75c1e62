package cli

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/indexjob"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/table"
)

func init() { extraCommands = append(extraCommands, newIndexCmd) }

func newIndexCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "index", Short: "Create, catch up, remap, merge and query secondary indices"}
	cmd.AddCommand(newIndexCreateCmd(e), newIndexCatchupCmd(e), newIndexRemapCmd(e), newIndexOptimizeCmd(e), newIndexLookupCmd(e), newIndexDropCmd(e), newIndexTrimFRICmd(e))
	return cmd
}

func newIndexCreateCmd(e *env) *cobra.Command {
	var spec index.Spec
	cmd := &cobra.Command{
		Use:   "create URL --name N --column C --type btree|bitmap",
		Short: "Build an index over the whole table and commit it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, done, err := openWriter(cmd.Context(), e, args[0], "index create")
			if err != nil {
				return err
			}
			defer done()
			progress.From(cmd.Context()).Start("index create", progress.Units{})
			res, err := index.Create(cmd.Context(), t, spec, index.BuildConfig{})
			if err != nil {
				return err
			}
			seg := res.Transaction.GetCreateIndex().GetNewIndices()[0]
			return printJSON(e.stdout, map[string]any{"version": res.Manifest.Version, "operation": "create_index",
				"name": seg.Name, "uuid": seg.Uuid, "type": seg.Type, "entries": seg.GetScalar().GetNumEntries(), "attempts": res.Attempts})
		},
	}
	cmd.Flags().StringVar(&spec.Name, "name", "", "index name")
	cmd.Flags().StringVar(&spec.Column, "column", "", "column to index")
	cmd.Flags().StringVar(&spec.Type, "type", "", "btree or bitmap (low-cardinality columns)")
	for _, f := range []string{"name", "column", "type"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

func indexJob(e *env, cmd *cobra.Command, url string, list string) (*indexjob.Job, func(), error) {
	t, done, err := openWriter(cmd.Context(), e, url, cmd.CommandPath())
	if err != nil {
		return nil, nil, err
	}
	cfg := indexjob.Config{}
	if list != "" {
		for _, n := range strings.Split(list, ",") {
			cfg.Indices = append(cfg.Indices, strings.TrimSpace(n))
		}
	}
	j, err := indexjob.New(cfg, t, e.logger)
	if err != nil {
		done()
		return nil, nil, err
	}
	return j, done, nil
}

func newIndexCatchupCmd(e *env) *cobra.Command {
	var names string
	cmd := &cobra.Command{
		Use:   "catchup URL [--indices N1,N2]",
		Short: "Index the fragments each index does not cover yet (delta segments)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if handled, err := runLanceCatchup(cmd, e, args[0], names); handled {
				return err
			}
			j, done, err := indexJob(e, cmd, args[0], names)
			if err != nil {
				return err
			}
			defer done()
			s, err := j.CatchUp(cmd.Context())
			if err != nil {
				return err
			}
			return printJSON(e.stdout, map[string]any{"version": s.Version, "operation": "index_catchup", "committed": s.Committed,
				"indices": strList(s.Indices), "segments": s.Segments})
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
			if handled, err := runLanceRemap(cmd, e, args[0], names); handled {
				return err
			}
			j, done, err := indexJob(e, cmd, args[0], names)
			if err != nil {
				return err
			}
			defer done()
			r, err := j.Remap(cmd.Context())
			if err != nil {
				return err
			}
			tr, err := j.Trim(cmd.Context())
			if err != nil {
				return err
			}
			return printJSON(e.stdout, map[string]any{"version": max(r.Version, tr.Version), "operation": "index_remap",
				"remapped": strList(r.Indices), "segments": r.Segments,
				"fri_versions_dropped": tr.Dropped, "fri_versions_kept": tr.Kept})
		},
	}
	cmd.Flags().StringVar(&names, "indices", "", "only these indices (default all)")
	addLanceRemapFlags(cmd)
	return cmd
}

func newIndexOptimizeCmd(e *env) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "optimize URL --name N",
		Short: "Merge an index's segments into one",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, done, err := openWriter(cmd.Context(), e, args[0], "index optimize")
			if err != nil {
				return err
			}
			defer done()
			res, err := index.Optimize(cmd.Context(), t, name, index.BuildConfig{})
			if err != nil {
				return err
			}
			if res == nil {
				head, err := table.LatestVersion(cmd.Context(), t.Bucket)
				if err != nil {
					return err
				}
				return printJSON(e.stdout, map[string]any{"version": head, "operation": "index_optimize", "committed": false})
			}
			return printJSON(e.stdout, map[string]any{"version": res.Manifest.Version, "operation": "index_optimize", "committed": true,
				"merged_segments": len(res.Transaction.GetCreateIndex().GetRemovedIndexUuids())})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "index name")
	_ = cmd.MarkFlagRequired("name")
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
			if handled, err := runLanceLookup(cmd, e, args[0], name, key, version, indexOnly, addrs); handled {
				return err
			}
			t, done, err := openTable(cmd.Context(), e, args[0])
			if err != nil {
				return err
			}
			defer done()
			var m *pb.Manifest
			if version == 0 {
				m, err = table.ReadLatest(cmd.Context(), t.Bucket)
			} else {
				m, err = table.ReadManifest(cmd.Context(), t.Bucket, version)
			}
			if err != nil {
				return err
			}
			r, err := index.Lookup(cmd.Context(), t.Bucket, m, name, key, index.LookupOptions{ScanUnindexed: !indexOnly, Rows: true})
			if err != nil {
				return err
			}
			w := bufio.NewWriterSize(e.stdout, 1<<16)
			defer w.Flush()
			for _, mt := range r.Matches {
				var extra []string
				if addrs {
					id, off := table.SplitRowAddr(mt.Addr)
					extra = []string{"_fragment", fmt.Sprint(id), "_offset", fmt.Sprint(off)}
				}
				w.Write(table.RowJSON(m.Schema, mt.Row, extra...))
				if err := w.WriteByte('\n'); err != nil {
					return err
				}
			}
			return nil
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

// strList never renders as JSON null.
func strList(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
