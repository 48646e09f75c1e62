package daemon

import (
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewLogger builds the process logger: JSON lines by default, console on
// request, at a level that a reload can change through the returned
// AtomicLevel.
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
	core := zapcore.NewCore(enc, zapcore.AddSync(w), lvl)
	return zap.New(core, zap.ErrorOutput(zapcore.AddSync(w))), lvl, nil
}
