package meta

import (
	"context"
	"testing"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/storage"
)

// countingBucket counts listings and existence checks.
type countingBucket struct {
	storage.Bucket
	lists, heads int
}

func (c *countingBucket) List(ctx context.Context, prefix string, fn func(storage.Attrs) error) error {
	c.lists++
	return c.Bucket.List(ctx, prefix, fn)
}

func (c *countingBucket) Attributes(ctx context.Context, key string) (storage.Attrs, error) {
	c.heads++
	return c.Bucket.Attributes(ctx, key)
}

func putVersions(t *testing.T, b storage.Bucket, n Naming, vs ...uint64) {
	t.Helper()
	for _, v := range vs {
		raw, err := EncodeManifestFile(&ManifestFile{Manifest: &pb.Manifest{Version: v}})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Put(t.Context(), ManifestKey(n, v), raw); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLatestFromHint: a hint naming a retained version is the start of an
// upward probe (no listing); any hint Latest cannot trust (absent,
// undecodable, naming a cleaned or never-written version, too far behind,
// on a V1 table) falls back to the listing, and every case finds the head.
func TestLatestFromHint(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name     string
		naming   Naming
		versions []uint64
		hint     string // "" = no hint file
		listed   bool   // the answer needs a listing
	}{
		{"current hint", NamingV2, []uint64{1, 2, 3, 4, 5}, `{"version":5}`, false},
		{"lagging hint", NamingV2, []uint64{1, 2, 3, 4, 5}, `{"version":2}`, false},
		{"hint at a retained version after cleanup", NamingV2, []uint64{7, 8, 9}, `{"version":7}`, false},
		{"hint at a tagged version, cleanup kept the rest", NamingV2, []uint64{3, 10, 11}, `{"version":10}`, false},
		{"hint at a cleaned version", NamingV2, []uint64{7, 8, 9}, `{"version":4}`, true},
		{"hint ahead of the head", NamingV2, []uint64{1, 2}, `{"version":9}`, true},
		{"no hint", NamingV2, []uint64{1, 2, 3}, "", true},
		{"undecodable hint", NamingV2, []uint64{1, 2, 3}, `{"version":`, true},
		{"zero hint", NamingV2, []uint64{1, 2, 3}, `{"version":0}`, true},
		{"hint far behind", NamingV2, seq(1, maxHintProbes+10), `{"version":1}`, true},
		{"V1 table", NamingV1, []uint64{1, 2, 3}, `{"version":2}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memBucket(t)
			putVersions(t, mem, tc.naming, tc.versions...)
			if tc.hint != "" {
				if err := mem.Put(ctx, HintKey, []byte(tc.hint)); err != nil {
					t.Fatal(err)
				}
			}
			b := &countingBucket{Bucket: mem}
			v, n, err := Latest(ctx, b)
			head := tc.versions[len(tc.versions)-1]
			if err != nil || v != head || n != tc.naming {
				t.Fatalf("Latest = %d, %v, %v; want %d, %v", v, n, err, head, tc.naming)
			}
			if got := b.lists > 0; got != tc.listed {
				t.Errorf("listed %d times, want a listing: %v", b.lists, tc.listed)
			}
		})
	}
}

// TestLatestRequestsFlat: with a current hint, finding the head costs the
// same requests at 10 and at 1000 versions (a GET and two HEADs).
func TestLatestRequestsFlat(t *testing.T) {
	for _, n := range []uint64{10, 1000} {
		mem := memBucket(t)
		putVersions(t, mem, NamingV2, seq(1, n)...)
		if err := WriteHint(t.Context(), mem, n); err != nil {
			t.Fatal(err)
		}
		b := &countingBucket{Bucket: mem}
		if v, _, err := Latest(t.Context(), b); err != nil || v != n {
			t.Fatalf("%d versions: Latest = %d, %v", n, v, err)
		}
		if b.lists != 0 || b.heads != 2 {
			t.Errorf("%d versions: %d listings, %d HEADs; want 0 and 2", n, b.lists, b.heads)
		}
	}
}

func seq(lo, hi uint64) []uint64 {
	var out []uint64
	for v := lo; v <= hi; v++ {
		out = append(out, v)
	}
	return out
}

// overtakingBucket commits the next version and cleans up the one Latest
// found at the first read of its manifest, as a writer and a cleanup
// retaining one version can between a reader's Latest and its read.
type overtakingBucket struct {
	storage.Bucket
	t      *testing.T
	victim uint64
	done   bool
}

func (o *overtakingBucket) Get(ctx context.Context, key string) ([]byte, error) {
	if !o.done && key == ManifestKey(NamingV2, o.victim) {
		o.done = true
		putVersions(o.t, o.Bucket, NamingV2, o.victim+1)
		if err := o.Bucket.Delete(ctx, key); err != nil {
			o.t.Fatal(err)
		}
	}
	return o.Bucket.Get(ctx, key)
}

// TestReadLatestOvertaken: the version Latest found is cleaned up before
// ReadLatest reads it; ReadLatest reads the newer head instead of failing.
func TestReadLatestOvertaken(t *testing.T) {
	for _, hint := range []bool{false, true} {
		mem := memBucket(t)
		putVersions(t, mem, NamingV2, 1, 2)
		if hint {
			if err := WriteHint(t.Context(), mem, 2); err != nil {
				t.Fatal(err)
			}
		}
		f, n, err := ReadLatest(t.Context(), &overtakingBucket{Bucket: mem, t: t, victim: 2})
		if err != nil || n != NamingV2 || f.Manifest.GetVersion() != 3 {
			t.Fatalf("hint %v: ReadLatest = %v, %v, %v; want version 3", hint, f, n, err)
		}
	}
}
