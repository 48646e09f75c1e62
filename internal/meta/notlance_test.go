package meta

import (
	"errors"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/storage"
)

// CheckLance: an empty location may become a table; a location whose
// manifests are framed as compactord's retired private format (or are not
// Lance's at all) is refused with ErrNotLance, in one line.
func TestCheckLance(t *testing.T) {
	ctx := t.Context()
	b, err := storage.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if ok, err := CheckLance(ctx, b); ok || err != nil {
		t.Fatalf("empty location: %v %v", ok, err)
	}
	key := VersionsDir + "18446744073709551614.manifest"
	if err := b.Put(ctx, key, []byte(privateMagic+"\x01payload-and-crc")); err != nil {
		t.Fatal(err)
	}
	_, err = CheckLance(ctx, b)
	if !errors.Is(err, ErrNotLance) || !strings.Contains(err.Error(), "retired private format") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("private table: %v", err)
	}
	if err := b.Put(ctx, key, []byte("something else entirely")); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckLance(ctx, b); !errors.Is(err, ErrNotLance) || !strings.Contains(err.Error(), "not a Lance manifest") {
		t.Fatalf("foreign manifest: %v", err)
	}
}
