package lancewal

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/arrowipc"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// ErrFenced: another writer claimed the shard (a newer epoch). The writer
// is unusable; its unflushed rows are in the WAL, where the new owner
// replays them.
var ErrFenced = errors.New("lancewal: the shard was claimed by a newer writer (fenced)")

// ErrClosed: the writer was closed.
var ErrClosed = errors.New("lancewal: writer closed")

// Row is one row: column name to value. Values are Go ints, uints,
// floats, bools, strings, []byte, time.Time (timestamp columns) or nil
// (null). A column missing from the row is null.
type Row map[string]any

// WriterOptions tune a Writer.
type WriterOptions struct {
	// MaxRows and MaxBytes flush the MemTable into a generation once it
	// holds this many rows or about this many bytes of column data (0: no
	// limit; Flush and Close always flush). That flush runs in the
	// background: the write that fills the MemTable freezes it and
	// returns, and later writes go to a new MemTable. A background flush
	// that fails leaves its rows buffered; the next Flush, Close, full
	// MemTable or write past MaxUnflushedBytes retries it.
	MaxRows  int
	MaxBytes int
	// MaxUnflushedBytes bounds the column data buffered in memory while
	// frozen MemTables wait for their flush (0: 1 GiB, LanceDB's
	// max_unflushed_memtable_bytes default): past it a write waits for a
	// flush to finish before it appends its WAL entry, or fails, with
	// nothing written, if that flush fails.
	MaxUnflushedBytes int
}

// defaultMaxUnflushedBytes is LanceDB's default unflushed-MemTable bound.
const defaultMaxUnflushedBytes = 1 << 30

// Writer owns one MemWAL shard of a table: every Upsert and Delete is one
// WAL entry (durable when the call returns), buffered in a MemTable that
// Flush turns into a generation. Only one writer owns a shard at a time;
// claiming fences the previous owner, in this process or any other
// (LanceDB's included), and a fenced writer fails with ErrFenced.
// A Writer is safe for concurrent use.
type Writer struct {
	t     *Table
	opts  WriterOptions
	shard string
	cfg   *Config

	// flushMu serialises flushes, so generations publish in freeze order.
	// REQUIRES: never taken while holding mu.
	flushMu sync.Mutex

	// mu guards what follows. A write holds it for its WAL append; a flush
	// only to freeze the MemTable and to publish a generation, never while
	// it builds one.
	mu          sync.Mutex
	st          *state
	manifest    *pb.ShardManifest // the newest manifest this writer wrote (changes under flushMu too)
	nextWAL     uint64
	mem         *memtable     // the active MemTable, which takes the writes
	frozen      []*frozenMem  // oldest first, each its own generation to be
	frozenBytes int           // the column data of frozen
	closing     bool          // Close has begun: writes are refused
	closeDone   chan struct{} // closed when the Close that began closing returns
	closeErr    error         // that Close's result, set before closeDone is closed
	bgRunning   bool          // a background flush goroutine runs
	bgErr       error         // the failure that stopped the last background flush
	changed     chan struct{} // closed and replaced when a flush publishes or stops
	err         error         // sticky: ErrFenced or ErrClosed

	bg       sync.WaitGroup // the background flush goroutine
	bgCtx    context.Context
	bgCancel context.CancelFunc
}

// OpenWriter claims shard (a shard id from ShardFor or Config.Shards):
// it writes the shard's next manifest version with the next writer epoch
// (put-if-absent: of two claims one wins), puts a fence sentinel at the
// next WAL position so that the previous owner's next append collides,
// and replays the WAL entries no generation covers yet into the MemTable.
func (t *Table) OpenWriter(ctx context.Context, shard string, opts WriterOptions) (*Writer, error) {
	if opts.MaxRows < 0 || opts.MaxBytes < 0 {
		return nil, fmt.Errorf("lancewal: max rows %d and max bytes %d must not be negative", opts.MaxRows, opts.MaxBytes)
	}
	st, err := t.state(ctx)
	if err != nil {
		return nil, err
	}
	if st.details == nil {
		return nil, errors.New("lancewal: the table has no MemWAL configuration (EnableMemWAL or LanceDB setLsmWriteSpec)")
	}
	if err := st.writable(); err != nil {
		return nil, err
	}
	cfg, err := configOf(st)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(cfg.Shards(), shard) {
		return nil, fmt.Errorf("lancewal: shard %q is not a shard of the table's MemWAL configuration (%s)", shard, strings.Join(cfg.Shards(), ", "))
	}
	if opts.MaxUnflushedBytes < 0 {
		return nil, fmt.Errorf("lancewal: max unflushed bytes %d must not be negative", opts.MaxUnflushedBytes)
	}
	if opts.MaxUnflushedBytes == 0 {
		opts.MaxUnflushedBytes = defaultMaxUnflushedBytes
	}
	w := &Writer{t: t, opts: opts, shard: shard, cfg: cfg, st: st, changed: make(chan struct{})}
	if err := w.claim(ctx); err != nil {
		return nil, err
	}
	// Background flushes outlive the call that triggered them, not the
	// writer: Abandon cancels them.
	w.bgCtx, w.bgCancel = context.WithCancel(context.WithoutCancel(ctx))
	return w, nil
}

// Shard is the writer's shard id.
func (w *Writer) Shard() string { return w.shard }

// Epoch is the writer epoch this writer claimed.
func (w *Writer) Epoch() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.manifest.GetWriterEpoch()
}

// Buffered is the number of rows written and not yet flushed: in the
// MemTable and in frozen MemTables waiting for (or being written by) a
// flush.
func (w *Writer) Buffered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.mem.rows
	for _, f := range w.frozen {
		n += f.mem.rows
	}
	return n
}

const maxClaimAttempts = 8

func (w *Writer) claim(ctx context.Context) error {
	b := w.t.b
	sid, err := meta.ParseUUID(w.shard)
	if err != nil {
		return fmt.Errorf("lancewal: shard id: %w", err)
	}
	for attempt := 0; ; attempt++ {
		ss, err := memwal.ReadShard(ctx, b, w.shard)
		if err != nil {
			return fmt.Errorf("lancewal: %w", err)
		}
		prev := ss.Manifest
		var m *pb.ShardManifest
		if prev == nil {
			m = &pb.ShardManifest{Version: 1, WriterEpoch: 1, CurrentGeneration: 1, ShardSpecId: 1, ShardId: sid}
		} else {
			if got := meta.UUIDString(prev.GetShardId()); got != w.shard {
				return fmt.Errorf("lancewal: shard directory %s holds a manifest of shard %s", w.shard, got)
			}
			m = proto.Clone(prev).(*pb.ShardManifest)
			m.Version++
			m.WriterEpoch++
		}
		if err := w.putManifest(ctx, m); err != nil {
			if storage.IsAlreadyExists(err) && attempt < maxClaimAttempts {
				continue // another writer claimed or flushed meanwhile: read again
			}
			return fmt.Errorf("lancewal: claim shard %s: %w", w.shard, err)
		}
		w.manifest = m
		break
	}
	// The position after every WAL entry present: where the previous owner
	// would append next.
	positions, err := memwal.ListWAL(ctx, b, w.shard)
	if err != nil {
		return fmt.Errorf("lancewal: %w", err)
	}
	// Never below the replay position: an entry there would be skipped by
	// every replay (the position hint may lag, and trim deletes the
	// covered entries).
	last := max(w.manifest.GetWalEntryPositionLastSeen(), w.manifest.GetReplayAfterWalEntryPosition())
	if n := len(positions); n > 0 && positions[n-1] > last {
		last = positions[n-1]
	}
	w.mem = newMemtable(w.st)
	if w.manifest.GetVersion() > 1 {
		// INVARIANT: the sentinel sits at the previous owner's next
		// position; a put there loses and tells it it was fenced.
		pos := last + 1
		for {
			out, err := storage.PutNext(ctx, b, memwal.WALKey(w.shard, pos), fenceSentinel(w.manifest.GetWriterEpoch()), storage.ReadBack{Taken: true})
			if out == storage.PutLanded {
				break
			}
			if out != storage.PutLost {
				return fmt.Errorf("lancewal: fence shard %s: %w", w.shard, err)
			}
			pos++ // the previous owner appended meanwhile: fence after it
		}
		// Replay what no generation covers: the previous owner's
		// unflushed entries, which this writer's next flush covers.
		for p := w.manifest.GetReplayAfterWalEntryPosition() + 1; p < pos; p++ {
			if err := w.replay(ctx, p); err != nil {
				return err
			}
		}
		w.nextWAL = pos + 1
		m := proto.Clone(w.manifest).(*pb.ShardManifest)
		m.Version++
		m.WalEntryPositionLastSeen = pos
		if err := w.putManifest(ctx, m); err != nil {
			return w.fail(ctx, fmt.Errorf("record the fence position: %w", err))
		}
		w.manifest = m
	} else {
		w.nextWAL = last + 1
	}
	return nil
}

// fenceSentinel is a WAL entry with no columns and no batches whose schema
// metadata says it fences writers below its epoch, as LanceDB writes one.
func fenceSentinel(epoch uint64) []byte {
	s := &arrowipc.Schema{Metadata: arrowipc.Metadata{{Key: "fence_sentinel", Value: "true"}, {Key: "writer_epoch", Value: strconv.FormatUint(epoch, 10)}}}
	data, _ := arrowipc.WriteStream(s, nil, arrowipc.None)
	return data
}

// putManifest writes shard manifest m at its version (put-if-absent), then
// the shard's version hint (a hint only: its failure is ignored).
func (w *Writer) putManifest(ctx context.Context, m *pb.ShardManifest) error {
	data, err := memwal.EncodeShardManifest(m)
	if err != nil {
		return err
	}
	// An outcome we do not know (a timeout, or a retried put that found
	// its own first attempt) is ours if the key holds our bytes: otherwise
	// the writer would take its own manifest for a rival's.
	key := memwal.ShardManifestKey(w.shard, m.GetVersion())
	if _, err := storage.PutNext(ctx, w.t.b, key, data, storage.ReadBack{Taken: true}); err != nil {
		return err
	}
	_ = w.t.b.Put(ctx, memwal.ShardHintKey(w.shard), meta.EncodeHint(m.GetVersion()))
	return nil
}

// fail classifies a lost put: a newer epoch in the shard's newest manifest
// means this writer was fenced, and it stays unusable.
func (w *Writer) fail(ctx context.Context, cause error) error {
	ss, err := memwal.ReadShard(ctx, w.t.b, w.shard)
	if err == nil && ss.Manifest != nil && ss.Manifest.GetWriterEpoch() > w.manifest.GetWriterEpoch() {
		w.err = ErrFenced
		return fmt.Errorf("%w: epoch %d took over from %d (%v)", ErrFenced, ss.Manifest.GetWriterEpoch(), w.manifest.GetWriterEpoch(), cause)
	}
	return fmt.Errorf("lancewal: shard %s: %w", w.shard, cause)
}

// REQUIRES: w.mu held.
func (w *Writer) usable() error {
	if w.err != nil {
		return w.err
	}
	if w.closing {
		return ErrClosed
	}
	return nil
}

// Upsert writes rows (each with its primary key) as one WAL entry and adds
// them to the MemTable. A later write of a key wins over an earlier one.
func (w *Writer) Upsert(ctx context.Context, rows []Row) error {
	return w.write(ctx, rows, false)
}

// Delete writes tombstones for keys as one WAL entry: the read view hides
// the keys, and a merge deletes them from the base table.
func (w *Writer) Delete(ctx context.Context, keys []any) error {
	rows := make([]Row, len(keys))
	pk := w.st.cols[w.st.pk].field.GetName()
	for i, k := range keys {
		rows[i] = Row{pk: k}
	}
	return w.write(ctx, rows, true)
}

func (w *Writer) write(ctx context.Context, rows []Row, tombstone bool) error {
	if len(rows) == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	b, err := w.mem.build(rows, tombstone)
	if err != nil {
		return err
	}
	for i := 0; i < b.n; i++ {
		s, err := shardFor(w.cfg, w.st.cols[w.st.pk], b.key(i))
		if err != nil {
			return err
		}
		if s != w.shard {
			return fmt.Errorf("lancewal: key %v belongs to shard %s, not this writer's %s (route writes with ShardFor)", b.key(i), s, w.shard)
		}
	}
	data, err := b.walEntry(w.manifest.GetWriterEpoch())
	if err != nil {
		return err
	}
	if err := w.waitForRoom(ctx); err != nil {
		return err
	}
	// As for manifests: an entry holding our bytes is ours.
	key := memwal.WALKey(w.shard, w.nextWAL)
	if _, err = storage.PutNext(ctx, w.t.b, key, data, storage.ReadBack{Taken: true}); err != nil {
		if storage.IsAlreadyExists(err) {
			return w.fail(ctx, fmt.Errorf("WAL position %d is taken", w.nextWAL))
		}
		return fmt.Errorf("lancewal: append WAL entry %d of shard %s: %w", w.nextWAL, w.shard, err)
	}
	w.nextWAL++
	w.mem.add(b)
	if (w.opts.MaxRows > 0 && w.mem.rows >= w.opts.MaxRows) || (w.opts.MaxBytes > 0 && w.mem.bytes >= w.opts.MaxBytes) {
		w.freeze()
		w.startBackground()
	}
	return nil
}

// waitForRoom holds a write back while the buffered rows exceed
// MaxUnflushedBytes and a flush of frozen MemTables can free memory. It
// (re)starts the background flush, and fails if that flush fails: the
// write has appended nothing then.
// REQUIRES: w.mu held; it is released while waiting.
func (w *Writer) waitForRoom(ctx context.Context) error {
	started := false
	for len(w.frozen) > 0 && w.mem.bytes+w.frozenBytes >= w.opts.MaxUnflushedBytes {
		if !w.bgRunning {
			if started && w.bgErr != nil {
				return fmt.Errorf("lancewal: %d bytes of rows wait for a flush, which failed (nothing of this write was written): %w", w.mem.bytes+w.frozenBytes, w.bgErr)
			}
			w.startBackground()
			started = true
		}
		ch := w.changed
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			w.mu.Lock()
			return ctx.Err()
		}
		w.mu.Lock()
		if err := w.usable(); err != nil {
			return err
		}
	}
	return nil
}

// replay loads WAL entry p (skipping fence sentinels) into the MemTable.
func (w *Writer) replay(ctx context.Context, p uint64) error {
	key := memwal.WALKey(w.shard, p)
	data, err := w.t.b.Get(ctx, key)
	if storage.IsNotFound(err) {
		return nil // a writer that died between positions leaves a gap
	}
	if err != nil {
		return fmt.Errorf("lancewal: replay %s: %w", key, err)
	}
	bs, err := w.mem.decodeEntry(data)
	if err != nil {
		return fmt.Errorf("lancewal: replay %s: %w", key, err)
	}
	for _, b := range bs {
		w.mem.add(b)
	}
	return nil
}

// decodeEntry decodes a WAL entry into row batches (none for a fence
// sentinel).
func (m *memtable) decodeEntry(data []byte) ([]*rowBatch, error) {
	s, err := arrowipc.ReadStream(data, nil)
	if err != nil {
		return nil, err
	}
	if v, _ := s.Schema.Metadata.Get("fence_sentinel"); v == "true" {
		return nil, nil
	}
	var out []*rowBatch
	for _, batch := range s.Batches {
		// A batch claims its length; the columns must hold it (a damaged
		// length must not size the allocations below).
		for i, c := range batch.Columns {
			if c == nil || c.Len != batch.Len {
				return nil, fmt.Errorf("column %d does not hold the batch's %d rows", i, batch.Len)
			}
		}
		if batch.Column(s.Schema, TombstoneColumn) == nil {
			return nil, fmt.Errorf("the entry has no %s column", TombstoneColumn)
		}
		b, err := m.fromArrow(s.Schema, batch)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// Close refuses further writes, flushes every row not yet flushed (the
// MemTable and the frozen ones) and releases the writer; it returns once
// no flush of the writer runs. A fenced writer closes without flushing.
// If the flush fails, the rows stay in the WAL for the shard's next owner.
// A Close called while another runs waits for it and returns its result
// (or ctx's error): returning at once would tell the caller the rows are
// flushed while they are still being written.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closing {
		done := w.closeDone
		w.mu.Unlock()
		select {
		case <-done:
			return w.closeErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if w.err != nil {
		w.err = ErrClosed // fenced (or closed): nothing to flush
		w.mu.Unlock()
		w.bgCancel()
		w.bg.Wait()
		return nil
	}
	w.closing = true
	w.closeDone = make(chan struct{})
	target := w.freeze()
	w.mu.Unlock()
	var err error
	if target != nil {
		_, err = w.flushThrough(ctx, target)
	}
	w.bg.Wait()
	w.bgCancel()
	w.mu.Lock()
	if w.err == nil {
		w.err = ErrClosed
	}
	w.closeErr = err
	close(w.closeDone)
	w.mu.Unlock()
	return err
}

// Abandon drops the writer without flushing, as a crash would: its WAL
// entries stay for the shard's next owner to replay. A background flush
// under way is cancelled and publishes nothing more; Abandon returns once
// it has stopped.
func (w *Writer) Abandon() {
	w.mu.Lock()
	if w.err == nil {
		w.err = ErrClosed
	}
	w.mu.Unlock()
	w.bgCancel()
	w.bg.Wait()
}

func normalizeURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", errors.New("lancewal: empty table URL")
	}
	if strings.Contains(raw, "://") {
		return raw, nil
	}
	abs, err := filepath.Abs(raw)
	if err != nil {
		return "", err
	}
	// Escaped: a directory name may hold '#' or '?'.
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), nil
}
