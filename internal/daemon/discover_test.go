package daemon_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"

	"github.com/compactord/compactord/internal/clock"
)

// Every folder holding _versions/ is a table; table internals never are.
func TestDiscover(t *testing.T) {
	root := memRoot(t)
	for _, p := range []string{"orders", "eu/users", "eu/users-archive"} {
		createTable(t, root+"/"+p)
	}
	b, err := storage.Open(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// Look-alikes that are not tables.
	for _, k := range []string{"orders/_indices/x/_versions/junk", "notes/versions/1", "eu/_tmp/_versions/1"} {
		if err := b.Put(context.Background(), k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	got, err := daemon.Discover(context.Background(), b, root)
	if err != nil {
		t.Fatal(err)
	}
	want := []scheduler.TableSpec{
		{Name: "eu.users", URL: root + "/eu/users"},
		{Name: "eu.users-archive", URL: root + "/eu/users-archive"},
		{Name: "orders", URL: root + "/orders"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("discovered %v, want %v", got, want)
	}
}

// The daemon watches configured and discovered tables together, and picks
// up a table created later at the next scan.
func TestDaemonDiscoversTables(t *testing.T) {
	root := memRoot(t)
	createTable(t, root+"/a")
	createTable(t, root+"/b")
	cfg := baseConfig()
	cfg.Discover.URL = root
	cfg.Tables = []daemon.TableConfig{{URL: root + "/b", Name: "configured-b"}}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rec := &recorder{}
	r := run(t, cfg, daemon.Deps{Jobs: rec.jobs(), Clock: clk})
	eventually(t, "ready", r.d.Ready)
	if got := names(r.d); fmt.Sprint(got) != "[a configured-b]" {
		t.Fatalf("tables %v", got)
	}
	createTable(t, root+"/c")
	for i := 0; i < 5 && !within(func() bool { return len(names(r.d)) == 3 }); i++ {
		clk.Advance(cfg.Discover.Interval)
	}
	if got := names(r.d); fmt.Sprint(got) != "[a c configured-b]" {
		t.Fatalf("tables after a rescan %v", got)
	}
}

// A LanceDB database directory yields one table per <name>.lance dataset,
// named <name>, next to a table in a folder of any other name; the MemWAL's generation
// directories (under _mem_wal/) are never tables.
func TestDiscoverLanceDatasets(t *testing.T) {
	root := memRoot(t)
	createTable(t, root+"/plain")
	b, err := storage.Open(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, k := range []string{
		"orders.lance/_versions/18446744073709551614.manifest",
		"orders.lance/data/abc.lance",
		"orders.lance/_mem_wal/shard/gen_1/_versions/1.manifest",
		"eu/users.lance/_versions/18446744073709551614.manifest",
	} {
		if err := b.Put(context.Background(), k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	got, err := daemon.Discover(context.Background(), b, root)
	if err != nil {
		t.Fatal(err)
	}
	want := []scheduler.TableSpec{
		{Name: "eu.users", URL: root + "/eu/users.lance"},
		{Name: "orders", URL: root + "/orders.lance"},
		{Name: "plain", URL: root + "/plain"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("discovered %v, want %v", got, want)
	}
	if n := daemon.NameFromURL("file:///data/db/orders.lance"); n != "orders" {
		t.Errorf("NameFromURL of a dataset: %q", n)
	}
}
