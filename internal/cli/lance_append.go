package cli

import (
	"context"
	"fmt"
	"io"
)

// lanceTableAppend runs `table append --jsonl` on a Lance dataset.
func lanceTableAppend(ctx context.Context, e *env, rawURL, jsonl string, generated bool) (handled bool, err error) {
	h, ok, done, err := openLanceHandle(ctx, e, rawURL)
	if err != nil || !ok {
		return err != nil, err
	}
	defer done()
	if generated {
		return true, fmt.Errorf("table append on a Lance table takes --jsonl; --rows is for the private format")
	}
	var in io.ReadCloser
	if in, err = readInput(e, jsonl); err != nil {
		return true, err
	}
	defer in.Close()
	res, rows, err := h.AppendJSON(ctx, in)
	if err != nil {
		return true, fmt.Errorf("table append %s: %w", rawURL, err)
	}
	return true, printCommit(e, res, map[string]any{"rows": rows})
}
