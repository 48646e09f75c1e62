package memwal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// ErrFenced is the class of every error caused by a newer writer having
// claimed the shard. Check with errors.Is; *FencedError has the details.
var ErrFenced = errors.New("writer fenced: a newer writer claimed the shard")

// ErrUnknownOutcome means a write's outcome could not be decided (the put
// and the read-back both failed). The writer refuses further work: its view
// of the WAL or of the shard manifest may be wrong. Claim the shard with a
// new writer, which replays whatever did land.
var ErrUnknownOutcome = errors.New("outcome of a MemWAL write is unknown; claim the shard again")

// FencedError reports a superseded writer.
type FencedError struct {
	Shard string
	Op    string // "append", "flush", "claim"
	// Epoch is this writer's; Newer is the epoch that fenced it, 0 when
	// unknown.
	Epoch, Newer uint64
	// MaybeLanded is set when the entry of a fenced append did land: a new
	// writer whose marker had not been written yet may replay it, so the
	// records must be treated as possibly written.
	MaybeLanded bool
}

func (e *FencedError) Error() string {
	s := fmt.Sprintf("%s on shard %q: writer epoch %d is fenced", e.Op, e.Shard, e.Epoch)
	if e.Newer > 0 {
		s += fmt.Sprintf(" by epoch %d", e.Newer)
	}
	if e.MaybeLanded {
		s += " (the entry landed and may be replayed by the new writer)"
	}
	return s
}

// Unwrap returns ErrFenced.
func (e *FencedError) Unwrap() error { return ErrFenced }

// Config configures a Writer.
type Config struct {
	// Shard is the shard id; it must be configured in the table's
	// __mem_wal index (the caller checks).
	Shard string
	// Schema is the table's schema.
	Schema *pb.Schema
	// Now stamps shard manifests; nil means time.Now.
	Now func() time.Time
	// Logger may be nil.
	Logger *zap.Logger
	// ClaimAttempts bounds claim retries after lost races; 0 means 8.
	ClaimAttempts int
	// ReadBackTimeout bounds resolving a put whose outcome is unknown; 0
	// means 30s.
	ReadBackTimeout time.Duration
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if err := ValidateShardName(c.Shard); err != nil {
		return err
	}
	if err := table.ValidateSchema(c.Schema); err != nil {
		return fmt.Errorf("memwal writer: %w", err)
	}
	if c.ClaimAttempts < 0 || c.ReadBackTimeout < 0 {
		return fmt.Errorf("memwal writer: negative claim_attempts or read_back_timeout")
	}
	return nil
}

// Writer is the single writer of one shard. Its methods are safe for
// concurrent use; they are serialized.
type Writer struct {
	cfg    Config
	b      storage.Bucket
	logger *zap.Logger

	mu sync.Mutex
	// manifest is the newest shard-manifest version this writer knows: its
	// own claim or flush, or a maintenance version it adopted.
	manifest *pb.ShardManifest
	epoch    uint64
	// markerPos is the position of this writer's claim marker (0 before it
	// is written).
	markerPos uint64
	nextPos   uint64
	active    *MemTable
	// frozen MemTables await flushing, oldest first.
	frozen []*MemTable
	// dead is set once the writer is fenced or an outcome is unknown.
	dead error
}

// NewWriter checks its arguments and starts nothing; Claim starts writing.
func NewWriter(cfg Config, b storage.Bucket) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if b == nil {
		return nil, errors.New("memwal writer: nil bucket")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.ClaimAttempts == 0 {
		cfg.ClaimAttempts = 8
	}
	if cfg.ReadBackTimeout == 0 {
		cfg.ReadBackTimeout = 30 * time.Second
	}
	return &Writer{cfg: cfg, b: b, active: NewMemTable(cfg.Schema),
		logger: cfg.Logger.With(zap.String("component", "memwal"), zap.String("shard", cfg.Shard))}, nil
}

// ClaimResult describes a successful claim.
type ClaimResult struct {
	Epoch           uint64
	ManifestVersion uint64
	// ReplayedEntries and ReplayedRecords count the WAL entries above the
	// replay cursor that were applied to the MemTable.
	ReplayedEntries int
	ReplayedRecords int
	// MarkerPosition is the WAL position of the claim marker.
	MarkerPosition uint64
}

// Claim takes the shard: it publishes a shard-manifest version with the
// next writer epoch, replays the WAL above the replay cursor into the
// MemTable, and writes the claim marker that fences older writers.
func (w *Writer) Claim(ctx context.Context) (*ClaimResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.manifest != nil {
		return nil, fmt.Errorf("shard %q: this writer already claimed it (epoch %d)", w.cfg.Shard, w.epoch)
	}
	m, err := w.publishClaim(ctx)
	if err != nil {
		return nil, err
	}
	w.manifest, w.epoch = m, m.WriterEpoch
	res := &ClaimResult{Epoch: m.WriterEpoch, ManifestVersion: m.Version}
	if err := w.replay(ctx, res); err != nil {
		w.dead = err
		return nil, err
	}
	pos, err := w.appendEntry(ctx, nil)
	if err != nil {
		w.dead = err
		return nil, err
	}
	res.MarkerPosition = pos
	w.logger.Info("claimed shard", zap.Uint64("epoch", w.epoch), zap.Uint64("version", m.Version),
		zap.Int("replayed_entries", res.ReplayedEntries), zap.Uint64("marker_position", pos))
	return res, nil
}

// publishClaim writes the next shard-manifest version with the next epoch.
// A lost race re-reads and tries again: the last claimer wins.
func (w *Writer) publishClaim(ctx context.Context) (*pb.ShardManifest, error) {
	for attempt := 1; attempt <= w.cfg.ClaimAttempts; attempt++ {
		prev, err := ReadShardManifest(ctx, w.b, w.cfg.Shard)
		if err != nil {
			return nil, err
		}
		next := &pb.ShardManifest{ShardId: w.cfg.Shard, CurrentGeneration: 1}
		if prev != nil {
			next = proto.Clone(prev).(*pb.ShardManifest)
		}
		if next.Status == pb.ShardStatus_SHARD_STATUS_SEALED {
			return nil, fmt.Errorf("claim shard %q: %w: a wal configure is dropping it (if that configure failed, run wal configure again listing the shard)", w.cfg.Shard, ErrSealed)
		}
		next.Version++
		next.WriterEpoch++
		next.Status = pb.ShardStatus_SHARD_STATUS_ACTIVE
		next.TimestampMicros = w.cfg.Now().UnixMicro()
		switch err := w.putManifest(ctx, next); {
		case err == nil:
			return next, nil
		case errors.Is(err, storage.ErrAlreadyExists):
			continue
		default:
			return nil, fmt.Errorf("claim shard %q: %w", w.cfg.Shard, err)
		}
	}
	return nil, fmt.Errorf("claim shard %q: lost the race for a manifest version %d times", w.cfg.Shard, w.cfg.ClaimAttempts)
}

// putManifest publishes m with put-if-absent (see putIfAbsent).
func (w *Writer) putManifest(ctx context.Context, m *pb.ShardManifest) error {
	data, err := table.EncodeProto(m)
	if err != nil {
		return err
	}
	key := ShardManifestKey(w.cfg.Shard, m.Version)
	return w.putIfAbsent(ctx, key, data)
}

// putIfAbsent writes data at key. It returns nil when our data is stored
// (also after an error whose read-back finds our bytes), an error matching
// storage.ErrAlreadyExists when another author holds the key, and
// otherwise an error (ErrUnknownOutcome when undecidable).
//
// An unknown outcome is read back on a detached context. A lost race is
// trusted as someone else's: the storage layer turns off SDK retries of
// conditional puts, which would otherwise report our own landed write as
// a lost race. (Byte equality cannot tell two authors apart anyway: two
// claims of one version are identical but for the timestamp.)
func (w *Writer) putIfAbsent(ctx context.Context, key string, data []byte) error {
	perr := w.b.PutIfAbsent(ctx, key, data)
	if perr == nil || storage.IsAlreadyExists(perr) {
		return perr
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.ReadBackTimeout)
	defer cancel()
	got, rerr := w.b.Get(rctx, key)
	switch {
	case rerr == nil && bytes.Equal(got, data):
		w.logger.Warn("a put reported an error but landed", zap.String("key", key), zap.Error(perr))
		return nil
	case rerr == nil:
		return fmt.Errorf("write %s: %w (after %v)", key, storage.ErrAlreadyExists, perr)
	case storage.IsNotFound(rerr):
		return fmt.Errorf("write %s: %w", key, perr)
	}
	return fmt.Errorf("write %s: %w: put: %v; read-back: %v", key, ErrUnknownOutcome, perr, rerr)
}

// replay applies the WAL entries above the replay cursor. What to replay is
// decided from the cursor alone, never from whether the SSTable list is
// empty (Lance #6767): a merge and a trim may have drained the list while
// the entries at or below the cursor are long in the base table.
func (w *Writer) replay(ctx context.Context, res *ClaimResult) error {
	cursor := w.manifest.ReplayAfterWalPosition
	positions, err := ListWALPositions(ctx, w.b, w.cfg.Shard)
	if err != nil {
		return err
	}
	last := cursor
	for _, p := range positions {
		if p <= cursor {
			continue // flushed (or written into a freed position by a fenced writer)
		}
		// INVARIANT: positions above the cursor are dense. A hole means an
		// entry was lost; replaying past it would silently drop its rows.
		if p != last+1 {
			return fmt.Errorf("replay shard %q: WAL entry at position %d is missing (next present is %d); refusing to skip data", w.cfg.Shard, last+1, p)
		}
		last = p
	}
	if seen := w.manifest.WalPositionLastSeen; seen > last {
		return fmt.Errorf("replay shard %q: WAL entries %d..%d are missing (the shard manifest saw position %d); refusing to skip data", w.cfg.Shard, last+1, seen, seen)
	}
	var maxEpoch uint64
	for p := cursor + 1; p <= last; p++ {
		e, err := ReadWALEntry(ctx, w.b, w.cfg.Shard, p)
		if err != nil {
			return fmt.Errorf("replay shard %q stopped at WAL position %d (nothing after it was applied): %w", w.cfg.Shard, p, err)
		}
		if e.WriterEpoch > w.epoch {
			return w.fence(ctx, "claim", false)
		}
		if e.WriterEpoch < maxEpoch {
			// Cannot happen while markers are written (a fenced writer
			// collides with the newer marker first); if it does, the entry
			// landed after a newer writer's marker and was never
			// acknowledged, and every replay skips it alike.
			w.logger.Warn("skipping a WAL entry of a fenced writer", zap.Uint64("position", p), zap.Uint64("entry_epoch", e.WriterEpoch), zap.Uint64("newer_epoch", maxEpoch))
			w.active.Apply(p, nil)
			continue
		}
		maxEpoch = e.WriterEpoch
		recs, err := w.decodeRecords(WALKey(w.cfg.Shard, p), e)
		if err != nil {
			return fmt.Errorf("replay shard %q stopped at WAL position %d (nothing after it was applied): %w", w.cfg.Shard, p, err)
		}
		w.active.Apply(p, recs)
		res.ReplayedEntries++
		res.ReplayedRecords += len(recs)
	}
	w.nextPos = max(last, w.manifest.WalPositionLastSeen) + 1
	return nil
}

func (w *Writer) decodeRecords(key string, e *pb.WalEntry) ([]Record, error) {
	recs := make([]Record, len(e.Records))
	for i, wr := range e.Records {
		r, err := decodeRecord(w.cfg.Schema, wr)
		if err != nil {
			return nil, fmt.Errorf("WAL entry %s: %w: record %d: %v", key, ErrCorruptWAL, i+1, err)
		}
		recs[i] = r
	}
	return recs, nil
}

// fence marks the writer dead and returns its FencedError.
func (w *Writer) fence(ctx context.Context, op string, landed bool) error {
	fe := &FencedError{Shard: w.cfg.Shard, Op: op, Epoch: w.epoch, MaybeLanded: landed}
	if m, err := ReadShardManifest(ctx, w.b, w.cfg.Shard); err == nil && m != nil && m.WriterEpoch > w.epoch {
		fe.Newer = m.WriterEpoch
	}
	w.dead = fe
	w.logger.Warn("writer fenced", zap.String("op", op), zap.Uint64("epoch", w.epoch), zap.Uint64("newer_epoch", fe.Newer))
	return fe
}

// checkFence confirms that this writer's epoch is still the newest. It
// lists for the newest version rather than probing version+1: trim deletes
// old shard manifests, and a probe of a deleted version+1 would wrongly
// read as "nothing newer". A newer version with our epoch (a maintenance
// job) is adopted.
func (w *Writer) checkFence(ctx context.Context, op string, landed bool) error {
	for {
		v, found, err := LatestShardVersion(ctx, w.b, w.cfg.Shard)
		if err != nil {
			return fmt.Errorf("check fence of shard %q: %w", w.cfg.Shard, err)
		}
		if !found {
			return fmt.Errorf("check fence of shard %q: %w: no shard manifest is left", w.cfg.Shard, table.ErrCorrupt)
		}
		if v == w.manifest.Version {
			return nil
		}
		latest, err := ReadShardManifestVersion(ctx, w.b, w.cfg.Shard, v)
		if err != nil {
			return fmt.Errorf("check fence of shard %q: %w", w.cfg.Shard, err)
		}
		if latest.WriterEpoch != w.epoch {
			return w.fence(ctx, op, landed)
		}
		if latest.Version < w.manifest.Version {
			return fmt.Errorf("check fence of shard %q: %w: the newest version listed is %d, below this writer's %d", w.cfg.Shard, table.ErrCorrupt, latest.Version, w.manifest.Version)
		}
		w.manifest = latest
	}
}

func (w *Writer) usable() error {
	if w.dead != nil {
		return w.dead
	}
	if w.manifest == nil {
		return fmt.Errorf("shard %q: the writer has not claimed it", w.cfg.Shard)
	}
	return nil
}

// Append logs records as one WAL entry and applies them to the MemTable.
// It returns the entry's position once the entry is durable and the writer
// has confirmed it still holds the shard.
func (w *Writer) Append(ctx context.Context, recs []Record) (uint64, error) {
	if len(recs) == 0 {
		return 0, fmt.Errorf("append to shard %q: no records", w.cfg.Shard)
	}
	norm := make([]Record, len(recs))
	for i, r := range recs {
		if err := CheckRecord(w.cfg.Schema, r); err != nil {
			return 0, fmt.Errorf("record %d: %w", i+1, err)
		}
		if r.Op == Delete {
			r.Row = tombstoneRow(w.cfg.Schema, r.Row)
		}
		norm[i] = r
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return 0, err
	}
	return w.appendEntry(ctx, norm)
}

// appendEntry writes one entry at the next position: the claim marker when
// recs is nil and no marker was written yet.
// REQUIRES: w.mu held; recs passed CheckRecord.
func (w *Writer) appendEntry(ctx context.Context, recs []Record) (uint64, error) {
	op := "append"
	if w.markerPos == 0 {
		op = "claim"
	}
	wrs := make([]*pb.WalRecord, len(recs))
	for i, r := range recs {
		wrs[i] = encodeRecord(w.cfg.Schema, r)
	}
	for {
		pos := w.nextPos
		data, err := EncodeWALEntry(&pb.WalEntry{ShardId: w.cfg.Shard, WriterEpoch: w.epoch, Position: pos, Records: wrs})
		if err != nil {
			return 0, err
		}
		err = w.putIfAbsent(ctx, WALKey(w.cfg.Shard, pos), data)
		if errors.Is(err, ErrUnknownOutcome) {
			w.dead = err
			return 0, err
		}
		if storage.IsAlreadyExists(err) {
			if err := w.collided(ctx, op, pos); err != nil {
				return 0, err
			}
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("%s to shard %q at WAL position %d: %w", op, w.cfg.Shard, pos, err)
		}
		w.nextPos = pos + 1
		// Re-check the fence after writing: the put may
		// have landed in a position trim freed below a newer writer's
		// cursor, where no collision could stop it.
		if err := w.checkFence(ctx, op, true); err != nil {
			if !errors.Is(err, ErrFenced) {
				w.dead = fmt.Errorf("%w: %v", ErrUnknownOutcome, err)
				return 0, w.dead
			}
			return 0, err
		}
		w.active.Apply(pos, recs)
		if w.markerPos == 0 {
			w.markerPos = pos
		}
		return pos, nil
	}
}

// collided handles a lost race for WAL position pos.
func (w *Writer) collided(ctx context.Context, op string, pos uint64) error {
	e, err := ReadWALEntry(ctx, w.b, w.cfg.Shard, pos)
	if err != nil {
		w.dead = fmt.Errorf("%s to shard %q: WAL position %d is taken and unreadable: %w", op, w.cfg.Shard, pos, err)
		return w.dead
	}
	switch {
	case e.WriterEpoch > w.epoch:
		return w.fence(ctx, op, false)
	case e.WriterEpoch == w.epoch:
		w.dead = fmt.Errorf("%s to shard %q: WAL position %d already holds an entry of epoch %d that this writer did not write", op, w.cfg.Shard, pos, w.epoch)
		return w.dead
	case w.markerPos == 0:
		// A superseded writer's entry landed after our replay listing and
		// before our marker. It is part of the log now and every later
		// replay applies it, so the MemTable must too.
		recs, err := w.decodeRecords(WALKey(w.cfg.Shard, pos), e)
		if err != nil {
			w.dead = err
			return err
		}
		w.active.Apply(pos, recs)
	default:
		// Above our marker a superseded writer cannot land (it collides
		// with the marker first); replay skips such an entry, and so do we.
		w.logger.Warn("skipping a WAL entry of a fenced writer", zap.Uint64("position", pos), zap.Uint64("entry_epoch", e.WriterEpoch))
		w.active.Apply(pos, nil)
	}
	w.nextPos = pos + 1
	return nil
}

// FlushResult lists the SSTables a flush published, oldest first.
type FlushResult struct {
	SSTables []*pb.SSTable
	// Manifest is the shard-manifest version after the flush.
	Manifest *pb.ShardManifest
}

// Flush freezes the MemTable and flushes every frozen MemTable, oldest
// first, each as the next generation. It stops at the first failure; the
// failed MemTable and those after it stay frozen and are retried by the
// next Flush, so the replay cursor never passes an unflushed entry
// (Lance #8293).
func (w *Writer) Flush(ctx context.Context) (*FlushResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return nil, err
	}
	if w.active.Len() > 0 {
		w.frozen = append(w.frozen, w.active)
		w.active = NewMemTable(w.cfg.Schema)
	}
	res := &FlushResult{}
	for len(w.frozen) > 0 {
		sst, err := w.flushOne(ctx, w.frozen[0])
		if err != nil {
			res.Manifest = proto.Clone(w.manifest).(*pb.ShardManifest)
			return res, err
		}
		w.frozen = w.frozen[1:]
		res.SSTables = append(res.SSTables, sst)
	}
	res.Manifest = proto.Clone(w.manifest).(*pb.ShardManifest)
	return res, nil
}

func (w *Writer) flushOne(ctx context.Context, mt *MemTable) (*pb.SSTable, error) {
	if err := w.checkFence(ctx, "flush", false); err != nil {
		return nil, err
	}
	gen := w.manifest.CurrentGeneration
	keys, recs := mt.Sorted()
	key := NewSSTableKey(w.cfg.Shard, gen)
	sst, err := WriteSSTable(ctx, w.b, w.cfg.Schema, key, gen, keys, recs)
	if err != nil {
		w.removeOrphan(ctx, key)
		return nil, fmt.Errorf("flush shard %q generation %d: %w", w.cfg.Shard, gen, err)
	}
	sst.FirstWalPosition, sst.LastWalPosition = mt.Positions()
	for {
		base := w.manifest
		if slices.ContainsFunc(base.Sstables, func(x *pb.SSTable) bool { return x.Path == key }) {
			// The version we adopted is our own publish, reported as a lost
			// race (a backend that retries conditional puts): done, and the
			// SSTable must stay.
			return sst, nil
		}
		// INVARIANT (Lance #8293): the cursor moves only over a contiguous
		// run of entries that are in published SSTables.
		if sst.FirstWalPosition != base.ReplayAfterWalPosition+1 {
			w.removeOrphan(ctx, key)
			return nil, fmt.Errorf("flush shard %q generation %d: it starts at WAL position %d but the replay cursor is %d; refusing to move the cursor past unflushed entries", w.cfg.Shard, gen, sst.FirstWalPosition, base.ReplayAfterWalPosition)
		}
		if base.CurrentGeneration != gen {
			w.removeOrphan(ctx, key)
			return nil, fmt.Errorf("flush shard %q: generation %d was taken (current generation is %d)", w.cfg.Shard, gen, base.CurrentGeneration)
		}
		next := proto.Clone(base).(*pb.ShardManifest)
		next.Version++
		next.Sstables = append(next.Sstables, sst)
		next.CurrentGeneration = gen + 1
		next.ReplayAfterWalPosition = sst.LastWalPosition
		next.WalPositionLastSeen = max(base.WalPositionLastSeen, w.nextPos-1)
		next.TimestampMicros = w.cfg.Now().UnixMicro()
		err := w.putManifest(ctx, next)
		switch {
		case err == nil:
			w.manifest = next
			w.logger.Info("flushed", zap.Uint64("generation", gen), zap.Uint64("rows", sst.Rows),
				zap.Uint64("replay_after_wal_position", next.ReplayAfterWalPosition))
			return sst, nil
		case storage.IsAlreadyExists(err):
			// A claim fences us; a maintenance version is adopted and the
			// flush rebased on it.
			if err := w.checkFence(ctx, "flush", false); err != nil {
				if errors.Is(err, ErrFenced) {
					w.removeOrphan(ctx, key)
				}
				return nil, err
			}
		case errors.Is(err, ErrUnknownOutcome):
			w.dead = err
			return nil, err // the SSTable may be named by the landed version: keep it
		default:
			w.removeOrphan(ctx, key)
			return nil, fmt.Errorf("flush shard %q generation %d: %w", w.cfg.Shard, gen, err)
		}
	}
}

// removeOrphan deletes an SSTable no published version names. Best effort:
// orphan cleanup removes what this misses.
func (w *Writer) removeOrphan(ctx context.Context, key string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.ReadBackTimeout)
	defer cancel()
	if err := w.b.Delete(dctx, key); err != nil && !storage.IsNotFound(err) {
		w.logger.Warn("could not remove an unpublished SSTable", zap.String("key", key), zap.Error(err))
	}
}

// Epoch is the writer's epoch (0 before Claim).
func (w *Writer) Epoch() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.epoch
}

// Manifest returns a copy of the newest shard manifest the writer knows.
func (w *Writer) Manifest() *pb.ShardManifest {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.manifest == nil {
		return nil
	}
	return proto.Clone(w.manifest).(*pb.ShardManifest)
}

// NextPosition is the WAL position the next append will try.
func (w *Writer) NextPosition() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nextPos
}

// Pending returns the number of keys and approximate bytes held unflushed
// (active and frozen MemTables).
func (w *Writer) Pending() (rows, bytes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rows, bytes = w.active.Len(), w.active.Bytes()
	for _, f := range w.frozen {
		rows += f.Len()
		bytes += f.Bytes()
	}
	return rows, bytes
}

// Get returns the newest unflushed record for a key (table.KeyOf).
func (w *Writer) Get(key string) (Record, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r, ok := w.active.Get(key); ok {
		return r, true
	}
	for i := len(w.frozen) - 1; i >= 0; i-- {
		if r, ok := w.frozen[i].Get(key); ok {
			return r, true
		}
	}
	return Record{}, false
}
