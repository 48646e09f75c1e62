package meta

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/jobclass"
)

// TestCheckMaintain: a newer Lance's writer flag (1024, the fragment-reuse
// index) leaves the table readable but stops trim and cleanup, in an
// error that names the flag and quarantines the daemon's table as
// unsupported_feature rather than failing.
func TestCheckMaintain(t *testing.T) {
	for _, bit := range []uint64{FlagFragReuseStableRowIDs, FlagFragmentReuseIndex, FlagManagedBlobs, 1 << 40} {
		m := &pb.Manifest{WriterFeatureFlags: FlagDeletionFiles | bit}
		if err := CheckRead(m); err != nil {
			t.Errorf("flag %d: read refused: %v", bit, err)
		}
		err := CheckMaintain(m)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("flag %d", bit)) {
			t.Fatalf("flag %d: CheckMaintain = %v, want a refusal naming it", bit, err)
		}
		if !errors.Is(err, ErrUnsupportedFeature) {
			t.Errorf("flag %d: not ErrUnsupportedFeature", bit)
		}
		if c, r, _, _ := jobclass.Of(fmt.Errorf("trim: %w", err)); c != jobclass.Error || r != jobclass.ReasonUnsupported {
			t.Errorf("flag %d: class %q reason %q, want error/unsupported_feature", bit, c, r)
		}
	}
	if err := CheckMaintain(&pb.Manifest{WriterFeatureFlags: WritableFlags, ReaderFeatureFlags: FlagDeletionFiles}); err != nil {
		t.Errorf("implemented flags refused: %v", err)
	}
}
