package cli

import (
	"bufio"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/table"
)

func init() {
	extraCommands = append(extraCommands, newWalCmd)
	// inspect shows shard state through this hook.
	ShardManifestReader = memwal.ReadShardManifest
}

func newWalCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "wal", Short: "Configure the MemWAL, write to a shard's WAL and flush its MemTable"}
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

func newWalConfigureCmd(e *env) *cobra.Command {
	var shards, maintain string
	cmd := &cobra.Command{
		Use:   "configure URL --shards s0,s1 [--maintain N1,N2]",
		Short: "Set the MemWAL shards and the indices it keeps caught up",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sh := splitList(shards)
			if len(sh) == 0 {
				return fmt.Errorf("--shards needs at least one shard name")
			}
			t, done, err := openTable(cmd.Context(), e, args[0])
			if err != nil {
				return err
			}
			defer done()
			res, err := memwal.Configure(cmd.Context(), t, sh, splitList(maintain))
			if err != nil {
				return err
			}
			d := table.MemWal(res.Manifest)
			return printJSON(e.stdout, map[string]any{"version": res.Manifest.Version, "operation": "configure_mem_wal",
				"shards": nonNil(d.GetShards()), "maintained_indexes": nonNil(d.GetMaintainedIndexes()), "attempts": res.Attempts})
		},
	}
	cmd.Flags().StringVar(&shards, "shards", "", "comma-separated shard names")
	cmd.Flags().StringVar(&maintain, "maintain", "", "comma-separated index names to keep caught up")
	_ = cmd.MarkFlagRequired("shards")
	return cmd
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// openShardWriter checks that shard is configured and returns an unclaimed
// writer for it, with the table schema.
func openShardWriter(ctx context.Context, e *env, t *ops.Table, shard string) (*memwal.Writer, *pb.Manifest, error) {
	head, err := table.ReadLatest(ctx, t.Bucket)
	if err != nil {
		return nil, nil, err
	}
	d := table.MemWal(head)
	if d == nil {
		return nil, nil, fmt.Errorf("the table has no MemWAL configured (run wal configure)")
	}
	if !slices.Contains(d.Shards, shard) {
		return nil, nil, fmt.Errorf("shard %q is not configured (shards: %s)", shard, strings.Join(d.Shards, ", "))
	}
	w, err := memwal.NewWriter(memwal.Config{Shard: shard, Schema: head.Schema, Logger: e.logger}, t.Bucket)
	return w, head, err
}

func newWalWriteCmd(e *env) *cobra.Command {
	var shard, jsonl string
	var n, start int64
	var seed uint64
	var flush bool
	cmd := &cobra.Command{
		Use:   "write URL --shard S (--jsonl FILE|- | --rows N [--start K] [--seed S]) [--flush]",
		Short: `Claim a shard, replay its WAL, and log the records as one WAL entry ({"_op":"delete",...} is a tombstone)`,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if (jsonl == "") == (n == 0) {
				return fmt.Errorf("give exactly one of --jsonl or --rows")
			}
			if err := checkGenerated(n, start); err != nil {
				return err
			}
			t, done, err := openWriter(ctx, e, args[0], "wal write")
			if err != nil {
				return err
			}
			defer done()
			w, head, err := openShardWriter(ctx, e, t, shard)
			if err != nil {
				return err
			}
			// Parse everything before claiming: bad input must not touch
			// the shard.
			var recs []memwal.Record
			if jsonl != "" {
				in, err := readInput(e, jsonl)
				if err != nil {
					return err
				}
				defer in.Close()
				rows, opsCol, err := ops.ReadJSONLines(head.Schema, bufio.NewReader(in))
				if err != nil {
					return err
				}
				for i, r := range rows {
					op := memwal.Upsert
					if opsCol[i] == "delete" {
						op = memwal.Delete
					}
					recs = append(recs, memwal.Record{Op: op, Row: r})
				}
				if len(recs) == 0 {
					return fmt.Errorf("no records in %s", jsonl)
				}
			} else {
				for _, r := range GenerateRows(head.Schema, start, n, seed) {
					recs = append(recs, memwal.Record{Op: memwal.Upsert, Row: r})
				}
			}
			for i, r := range recs {
				if err := memwal.CheckRecord(head.Schema, r); err != nil {
					return fmt.Errorf("record %d: %w", i+1, err)
				}
			}
			cr, err := w.Claim(ctx)
			if err != nil {
				return err
			}
			prog := progress.From(ctx)
			prog.Start("wal write", progress.Units{Rows: int64(len(recs))})
			pos, err := w.Append(ctx, recs)
			if err != nil {
				return err
			}
			prog.Add(int64(len(recs)), 0)
			out := map[string]any{"operation": "wal_write", "shard": shard, "epoch": cr.Epoch, "wal_position": pos,
				"records": len(recs), "replayed_entries": cr.ReplayedEntries, "replayed_records": cr.ReplayedRecords,
				"shard_version": w.Manifest().Version, "flushed": false}
			if flush {
				if walWriteBeforeFlush != nil {
					walWriteBeforeFlush(ctx, t, shard)
				}
				fr, err := w.Flush(ctx)
				if err != nil {
					// The entry is durable and acknowledged; only the flush
					// failed. Say so, with the write's outcome on stdout
					// and an exit status of its own.
					out["flush_error"] = oneLine(err.Error())
					if perr := printJSON(e.stdout, out); perr != nil {
						return perr
					}
					return &exitError{code: ExitWrittenNotFlushed, err: fmt.Errorf("the records were written at WAL position %d of shard %q (acknowledged; a later flush or claim replays them), but the flush failed: %w", pos, shard, err)}
				}
				addFlush(out, fr)
			}
			return printJSON(e.stdout, out)
		},
	}
	cmd.Flags().StringVar(&shard, "shard", "", "shard to write to")
	cmd.Flags().StringVar(&jsonl, "jsonl", "", "JSON lines file, or - for stdin")
	cmd.Flags().Int64Var(&n, "rows", 0, fmt.Sprintf("generate N upserts (at most %d per command: they are held in memory)", MaxGeneratedRows))
	cmd.Flags().Int64Var(&start, "start", 0, "first generated primary key (keys start..start+N-1 must fit an int64)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed for generated values")
	cmd.Flags().BoolVar(&flush, "flush", false, fmt.Sprintf("flush the MemTable to an SSTable afterwards (exit %d when the write landed but the flush failed)", ExitWrittenNotFlushed))
	_ = cmd.MarkFlagRequired("shard")
	return cmd
}

// ExitWrittenNotFlushed is the exit status of wal write --flush when the
// write landed but the flush failed (for example fenced by a newer writer).
const ExitWrittenNotFlushed = 3

// walWriteBeforeFlush, when set (tests), runs between the write and the
// flush of wal write --flush.
var walWriteBeforeFlush func(ctx context.Context, t *ops.Table, shard string)

// addFlush adds a flush's outcome to a command's output.
func addFlush(out map[string]any, fr *memwal.FlushResult) {
	gens := []uint64{}
	for _, s := range fr.SSTables {
		gens = append(gens, s.Generation)
	}
	out["flushed"] = len(gens) > 0
	out["generations"] = gens
	out["current_generation"] = fr.Manifest.CurrentGeneration
	out["replay_after_wal_position"] = fr.Manifest.ReplayAfterWalPosition
	out["shard_version"] = fr.Manifest.Version
	if len(fr.SSTables) > 0 {
		last := fr.SSTables[len(fr.SSTables)-1]
		out["generation"] = last.Generation
		out["sstable"] = last.Path
		out["sstable_rows"] = last.Rows
	}
}

func newWalFlushCmd(e *env) *cobra.Command {
	var shard string
	cmd := &cobra.Command{
		Use:   "flush URL --shard S",
		Short: "Claim a shard, replay its WAL and flush the MemTable to an SSTable",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			t, done, err := openWriter(ctx, e, args[0], "wal flush")
			if err != nil {
				return err
			}
			defer done()
			w, _, err := openShardWriter(ctx, e, t, shard)
			if err != nil {
				return err
			}
			cr, err := w.Claim(ctx)
			if err != nil {
				return err
			}
			fr, err := w.Flush(ctx)
			if err != nil {
				return err
			}
			out := map[string]any{"operation": "wal_flush", "shard": shard, "epoch": cr.Epoch,
				"replayed_entries": cr.ReplayedEntries, "replayed_records": cr.ReplayedRecords}
			addFlush(out, fr)
			return printJSON(e.stdout, out)
		},
	}
	cmd.Flags().StringVar(&shard, "shard", "", "shard to flush")
	_ = cmd.MarkFlagRequired("shard")
	return cmd
}
