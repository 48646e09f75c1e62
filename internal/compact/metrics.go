package compact

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics of the compaction job.
type Metrics struct {
	bytesRead       prometheus.Counter
	bytesWritten    prometheus.Counter
	fragmentsIn     prometheus.Counter
	fragmentsOut    prometheus.Counter
	rowGroupsCopied prometheus.Counter
	rowsRewritten   prometheus.Counter
}

// NewMetrics registers the compaction metrics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		bytesRead:       f.NewCounter(prometheus.CounterOpts{Name: "compactord_compact_bytes_read_total", Help: "Data-file bytes read by compactions."}),
		bytesWritten:    f.NewCounter(prometheus.CounterOpts{Name: "compactord_compact_bytes_written_total", Help: "Data-file bytes written by compactions (committed or not)."}),
		fragmentsIn:     f.NewCounter(prometheus.CounterOpts{Name: "compactord_compact_fragments_in_total", Help: "Fragments rewritten away by committed compactions."}),
		fragmentsOut:    f.NewCounter(prometheus.CounterOpts{Name: "compactord_compact_fragments_out_total", Help: "Fragments written by committed compactions."}),
		rowGroupsCopied: f.NewCounter(prometheus.CounterOpts{Name: "compactord_compact_row_groups_copied_total", Help: "Parquet row groups copied without decoding (fragments with no deletions)."}),
		rowsRewritten:   f.NewCounter(prometheus.CounterOpts{Name: "compactord_compact_rows_rewritten_total", Help: "Rows decoded and re-encoded to drop deleted rows."}),
	}
}
