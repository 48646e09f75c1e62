// Package inflight publishes the jobs running on a table, so that cleanup
// never deletes the files a job has written but not yet committed.
//
// Each job writes `_inflight/{uuid}.json` when it starts, holding its start
// time, its read version and an expiry, and deletes it when it ends. Cleanup
// takes the low watermark of the live markers: no unreferenced file younger
// than the oldest in-flight job is deleted (Lance #3718, #6607; SlateDB #604),
// and no version at or after the oldest read version is removed, because the
// commit loop reads those versions' transactions to classify conflicts.
// A marker past its expiry belongs to a crashed job and is ignored, so one
// crash cannot block cleanup forever.
package inflight

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/compactord/compactord/internal/storage"
)

// Dir holds the markers.
const Dir = "_inflight/"

// Marker is one running job.
type Marker struct {
	Job         string    `json:"job"`
	Started     time.Time `json:"started"`
	Expires     time.Time `json:"expires"`
	ReadVersion uint64    `json:"read_version"`
}

// Register publishes a marker and returns a function that removes it. ttl
// bounds the job's life; a job that may outlive it must not rely on the
// marker.
func Register(ctx context.Context, b storage.Bucket, job string, readVersion uint64, now time.Time, ttl time.Duration) (func(), error) {
	key := Dir + uuid.NewString() + ".json"
	data, err := json.Marshal(Marker{Job: job, Started: now.UTC(), Expires: now.Add(ttl).UTC(), ReadVersion: readVersion})
	if err != nil {
		return nil, err
	}
	if err := b.Put(ctx, key, data); err != nil {
		return nil, fmt.Errorf("publish in-flight marker: %w", err)
	}
	return func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = b.Delete(dctx, key)
	}, nil
}

// Watermark is the low watermark of the live markers.
type Watermark struct {
	// Oldest start time; zero when no job is in flight.
	Started time.Time
	// Lowest read version; 0 when no job is in flight.
	ReadVersion uint64
	Live        int
}

// Load reads the live markers. An unreadable marker is treated as live
// since the epoch: failing safe means deleting nothing young.
func Load(ctx context.Context, b storage.Bucket, now time.Time) (Watermark, error) {
	var w Watermark
	var keys []string
	if err := b.List(ctx, Dir, func(a storage.Attrs) error {
		if strings.HasSuffix(a.Key, ".json") {
			keys = append(keys, a.Key)
		}
		return nil
	}); err != nil {
		return w, fmt.Errorf("list in-flight markers: %w", err)
	}
	for _, k := range keys {
		data, err := b.Get(ctx, k)
		if errors.Is(err, storage.ErrNotFound) {
			continue // finished meanwhile
		}
		if err != nil {
			return w, fmt.Errorf("read in-flight marker %s: %w", k, err)
		}
		var m Marker
		if err := json.Unmarshal(data, &m); err != nil || m.Started.IsZero() {
			m = Marker{Started: time.Unix(0, 0), Expires: now.Add(time.Hour), ReadVersion: 1}
		}
		if now.After(m.Expires) {
			continue
		}
		w.Live++
		if w.Started.IsZero() || m.Started.Before(w.Started) {
			w.Started = m.Started
		}
		if m.ReadVersion > 0 && (w.ReadVersion == 0 || m.ReadVersion < w.ReadVersion) {
			w.ReadVersion = m.ReadVersion
		}
	}
	return w, nil
}
