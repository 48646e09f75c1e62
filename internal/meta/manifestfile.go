package meta

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/jobclass"
)

// A manifest file is a sequence of sections, each a u32 little-endian length
// and a protobuf message, followed by a 16-byte footer:
//
//	[IndexSection] [Transaction] Manifest | u64 manifest offset | u16 major | u16 minor | "LANC"
//
// The manifest locates the other two through index_section and
// transaction_section. Sections are not padded.
const (
	footerLen   = 16
	magic       = "LANC"
	footerMajor = 0
	footerMinor = 2
	// maxSection bounds one section so a corrupt length cannot ask for an
	// allocation the file does not back (the length is checked against the
	// file anyway; this keeps the arithmetic in range).
	maxSection = 1 << 31
)

// ManifestFile is one decoded manifest file.
type ManifestFile struct {
	Manifest *pb.Manifest
	// Indices is the index section; nil when the file has none.
	Indices []*pb.IndexMetadata
	// Transaction is the inline transaction; nil when the file has none.
	Transaction *pb.Transaction
}

// ErrCorrupt marks undecodable metadata. Callers never delete anything
// because of it: the bytes may belong to a writer newer than compactord.
var ErrCorrupt = jobclass.Weak(jobclass.Error, jobclass.ReasonCorrupt, errors.New("corrupt Lance metadata"))

// CorruptError says which object could not be decoded and why.
type CorruptError struct {
	Key string
	Err error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s: %v: %v", e.Key, ErrCorrupt, e.Err)
}

// Unwrap lets errors.Is(err, ErrCorrupt) match.
func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }

func section(b []byte, off uint64, what string) ([]byte, error) {
	if off > uint64(len(b)) || uint64(len(b))-off < 4 {
		return nil, fmt.Errorf("%s offset %d outside the file (%d bytes)", what, off, len(b))
	}
	n := uint64(binary.LittleEndian.Uint32(b[off:]))
	start := off + 4
	if n > maxSection || start+n > uint64(len(b)) {
		return nil, fmt.Errorf("%s of %d bytes at offset %d runs past the end of the file (%d bytes)", what, n, off, len(b))
	}
	return b[start : start+n], nil
}

// DecodeManifestFile decodes a manifest file's bytes.
func DecodeManifestFile(b []byte) (*ManifestFile, error) {
	if len(b) < footerLen {
		return nil, fmt.Errorf("manifest file of %d bytes is shorter than its footer", len(b))
	}
	foot := b[len(b)-footerLen:]
	if string(foot[12:]) != magic {
		return nil, fmt.Errorf("manifest file does not end in %q", magic)
	}
	body := b[:len(b)-footerLen]
	off := binary.LittleEndian.Uint64(foot)
	raw, err := section(body, off, "manifest")
	if err != nil {
		return nil, err
	}
	f := &ManifestFile{Manifest: &pb.Manifest{}}
	if err := proto.Unmarshal(raw, f.Manifest); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if f.Manifest.IndexSection != nil {
		raw, err := section(body, f.Manifest.GetIndexSection(), "index section")
		if err != nil {
			return nil, err
		}
		var is pb.IndexSection
		if err := proto.Unmarshal(raw, &is); err != nil {
			return nil, fmt.Errorf("index section: %w", err)
		}
		f.Indices = is.Indices
		if f.Indices == nil {
			f.Indices = []*pb.IndexMetadata{}
		}
	}
	if f.Manifest.TransactionSection != nil {
		raw, err := section(body, f.Manifest.GetTransactionSection(), "transaction section")
		if err != nil {
			return nil, err
		}
		f.Transaction = &pb.Transaction{}
		if err := proto.Unmarshal(raw, f.Transaction); err != nil {
			return nil, fmt.Errorf("transaction section: %w", err)
		}
	}
	return f, nil
}

var marshal = proto.MarshalOptions{Deterministic: true}

// EncodeManifestFile lays out f as LanceDB does: the index section (when
// f.Indices is non-nil) at offset 0, then the transaction, then the
// manifest. It sets the manifest's index_section and transaction_section;
// everything else in the manifest is written as given.
func EncodeManifestFile(f *ManifestFile) ([]byte, error) {
	m := proto.Clone(f.Manifest).(*pb.Manifest)
	m.IndexSection, m.TransactionSection = nil, nil
	var out []byte
	put := func(msg proto.Message) (uint64, error) {
		raw, err := marshal.Marshal(msg)
		if err != nil {
			return 0, err
		}
		off := uint64(len(out))
		out = binary.LittleEndian.AppendUint32(out, uint32(len(raw)))
		out = append(out, raw...)
		return off, nil
	}
	if f.Indices != nil {
		off, err := put(&pb.IndexSection{Indices: f.Indices})
		if err != nil {
			return nil, fmt.Errorf("encode index section: %w", err)
		}
		m.IndexSection = proto.Uint64(off)
	}
	if f.Transaction != nil {
		off, err := put(f.Transaction)
		if err != nil {
			return nil, fmt.Errorf("encode transaction: %w", err)
		}
		m.TransactionSection = proto.Uint64(off)
	}
	off, err := put(m)
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	out = binary.LittleEndian.AppendUint64(out, off)
	out = binary.LittleEndian.AppendUint16(out, footerMajor)
	out = binary.LittleEndian.AppendUint16(out, footerMinor)
	return append(out, magic...), nil
}
