package meta

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/storage"
)

// EncodeTransaction is a transaction file's bytes: the raw message, no
// framing, as Lance writes it.
func EncodeTransaction(t *pb.Transaction) ([]byte, error) { return marshal.Marshal(t) }

// DecodeTransaction decodes a transaction file.
func DecodeTransaction(data []byte) (*pb.Transaction, error) {
	t := &pb.Transaction{}
	if err := proto.Unmarshal(data, t); err != nil {
		return nil, err
	}
	return t, nil
}

// ReadTransaction reads the transaction that made f's version: the inline
// section when there is one (one read fewer), the file the manifest names
// otherwise. A version with neither returns nil: old writers and tables with
// transaction files disabled leave some versions without one, and a caller
// classifying conflicts must then treat the version as incompatible with
// anything.
func ReadTransaction(ctx context.Context, b storage.Bucket, f *ManifestFile) (*pb.Transaction, error) {
	if f.Transaction != nil {
		return f.Transaction, nil
	}
	name := f.Manifest.GetTransactionFile()
	if name == "" {
		return nil, nil
	}
	key := TransactionKey(name)
	data, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read transaction of version %d: %w", f.Manifest.GetVersion(), err)
	}
	t, err := DecodeTransaction(data)
	if err != nil {
		return nil, &CorruptError{Key: key, Err: err}
	}
	return t, nil
}
