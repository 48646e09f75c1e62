package cli

import (
	"fmt"
	"strings"

	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/meta"
	"github.com/spf13/cobra"

	"github.com/compactord/compactord/lancewal"
)

func init() { extraCommands = append(extraCommands, newIndexCmd) }

func newIndexCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "index", Short: "Catch up, remap, rebuild and drop every index kind (scalar, full-text, vector); create and look up scalar ones"}
	cmd.AddCommand(newIndexCreateCmd(e), newIndexCatchupCmd(e), newIndexRemapCmd(e), newIndexLookupCmd(e), newIndexDropCmd(e), newIndexTrimFRICmd(e), newIndexRebuildCmd(e))
	return cmd
}

func newIndexCreateCmd(e *env) *cobra.Command {
	var name, column, typ string
	cmd := &cobra.Command{
		Use:   "create URL --name N --column C --type btree|bitmap",
		Short: "Build a scalar index over the whole table and commit it, as LanceDB's createIndex does (an identical index of that name is kept; one on another column or of another type is refused)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if typ != lancewal.BTree && typ != lancewal.Bitmap {
				return fmt.Errorf("--type %q: want btree or bitmap", typ)
			}
			// Refuse what is not a Lance table before writing anything.
			b, err := openTable(ctx, args[0])
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
			res, err := t.EnsureIndex(ctx, name, column, typ)
			if err != nil {
				return fmt.Errorf("index create %s: %w", args[0], err)
			}
			// The version is the one this command's own commit made (or,
			// when an identical index existed, the version it was read in):
			// never the head, which a racing writer may have moved.
			return printJSON(e.stdout, map[string]any{"version": res.Version, "created": res.Created, "operation": "create_index", "name": name, "column": column, "type": typ})
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
			err := runCatchup(cmd, e, args[0], names)
			return err
		},
	}
	cmd.Flags().StringVar(&names, "indices", "", "only these indices (default all)")
	addCatchupFlags(cmd)
	return cmd
}

func newIndexRemapCmd(e *env) *cobra.Command {
	var names string
	cmd := &cobra.Command{
		Use:   "remap URL [--indices N1,N2]",
		Short: "Rewrite index segments through the fragment-reuse index, then trim the versions every index absorbed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := runRemap(cmd, e, args[0], names)
			return err
		},
	}
	cmd.Flags().StringVar(&names, "indices", "", "only these indices (default all)")
	addRemapFlags(cmd)
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
			err := runLookup(cmd, e, args[0], name, key, version, indexOnly, addrs)
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

// catchupHelp is appended to index catchup's help.
const catchupHelp = `

On a Lance dataset, catch-up covers every btree, bitmap, label-list, full-text and vector index's
missing fragments (those of the latest version no segment's fragment bitmap names) with a delta
segment over their live rows (vectors encoded with the index's own centroids and quantizer, in
lance's arithmetic for float16, float64 and binary vectors), all in one CreateIndex; --rebuild (or an index reaching --max-segments) replaces the
index's segments with one over the whole version. A full-text index gains a partition over the new
rows in a segment replacing its one segment, when compactord reproduces its tokenizer (docs/format.md,
"Full-text tokenizers": LanceDB's default and most of Index.fts()'s options; not icu, jieba,
lindera, nor stemming in Arabic, Dutch, Greek, Tamil or Turkish); otherwise it is skipped with the reason. A MemWAL table's index_catchup then records the
generations the read version had merged, so trim can delete them. With nothing to index, a
maintained index that covers every fragment of the version while its index_catchup lags gets
that credit recorded by a record-only commit (an empty CreateIndex; "credited" lists it).
--dry-run prints the same plan ("indices", or "credit") as one JSON document and writes nothing.`

// runCatchup runs `index catchup` when url is a Lance dataset.
func runCatchup(cmd *cobra.Command, e *env, url, names string) error {
	h, done, err := openHandle(cmd.Context(), e, url)
	if err != nil {
		return err
	}
	defer done()
	o := index.DefaultConfig().Options(e.clock)
	if names != "" {
		for _, n := range strings.Split(names, ",") {
			if n = strings.TrimSpace(n); n != "" {
				o.Indices = append(o.Indices, n)
			}
		}
	}
	if o.Rebuild, err = cmd.Flags().GetBool("rebuild"); err != nil {
		return err
	}
	if o.MaxSegments, err = cmd.Flags().GetInt("max-segments"); err != nil {
		return err
	}
	if dry, err := cmd.Flags().GetBool("dry-run"); err != nil || dry {
		if err != nil {
			return err
		}
		return catchupDryRun(cmd.Context(), e, h, o)
	}
	res, err := index.CatchUp(cmd.Context(), h, o)
	if err != nil {
		return err
	}
	return printJSON(e.stdout, map[string]any{"version": res.Version, "read_version": res.ReadVersion,
		"operation": "index_catchup", "committed": res.Committed, "indices": res.Indices, "credited": res.Credited, "skipped": res.Skipped, "attempts": res.Attempts})
}

// addCatchupFlags adds the Lance-only flags of index catchup.
func addCatchupFlags(cmd *cobra.Command) {
	cmd.Long = cmd.Short + "." + catchupHelp
	cmd.Flags().Bool("rebuild", false, "Lance: rebuild each lagging index into one segment instead of adding a delta")
	cmd.Flags().Int("max-segments", index.DefaultMaxSegments, "Lance: rebuild an index whose delta would give it more segments than this (negative: never)")
	cmd.Flags().Bool("dry-run", false, "print what catch-up would do (each lagging index: the fragments it lacks, the rows to index, delta or rebuild; or the catch-up positions a record-only commit would raise) and write nothing")
}

// remapHelp is appended to index remap's help.
const remapHelp = `

On a Lance dataset, remap rewrites every btree, bitmap, label-list, full-text and vector segment whose data may still hold row
addresses a version of the fragment-reuse index (__lance_frag_reuse) remaps: each gets a new
uuid, dataset_version = the version read, its fragment bitmap through the FRI, and loses the
rows the compactions dropped or the fully deleted fragments held (one CreateIndex per logical
index). Then the FRI is trimmed of the versions no index needs any more, or removed when none
is left (--no-trim skips this; index trim-fri does it alone). --dry-run prints the segments each
index would have rewritten and the FRI versions no index needs already ("fri_trim_now"; the
remaps free more), and writes nothing.`

// runRemap runs `index remap` when url is a Lance dataset.
func runRemap(cmd *cobra.Command, e *env, url, names string) error {
	h, done, err := openHandle(cmd.Context(), e, url)
	if err != nil {
		return err
	}
	defer done()
	o := index.DefaultConfig().RemapJobOptions(e.clock)
	for _, n := range strings.Split(names, ",") {
		if n = strings.TrimSpace(n); n != "" {
			o.Indices = append(o.Indices, n)
		}
	}
	if o.NoTrim, err = cmd.Flags().GetBool("no-trim"); err != nil {
		return err
	}
	if dry, err := cmd.Flags().GetBool("dry-run"); err != nil || dry {
		if err != nil {
			return err
		}
		return remapDryRun(cmd.Context(), e, h, o)
	}
	res, err := index.RemapIndexes(cmd.Context(), h, o)
	if err != nil {
		return err
	}
	version := uint64(0)
	if n := len(res.Versions); n > 0 {
		version = res.Versions[n-1]
	}
	return printJSON(e.stdout, map[string]any{"version": version, "read_version": res.ReadVersion, "operation": "index_remap",
		"fri_versions": res.FRIVersions, "indices": res.Indices, "skipped": res.Skipped, "trim": res.Trim, "commits": res.Commits})
}

// addRemapFlags adds the Lance-only flags of index remap.
func addRemapFlags(cmd *cobra.Command) {
	cmd.Long = cmd.Short + "." + remapHelp
	cmd.Flags().Bool("no-trim", false, "Lance: leave the fragment-reuse index as it is after the remaps")
	cmd.Flags().Bool("dry-run", false, "print the segments remap would rewrite and the FRI versions no index needs already, and write nothing")
}

// newIndexRebuildCmd is `index rebuild` (Lance datasets only).
func newIndexRebuildCmd(e *env) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "rebuild URL --name N",
		Short: "Rebuild a btree, bitmap, label-list or full-text index from the data, replacing every segment of that name (Lance)",
		Long: `Rebuild a btree, bitmap, label-list or full-text index from the data, replacing every segment of that name (Lance).

The repair after verify --deep reports an index_content violation: the index is built afresh over
every live row of the latest version and committed as one CreateIndex that removes every old segment
of the index (name, column, details and index version are kept); a vector index is re-encoded with
its own centroids and quantizer; a full-text index becomes one partition. Full-text indexes whose
tokenizer compactord does not reproduce (stemming, stop words, ngram, ...), and vector indexes of a
type LanceDB 0.39 does not build, are refused: rebuild those with LanceDB (createIndex with replace).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, done, err := openHandle(cmd.Context(), e, args[0])
			if err != nil {
				return err
			}
			defer done()
			res, err := index.Rebuild(cmd.Context(), h, name, index.RebuildOptions{})
			if err != nil {
				return err
			}
			return printJSON(e.stdout, map[string]any{"version": res.Version, "read_version": res.ReadVersion, "operation": "index_rebuild",
				"name": res.Name, "kind": res.Kind, "rows": res.Rows, "fragments": res.Fragments, "segment": res.Segment,
				"removed": res.Removed, "attempts": res.Attempts})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "index name")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// newIndexTrimFRICmd is `index trim-fri` (Lance datasets only).
func newIndexTrimFRICmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "trim-fri URL",
		Short: "Drop the fragment-reuse index versions no index needs any more (Lance)",
		Long: `Drop the fragment-reuse index versions no index needs any more (Lance).

A version is kept while some btree, bitmap or other non-system index may hold row addresses it
remaps: its fragment bitmap meets the version's old or removed fragments (followed through the
earlier versions), or it was moved onto the version's new fragments while its data predates the
version. The FRI is replaced by one with the kept versions, or removed when none is left.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, done, err := openHandle(cmd.Context(), e, args[0])
			if err != nil {
				return err
			}
			defer done()
			tr, err := index.TrimFRI(cmd.Context(), h, index.RemapJobOptions{Clock: e.clock})
			if err != nil {
				return err
			}
			if tr == nil {
				return printJSON(e.stdout, map[string]any{"version": 0, "operation": "fri_trim", "committed": false})
			}
			return printJSON(e.stdout, map[string]any{"version": tr.Version, "operation": "fri_trim", "committed": true,
				"dropped": tr.Dropped, "kept": tr.Kept, "removed": tr.Removed, "attempts": tr.Attempts})
		},
	}
}

// runLookup runs `index lookup` when url is a Lance dataset: the rows
// whose indexed column equals key, through the index's segments remapped
// by the fragment-reuse index (and a scan of what no segment covers unless
// indexOnly).
func runLookup(cmd *cobra.Command, e *env, url, name, key string, version uint64, indexOnly, addrs bool) error {
	ctx := cmd.Context()
	b, err := openTable(ctx, url)
	if err != nil {
		return err
	}
	defer b.Close()
	var read *meta.ManifestFile
	if version == 0 {
		read, _, err = meta.ReadLatest(ctx, b)
	} else {
		var n meta.Naming
		if _, n, err = meta.Latest(ctx, b); err == nil {
			read, err = meta.ReadVersion(ctx, b, n, version)
		}
	}
	if err != nil {
		return err
	}
	res, err := index.Lookup(ctx, b, read, name, key, index.LookupOptions{IndexOnly: indexOnly})
	if err != nil {
		return err
	}
	return index.WriteRows(ctx, b, read, res.Addrs, e.stdout, addrs)
}
