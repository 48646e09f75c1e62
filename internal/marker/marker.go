// Package marker keeps an operator's marks on a table in the table's own
// bucket, as Thanos keeps no-compact-mark.json next to a block: a mark
// written by any instance, or by `compactord table pause|mark`, is honoured
// by every instance that watches the table, and survives restarts and
// failover. Marks live under `_markers/`, one JSON object per kind; no job
// reads or deletes them.
package marker

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/compactord/compactord/internal/storage"
)

// Dir holds the marks, under the table root.
const Dir = "_markers/"

// Kind is what a mark asks for.
type Kind string

// Kinds of marks.
const (
	// Pause: no job of any kind runs on the table.
	Pause Kind = "pause"
	// NoCompact: compaction skips the table; the other kinds run.
	NoCompact Kind = "no-compact"
)

// Kinds lists every kind.
var Kinds = []Kind{Pause, NoCompact}

// ParseKind checks a kind name.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown mark %q (want pause or no-compact)", s)
}

// Mark is one mark.
type Mark struct {
	Kind   Kind      `json:"kind"`
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
	Since  time.Time `json:"since"`
}

// Key is the object holding the mark of kind k.
func Key(k Kind) string { return Dir + string(k) + ".json" }

// Put writes (or replaces) a mark.
func Put(ctx context.Context, b storage.Bucket, m Mark) error {
	if _, err := ParseKind(string(m.Kind)); err != nil {
		return err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := b.Put(ctx, Key(m.Kind), data); err != nil {
		return fmt.Errorf("write the %s mark: %w", m.Kind, err)
	}
	return nil
}

// Delete removes the mark of kind k; a missing mark is not an error.
func Delete(ctx context.Context, b storage.Bucket, k Kind) error {
	if err := b.Delete(ctx, Key(k)); err != nil && !storage.IsNotFound(err) {
		return fmt.Errorf("remove the %s mark: %w", k, err)
	}
	return nil
}

// Load reads every mark of the table: one listing, plus one read per mark
// present (usually none). Objects under Dir that are not marks are ignored;
// a mark that does not decode still counts, with the reason saying so, so
// that a damaged pause mark pauses rather than lets jobs run.
func Load(ctx context.Context, b storage.Bucket) (map[Kind]Mark, error) {
	var keys []storage.Attrs
	if err := b.List(ctx, Dir, func(a storage.Attrs) error {
		keys = append(keys, a)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list %s: %w", Dir, err)
	}
	out := map[Kind]Mark{}
	for _, a := range keys {
		name, ok := strings.CutSuffix(strings.TrimPrefix(a.Key, Dir), ".json")
		if !ok {
			continue
		}
		k, err := ParseKind(name)
		if err != nil {
			continue
		}
		data, err := b.Get(ctx, a.Key)
		if storage.IsNotFound(err) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", a.Key, err)
		}
		m := Mark{Kind: k, Since: a.ModTime}
		if err := json.Unmarshal(data, &m); err != nil || m.Kind != k {
			m = Mark{Kind: k, Since: a.ModTime, Reason: fmt.Sprintf("the mark object %s does not decode", a.Key)}
		}
		out[k] = m
	}
	return out, nil
}

// Sorted returns the marks in Kinds order.
func Sorted(ms map[Kind]Mark) []Mark {
	out := make([]Mark, 0, len(ms))
	for _, m := range ms {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}
