package table

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// PrimaryKeyPositionKey is the field metadata key in which Lance records a
// field's 1-based position in the unenforced primary key.
const PrimaryKeyPositionKey = "lance-schema:unenforced-primary-key:position"

// FileVersions are the data_storage_format versions compactord creates
// tables with; the first is the default (LanceDB 0.39's).
var FileVersions = []string{"2.2", "2.1", "2.0"}

// fieldTypes maps the type names of a schema spec to Lance's logical type
// (Arrow's names, as LanceDB writes them) and encoding.
var fieldTypes = map[string]struct {
	logical  string
	encoding pb.Encoding
}{
	"int64":     {"int64", pb.Encoding_PLAIN},
	"float64":   {"double", pb.Encoding_PLAIN},
	"string":    {"string", pb.Encoding_VAR_BINARY},
	"bool":      {"bool", pb.Encoding_PLAIN},
	"bytes":     {"binary", pb.Encoding_VAR_BINARY},
	"timestamp": {"timestamp:us:-", pb.Encoding_PLAIN},
}

// ParseFields turns a schema spec "name:type,..." (types int64, float64,
// string, bool, bytes, timestamp) and its primary key into Lance's field
// list, as LanceDB writes it for the same Arrow schema: ids in order, Arrow
// type names ("int64", "double", "string", "bool", "binary",
// "timestamp:us:-"), fields nullable except the primary key, which is
// unenforced (field metadata and fields 12/13).
func ParseFields(spec string, primaryKey []string) ([]*pb.Field, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, fmt.Errorf("empty schema: want name:type[,name:type...]")
	}
	var out []*pb.Field
	byName := map[string]*pb.Field{}
	for i, part := range strings.Split(spec, ",") {
		name, typ, ok := strings.Cut(strings.TrimSpace(part), ":")
		name = strings.TrimSpace(name)
		if !ok {
			return nil, fmt.Errorf("schema field %q: want name:type", part)
		}
		ft, ok := fieldTypes[strings.ToLower(strings.TrimSpace(typ))]
		if !ok {
			return nil, fmt.Errorf("schema field %q: unknown type %q (want int64, float64, string, bool, bytes or timestamp)", name, typ)
		}
		if name == "" || strings.HasPrefix(name, "_") {
			return nil, fmt.Errorf("field name %q: must be non-empty and not start with '_'", name)
		}
		if byName[name] != nil {
			return nil, fmt.Errorf("duplicate field %q", name)
		}
		f := &pb.Field{Name: name, Id: int32(i), ParentId: -1, Nullable: true, LogicalType: ft.logical, Encoding: ft.encoding}
		byName[name] = f
		out = append(out, f)
	}
	var keys []string
	for _, k := range primaryKey {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("schema has no primary key")
	}
	for i, k := range keys {
		f := byName[k]
		switch {
		case f == nil:
			return nil, fmt.Errorf("primary key %q is not a field of the schema", k)
		case f.UnenforcedPrimaryKey:
			return nil, fmt.Errorf("primary key %q named twice", k)
		case f.LogicalType == "double":
			return nil, fmt.Errorf("primary key %q: float64 cannot be a key", k)
		}
		p := uint32(i + 1)
		f.Nullable = false
		f.UnenforcedPrimaryKey = true
		f.UnenforcedPrimaryKeyPosition = p
		f.Metadata = map[string][]byte{PrimaryKeyPositionKey: []byte(strconv.FormatUint(uint64(p), 10))}
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
	if err := commit.CreateVersion1(ctx, b, mf); err != nil {
		if storage.IsAlreadyExists(err) {
			return nil, fmt.Errorf("%w (created concurrently)", ErrExists)
		}
		return nil, err
	}
	return mf, nil
}
