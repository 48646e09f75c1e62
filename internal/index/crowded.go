package index

import (
	"context"
	"fmt"
	"slices"

	"github.com/compactord/compactord/internal/index/fts"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// Crowded is an index whose pieces (segments; for a full-text index, the
// partitions of all its segments) outnumber a threshold: each piece is
// files every query opens, and LanceDB's optimize() adds one per call.
type Crowded struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Pieces int    `json:"pieces"`
}

// CrowdedIndexes lists the indexes of read (those named in names, or
// all when names is empty) with more than over pieces that Rebuild can
// replace by one, in name order; a crowded index Rebuild would refuse is
// a Skip with the reason. over <= 0 lists none.
func CrowdedIndexes(ctx context.Context, b storage.Bucket, read *meta.ManifestFile, names []string, over int) ([]Crowded, []Skip, error) {
	if over <= 0 {
		return nil, nil, nil
	}
	var all []string
	for _, ix := range read.Indices {
		if n := ix.GetName(); !meta.IsSystemIndex(ix) && !slices.Contains(all, n) && (len(names) == 0 || slices.Contains(names, n)) {
			all = append(all, n)
		}
	}
	slices.Sort(all)
	var out []Crowded
	var skipped []Skip
	for _, name := range all {
		segs := meta.FindIndex(read.Indices, name)
		kind := meta.IndexKind(segs[0])
		pieces := len(segs)
		var params *fts.Params
		if kind == KindInverted {
			pieces = 0
			for _, s := range segs {
				m, err := fts.ReadMetadata(invertedOpener(ctx, b, s))
				if err != nil {
					if ctx.Err() != nil {
						return nil, nil, ctx.Err()
					}
					skipped = append(skipped, Skip{name, err.Error()})
					pieces = -1
					break
				}
				pieces += len(m.Partitions)
				params = &m.Params
			}
		}
		if pieces <= over {
			continue
		}
		if _, _, _, err := RebuildJob(read, name); err != nil {
			skipped = append(skipped, Skip{name, err.Error()})
			continue
		}
		if params != nil {
			if _, err := fts.NewTokenizer(*params); err != nil {
				skipped = append(skipped, Skip{name, fmt.Sprintf("%d partitions, not rebuilt: %v", pieces, err)})
				continue
			}
		}
		out = append(out, Crowded{Name: name, Kind: kind, Pieces: pieces})
	}
	return out, skipped, nil
}
