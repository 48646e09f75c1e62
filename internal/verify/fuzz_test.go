package verify

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/compactord/compactord/internal/inspect"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// memCopy loads a corpus table into an in-memory bucket.
func memCopy(t testing.TB, name string) storage.Bucket {
	t.Helper()
	ctx := context.Background()
	b, err := storage.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(lancedb.CorpusRoot(), name)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		return b.Put(ctx, filepath.ToSlash(rel), data)
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func seed(f *testing.F, b storage.Bucket, key string) {
	data, err := b.Get(context.Background(), key)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
}

// FuzzNewestManifest puts arbitrary bytes where the newest manifest of a
// MemWAL table is and runs verify and inspect: what meta's decoder lets
// through (index bitmaps, MemWAL and FRI details, sections) must never
// panic either. Seeds are the real manifests of the corpus.
func FuzzNewestManifest(f *testing.F) {
	b := memCopy(f, "memwal_1")
	key := meta.ManifestKey(meta.NamingV2, 4)
	for v := uint64(1); v <= 4; v++ {
		seed(f, b, meta.ManifestKey(meta.NamingV2, v))
	}
	for _, name := range []string{"indexed", "compacted", "deletes_arrow"} {
		other := memCopy(f, name)
		vs, _, _ := meta.ListVersions(context.Background(), other)
		seed(f, other, meta.ManifestKey(meta.NamingV2, vs[len(vs)-1]))
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := b.Put(ctx, key, data); err != nil {
			t.Fatal(err)
		}
		rep, err := Run(ctx, b, Options{Deep: true})
		if err == nil && rep.OK() {
			mf, derr := meta.DecodeManifestFile(data)
			if derr != nil || mf.Manifest.GetVersion() != 4 {
				t.Fatalf("verify passed a manifest that does not decode as version 4: %v", derr)
			}
		}
		if mf, err := meta.DecodeManifestFile(data); err == nil {
			_, _ = inspect.FromManifest(ctx, b, mf)
		}
	})
}

// FuzzShardManifest puts arbitrary bytes where the newest shard manifest
// is; verify must report, never panic.
func FuzzShardManifest(f *testing.F) {
	b := memCopy(f, "memwal_1")
	ctx := context.Background()
	ids, err := memwal.ListShards(ctx, b)
	if err != nil || len(ids) != 1 {
		f.Fatalf("shards %v %v", ids, err)
	}
	st, err := memwal.ReadShard(ctx, b, ids[0])
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range st.ManifestVersions {
		seed(f, b, memwal.ShardManifestKey(ids[0], v))
	}
	key := memwal.ShardManifestKey(ids[0], st.Manifest.GetVersion())
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := b.Put(ctx, key, data); err != nil {
			t.Fatal(err)
		}
		if _, err := Run(ctx, b, Options{Deep: true}); err != nil {
			t.Fatalf("verify failed instead of reporting: %v", err)
		}
		_, _ = inspect.Build(ctx, b, 0)
	})
}
