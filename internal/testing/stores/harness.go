package stores

import (
	"testing"

	"github.com/compactord/compactord/internal/storage"
)

// CheckPrefixedURL checks a test server harness's URL method: the store
// url("some/prefix") opens takes a key with put-if-absent once only, and
// the key lands under some/prefix in the store of url("").
func CheckPrefixedURL(t *testing.T, url func(prefix string) string) {
	t.Helper()
	ctx := t.Context()
	b, err := storage.Open(ctx, url("some/prefix"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.PutIfAbsent(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "k", []byte("w")); !storage.IsAlreadyExists(err) {
		t.Errorf("second PutIfAbsent: %v", err)
	}
	root, err := storage.Open(ctx, url(""))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if got, err := root.Get(ctx, "some/prefix/k"); err != nil || string(got) != "v" {
		t.Errorf("unprefixed Get = %q, %v", got, err)
	}
}
