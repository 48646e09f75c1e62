package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/lancewal"
)

// The wal commands write a Lance table through its MemWAL with the Go
// MemWAL writer (package lancewal), as LanceDB's own writers do: for
// scripts, tests and demos. A service embeds lancewal instead.

func init() { extraCommands = append(extraCommands, newWalCmd) }

func newWalCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "wal", Short: "Configure a Lance table's MemWAL, write to its shards' WALs and flush their MemTables"}
	cmd.AddCommand(newWalConfigureCmd(e), newWalWriteCmd(e), newWalFlushCmd(e))
	return cmd
}

// splitList parses "a,b,c"; blanks are dropped.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// openWalTable opens rawURL for MemWAL writes after checking it is a Lance
// table (a one-line error otherwise).
func openWalTable(ctx context.Context, rawURL string) (*lancewal.Table, error) {
	b, err := openTable(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	_ = b.Close()
	u, err := normalizeURL(rawURL)
	if err != nil {
		return nil, err
	}
	t, err := lancewal.OpenTable(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rawURL, err)
	}
	return t, nil
}

func newWalConfigureCmd(e *env) *cobra.Command {
	var buckets int
	var maintain string
	cmd := &cobra.Command{
		Use:   "configure URL [--buckets N] [--maintain N1,N2]",
		Short: "Install the MemWAL: one shard, or N shards by a hash of the primary key; the btree indices it maintains",
		Long: `Install the table's MemWAL configuration, as LanceDB's setLsmWriteSpec does: unsharded (one
shard) by default, or --buckets N shards by a murmur3 hash of the primary key. A table that
already has one keeps it (changing a live configuration would re-route keys under running
writers); either way the shard ids are printed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if buckets < 0 {
				return fmt.Errorf("--buckets must not be negative, got %d", buckets)
			}
			ctx := cmd.Context()
			t, err := openWalTable(ctx, args[0])
			if err != nil {
				return err
			}
			defer t.Close()
			spec := lancewal.Config{Sharding: lancewal.Unsharded, MaintainedIndexes: splitList(maintain)}
			if buckets > 0 {
				key, err := primaryKeyColumn(ctx, args[0])
				if err != nil {
					return err
				}
				spec = lancewal.Config{Sharding: lancewal.Bucket, Column: key, NumBuckets: buckets, MaintainedIndexes: spec.MaintainedIndexes}
			}
			cfg, err := t.EnableMemWAL(ctx, spec)
			if err != nil {
				return fmt.Errorf("wal configure %s: %w", args[0], err)
			}
			return printJSON(e.stdout, map[string]any{"operation": "configure_mem_wal", "sharding": cfg.Sharding,
				"shards": cfg.Shards(), "maintained_indexes": nonNil(cfg.MaintainedIndexes)})
		},
	}
	cmd.Flags().IntVar(&buckets, "buckets", 0, "shards by a hash of the primary key (0: one unsharded shard)")
	cmd.Flags().StringVar(&maintain, "maintain", "", "btree indices each flushed generation carries a copy of")
	return cmd
}

// primaryKeyColumn is the table's single primary-key column.
func primaryKeyColumn(ctx context.Context, rawURL string) (string, error) {
	b, err := openTable(ctx, rawURL)
	if err != nil {
		return "", err
	}
	defer b.Close()
	h, err := openHandleOn(b)
	if err != nil {
		return "", err
	}
	read, _, err := h.ReadForWrite(ctx)
	if err != nil {
		return "", err
	}
	for _, f := range read.Manifest.GetFields() {
		if f.GetUnenforcedPrimaryKey() {
			return f.GetName(), nil
		}
	}
	return "", fmt.Errorf("%s has no primary key; the MemWAL needs one", rawURL)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func newWalWriteCmd(e *env) *cobra.Command {
	var jsonl string
	var n, start int64
	var seed uint64
	var flush bool
	cmd := &cobra.Command{
		Use:   "write URL (--jsonl FILE|- | --rows N [--start K] [--seed S]) [--flush]",
		Short: "Write rows through the MemWAL: each row to its key's shard, one WAL entry per shard",
		Long: `Claim every shard the rows route to (fencing its previous owner), write the rows as one WAL
entry per shard ("_op":"delete" in a JSON line writes a tombstone for its key), and with --flush
flush each MemTable as the shard's next generation. Without --flush the entries stay durable in
the WAL, unflushed, for the shard's next owner (wal flush) to replay.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (jsonl == "") == (n == 0) {
				return fmt.Errorf("give exactly one of --jsonl or --rows")
			}
			if err := checkGenerated(n, start); err != nil {
				return err
			}
			ctx := cmd.Context()
			t, err := openWalTable(ctx, args[0])
			if err != nil {
				return err
			}
			defer t.Close()
			cfg, err := t.Config(ctx)
			if err != nil {
				return err
			}
			if cfg == nil {
				return fmt.Errorf("wal write %s: the table has no MemWAL configuration (wal configure)", args[0])
			}
			key, err := primaryKeyColumn(ctx, args[0])
			if err != nil {
				return err
			}
			var in io.Reader
			if jsonl != "" {
				rc, err := readInput(e, jsonl)
				if err != nil {
					return err
				}
				defer rc.Close()
				in = rc
			} else {
				b, err := openTable(ctx, args[0])
				if err != nil {
					return err
				}
				h, err := openHandleOn(b)
				if err != nil {
					_ = b.Close()
					return err
				}
				read, _, err := h.ReadForWrite(ctx)
				_ = b.Close()
				if err != nil {
					return err
				}
				data, err := GenerateRows(read.Manifest.GetFields(), start, n, seed)
				if err != nil {
					return err
				}
				in = strings.NewReader(string(data))
			}
			type batch struct {
				rows []lancewal.Row
				dels []any
			}
			byShard := map[string]*batch{}
			dec := json.NewDecoder(bufio.NewReader(in))
			dec.UseNumber()
			lines := 0
			for {
				var row map[string]any
				if err := dec.Decode(&row); err == io.EOF {
					break
				} else if err != nil {
					return fmt.Errorf("wal write: row %d: %v", lines+1, err)
				}
				lines++
				op, _ := row["_op"].(string)
				delete(row, "_op")
				for k, v := range row {
					if num, ok := v.(json.Number); ok {
						if i, err := num.Int64(); err == nil {
							row[k] = i
						} else if f, err := num.Float64(); err == nil {
							row[k] = f
						}
					}
				}
				k, ok := row[key]
				if !ok || k == nil {
					return fmt.Errorf("wal write: row %d has no primary key %q", lines, key)
				}
				s, err := cfg.ShardFor(k)
				if err != nil {
					return fmt.Errorf("wal write: row %d: %w", lines, err)
				}
				bt := byShard[s]
				if bt == nil {
					bt = &batch{}
					byShard[s] = bt
				}
				switch op {
				case "", "upsert":
					bt.rows = append(bt.rows, lancewal.Row(row))
				case "delete":
					bt.dels = append(bt.dels, k)
				default:
					return fmt.Errorf("wal write: row %d: _op %q: want upsert or delete", lines, op)
				}
			}
			shards := make([]string, 0, len(byShard))
			for s := range byShard {
				shards = append(shards, s)
			}
			slices.Sort(shards)
			var out []map[string]any
			// Progress: the rows (upserts and deletes) written, a shard's
			// WAL entry at a time.
			rep := progress.From(ctx)
			rep.Start("wal write", progress.Units{Rows: int64(lines)})
			for _, s := range shards {
				w, err := t.OpenWriter(ctx, s, lancewal.WriterOptions{})
				if err != nil {
					return fmt.Errorf("wal write: shard %s: %w", s, err)
				}
				bt := byShard[s]
				if len(bt.rows) > 0 {
					err = w.Upsert(ctx, bt.rows)
				}
				if err == nil && len(bt.dels) > 0 {
					err = w.Delete(ctx, bt.dels)
				}
				doc := map[string]any{"shard": s, "epoch": w.Epoch(), "upserts": len(bt.rows), "deletes": len(bt.dels), "flushed": false}
				if err != nil {
					w.Abandon()
					return fmt.Errorf("wal write: shard %s: %w%s", s, err, notWritten(out, shards[len(out)+1:]))
				}
				if flush {
					if walWriteBeforeFlush != nil {
						walWriteBeforeFlush(ctx, t, s)
					}
					g, ferr := w.Flush(ctx)
					if ferr != nil {
						// The entries are durable in the WAL: the write is
						// acknowledged whatever happens to the flush.
						w.Abandon()
						doc["flush_error"] = ferr.Error()
						out = append(out, doc)
						if perr := printJSON(e.stdout, map[string]any{"operation": "wal_write", "rows": lines, "shards": out}); perr != nil {
							return perr
						}
						return &exitError{code: ExitWrittenNotFlushed, err: fmt.Errorf("wal write: shard %s: %d upserts and %d deletes are written to its WAL (durable: the shard's next owner replays them), but the flush failed: %w%s",
							s, len(bt.rows), len(bt.dels), ferr, notWritten(nil, shards[len(out):]))}
					}
					if g != nil {
						doc["flushed"], doc["generation"] = true, g.Generation
					}
				}
				// Without --flush the entries stay in the WAL for the next owner.
				w.Abandon()
				rep.Add(int64(len(bt.rows)+len(bt.dels)), 0)
				out = append(out, doc)
			}
			return printJSON(e.stdout, map[string]any{"operation": "wal_write", "rows": lines, "shards": out})
		},
	}
	cmd.Flags().StringVar(&jsonl, "jsonl", "", "JSON lines file, or - for stdin")
	cmd.Flags().Int64Var(&n, "rows", 0, fmt.Sprintf("generate N rows (at most %d per command)", MaxGeneratedRows))
	cmd.Flags().Int64Var(&start, "start", 0, "first generated primary key")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed for generated values")
	cmd.Flags().BoolVar(&flush, "flush", false, fmt.Sprintf("flush each shard's MemTable as a generation after the write (exit %d when the write landed but a flush failed)", ExitWrittenNotFlushed))
	return cmd
}

// ExitWrittenNotFlushed is the exit status of wal write --flush when the
// write landed in the WAL but the flush failed (for example fenced by a
// newer owner of the shard).
const ExitWrittenNotFlushed = 3

// walWriteBeforeFlush, when set (tests), runs between the write and the
// flush of each shard of wal write --flush.
var walWriteBeforeFlush func(ctx context.Context, t *lancewal.Table, shard string)

// notWritten says which shards a failed wal write did and did not reach.
func notWritten(done []map[string]any, rest []string) string {
	msg := ""
	if len(done) > 0 {
		var ids []string
		for _, d := range done {
			ids = append(ids, fmt.Sprint(d["shard"]))
		}
		msg += fmt.Sprintf("; shards %s were written", strings.Join(ids, ", "))
	}
	if len(rest) > 0 {
		msg += fmt.Sprintf("; shards %s were not written", strings.Join(rest, ", "))
	}
	return msg
}

func newWalFlushCmd(e *env) *cobra.Command {
	var shard string
	cmd := &cobra.Command{
		Use:   "flush URL --shard S",
		Short: "Claim a shard, replay its unflushed WAL entries and flush them as its next generation",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			t, err := openWalTable(ctx, args[0])
			if err != nil {
				return err
			}
			defer t.Close()
			w, err := t.OpenWriter(ctx, shard, lancewal.WriterOptions{})
			if err != nil {
				return fmt.Errorf("wal flush %s: %w", args[0], err)
			}
			buffered := w.Buffered()
			g, err := w.Flush(ctx)
			if err != nil {
				w.Abandon()
				return fmt.Errorf("wal flush %s: shard %s: %w", args[0], shard, err)
			}
			if err := w.Close(ctx); err != nil {
				return fmt.Errorf("wal flush %s: shard %s: %w", args[0], shard, err)
			}
			doc := map[string]any{"operation": "wal_flush", "shard": shard, "epoch": w.Epoch(), "rows": buffered, "flushed": g != nil}
			if g != nil {
				doc["generation"] = g.Generation
			}
			return printJSON(e.stdout, doc)
		},
	}
	cmd.Flags().StringVar(&shard, "shard", "", "shard id (wal configure prints them)")
	_ = cmd.MarkFlagRequired("shard")
	return cmd
}
