package lancewal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/compactord/compactord/lancewal"
)

// A Go service writing a Lance table through its MemWAL: create the table
// (or open one LanceDB made), configure the MemWAL once, route each key to
// its shard, write, flush. LanceDB's LSM view reads the flushed rows, and
// compactord merges them into the base table.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "lancewal-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	// LanceDB opens this as table "items" of the database dir.
	t, err := lancewal.CreateTable(ctx, filepath.Join(dir, "items.lance"), []lancewal.Column{
		{Name: "id", Type: "int64"},
		{Name: "name", Type: "string", Nullable: true},
		{Name: "price", Type: "double", Nullable: true},
	}, "id")
	if err != nil {
		panic(err)
	}
	defer t.Close()
	if err := t.CreateIndex(ctx, "id_idx", "id", lancewal.BTree); err != nil {
		panic(err)
	}
	cfg, err := t.EnableMemWAL(ctx, lancewal.Config{Sharding: lancewal.Bucket, Column: "id", NumBuckets: 2, MaintainedIndexes: []string{"id_idx"}})
	if err != nil {
		panic(err)
	}

	shard, err := cfg.ShardFor(int64(7))
	if err != nil {
		panic(err)
	}
	w, err := t.OpenWriter(ctx, shard, lancewal.WriterOptions{})
	if err != nil {
		panic(err)
	}
	// Each call is one WAL entry, durable when it returns.
	if err := w.Upsert(ctx, []lancewal.Row{{"id": int64(7), "name": "lamp", "price": 19.5}}); err != nil {
		panic(err)
	}
	if err := w.Upsert(ctx, []lancewal.Row{{"id": int64(7), "name": "lamp", "price": 17.0}}); err != nil {
		panic(err)
	}
	g, err := w.Flush(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("generation %d: %d row (the newest write of key 7), covers WAL entries up to %d\n", g.Generation, g.Rows, g.CoversWAL)
	if err := w.Close(ctx); err != nil {
		panic(err)
	}
	// Output: generation 1: 1 row (the newest write of key 7), covers WAL entries up to 2
}

// Claiming a shard fences its previous owner, whether it is another Go
// writer or LanceDB's: the fenced writer's next write fails with
// ErrFenced, and the new owner replays what it had not flushed.
func ExampleTable_OpenWriter() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "lancewal-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	t, err := lancewal.CreateTable(ctx, filepath.Join(dir, "t.lance"), []lancewal.Column{{Name: "id", Type: "int64"}, {Name: "v", Type: "string", Nullable: true}}, "id")
	if err != nil {
		panic(err)
	}
	defer t.Close()
	cfg, err := t.EnableMemWAL(ctx, lancewal.Config{Sharding: lancewal.Unsharded})
	if err != nil {
		panic(err)
	}
	shard := cfg.Shards()[0]

	old, err := t.OpenWriter(ctx, shard, lancewal.WriterOptions{})
	if err != nil {
		panic(err)
	}
	if err := old.Upsert(ctx, []lancewal.Row{{"id": int64(1), "v": "a"}}); err != nil {
		panic(err)
	}
	cur, err := t.OpenWriter(ctx, shard, lancewal.WriterOptions{})
	if err != nil {
		panic(err)
	}
	err = old.Upsert(ctx, []lancewal.Row{{"id": int64(2), "v": "b"}})
	fmt.Println("old writer fenced:", errors.Is(err, lancewal.ErrFenced))
	fmt.Println("epochs:", old.Epoch(), "then", cur.Epoch())
	fmt.Println("replayed rows:", cur.Buffered())
	if err := cur.Close(ctx); err != nil {
		panic(err)
	}
	// Output:
	// old writer fenced: true
	// epochs: 1 then 2
	// replayed rows: 1
}
