package storage_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/stores"
)

func TestMetrics(t *testing.T) {
	ctx := t.Context()
	reg := prometheus.NewPedanticRegistry()
	m := storage.NewMetrics(reg)
	b := storage.WithMetrics(stores.Open(t, "mem://"), m)

	// Every series exists from the start.
	if n := promtest.CollectAndCount(reg, "compactord_objstore_operations_total"); n != 8*5 {
		t.Errorf("%d operation series, want 40", n)
	}
	if n := promtest.CollectAndCount(reg, "compactord_objstore_operation_duration_seconds"); n != 8 {
		t.Errorf("%d duration series, want 8", n)
	}

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.Put(ctx, "a", []byte("12345")))       // put success, 5 written
	must(b.PutIfAbsent(ctx, "c", []byte("123"))) // put_if_absent success, 3 written
	b.PutIfAbsent(ctx, "c", []byte("123"))       // put_if_absent already_exists
	b.Get(ctx, "a")                              // get success, 5 read
	b.Get(ctx, "missing")                        // get not_found
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	b.Get(canceled, "a")                        // get canceled
	rc, err := b.NewRangeReader(ctx, "a", 1, 2) // get_range success
	must(err)
	io.ReadAll(rc) // 2 read
	rc.Close()
	w, err := b.NewWriter(ctx, "u") // upload success, 4 written
	must(err)
	w.Write([]byte("abcd"))
	must(w.Close())
	b.Attributes(ctx, "a") // attributes success
	stop := errors.New("stop")
	b.List(ctx, "", func(storage.Attrs) error { return stop })    // list success (caller stopped)
	b.List(ctx, "/bad", func(storage.Attrs) error { return nil }) // list error
	must(b.Delete(ctx, "a"))                                      // delete success
	b.Delete(ctx, "a")                                            // delete not_found

	want := map[[2]string]float64{
		{"put", "success"}:                  1,
		{"put_if_absent", "success"}:        1,
		{"put_if_absent", "already_exists"}: 1,
		{"get", "success"}:                  1,
		{"get", "not_found"}:                1,
		{"get", "canceled"}:                 1,
		{"get_range", "success"}:            1,
		{"upload", "success"}:               1,
		{"attributes", "success"}:           1,
		{"list", "success"}:                 1,
		{"list", "error"}:                   1,
		{"delete", "success"}:               1,
		{"delete", "not_found"}:             1,
	}
	var exp strings.Builder
	exp.WriteString("# HELP compactord_objstore_operations_total Object store operations by kind and result.\n# TYPE compactord_objstore_operations_total counter\n")
	for _, op := range storage.AllOps {
		for _, r := range []string{"already_exists", "canceled", "error", "not_found", "success"} {
			exp.WriteString(`compactord_objstore_operations_total{operation="` + string(op) + `",result="` + r + `"} `)
			if want[[2]string{string(op), r}] == 1 {
				exp.WriteString("1\n")
			} else {
				exp.WriteString("0\n")
			}
		}
	}
	if err := promtest.GatherAndCompare(reg, strings.NewReader(exp.String()), "compactord_objstore_operations_total"); err != nil {
		t.Error(err)
	}
	if got := promtest.ToFloat64(findCounter(t, reg, "compactord_objstore_bytes_read_total")); got != 7 {
		t.Errorf("bytes read = %v, want 7", got)
	}
	if got := promtest.ToFloat64(findCounter(t, reg, "compactord_objstore_bytes_written_total")); got != 12 {
		t.Errorf("bytes written = %v, want 12", got)
	}
	if n := promtest.CollectAndCount(reg, "compactord_objstore_operation_duration_seconds"); n != 8 {
		t.Errorf("%d duration series, want 8", n)
	}
}

// findCounter gathers one unlabelled counter from reg as a Collector for
// promtest.ToFloat64.
func findCounter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: "copy"})
			c.Add(mf.GetMetric()[0].GetCounter().GetValue())
			return c
		}
	}
	t.Fatalf("metric %s not found", name)
	return nil
}
