package daemon

import (
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewLogger builds the process logger: JSON lines by default, console on
// request, at a level that a reload can change through the returned
// AtomicLevel. Loggers that share a writer must share one that is safe
// for concurrent writes (zapcore.Lock).
func NewLogger(c LogConfig, w io.Writer) (*zap.Logger, zap.AtomicLevel, error) {
	lvl, err := zap.ParseAtomicLevel(c.Level)
	if err != nil {
		return nil, lvl, err
	}
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = "ts"
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	if c.Format == "console" {
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	} else {
		enc = zapcore.NewJSONEncoder(ec)
	}
	// Locked: jobs log from many goroutines at once, and w need not be
	// safe for concurrent writes.
	ws := zapcore.Lock(zapcore.AddSync(w))
	core := zapcore.NewCore(enc, ws, lvl)
	return zap.New(core, zap.ErrorOutput(ws)), lvl, nil
}
