package cli

import (
	"encoding/json"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
)

func jsonNumber(s string) json.Number { return json.Number(s) }

func commitOpName(t *pb.Transaction) string { return commit.OpName(t) }
