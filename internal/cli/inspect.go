package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/spf13/cobra"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// The inspect document. Field names are a contract: tools parse them.
type inspectDoc struct {
	Version       uint64            `json:"version"`
	ReadVersion   uint64            `json:"read_version"`
	Operation     string            `json:"operation"`
	Timestamp     string            `json:"timestamp"`
	Schema        []inspectField    `json:"schema"`
	PrimaryKey    []string          `json:"primary_key"`
	Fragments     []inspectFragment `json:"fragments"`
	MaxFragmentID *uint32           `json:"max_fragment_id"`
	Indices       []inspectIndex    `json:"indices"`
	MemWal        inspectMemWal     `json:"mem_wal"`
	FragReuse     inspectFragReuse  `json:"frag_reuse"`
}

type inspectField struct {
	ID       int32  `json:"id"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

type inspectFragment struct {
	ID           uint32   `json:"id"`
	PhysicalRows uint64   `json:"physical_rows"`
	DeletedRows  uint64   `json:"deleted_rows"`
	Files        []string `json:"files"`
}

type inspectIndex struct {
	Name           string   `json:"name"`
	UUID           string   `json:"uuid"`
	Type           string   `json:"type"`
	DatasetVersion uint64   `json:"dataset_version"`
	FragmentBitmap []uint32 `json:"fragment_bitmap"` // null = unknown
}

type inspectShard struct {
	ID                string           `json:"id"`
	CompactedSSTables uint64           `json:"compacted_sstables"`
	CurrentGeneration uint64           `json:"current_generation"`
	SSTables          []inspectSSTable `json:"sstables"`
}

type inspectSSTable struct {
	Generation uint64 `json:"generation"`
	Path       string `json:"path"`
}

type inspectMemWal struct {
	Shards            []inspectShard               `json:"shards"`
	MaintainedIndexes []string                     `json:"maintained_indexes"`
	IndexCatchup      map[string]map[string]uint64 `json:"index_catchup"`
}

type inspectGroup struct {
	Old []uint32 `json:"old"`
	New []uint32 `json:"new"`
}

type inspectFRIVersion struct {
	DatasetVersion   uint64         `json:"dataset_version"`
	ReadVersion      uint64         `json:"read_version"`
	Groups           []inspectGroup `json:"groups"`
	RemovedFragments []uint32       `json:"removed_fragments"`
}

type inspectFragReuse struct {
	Versions []inspectFRIVersion `json:"versions"`
}

// ShardManifestReader lets inspect show shard state; the MemWAL package
// installs it so cli does not depend on the shard-manifest layout here.
var ShardManifestReader func(ctx context.Context, b storage.Bucket, shard string) (*pb.ShardManifest, error)

func newInspectCmd(e *env) *cobra.Command {
	var version uint64
	cmd := &cobra.Command{
		Use:   "inspect URL [--version V]",
		Short: "Print one version's metadata as one JSON document",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if handled, err := lanceInspect(cmd.Context(), e, args[0], version); handled {
				return err
			}
			t, done, err := openTable(cmd.Context(), e, args[0])
			if err != nil {
				return err
			}
			defer done()
			doc, err := Inspect(cmd.Context(), t.Bucket, version)
			if err != nil {
				return err
			}
			return printJSON(e.stdout, doc)
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "version (default latest)")
	return cmd
}

func decode32(b []byte) ([]uint32, error) {
	bm := roaring.New()
	if len(b) > 0 {
		if err := bm.UnmarshalBinary(b); err != nil {
			return nil, err
		}
	}
	out := bm.ToArray()
	if out == nil {
		out = []uint32{}
	}
	return out, nil
}

// Inspect builds the inspect document of version v (0 = latest).
func Inspect(ctx context.Context, b storage.Bucket, v uint64) (any, error) {
	var m *pb.Manifest
	var err error
	if v == 0 {
		m, err = table.ReadLatest(ctx, b)
	} else {
		m, err = table.ReadManifest(ctx, b, v)
	}
	if err != nil {
		return nil, err
	}
	doc := inspectDoc{
		Version: m.Version, ReadVersion: m.ReadVersion, MaxFragmentID: m.MaxFragmentId,
		Fragments: []inspectFragment{}, Indices: []inspectIndex{}, Schema: []inspectField{}, PrimaryKey: []string{},
		MemWal:    inspectMemWal{Shards: []inspectShard{}, MaintainedIndexes: []string{}, IndexCatchup: map[string]map[string]uint64{}},
		FragReuse: inspectFragReuse{Versions: []inspectFRIVersion{}},
		Timestamp: time.UnixMicro(m.TimestampMicros).UTC().Format(time.RFC3339Nano),
	}
	if m.Transaction != nil {
		doc.Operation = commitOpName(m.Transaction)
	} else if txn, err := table.ReadTransaction(ctx, b, m.TransactionPath); err == nil {
		doc.Operation = commitOpName(txn)
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	} else {
		doc.Operation = "unknown (transaction file missing)"
	}
	for _, f := range m.Schema.GetFields() {
		doc.Schema = append(doc.Schema, inspectField{ID: f.Id, Name: f.Name, Type: table.TypeName(f.Type), Nullable: f.Nullable})
	}
	for _, id := range m.Schema.GetPrimaryKey() {
		if i := table.FieldIndex(m.Schema, id); i >= 0 {
			doc.PrimaryKey = append(doc.PrimaryKey, m.Schema.Fields[i].Name)
		}
	}
	for _, f := range m.Fragments {
		files := []string{f.GetDataFile().GetPath()}
		var del uint64
		if f.DeletionFile != nil {
			files = append(files, f.DeletionFile.Path)
			del = f.DeletionFile.NumDeleted
		}
		doc.Fragments = append(doc.Fragments, inspectFragment{ID: f.Id, PhysicalRows: f.PhysicalRows, DeletedRows: del, Files: files})
	}
	for _, ix := range m.Indices {
		ii := inspectIndex{Name: ix.Name, UUID: ix.Uuid, Type: ix.Type, DatasetVersion: ix.DatasetVersion}
		if ix.FragmentBitmap != nil {
			if ii.FragmentBitmap, err = decode32(ix.FragmentBitmap); err != nil {
				return nil, fmt.Errorf("index %s: %w: fragment bitmap: %v", ix.Name, table.ErrCorrupt, err)
			}
		}
		doc.Indices = append(doc.Indices, ii)
	}
	if d := table.MemWal(m); d != nil {
		doc.MemWal.MaintainedIndexes = append(doc.MemWal.MaintainedIndexes, d.MaintainedIndexes...)
		for _, s := range d.Shards {
			sh := inspectShard{ID: s, CompactedSSTables: d.CompactedSstables[s], SSTables: []inspectSSTable{}}
			if ShardManifestReader != nil {
				sm, err := ShardManifestReader(ctx, b, s)
				if err != nil && !errors.Is(err, storage.ErrNotFound) {
					return nil, err
				}
				if sm != nil {
					sh.CurrentGeneration = sm.CurrentGeneration
					for _, st := range sm.Sstables {
						sh.SSTables = append(sh.SSTables, inspectSSTable{Generation: st.Generation, Path: st.Path})
					}
				}
			}
			doc.MemWal.Shards = append(doc.MemWal.Shards, sh)
		}
		for name, sg := range d.IndexCatchup {
			doc.MemWal.IndexCatchup[name] = map[string]uint64{}
			for s, g := range sg.Generations {
				doc.MemWal.IndexCatchup[name][s] = g
			}
		}
	}
	if d := table.FragReuse(m); d != nil {
		for _, fv := range d.Versions {
			iv := inspectFRIVersion{DatasetVersion: fv.DatasetVersion, ReadVersion: fv.ReadVersion, Groups: []inspectGroup{}}
			if iv.RemovedFragments, err = decode32(fv.RemovedFragments); err != nil {
				return nil, fmt.Errorf("frag_reuse: %w: removed_fragments: %v", table.ErrCorrupt, err)
			}
			for _, g := range fv.Groups {
				ig := inspectGroup{Old: []uint32{}, New: []uint32{}}
				for _, o := range g.OldFragments {
					ig.Old = append(ig.Old, o.Id)
				}
				for _, n := range g.NewFragments {
					ig.New = append(ig.New, n.Id)
				}
				if len(g.SurvivingAddresses) > 0 {
					if err := roaring64.New().UnmarshalBinary(g.SurvivingAddresses); err != nil {
						return nil, fmt.Errorf("frag_reuse: %w: surviving addresses: %v", table.ErrCorrupt, err)
					}
				}
				iv.Groups = append(iv.Groups, ig)
			}
			doc.FragReuse.Versions = append(doc.FragReuse.Versions, iv)
		}
	}
	sort.Slice(doc.MemWal.Shards, func(i, j int) bool { return doc.MemWal.Shards[i].ID < doc.MemWal.Shards[j].ID })
	return doc, nil
}
