package storage_test

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/stores"
)

func TestFirst(t *testing.T) {
	stores.ForEachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		b := stores.Open(t, url)
		for _, k := range []string{"v/003", "v/001", "v/002", "w/000", "u/999"} {
			if err := b.Put(ctx, k, []byte(k)); err != nil {
				t.Fatal(err)
			}
		}
		views := map[string]storage.Bucket{
			"plain":   b,
			"metrics": storage.WithMetrics(b, storage.NewMetrics(prometheus.NewRegistry())),
			"faulty":  faults.NewFaulty(b),
		}
		for name, v := range views {
			a, ok, err := storage.First(ctx, v, "v/")
			if err != nil || !ok || a.Key != "v/001" || a.Size != 5 {
				t.Fatalf("%s: First = %+v %v %v, want v/001", name, a, ok, err)
			}
			if _, ok, err := storage.First(ctx, v, "x/"); err != nil || ok {
				t.Fatalf("%s: First of an empty prefix = %v %v", name, ok, err)
			}
		}
		a, ok, err := storage.First(ctx, storage.Sub(b, "v/"), "")
		if err != nil || !ok || a.Key != "001" {
			t.Fatalf("sub: First = %+v %v %v", a, ok, err)
		}
	})
}

// First on file:// reads the directory unsorted; it must agree with the
// ordered listing: a subdirectory ("v/0/", which sorts before "v/001") comes
// first, temporary files of writes in progress are not objects.
func TestFirstAgreesWithList(t *testing.T) {
	stores.ForEachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		b := stores.Open(t, url)
		check := func(prefix string) {
			t.Helper()
			var want string
			if err := b.List(ctx, prefix, func(a storage.Attrs) error {
				// First and List on file:// share the rule that skips
				// these, so agreeing is not enough.
				if strings.HasPrefix(path.Base(a.Key), ".tmp-") {
					t.Fatalf("List(%q) returned the temporary file %q", prefix, a.Key)
				}
				if want == "" {
					want = a.Key
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			a, ok, err := storage.First(ctx, b, prefix)
			if err != nil || ok != (want != "") || a.Key != want {
				t.Fatalf("First(%q) = %q %v %v, List starts with %q", prefix, a.Key, ok, err, want)
			}
		}
		for _, k := range []string{"v/003", "v/001", "v/0a"} {
			if err := b.Put(ctx, k, []byte(k)); err != nil {
				t.Fatal(err)
			}
		}
		check("v/")
		if lp, ok := b.(storage.LocalPather); ok {
			p, _ := lp.LocalPath("v/000")
			if err := os.WriteFile(filepath.Join(filepath.Dir(p), ".tmp-000000"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		check("v/")
		if err := b.Put(ctx, "v/0/x", []byte("x")); err != nil {
			t.Fatal(err)
		}
		check("v/")
		check("v/0/")
		check("w/")
	})
}
