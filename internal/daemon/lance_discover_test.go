package daemon_test

import (
	"context"
	"slices"
	"testing"

	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
)

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
