package storage_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testutil"
)

func TestFirst(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		b, err := storage.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		for _, k := range []string{"v/003", "v/001", "v/002", "w/000", "u/999"} {
			if err := b.Put(ctx, k, []byte(k)); err != nil {
				t.Fatal(err)
			}
		}
		views := map[string]storage.Bucket{
			"plain":   b,
			"metrics": storage.WithMetrics(b, storage.NewMetrics(prometheus.NewRegistry())),
			"faulty":  storage.NewFaulty(b),
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
