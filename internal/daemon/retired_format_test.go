package daemon_test

import (
	"context"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// A table of compactord's retired private format (manifests framed with
// "CMPD") is refused when the daemon opens it: its sync error says so in
// one line, no job runs on it and nothing under it changes, while a Lance
// table next to it is maintained.
func TestRetiredFormatTableRefused(t *testing.T) {
	ctx := context.Background()
	root := memRoot(t)
	createTable(t, root+"/lance")
	b, err := storage.Open(ctx, root+"/old")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	key := meta.ManifestKey(meta.NamingV2, 1)
	if err := b.Put(ctx, key, []byte("CMPD\x01framed-protobuf-and-crc")); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: root + "/old"}, {URL: root + "/lance"}}
	r := run(t, cfg, daemon.Deps{})
	s := r.d.Scheduler()
	eventually(t, "the Lance table synced", func() bool { st, _ := s.Table("lance"); return st.Synced })
	eventually(t, "the old table's sync error", func() bool { st, _ := s.Table("old"); return st.SyncError != "" })
	st, _ := s.Table("old")
	if !strings.Contains(st.SyncError, "retired private format") || strings.Contains(st.SyncError, "\n") || st.Synced {
		t.Fatalf("old table: synced %v, sync error %q", st.Synced, st.SyncError)
	}
	if lr := st.Jobs["compact"].LastRun; lr != nil {
		t.Fatalf("a job ran on the refused table: %+v", lr)
	}
	var keys []string
	if err := b.List(ctx, "", func(a storage.Attrs) error { keys = append(keys, a.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != key {
		t.Fatalf("the old table's objects changed: %v", keys)
	}
}
