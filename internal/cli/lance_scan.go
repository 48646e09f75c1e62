package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/compactord/compactord/internal/lance/scan"
)

// lanceTableScan runs `table scan` on a Lance dataset: one JSON object per
// live row (see scan.AppendValue for the value conventions). handled is
// false when rawURL is not one; --columns is refused on the private format.
func lanceTableScan(ctx context.Context, e *env, rawURL string, version uint64, columns string) (handled bool, err error) {
	b, ok, err := openLance(ctx, rawURL)
	if err != nil {
		return true, err
	}
	if !ok {
		if columns != "" {
			return true, fmt.Errorf("table scan: --columns is only supported on Lance tables")
		}
		return false, nil
	}
	defer b.Close()
	o := scan.Options{Version: version}
	if columns != "" {
		for _, c := range strings.Split(columns, ",") {
			if c = strings.TrimSpace(c); c == "" {
				return true, fmt.Errorf("table scan: --columns %q has an empty name", columns)
			}
			o.Columns = append(o.Columns, strings.TrimSpace(c))
		}
	}
	t, err := scan.Open(ctx, b, o)
	if err != nil {
		return true, fmt.Errorf("table scan %s: %w", rawURL, err)
	}
	if _, err := t.Write(ctx, e.stdout); err != nil {
		return true, fmt.Errorf("table scan %s: version %d: %w", rawURL, t.Version(), err)
	}
	return true, nil
}
