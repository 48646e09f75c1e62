package meta

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/compactord/compactord/internal/storage"
)

type hint struct {
	Version uint64 `json:"version"`
}

// EncodeHint is the content of latest_version_hint.json.
func EncodeHint(v uint64) []byte {
	b, _ := json.Marshal(hint{Version: v})
	return b
}

// DecodeHint parses a version hint ({"version":N}).
func DecodeHint(data []byte) (uint64, error) {
	var h hint
	if err := json.Unmarshal(data, &h); err != nil {
		return 0, fmt.Errorf("version hint: %w", err)
	}
	return h.Version, nil
}

// WriteHint writes the table's latest-version hint. Lance writes it after the
// manifest, as a hint only: nothing may depend on it being current, and a
// failure to write it does not undo the commit.
func WriteHint(ctx context.Context, b storage.Bucket, v uint64) error {
	return b.Put(ctx, HintKey, EncodeHint(v))
}
