package commit

import (
	"context"
	"fmt"

	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// CreateVersion1 publishes version 1 of a new dataset at b: mf's
// transaction file when it names one, then the manifest, put-if-absent, so
// that it never replaces a dataset that exists or is being created
// concurrently. The loop (Committer) publishes every later version; this is
// the only other writer of a version, for the one version that has no
// predecessor to read. A put whose outcome is unknown is read back (the
// manifest is ours if it holds our bytes). When another creator won, the
// error matches storage.ErrAlreadyExists and the transaction file written
// for it is removed.
func CreateVersion1(ctx context.Context, b storage.Bucket, mf *meta.ManifestFile) error {
	m := mf.Manifest
	if m.GetVersion() != 1 {
		return fmt.Errorf("create: manifest is version %d, not 1", m.GetVersion())
	}
	data, err := meta.EncodeManifestFile(mf)
	if err != nil {
		return err
	}
	var tkey string
	if mf.Transaction != nil && m.GetTransactionFile() != "" {
		tdata, err := meta.EncodeTransaction(mf.Transaction)
		if err != nil {
			return err
		}
		tkey = meta.TransactionKey(m.GetTransactionFile())
		if err := b.Put(ctx, tkey, tdata); err != nil {
			return fmt.Errorf("write transaction file: %w", err)
		}
	}
	out, err := storage.PutNext(ctx, b, meta.ManifestKey(meta.NamingV2, 1), data, storage.ReadBack{Taken: true})
	switch out {
	case storage.PutLanded:
		_ = meta.WriteHint(ctx, b, 1) // advisory: readers fall back to a listing
		return nil
	case storage.PutLost:
		if tkey != "" {
			_ = b.Delete(context.WithoutCancel(ctx), tkey)
		}
		return fmt.Errorf("put version 1: %w", storage.ErrAlreadyExists)
	}
	return fmt.Errorf("put version 1 (%s): %w", out, err)
}
