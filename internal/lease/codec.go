package lease

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"google.golang.org/protobuf/proto"

	"github.com/compactord/compactord/internal/jobclass"
)

// A lease record is framed as: magic "CMPD", one format byte, the deterministic protobuf
// payload, then a CRC32C of everything before it. A bare protobuf would
// decode a truncated file into a plausible but partial message; the frame
// turns truncation and bit rot into a clear error instead.
const (
	frameMagic   = "CMPD"
	frameFormat  = byte(1)
	frameOverhed = len(frameMagic) + 1 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt marks a lease record that failed its frame or protobuf checks.
var ErrCorrupt = jobclass.Weak(jobclass.Error, jobclass.ReasonCorrupt, errors.New("corrupt lease record"))

// encodeProto frames m for storage. Marshalling is deterministic so that an
// unchanged message is byte-identical.
func encodeProto(m proto.Message) ([]byte, error) {
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(payload)+frameOverhed)
	out = append(out, frameMagic...)
	out = append(out, frameFormat)
	out = append(out, payload...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli)), nil
}

// decodeProto checks the frame and unmarshals into m. name is used only in
// the error message.
func decodeProto(name string, data []byte, m proto.Message) error {
	if len(data) < frameOverhed {
		return fmt.Errorf("%s: %w: truncated (%d bytes)", name, ErrCorrupt, len(data))
	}
	if string(data[:4]) != frameMagic {
		return fmt.Errorf("%s: %w: bad magic", name, ErrCorrupt)
	}
	if data[4] != frameFormat {
		return fmt.Errorf("%s: %w: unsupported format %d", name, ErrCorrupt, data[4])
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return fmt.Errorf("%s: %w: checksum mismatch (truncated or damaged)", name, ErrCorrupt)
	}
	if err := proto.Unmarshal(body[5:], m); err != nil {
		return fmt.Errorf("%s: %w: %v", name, ErrCorrupt, err)
	}
	return nil
}
