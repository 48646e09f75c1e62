package table

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	cpb "github.com/compactord/compactord/gen/compactordv1"
	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/lance/commit"
	"github.com/compactord/compactord/internal/lance/meta"
	"github.com/compactord/compactord/internal/storage"
)

// PrimaryKeyPositionKey is the field metadata key in which Lance records a
// field's 1-based position in the unenforced primary key.
const PrimaryKeyPositionKey = "lance-schema:unenforced-primary-key:position"

// FileVersions are the data_storage_format versions compactord creates
// tables with; the first is the default (LanceDB 0.39's).
var FileVersions = []string{"2.2", "2.1", "2.0"}

// LanceFields converts compactord's schema to Lance's field list, as
// LanceDB writes it for the same Arrow schema: ids in order, Arrow type
// names ("int64", "double", "string", "bool", "binary", "timestamp:us:-"),
// and the primary key unenforced (field metadata and fields 12/13), its
// fields not nullable.
func LanceFields(s *cpb.Schema) ([]*pb.Field, error) {
	pos := map[int32]uint32{}
	for i, id := range s.GetPrimaryKey() {
		pos[id] = uint32(i + 1)
	}
	var out []*pb.Field
	for i, f := range s.GetFields() {
		lf := &pb.Field{Name: f.GetName(), Id: int32(i), ParentId: -1, Nullable: f.GetNullable(), Encoding: pb.Encoding_PLAIN}
		switch f.GetType() {
		case cpb.FieldType_FIELD_TYPE_INT64:
			lf.LogicalType = "int64"
		case cpb.FieldType_FIELD_TYPE_FLOAT64:
			lf.LogicalType = "double"
		case cpb.FieldType_FIELD_TYPE_STRING:
			lf.LogicalType, lf.Encoding = "string", pb.Encoding_VAR_BINARY
		case cpb.FieldType_FIELD_TYPE_BOOL:
			lf.LogicalType = "bool"
		case cpb.FieldType_FIELD_TYPE_BYTES:
			lf.LogicalType, lf.Encoding = "binary", pb.Encoding_VAR_BINARY
		case cpb.FieldType_FIELD_TYPE_TIMESTAMP:
			lf.LogicalType = "timestamp:us:-"
		default:
			return nil, fmt.Errorf("field %q: type %v has no Lance equivalent", f.GetName(), f.GetType())
		}
		if p, ok := pos[f.GetId()]; ok {
			lf.Nullable = false
			lf.UnenforcedPrimaryKey = true
			lf.UnenforcedPrimaryKeyPosition = p
			lf.Metadata = map[string][]byte{PrimaryKeyPositionKey: []byte(strconv.FormatUint(uint64(p), 10))}
		}
		out = append(out, lf)
	}
	return out, nil
}

// ErrExists is Create's error when the location already holds a table.
var ErrExists = errors.New("a table already exists there")

// Create makes version 1 of a new Lance dataset: an Overwrite of no
// fragments with the given schema, data_storage_format fileVersion ("" is
// 2.2), committed with put-if-absent so that it never replaces a table
// (compactord's or Lance's) that exists or is being created concurrently.
func Create(ctx context.Context, b storage.Bucket, fields []*pb.Field, fileVersion string, now time.Time) (*meta.ManifestFile, error) {
	if fileVersion == "" {
		fileVersion = FileVersions[0]
	}
	ok := false
	for _, v := range FileVersions {
		ok = ok || v == fileVersion
	}
	if !ok {
		return nil, fmt.Errorf("file version %q: want one of %v", fileVersion, FileVersions)
	}
	if len(fields) == 0 {
		return nil, errors.New("a table needs at least one field")
	}
	switch v, _, err := meta.Latest(ctx, b); {
	case err == nil:
		return nil, fmt.Errorf("%w (version %d)", ErrExists, v)
	case !errors.Is(err, meta.ErrNoTable):
		return nil, err
	}
	txn := commit.NewTransaction(0)
	txn.Operation = &pb.Transaction_Overwrite_{Overwrite: &pb.Transaction_Overwrite{Schema: fields}}
	m := &pb.Manifest{
		Fields:          fields,
		Version:         1,
		WriterVersion:   &pb.Manifest_WriterVersion{Library: commit.WriterLibrary, Version: commit.WriterVersion},
		Timestamp:       timestamppb.New(now),
		TransactionFile: meta.TransactionName(0, txn.GetUuid()),
		DataFormat:      &pb.Manifest_DataStorageFormat{FileFormat: "lance", Version: fileVersion},
	}
	meta.RecomputeFlags(m, 0, 0)
	mf := &meta.ManifestFile{Manifest: m, Transaction: txn}
	data, err := meta.EncodeManifestFile(mf)
	if err != nil {
		return nil, err
	}
	tdata, err := meta.EncodeTransaction(txn)
	if err != nil {
		return nil, err
	}
	tkey := meta.TransactionKey(m.TransactionFile)
	if err := b.Put(ctx, tkey, tdata); err != nil {
		return nil, fmt.Errorf("write transaction file: %w", err)
	}
	if err := b.PutIfAbsent(ctx, meta.ManifestKey(meta.NamingV2, 1), data); err != nil {
		if storage.IsAlreadyExists(err) {
			_ = b.Delete(context.WithoutCancel(ctx), tkey)
			return nil, fmt.Errorf("%w (created concurrently)", ErrExists)
		}
		return nil, fmt.Errorf("put version 1: %w", err)
	}
	_ = meta.WriteHint(ctx, b, 1)
	return mf, nil
}
