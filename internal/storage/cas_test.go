package storage_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/stores"
)

// PutNext classifies every way a put-if-absent of a versioned object can
// end, reading the key back only when the put's outcome is unknown (or,
// with Taken, when the key was found taken).
func TestPutNext(t *testing.T) {
	const key = "v/2"
	mine, theirs := []byte("mine"), []byte("theirs")
	timeout := faults.LandThenFail(nil) // lands, then reports an i/o timeout
	for _, c := range []struct {
		name     string
		existing []byte         // the key's object before the put (nil: absent)
		put      *faults.Action // the put's fault
		get      *faults.Action // every read-back's fault
		rb       storage.ReadBack
		want     storage.PutOutcome
		wantErr  error // matched by errors.Is; nil: no error
		reads    int   // Gets the read-back made
	}{
		{name: "clean", want: storage.PutLanded},
		{name: "taken by a rival", existing: theirs, want: storage.PutLost, wantErr: storage.ErrAlreadyExists},
		{name: "taken by our earlier put, not read back", existing: mine, want: storage.PutLost, wantErr: storage.ErrAlreadyExists},
		{name: "taken by our earlier put, read back", existing: mine, rb: storage.ReadBack{Taken: true}, want: storage.PutLanded, reads: 1},
		{name: "taken by a rival, read back", existing: theirs, rb: storage.ReadBack{Taken: true}, want: storage.PutLost, wantErr: storage.ErrAlreadyExists, reads: 1},
		{name: "landed, response lost", put: &timeout, want: storage.PutLanded, reads: 1},
		{name: "not landed, response lost", put: ptr(faults.Fail(faults.ErrInjectedTimeout)), want: storage.PutAbsent, wantErr: faults.ErrInjected, reads: 1},
		{name: "rival landed while our put timed out", existing: theirs, put: ptr(faults.Fail(faults.ErrInjectedTimeout)), want: storage.PutLost, wantErr: faults.ErrInjected, reads: 1},
		{name: "permanent: no read-back", put: ptr(faults.Fail(fmt.Errorf("put: %w", fs.ErrPermission))), want: storage.PutFailed, wantErr: fs.ErrPermission},
		{name: "read-back fails once, no Wait", put: &timeout, get: ptr(faults.Fail(nil)), want: storage.PutUnknown, wantErr: faults.ErrInjected, reads: 1},
		{name: "read-back fails, Wait gives up after 3 reads", put: &timeout, get: ptr(faults.Fail(nil)),
			rb: storage.ReadBack{Wait: func(_ context.Context, i int) error {
				if i >= 2 {
					return errors.New("enough")
				}
				return nil
			}}, want: storage.PutUnknown, wantErr: faults.ErrInjected, reads: 3},
		{name: "Ours decides", put: &timeout, rb: storage.ReadBack{Ours: func(context.Context, []byte) (bool, error) { return false, nil }},
			want: storage.PutLost, wantErr: faults.ErrInjected, reads: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			f := faults.NewFaulty(stores.Open(t, "mem://"))
			if c.existing != nil {
				if err := f.Put(ctx, key, c.existing); err != nil {
					t.Fatal(err)
				}
			}
			if c.put != nil {
				f.Add(faults.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, Action: *c.put})
			}
			reads := f.Add(faults.Fault{Ops: []storage.Op{storage.OpGet}})
			if c.get != nil {
				f.Add(faults.Fault{Ops: []storage.Op{storage.OpGet}, Action: *c.get})
			}
			got, err := storage.PutNext(ctx, f, key, mine, c.rb)
			if got != c.want {
				t.Errorf("outcome %s, want %s (err %v)", got, c.want, err)
			}
			switch {
			case c.wantErr == nil && err != nil:
				t.Errorf("err %v, want nil", err)
			case c.wantErr != nil && !errors.Is(err, c.wantErr):
				t.Errorf("err %v, want one matching %v", err, c.wantErr)
			}
			if n := reads.Matched(); n != c.reads {
				t.Errorf("%d read-backs, want %d", n, c.reads)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
