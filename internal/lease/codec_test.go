package lease

import (
	"errors"
	"testing"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

// A lease record that is truncated or damaged is reported corrupt, never
// decoded into a plausible partial record.
func TestDecodeProtoRejectsDamage(t *testing.T) {
	data, err := encodeProto(&pb.Lease{Holder: "host-a", Epoch: 7, ExpiresUnixMicros: 1234567})
	if err != nil {
		t.Fatal(err)
	}
	var rec pb.Lease
	if err := decodeProto("lease", data, &rec); err != nil || rec.Holder != "host-a" || rec.Epoch != 7 || rec.ExpiresUnixMicros != 1234567 {
		t.Fatalf("round trip: %v %+v", err, &rec)
	}
	flipped := append([]byte(nil), data...)
	flipped[6] ^= 0x40
	for name, bad := range map[string][]byte{"truncated": data[:len(data)-2], "short": data[:3], "flipped": flipped,
		"magic": append([]byte("XXXX"), data[4:]...)} {
		if err := decodeProto("lease", bad, &rec); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
}
