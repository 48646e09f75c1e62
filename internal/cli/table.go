package cli

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/table"
)

func newTableCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "table", Short: "Create, append to, delete from and scan a table"}
	cmd.AddCommand(newTableCreateCmd(e), newTableAppendCmd(e), newTableDeleteCmd(e), newTableScanCmd(e))
	return cmd
}

func newTableCreateCmd(e *env) *cobra.Command {
	var schema, pk, format, fileVersion string
	cmd := &cobra.Command{
		Use:   "create URL --schema name:type,... --primary-key field [--format lance|private] [--file-version 2.0|2.1|2.2]",
		Short: "Create a table (Lance for a URL ending in .lance or with --format lance)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if handled, err := lanceTableCreate(cmd.Context(), e, args[0], schema, pk, format, fileVersion); handled {
				return err
			}
			s, err := table.ParseSchema(schema, strings.Split(pk, ","))
			if err != nil {
				return err
			}
			t, done, err := openTable(cmd.Context(), e, args[0])
			if err != nil {
				return err
			}
			defer done()
			m, err := t.Create(cmd.Context(), s)
			if err != nil {
				return err
			}
			return printJSON(e.stdout, map[string]any{"version": m.Version, "operation": "create"})
		},
	}
	cmd.Flags().StringVar(&schema, "schema", "", `fields, e.g. "id:int64,cat:string,val:float64"`)
	cmd.Flags().StringVar(&pk, "primary-key", "", "primary-key field(s), comma separated")
	cmd.Flags().StringVar(&format, "format", "", "lance or private (default: lance if the URL ends in .lance, else private)")
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
		Short: "Append rows as new fragments",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (jsonl == "") == (n == 0) {
				return fmt.Errorf("give exactly one of --jsonl or --rows")
			}
			if err := checkGenerated(n, start); err != nil {
				return err
			}
			if handled, err := lanceTableAppend(cmd.Context(), e, args[0], jsonl, n != 0); handled {
				return err
			}
			t, done, err := openWriter(cmd.Context(), e, args[0], "table append")
			if err != nil {
				return err
			}
			defer done()
			head, err := table.ReadLatest(cmd.Context(), t.Bucket)
			if err != nil {
				return err
			}
			var rows []table.Row
			if jsonl != "" {
				in, err := readInput(e, jsonl)
				if err != nil {
					return err
				}
				defer in.Close()
				var opsCol []string
				rows, opsCol, err = ops.ReadJSONLines(head.Schema, bufio.NewReader(in))
				if err != nil {
					return err
				}
				for i, o := range opsCol {
					if o == "delete" {
						return fmt.Errorf("line %d: \"_op\":\"delete\" is for the WAL; use table delete", i+1)
					}
				}
			} else {
				rows = GenerateRows(head.Schema, start, n, seed)
			}
			progress.From(cmd.Context()).Start("table append", progress.Units{Rows: int64(len(rows))})
			res, err := t.Append(cmd.Context(), rows)
			if err != nil {
				return err
			}
			return printJSON(e.stdout, map[string]any{"version": res.Manifest.Version, "operation": "append", "rows": len(rows), "attempts": res.Attempts})
		},
	}
	cmd.Flags().StringVar(&jsonl, "jsonl", "", "JSON lines file, or - for stdin")
	cmd.Flags().Int64Var(&n, "rows", 0, fmt.Sprintf("generate N rows (at most %d per command: they are held in memory)", MaxGeneratedRows))
	cmd.Flags().Int64Var(&start, "start", 0, "first generated primary key (keys start..start+N-1 must fit an int64)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed for generated values")
	return cmd
}

// MaxGeneratedRows bounds --rows: generated rows are held in memory (and a
// WAL write logs them as one entry), about 150 MB at this count. Larger
// loads are several commands with consecutive --start values.
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

// GenerateRows makes n deterministic rows with keys start..start+n-1 (for
// every integer primary-key field; string keys get "k<n>"). The caller
// checks n and start with checkGenerated.
func GenerateRows(s *pb.Schema, start, n int64, seed uint64) []table.Row {
	rng := rand.New(rand.NewPCG(seed, uint64(start)))
	rows := make([]table.Row, 0, n)
	for i := int64(0); i < n; i++ {
		k := start + i
		r := make(table.Row, len(s.Fields))
		for j, f := range s.Fields {
			key := table.FieldIndexIsKey(s, f.Id)
			switch f.Type {
			case pb.FieldType_FIELD_TYPE_INT64:
				if key {
					r[j] = k
				} else {
					r[j] = rng.Int64N(1_000_000)
				}
			case pb.FieldType_FIELD_TYPE_FLOAT64:
				r[j] = float64(rng.IntN(1_000_000)) / 100
			case pb.FieldType_FIELD_TYPE_STRING:
				if key {
					r[j] = "k" + strconv.FormatInt(k, 10)
				} else {
					r[j] = "c" + strconv.Itoa(rng.IntN(8))
				}
			case pb.FieldType_FIELD_TYPE_BOOL:
				r[j] = rng.IntN(2) == 1
			case pb.FieldType_FIELD_TYPE_BYTES:
				r[j] = []byte(strconv.FormatInt(k, 16))
			case pb.FieldType_FIELD_TYPE_TIMESTAMP:
				if key {
					r[j] = table.Timestamp(k)
				} else {
					r[j] = table.Timestamp(1_700_000_000_000_000 + rng.Int64N(1_000_000_000))
				}
			}
		}
		rows = append(rows, r)
	}
	return rows
}

func newTableDeleteCmd(e *env) *cobra.Command {
	var keys, where string
	var frag int64 = -1
	cmd := &cobra.Command{
		Use:   `delete URL (--keys 1,2,3 | --where "id >= 10 AND id < 20" | --fragment F)`,
		Short: "Delete rows by key, predicate or whole fragment",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set := 0
			for _, b := range []bool{keys != "", where != "", frag >= 0} {
				if b {
					set++
				}
			}
			if set != 1 {
				return fmt.Errorf("give exactly one of --keys, --where or --fragment")
			}
			if handled, err := lanceTableDelete(cmd.Context(), e, args[0], frag, frag < 0); handled {
				return err
			}
			t, done, err := openWriter(cmd.Context(), e, args[0], "table delete")
			if err != nil {
				return err
			}
			defer done()
			head, err := table.ReadLatest(cmd.Context(), t.Bucket)
			if err != nil {
				return err
			}
			var spec ops.DeleteSpec
			switch {
			case frag >= 0:
				if frag > int64(^uint32(0)) {
					return fmt.Errorf("--fragment %d is out of range", frag)
				}
				f := uint32(frag)
				spec.Fragment = &f
			case where != "":
				if spec.Predicate, err = ops.ParsePredicate(head.Schema, where); err != nil {
					return err
				}
			default:
				if spec.Keys, err = parseKeys(head.Schema, keys); err != nil {
					return err
				}
			}
			res, matched, err := t.Delete(cmd.Context(), head, spec)
			if err != nil {
				return err
			}
			if res == nil {
				return printJSON(e.stdout, map[string]any{"version": head.Version, "operation": "delete", "deleted_rows": 0})
			}
			return printJSON(e.stdout, map[string]any{"version": res.Manifest.Version, "operation": "delete", "deleted_rows": matched, "attempts": res.Attempts, "rebased": res.Rebased})
		},
	}
	cmd.Flags().StringVar(&keys, "keys", "", "comma-separated primary-key values (single-field keys)")
	cmd.Flags().StringVar(&where, "where", "", "comparisons joined by AND")
	cmd.Flags().Int64Var(&frag, "fragment", -1, "delete a whole fragment")
	return cmd
}

func parseKeys(s *pb.Schema, list string) ([]table.Row, error) {
	if len(s.PrimaryKey) != 1 {
		return nil, fmt.Errorf("--keys needs a single-field primary key; use --where")
	}
	idx := table.KeyIndexes(s)[0]
	f := s.Fields[idx]
	var out []table.Row
	for _, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		var lit any = raw
		switch f.Type {
		case pb.FieldType_FIELD_TYPE_INT64, pb.FieldType_FIELD_TYPE_TIMESTAMP:
			if _, err := strconv.ParseInt(raw, 10, 64); err != nil {
				return nil, fmt.Errorf("--keys: %q is not an integer key", raw)
			}
			lit = jsonNumber(raw)
		case pb.FieldType_FIELD_TYPE_BOOL:
			b, err := strconv.ParseBool(raw)
			if err != nil {
				return nil, fmt.Errorf("--keys: %q is not a boolean key", raw)
			}
			lit = b
		}
		v, err := table.ParseValue(f, lit)
		if err != nil {
			return nil, fmt.Errorf("--keys: %v", err)
		}
		r := make(table.Row, len(s.Fields))
		r[idx] = v
		out = append(out, r)
	}
	return out, nil
}

func newTableScanCmd(e *env) *cobra.Command {
	var version uint64
	var columns string
	cmd := &cobra.Command{
		Use:   "scan URL [--version V] [--columns a,b]",
		Short: "Print live rows as JSON lines",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if handled, err := lanceTableScan(cmd.Context(), e, args[0], version, columns); handled {
				return err
			}
			t, done, err := openTable(cmd.Context(), e, args[0])
			if err != nil {
				return err
			}
			defer done()
			w := bufio.NewWriterSize(e.stdout, 1<<16)
			defer w.Flush()
			var schema *pb.Schema
			_, err = t.Scan(cmd.Context(), version, func(r table.Row) error {
				if schema == nil {
					return fmt.Errorf("internal: schema unset")
				}
				w.Write(table.RowJSON(schema, r))
				return w.WriteByte('\n')
			}, func(m *pb.Manifest) { schema = m.Schema })
			return err
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "version to read (default latest)")
	cmd.Flags().StringVar(&columns, "columns", "", "top-level columns to print, comma separated (Lance tables)")
	return cmd
}
