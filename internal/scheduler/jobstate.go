package scheduler

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/storage"
)

// A table's job state outlives the process: each kind's last attempt and
// last success, when an instance first watched the table, and what the
// last cleanup kept. Schedules resume from it after a restart (a daemon
// restarted more often than a schedule's interval would otherwise never
// run that kind), and the last-success series are exported from it from
// the first sync on, so that staleness alerts see a kind that never
// succeeds whatever the restarts.
//
// Several instances share a bucket, and leases may be wrong, so the state
// is a sequence of records, each written with put-if-absent
// (storage.PutNext) at the next sequence number: a writer that loses the
// race re-reads the newest record, merges its own news in and tries the
// number after. Merging takes the later time of each field, so it commutes
// and a lost race never drops another instance's news. An in-place
// overwrite would let two instances' writes erase each other. The record
// before the newest is deleted after a write lands; readers list again
// when the record they found is gone.

// JobStateDir holds a table's job-state records, beside its Lance dataset
// (cleanup collects only Lance's own prefixes).
const JobStateDir = "_compactord/jobs/"

// jobStateKey names the record of sequence number seq; the newest record is
// the first key of a listing.
func jobStateKey(seq uint64) string {
	return fmt.Sprintf("%s%020d.state", JobStateDir, math.MaxUint64-seq)
}

func parseJobStateKey(key string) (uint64, bool) {
	s, ok := strings.CutPrefix(key, JobStateDir)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ".state")
	if !ok || len(s) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return math.MaxUint64 - n, true
}

// JobState is a table's job state as the bucket keeps it.
type JobState struct {
	// Seq is the sequence number of the record it was read from (0: none).
	Seq uint64
	// Since is when an instance first watched the table.
	Since time.Time
	Kinds map[Kind]KindState
	// OldestRetained is the oldest version the last cleanup kept, and
	// OldestRetainedTime its commit time (zero: unknown).
	OldestRetained     uint64
	OldestRetainedTime time.Time
}

// KindState is one kind's last attempt and last success.
type KindState struct {
	// LastRun is when the last attempt that ended (not canceled) started.
	LastRun    time.Time
	LastResult Class
	// LastSuccess is when the last successful or skipped attempt ended.
	LastSuccess time.Time
}

// anchor is the instant kind k's schedule resumes from: its last run or
// success, else when the table was first watched (zero: nothing known).
func (j *JobState) anchor(k Kind) time.Time {
	ks := j.Kinds[k]
	a := ks.LastRun
	if ks.LastSuccess.After(a) {
		a = ks.LastSuccess
	}
	if a.IsZero() {
		a = j.Since
	}
	return a
}

func laterTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// merge folds o into j: the later time of each field, the earlier Since,
// the result of the later run, the newer retained-version record. The
// sequence number is j's.
func (j *JobState) merge(o JobState) {
	if !o.Since.IsZero() && (j.Since.IsZero() || o.Since.Before(j.Since)) {
		j.Since = o.Since
	}
	for k, ok := range o.Kinds {
		if j.Kinds == nil {
			j.Kinds = map[Kind]KindState{}
		}
		cur := j.Kinds[k]
		if ok.LastRun.After(cur.LastRun) || (cur.LastResult == "" && ok.LastRun.Equal(cur.LastRun)) {
			cur.LastRun, cur.LastResult = ok.LastRun, ok.LastResult
		}
		cur.LastSuccess = laterTime(cur.LastSuccess, ok.LastSuccess)
		j.Kinds[k] = cur
	}
	// Cleanup only ever raises the oldest retained version.
	if o.OldestRetained > j.OldestRetained {
		j.OldestRetained, j.OldestRetainedTime = o.OldestRetained, o.OldestRetainedTime
	}
}

// holds reports whether merging news into j changes nothing.
func (j JobState) holds(news JobState) bool {
	m := JobState{Seq: j.Seq}
	m.merge(j)
	m.merge(news)
	a, err1 := EncodeJobState(m)
	b, err2 := EncodeJobState(j)
	return err1 == nil && err2 == nil && string(a) == string(b)
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(us int64) time.Time {
	if us <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// A record is framed as the lease records are: magic, one format byte, the
// deterministic protobuf, then a CRC32C of everything before it, so that a
// truncated or damaged record is an error, not a plausible partial state.
const (
	jobStateMagic    = "CMPJ"
	jobStateFormat   = byte(1)
	jobStateOverhead = len(jobStateMagic) + 1 + 4
)

var jobStateCRC = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptJobState marks a job-state record that fails its checks.
var ErrCorruptJobState = errors.New("corrupt job-state record")

// EncodeJobState frames j for storage; kinds are sorted, so that equal
// states encode to equal bytes.
func EncodeJobState(j JobState) ([]byte, error) {
	m := &pb.JobState{Seq: j.Seq, SinceUnixMicros: micros(j.Since), OldestRetainedVersion: j.OldestRetained,
		OldestRetainedUnixMicros: micros(j.OldestRetainedTime)}
	kinds := make([]string, 0, len(j.Kinds))
	for k := range j.Kinds {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		ks := j.Kinds[Kind(k)]
		m.Kinds = append(m.Kinds, &pb.KindState{Kind: k, LastRunUnixMicros: micros(ks.LastRun),
			LastResult: string(ks.LastResult), LastSuccessUnixMicros: micros(ks.LastSuccess)})
	}
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(payload)+jobStateOverhead)
	out = append(out, jobStateMagic...)
	out = append(out, jobStateFormat)
	out = append(out, payload...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, jobStateCRC)), nil
}

// DecodeJobState checks a record's frame and decodes it. Kinds this build
// does not know (a newer build's) are left out; negative times read as
// never.
func DecodeJobState(data []byte) (JobState, error) {
	switch {
	case len(data) < jobStateOverhead:
		return JobState{}, fmt.Errorf("%w: truncated (%d bytes)", ErrCorruptJobState, len(data))
	case string(data[:4]) != jobStateMagic:
		return JobState{}, fmt.Errorf("%w: bad magic", ErrCorruptJobState)
	case data[4] != jobStateFormat:
		return JobState{}, fmt.Errorf("%w: unsupported format %d", ErrCorruptJobState, data[4])
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, jobStateCRC) != sum {
		return JobState{}, fmt.Errorf("%w: checksum mismatch (truncated or damaged)", ErrCorruptJobState)
	}
	var m pb.JobState
	if err := proto.Unmarshal(body[5:], &m); err != nil {
		return JobState{}, fmt.Errorf("%w: %v", ErrCorruptJobState, err)
	}
	j := JobState{Seq: m.GetSeq(), Since: fromMicros(m.GetSinceUnixMicros()), OldestRetained: m.GetOldestRetainedVersion(),
		OldestRetainedTime: fromMicros(m.GetOldestRetainedUnixMicros()), Kinds: map[Kind]KindState{}}
	for _, ks := range m.GetKinds() {
		k := Kind(ks.GetKind())
		if k.index() < 0 {
			continue
		}
		j.Kinds[k] = KindState{LastRun: fromMicros(ks.GetLastRunUnixMicros()), LastResult: Class(ks.GetLastResult()),
			LastSuccess: fromMicros(ks.GetLastSuccessUnixMicros())}
	}
	return j, nil
}

// LoadJobState reads the table's newest job-state record; found is false
// when there is none. A corrupt newest record is an error naming its key.
func LoadJobState(ctx context.Context, b storage.Bucket) (j JobState, found bool, err error) {
	// The newest record can be deleted between the listing and the read
	// (a writer landed a newer one): list again.
	for range 5 {
		key, seq, ok, err := newestJobStateKey(ctx, b)
		if err != nil {
			return JobState{}, false, err
		}
		if !ok {
			return JobState{}, false, nil
		}
		data, err := b.Get(ctx, key)
		if storage.IsNotFound(err) {
			continue
		}
		if err != nil {
			return JobState{}, false, fmt.Errorf("read %s: %w", key, err)
		}
		j, err := DecodeJobState(data)
		if err != nil {
			return JobState{}, false, fmt.Errorf("%s: %w", key, err)
		}
		if j.Seq != seq {
			return JobState{}, false, fmt.Errorf("%s: %w: it says sequence %d", key, ErrCorruptJobState, j.Seq)
		}
		return j, true, nil
	}
	return JobState{}, false, fmt.Errorf("list %s: the newest record kept disappearing", JobStateDir)
}

var errStopListing = errors.New("stop")

// newestJobStateKey is the first record name of a listing of JobStateDir
// (the newest record); other objects there (a stray upload) are passed
// over, not taken for a damaged record.
func newestJobStateKey(ctx context.Context, b storage.Bucket) (key string, seq uint64, ok bool, err error) {
	err = b.List(ctx, JobStateDir, func(a storage.Attrs) error {
		if n, valid := parseJobStateKey(a.Key); valid {
			key, seq, ok = a.Key, n, true
			return errStopListing
		}
		return nil
	})
	if errors.Is(err, errStopListing) {
		err = nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("list %s: %w", JobStateDir, err)
	}
	return key, seq, ok, nil
}

// jobStateAttempts bounds the lost races of one save: each loss means
// another instance's record landed, so a few suffice.
const jobStateAttempts = 8

// SaveJobState merges news into the table's newest record and writes the
// result as the next record (put-if-absent); a lost race re-reads and
// merges again, and so does a write that landed below the newest record
// (at a number deleted after a newer one landed). It returns the newest
// state, which holds news. A newest record that does
// not decode is superseded by one built from news alone: the state is a
// cache of what compactord did, not table data, and a damaged record must
// not stop the schedules.
func SaveJobState(ctx context.Context, b storage.Bucket, news JobState) (JobState, error) {
	var lastErr error
	for range jobStateAttempts {
		cur, found, err := LoadJobState(ctx, b)
		var seq uint64
		switch {
		case err == nil:
			seq = cur.Seq
		case errors.Is(err, ErrCorruptJobState):
			_, n, ok, lerr := newestJobStateKey(ctx, b)
			if lerr != nil || !ok {
				return JobState{}, err
			}
			seq, cur, found = n, JobState{}, true
		default:
			return JobState{}, err
		}
		next := JobState{Seq: seq + 1}
		next.merge(cur)
		next.merge(news)
		data, err := EncodeJobState(next)
		if err != nil {
			return JobState{}, err
		}
		out, err := storage.PutNext(ctx, b, jobStateKey(next.Seq), data, storage.ReadBack{})
		switch out {
		case storage.PutLanded:
			if found {
				// Best effort: a leftover older record is never read.
				_ = b.Delete(ctx, jobStateKey(seq))
			}
			// A writer that read an old record can land at a number whose
			// record was deleted, below the newest, where no reader looks:
			// the write counts only if the newest record holds its news.
			key, newestSeq, ok, err := newestJobStateKey(ctx, b)
			if err == nil && ok && key == jobStateKey(next.Seq) {
				return next, nil
			}
			if err == nil && ok && newestSeq > next.Seq {
				// Ours is below the newest, where nobody reads it.
				_ = b.Delete(ctx, jobStateKey(next.Seq))
			}
			newest, _, err := LoadJobState(ctx, b)
			if err == nil && newest.holds(news) {
				return newest, nil
			}
			lastErr = err
			continue
		case storage.PutLost, storage.PutAbsent:
			lastErr = err
			continue
		default:
			return JobState{}, fmt.Errorf("write %s (%s): %w", jobStateKey(next.Seq), out, err)
		}
	}
	if lastErr == nil {
		return JobState{}, fmt.Errorf("write the job state: lost %d races in a row", jobStateAttempts)
	}
	return JobState{}, fmt.Errorf("write the job state: lost %d races in a row: %w", jobStateAttempts, lastErr)
}

// noteSuccess records a success (or an elided run) of kind k at t.
func (j *JobState) noteSuccess(k Kind, t time.Time) {
	if j.Kinds == nil {
		j.Kinds = map[Kind]KindState{}
	}
	ks := j.Kinds[k]
	ks.LastSuccess = laterTime(ks.LastSuccess, t)
	j.Kinds[k] = ks
}

// noteAttemptLocked records an attempt that ended with class in st's job
// state and returns the news to write to the bucket. REQUIRES: s.mu held.
func (s *Scheduler) noteAttemptLocked(st *tableState, a *attempt, class Class, out Outcome, now time.Time) JobState {
	ks := KindState{LastRun: a.started, LastResult: class}
	if class == ClassSuccess || class == ClassSkipped {
		ks.LastSuccess = now
	}
	news := JobState{Since: st.added, Kinds: map[Kind]KindState{a.kind: ks}}
	if r := out.Retained; r != nil {
		news.OldestRetained, news.OldestRetainedTime = r.Version, r.Timestamp
	}
	st.state.merge(news)
	return news
}

// saveStateTimeout bounds a job-state write; it runs detached from the
// attempt, so that an attempt drained at shutdown still records its end.
const saveStateTimeout = 30 * time.Second

// saveState writes news to the table's job-state records. A failure is
// logged, not the job's: the next attempt's write carries the same news
// (the in-memory state keeps it), and until then a restart only runs the
// kind earlier than needed.
func (s *Scheduler) saveState(st *tableState, h *TableHandle, news JobState) {
	ctx, cancel := context.WithTimeout(context.Background(), saveStateTimeout)
	defer cancel()
	s.mu.Lock()
	// Everything this instance knows goes along, so that a write that
	// failed earlier is made good now.
	all := JobState{}
	all.merge(st.state)
	all.merge(news)
	s.mu.Unlock()
	written, err := SaveJobState(ctx, h.Bucket, all)
	if err != nil {
		st.logger.Warn("could not record the job state in the bucket; a restart may run the job early", zap.Error(err))
		return
	}
	s.mu.Lock()
	st.state.merge(written)
	s.mu.Unlock()
}

// loadState reads the table's job state for its first sync, creating the
// record (with this instance's start as the table's since) when there is
// none. It runs outside s.mu.
func (s *Scheduler) loadState(ctx context.Context, st *tableState, h *TableHandle) (JobState, error) {
	j, found, err := LoadJobState(ctx, h.Bucket)
	if err != nil || found {
		return j, err
	}
	s.mu.Lock()
	added := st.added
	s.mu.Unlock()
	return SaveJobState(ctx, h.Bucket, JobState{Since: added})
}

// applyStateLocked installs the job state the first sync read and moves
// each schedule to resume from it: the next run of a kind follows its
// last run (or success), or, for a kind that never ran, the time the table
// was first watched. A run that is due by then is collected at once. A
// schedule is only ever brought forward. REQUIRES: s.mu held.
func (s *Scheduler) applyStateLocked(st *tableState, j JobState) {
	st.state.merge(j)
	st.stateLoaded = true
	for i, k := range Kinds {
		if ls := st.state.Kinds[k].LastSuccess; ls.After(st.upToDate[i]) {
			st.upToDate[i] = ls
		}
		sched := s.schedLocked(st, i)
		if sched == nil {
			continue
		}
		a := st.state.anchor(k)
		if a.IsZero() {
			continue
		}
		if n := sched.Next(a); st.next[i].IsZero() || n.Before(st.next[i]) {
			st.next[i] = n
		}
	}
}

// checkStartLocked queues, once, when the table is first eligible, the
// work a sync finds waiting since before this instance started, instead of
// leaving it to the first scheduled run: generations flushed but not merged
// (change polling only reports changes after its first look) and indexes
// lagging behind merged generations. A pending fragment-reuse version needs
// no job of its own: whichever job runs first absorbs it. REQUIRES: s.mu
// held.
func (s *Scheduler) checkStartLocked(st *tableState, now time.Time) {
	if st.startChecked || st.snap == nil || !s.eligibleLocked(st) {
		return
	}
	st.startChecked = true
	var lag bool
	for _, sh := range st.snap.Shards {
		for _, g := range sh.Lag {
			lag = lag || g > 0
		}
	}
	for _, w := range []struct {
		k   Kind
		due bool
	}{{KindMerge, st.snap.PendingGenerations > 0}, {KindIndex, lag}} {
		if _, have := s.deps.Jobs[w.k]; have && w.due && !st.markedLocked(w.k) {
			st.pend(w.k, TriggerChange, now)
		}
	}
}
