package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/scan"
)

func newTableCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "table", Short: "Create, append to, delete from and scan a Lance table"}
	cmd.AddCommand(newTableCreateCmd(e), newTableAppendCmd(e), newTableDeleteCmd(e), newTableScanCmd(e))
	return cmd
}

func newTableCreateCmd(e *env) *cobra.Command {
	var schema, pk, fileVersion string
	cmd := &cobra.Command{
		Use:   "create URL --schema name:type,... --primary-key field [--file-version 2.0|2.1|2.2]",
		Short: "Create a Lance table: version 1, the schema and no rows",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			fields, err := table.ParseFields(schema, strings.Split(pk, ","))
			if err != nil {
				return err
			}
			u, err := normalizeURL(args[0])
			if err != nil {
				return err
			}
			b, err := storage.Open(ctx, u)
			if err != nil {
				return err
			}
			defer b.Close()
			mf, err := table.Create(ctx, b, fields, fileVersion, e.clock.Now())
			if err != nil {
				return fmt.Errorf("table create %s: %w", args[0], err)
			}
			return printJSON(e.stdout, map[string]any{"version": mf.Manifest.GetVersion(), "operation": "overwrite",
				"format": "lance", "file_version": mf.Manifest.GetDataFormat().GetVersion()})
		},
	}
	cmd.Flags().StringVar(&schema, "schema", "", `fields, e.g. "id:int64,cat:string,val:float64" (int64, float64, string, bool, bytes, timestamp)`)
	cmd.Flags().StringVar(&pk, "primary-key", "", "primary-key field(s), comma separated")
	cmd.Flags().StringVar(&fileVersion, "file-version", "", "Lance data_storage_format: 2.0, 2.1 or 2.2 (default 2.2)")
	_ = cmd.MarkFlagRequired("schema")
	_ = cmd.MarkFlagRequired("primary-key")
	return cmd
}

func newTableAppendCmd(e *env) *cobra.Command {
	var jsonl string
	var n, start int64
	var seed uint64
	cmd := &cobra.Command{
		Use:   "append URL (--jsonl FILE|- | --rows N [--start K] [--seed S])",
		Short: "Append rows as one new fragment",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (jsonl == "") == (n == 0) {
				return fmt.Errorf("give exactly one of --jsonl or --rows")
			}
			if err := checkGenerated(n, start); err != nil {
				return err
			}
			ctx := cmd.Context()
			h, done, err := openWriter(ctx, e, args[0], "table append")
			if err != nil {
				return err
			}
			defer done()
			var in io.Reader
			if jsonl != "" {
				rc, err := readInput(e, jsonl)
				if err != nil {
					return err
				}
				defer rc.Close()
				in = rc
			} else {
				read, _, err := h.ReadForWrite(ctx)
				if err != nil {
					return fmt.Errorf("table append %s: %w", args[0], err)
				}
				data, err := GenerateRows(read.Manifest.GetFields(), start, n, seed)
				if err != nil {
					return err
				}
				in = bytes.NewReader(data)
			}
			progress.From(ctx).Start("table append", progress.Units{Rows: n}) // --jsonl: unknown
			res, rows, err := h.AppendJSON(ctx, in)
			if err != nil {
				return fmt.Errorf("table append %s: %w", args[0], err)
			}
			return printCommit(e, res, map[string]any{"rows": rows})
		},
	}
	cmd.Flags().StringVar(&jsonl, "jsonl", "", "JSON lines file, or - for stdin")
	cmd.Flags().Int64Var(&n, "rows", 0, fmt.Sprintf("generate N rows (at most %d per command: they are held in memory)", MaxGeneratedRows))
	cmd.Flags().Int64Var(&start, "start", 0, "first generated primary key (keys start..start+N-1 must fit an int64)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed for generated values")
	return cmd
}

// MaxGeneratedRows bounds --rows: generated rows are held in memory.
// Larger loads are several commands with consecutive --start values.
const MaxGeneratedRows = 1_000_000

// checkGenerated checks --rows and --start before anything is generated.
func checkGenerated(n, start int64) error {
	switch {
	case n < 0:
		return fmt.Errorf("--rows must be positive, got %d", n)
	case n > MaxGeneratedRows:
		return fmt.Errorf("--rows %d is more than the %d generated rows one command holds; run several with consecutive --start values", n, MaxGeneratedRows)
	case n > 0 && start > math.MaxInt64-(n-1):
		return fmt.Errorf("--start %d with --rows %d runs past the largest key (%d): keys would wrap around", start, n, int64(math.MaxInt64))
	}
	return nil
}

// GenerateRows makes n deterministic rows as JSON lines (package jsonl's
// conventions) with keys start..start+n-1 for every integer primary-key
// field (string keys get "k<n>"). Top-level columns of the types `table
// create` makes are generated; any other column type is an error. The
// caller checks n and start with checkGenerated.
func GenerateRows(fields []*pb.Field, start, n int64, seed uint64) ([]byte, error) {
	var top []*pb.Field
	for _, f := range fields {
		if f.GetParentId() != -1 {
			continue
		}
		switch f.GetLogicalType() {
		case "int64", "double", "string", "large_string", "bool", "binary", "large_binary", "timestamp:us:-":
		default:
			return nil, fmt.Errorf("--rows cannot generate column %q of type %s; use --jsonl", f.GetName(), f.GetLogicalType())
		}
		top = append(top, f)
	}
	rng := rand.New(rand.NewPCG(seed, uint64(start)))
	var buf bytes.Buffer
	row := make(map[string]any, len(top))
	enc := json.NewEncoder(&buf)
	for i := int64(0); i < n; i++ {
		k := start + i
		clear(row)
		for _, f := range top {
			key := f.GetUnenforcedPrimaryKey()
			var v any
			switch f.GetLogicalType() {
			case "int64":
				v = rng.Int64N(1_000_000)
				if key {
					v = k
				}
			case "double":
				v = float64(rng.IntN(1_000_000)) / 100
			case "string", "large_string":
				v = "c" + strconv.Itoa(rng.IntN(8))
				if key {
					v = "k" + strconv.FormatInt(k, 10)
				}
			case "bool":
				v = rng.IntN(2) == 1
			case "binary", "large_binary":
				v = base64.StdEncoding.EncodeToString([]byte(strconv.FormatInt(k, 16)))
			case "timestamp:us:-":
				v = 1_700_000_000_000_000 + rng.Int64N(1_000_000_000)
				if key {
					v = k
				}
			}
			row[f.GetName()] = v
		}
		if err := enc.Encode(row); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

func newTableDeleteCmd(e *env) *cobra.Command {
	var keys, where string
	var frag int64 = -1
	cmd := &cobra.Command{
		Use:   `delete URL (--where "id >= 10 AND id < 20" | --fragment F)`,
		Short: "Delete rows by predicate, or a whole fragment",
		Long: `Delete rows by predicate, or a whole fragment.

--where takes comparisons <column> <op> <literal> joined by AND, with op one
of = == != < <= > >=. String literals are quoted ('a' or "a"); numbers,
true, false and null are bare ("= null" is "is null", "!= null" "is not
null"; any other comparison with a null is false). Literals follow table
append's JSON conventions for the column's type: binaries as base64
strings, timestamps, dates and times as integers in the column's unit.
As Lance's delete, it reads only the predicate's columns, extends each
matching fragment's deletion file, drops fragments left with no live row,
and commits one Delete (none when nothing matched).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set := 0
			for _, b := range []bool{keys != "", where != "", frag >= 0} {
				if b {
					set++
				}
			}
			if set != 1 {
				return usageError(fmt.Errorf("give exactly one of --where or --fragment"))
			}
			switch {
			case keys != "":
				return usageError(fmt.Errorf("--keys is not supported on Lance tables; use --where (e.g. --where \"id = 5\")"))
			case where != "":
				return tableDeleteWhere(cmd.Context(), e, args[0], where)
			}
			return tableDelete(cmd.Context(), e, args[0], frag)
		},
	}
	cmd.Flags().StringVar(&keys, "keys", "", "not supported on Lance tables: use --where")
	_ = cmd.Flags().MarkHidden("keys")
	cmd.Flags().StringVar(&where, "where", "", "comparisons joined by AND, e.g. \"id >= 10 AND cat = 'a'\"")
	cmd.Flags().Int64Var(&frag, "fragment", -1, "delete a whole fragment")
	return cmd
}

func newTableScanCmd(e *env) *cobra.Command {
	var version uint64
	var columns string
	cmd := &cobra.Command{
		Use:   "scan URL [--version V] [--columns a,b]",
		Short: "Print live rows as JSON lines",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return tableScan(cmd.Context(), e, args[0], version, columns)
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "version to read (default latest)")
	cmd.Flags().StringVar(&columns, "columns", "", "top-level columns to print, comma separated")
	return cmd
}

// tableScan prints one JSON object per live row (see scan.AppendValue
// for the value conventions).
func tableScan(ctx context.Context, e *env, rawURL string, version uint64, columns string) error {
	b, err := openTable(ctx, rawURL)
	if err != nil {
		return err
	}
	defer b.Close()
	o := scan.Options{Version: version}
	if columns != "" {
		for _, c := range strings.Split(columns, ",") {
			if c = strings.TrimSpace(c); c == "" {
				return fmt.Errorf("table scan: --columns %q has an empty name", columns)
			}
			o.Columns = append(o.Columns, strings.TrimSpace(c))
		}
	}
	t, err := scan.Open(ctx, b, o)
	if err != nil {
		return fmt.Errorf("table scan %s: %w", rawURL, err)
	}
	if _, err := t.Write(ctx, e.stdout); err != nil {
		return fmt.Errorf("table scan %s: version %d: %w", rawURL, t.Version(), err)
	}
	return nil
}

// openHandle opens rawURL as a Lance table with a commit loop (see
// openTable for the errors); ok is true whenever err is nil.
func openHandle(ctx context.Context, e *env, rawURL string) (h *table.Handle, done func(), err error) {
	b, err := openTable(ctx, rawURL)
	if err != nil {
		return nil, nil, err
	}
	c, err := commit.NewCommitter(commit.DefaultConfig(), b, e.clock, commit.NewMetrics(prometheus.NewRegistry()), e.logger)
	if err == nil {
		h, err = table.New(b, c)
	}
	if err != nil {
		_ = b.Close()
		return nil, nil, err
	}
	return h, func() { _ = b.Close() }, nil
}

func printCommit(e *env, res *commit.Result, extra map[string]any) error {
	out := map[string]any{"version": res.Version, "operation": commit.OpName(res.Transaction),
		"attempts": res.Attempts, "rebased": res.Rebases}
	for k, v := range extra {
		out[k] = v
	}
	return printJSON(e.stdout, out)
}

// tableDelete runs `table delete --fragment` on a Lance dataset: a
// Delete of the whole fragment, from metadata alone.
func tableDelete(ctx context.Context, e *env, rawURL string, frag int64) error {
	h, done, err := openWriter(ctx, e, rawURL, "table delete")
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

// tableDeleteWhere runs `table delete --where`. A predicate that does
// not parse against the table's schema is a usage error.
func tableDeleteWhere(ctx context.Context, e *env, rawURL, where string) error {
	h, done, err := openWriter(ctx, e, rawURL, "table delete")
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
			h, done, err := openHandle(cmd.Context(), e, args[0])
			if err != nil {
				return err
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
	c, err := commit.NewCommitter(commit.DefaultConfig(), b, clock.Real(), commit.NewMetrics(prometheus.NewRegistry()), zap.NewNop())
	if err != nil {
		return nil, err
	}
	return table.New(b, c)
}
