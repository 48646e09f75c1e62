package memwal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/table"
)

// A WAL entry object is:
//
//	"CWAL" | format (1 byte) | payload length (uint32 LE) | payload | CRC32C (uint32 LE)
//
// where the payload is a deterministic WalEntry protobuf and the CRC covers
// every byte before it. The explicit length turns a truncated object into
// a clear error even when the truncation falls on a protobuf field boundary,
// where the bare message would decode as a plausible, shorter entry.
const (
	walMagic    = "CWAL"
	walFormat   = byte(1)
	walHeader   = len(walMagic) + 1 + 4
	walOverhead = walHeader + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptWAL marks a WAL entry that failed its frame, checksum or schema
// checks. It matches table.ErrCorrupt too.
var ErrCorruptWAL = fmt.Errorf("corrupt WAL entry (%w)", table.ErrCorrupt)

// EncodeWALEntry frames an entry for storage.
func EncodeWALEntry(e *pb.WalEntry) ([]byte, error) {
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(e)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(payload)+walOverhead)
	out = append(out, walMagic...)
	out = append(out, walFormat)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(payload)))
	out = append(out, payload...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli)), nil
}

// DecodeWALEntry checks the frame and decodes an entry. key names the
// object in errors.
func DecodeWALEntry(key string, data []byte) (*pb.WalEntry, error) {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("WAL entry %s: %w: %s", key, ErrCorruptWAL, fmt.Sprintf(f, a...))
	}
	if len(data) < walOverhead {
		return nil, bad("truncated (%d bytes)", len(data))
	}
	if string(data[:4]) != walMagic {
		return nil, bad("bad magic")
	}
	if data[4] != walFormat {
		return nil, bad("unsupported format %d", data[4])
	}
	n := binary.LittleEndian.Uint32(data[5:9])
	if uint64(n) != uint64(len(data)-walOverhead) {
		return nil, bad("length prefix says %d payload bytes, object holds %d (truncated or damaged)", n, len(data)-walOverhead)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, bad("checksum mismatch (damaged)")
	}
	e := &pb.WalEntry{}
	if err := proto.Unmarshal(body[walHeader:], e); err != nil {
		return nil, bad("%v", err)
	}
	return e, nil
}

// IsCorruptWAL reports whether err is a corrupt WAL entry.
func IsCorruptWAL(err error) bool { return errors.Is(err, ErrCorruptWAL) }
