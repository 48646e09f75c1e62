package lancedb

import (
	"testing"
	"time"

	"github.com/compactord/compactord/internal/testing/s3server"
)

// TestS3: LanceDB builds and reads a table on the loopback S3 gateway, and
// a writer's acknowledged operations there are all visible.
func TestS3(t *testing.T) {
	Require(t)
	srv := s3server.Start(t)
	uri, opts := S3(srv, "db-"+s3server.RandomSuffix())
	steps, want := DeletesSteps()
	res := MustRun(t, Program{URI: uri, StorageOptions: opts, Steps: append(steps, ReadRows(ReadOpts{}))})
	rows, err := res.Rows(len(steps))
	if err != nil {
		t.Fatal(err)
	}
	got, err := RowsByID(rows)
	if err != nil {
		t.Fatal(err)
	}
	if d := DiffByID(got, want); d != "" {
		t.Fatalf("rows on S3 differ:\n%s", d)
	}
	w := StartWriter(t, WriterOpts{URI: uri, StorageOptions: opts, Duration: 2 * time.Second, KeyMin: 0, KeyMax: 40, Seed: 5})
	<-w.Done()
	ops, err := w.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(Acknowledged(ops)) == 0 {
		t.Fatalf("no operation acknowledged on S3: %+v", ops)
	}
	res = MustRun(t, Program{URI: uri, StorageOptions: opts, Steps: []Step{ReadRows(ReadOpts{})}})
	rows, _ = res.Rows(0)
	got, err = RowsByID(rows)
	if err != nil {
		t.Fatal(err)
	}
	if d := DiffByID(got, Expected(want, ops)); d != "" {
		t.Errorf("acknowledged operations on S3 not visible:\n%s", d)
	}
}
