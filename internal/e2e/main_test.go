package e2e

import (
	"testing"

	"github.com/compactord/compactord/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }
