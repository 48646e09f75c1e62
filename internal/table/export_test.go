package table

import "context"

// SetBeforeDeleteCommit runs fn between each plan of DeleteWhere and its
// commit.
func SetBeforeDeleteCommit(h *Handle, fn func(context.Context) error) { h.beforeDeleteCommit = fn }
