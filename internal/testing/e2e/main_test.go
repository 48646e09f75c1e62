package e2e

import (
	"testing"

	"github.com/compactord/compactord/internal/testing/stores"
)

func TestMain(m *testing.M) { stores.Main(m) }
