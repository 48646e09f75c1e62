package cli

import (
	"context"
	"fmt"

	"github.com/compactord/compactord/internal/verify"
)

// lanceVerify runs `verify` on a Lance dataset. The report goes to stdout (one line per violation and
// warning, then a summary, or one JSON document with --json); any violation
// makes the command fail with one line naming the first, so scripts need
// only the exit code and operators see what to look at.
func lanceVerify(ctx context.Context, e *env, rawURL string, version uint64, deep, asJSON bool) (handled bool, err error) {
	b, ok, err := openLance(ctx, rawURL)
	if err != nil || !ok {
		return err != nil, err
	}
	defer b.Close()
	rep, err := verify.Run(ctx, b, verify.Options{Version: version, Deep: deep})
	if err != nil {
		return true, fmt.Errorf("verify %s: %w", rawURL, err)
	}
	if asJSON {
		if err := printJSON(e.stdout, rep); err != nil {
			return true, err
		}
	} else {
		for _, v := range rep.Violations {
			fmt.Fprintf(e.stdout, "violation: %s\n", v)
		}
		for _, w := range rep.Warnings {
			fmt.Fprintf(e.stdout, "warning: %s\n", w)
		}
		fmt.Fprintf(e.stdout, "checked %d versions, %d objects, %d live rows: %d violations, %d warnings\n",
			len(rep.Versions), rep.Objects, rep.Rows, len(rep.Violations), len(rep.Warnings))
	}
	switch n := len(rep.Violations); n {
	case 0:
		return true, nil
	case 1:
		return true, fmt.Errorf("1 invariant violation: %s", rep.Violations[0])
	default:
		return true, fmt.Errorf("%d invariant violations (first: %s)", n, rep.Violations[0])
	}
}
