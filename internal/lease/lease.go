// Package lease lets several daemon instances over one bucket split the
// tables between them, with leases stored in the bucket itself.
//
// A lease is a sequence of records `_leases/{name}/{inv:020}.lease`, one per
// epoch, each written with put-if-absent; inv = MaxUint64 - epoch, so the
// newest record is the first key of a listing. The newest record decides:
// its holder owns the lease until its expiry. Acquiring, renewing, taking
// over an expired lease and releasing are all the same move, writing the
// record of the next epoch, so exactly one of any number of racing
// instances wins it (storage INVARIANT: put-if-absent is atomic).
//
// INVARIANT: correctness never depends on a lease. Two instances may both
// believe they hold one (a stalled holder whose lease expired and was taken
// over); the commit loop is the arbiter of every change to a table. Leases
// only keep instances from doing the same work twice.
//
// Leases are per table and cost a write per renewal, so the scheduler
// holds one only while the table has jobs to run; which instance serves an
// idle table follows from the heartbeats of Members (one write per
// instance, whatever the number of tables) and Assign.
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/storage"
)

// Config of the lease manager.
type Config struct {
	// Enabled turns leasing on. Off, every instance works on every table
	// (still correct, only wasteful when several instances run).
	Enabled bool `yaml:"enabled"`
	// Holder names this instance in lease records; empty means
	// hostname-pid-random. Two live instances must not share a holder.
	Holder string `yaml:"holder"`
	// TTL is how long a lease or heartbeat lasts without renewal: how long
	// a killed instance's tables wait before another instance takes them
	// over.
	TTL time.Duration `yaml:"ttl"`
	// RenewInterval is how often the heartbeat is written and the leases
	// of busy tables renewed. At most TTL/3, so that a holder renews at
	// least twice per TTL.
	RenewInterval time.Duration `yaml:"renew_interval"`
	// MembersURL is a bucket where instances publish heartbeats so that
	// they can split the tables evenly. Empty: the discovery URL when
	// there is one, otherwise every instance serves every table and the
	// lease of each job decides, first come, first served.
	MembersURL string `yaml:"members_url"`
}

// DefaultConfig: leasing on, 30s TTL, renewed every 10s.
func DefaultConfig() Config {
	return Config{Enabled: true, TTL: 30 * time.Second, RenewInterval: 10 * time.Second}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	switch {
	case c.TTL <= 0:
		return fmt.Errorf("lease.ttl must be positive, got %s", c.TTL)
	case c.RenewInterval <= 0:
		return fmt.Errorf("lease.renew_interval must be positive, got %s", c.RenewInterval)
	case c.RenewInterval*3 > c.TTL:
		return fmt.Errorf("lease.renew_interval (%s) must be at most a third of lease.ttl (%s), so that a lease is renewed before it expires", c.RenewInterval, c.TTL)
	}
	if c.Holder != "" {
		if err := ValidateHolder(c.Holder); err != nil {
			return fmt.Errorf("lease.holder: %w", err)
		}
	}
	return nil
}

// ValidateHolder checks that a holder name can be one key segment.
func ValidateHolder(h string) error {
	if h == "" || len(h) > 128 || h[0] == '.' {
		return fmt.Errorf("holder %q: want 1 to 128 characters, not starting with '.'", h)
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("holder %q: only letters, digits, '-', '_' and '.' are allowed", h)
		}
	}
	return nil
}

// DefaultHolder is hostname-pid-random, sanitized to a key segment. The
// random part keeps a restarted process with a recycled pid from mistaking
// its predecessor's leases for its own.
func DefaultHolder() string {
	host, _ := os.Hostname()
	var sb strings.Builder
	for _, c := range host {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' {
			sb.WriteRune(c)
		} else {
			sb.WriteByte('_')
		}
	}
	if sb.Len() == 0 || strings.HasPrefix(sb.String(), ".") {
		sb.Reset()
		sb.WriteString("host")
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	h := fmt.Sprintf("%s-%d-%s", sb.String(), os.Getpid(), hex.EncodeToString(r[:]))
	if len(h) > 128 {
		h = h[len(h)-128:]
	}
	return h
}

// State is the newest lease record. The zero State means no record.
type State struct {
	Holder  string    `json:"holder"`
	Epoch   uint64    `json:"epoch"`
	Expires time.Time `json:"expires"`
}

// Live reports whether the record is held at now.
func (s State) Live(now time.Time) bool { return s.Holder != "" && now.Before(s.Expires) }

// LeasesDir holds every lease of a table, beside its Lance dataset.
const LeasesDir = "_leases/"

// Dir is the folder of lease name.
func Dir(name string) string { return LeasesDir + name + "/" }

// Key names the record of one epoch.
func Key(name string, epoch uint64) string {
	return fmt.Sprintf("%s%020d.lease", Dir(name), math.MaxUint64-epoch)
}

func parseKey(name, key string) (uint64, bool) {
	s, ok := strings.CutPrefix(key, Dir(name))
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ".lease")
	if !ok || len(s) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return math.MaxUint64 - n, true
}

// Manager acquires, renews and releases leases for one holder.
type Manager struct {
	holder string
	ttl    time.Duration
	clock  clock.Clock
}

// NewManager checks its arguments; it does no I/O.
func NewManager(holder string, ttl time.Duration, clk clock.Clock) (*Manager, error) {
	if err := ValidateHolder(holder); err != nil {
		return nil, fmt.Errorf("lease manager: %w", err)
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("lease manager: ttl must be positive")
	}
	if clk == nil {
		return nil, errors.New("lease manager: nil clock")
	}
	return &Manager{holder: holder, ttl: ttl, clock: clk}, nil
}

// Holder is this manager's holder name.
func (m *Manager) Holder() string { return m.holder }

var errStop = errors.New("stop")

// Read returns the newest record of lease name (the zero State if none).
// An undecodable record reads as expired at its epoch, so that it can be
// superseded rather than blocking the table forever.
func (m *Manager) Read(ctx context.Context, b storage.Bucket, name string) (State, error) {
	// A record can be deleted between the listing and the read (its holder
	// wrote a newer one and removed it): list again.
	for range 5 {
		epoch, found, err := newestEpoch(ctx, b, name)
		if err != nil {
			return State{}, fmt.Errorf("list lease %s: %w", name, err)
		}
		if !found {
			return State{}, nil
		}
		data, err := b.Get(ctx, Key(name, epoch))
		if storage.IsNotFound(err) {
			continue
		}
		if err != nil {
			return State{}, fmt.Errorf("read lease %s: %w", name, err)
		}
		var rec pb.Lease
		if err := decodeProto("lease "+Key(name, epoch), data, &rec); err != nil || rec.Epoch != epoch {
			return State{Epoch: epoch}, nil
		}
		return State{Holder: rec.Holder, Epoch: rec.Epoch, Expires: time.UnixMicro(rec.ExpiresUnixMicros)}, nil
	}
	return State{}, fmt.Errorf("read lease %s: the newest record kept disappearing", name)
}

// newestEpoch finds the newest record's epoch: the first key of the folder
// (epochs are stored inverted), asked of the store as a one-key listing;
// a folder whose first key is not a record is listed in full.
func newestEpoch(ctx context.Context, b storage.Bucket, name string) (uint64, bool, error) {
	a, ok, err := storage.First(ctx, b, Dir(name))
	if err != nil || !ok {
		return 0, false, err
	}
	if e, ok := parseKey(name, a.Key); ok {
		return e, true, nil
	}
	var epoch uint64
	found := false
	err = b.List(ctx, Dir(name), func(a storage.Attrs) error {
		if e, ok := parseKey(name, a.Key); ok {
			epoch, found = e, true
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, false, err
	}
	return epoch, found, nil
}

// Fresh reports whether cur, a record of this holder's lease, needs no
// renewal yet: more than half its TTL is left. Until then no other holder
// may take the lease, so a holder that remembers the record it wrote need
// not read it again.
func (m *Manager) Fresh(cur State) bool {
	return cur.Holder == m.holder && cur.Expires.Sub(m.clock.Now()) > m.ttl/2
}

// TryAcquire takes lease name if it is free or expired, renews it if this
// holder has it and half its TTL has passed, and otherwise reports the
// current holder. held says whether this holder owns the lease on return.
func (m *Manager) TryAcquire(ctx context.Context, b storage.Bucket, name string) (st State, held bool, err error) {
	cur, err := m.Read(ctx, b, name)
	if err != nil {
		return State{}, false, err
	}
	now := m.clock.Now()
	if m.Fresh(cur) {
		return cur, true, nil
	}
	if cur.Holder != m.holder && cur.Live(now) {
		return cur, false, nil
	}
	// Free, expired, or ours and due for renewal: write the next epoch.
	return m.write(ctx, b, name, cur, now.Add(m.ttl))
}

// Renew extends the lease that this holder last knew as held, the record
// prev it wrote or read, without reading it first: it writes the next
// epoch. Had another holder moved on meanwhile, the write collides with
// that holder's record, or is found not to be the newest when read back,
// exactly as a TryAcquire that read a stale record; held then reports the
// loss.
func (m *Manager) Renew(ctx context.Context, b storage.Bucket, name string, prev State) (st State, held bool, err error) {
	if prev.Holder != m.holder || prev.Epoch == 0 {
		return m.TryAcquire(ctx, b, name)
	}
	return m.write(ctx, b, name, prev, m.clock.Now().Add(m.ttl))
}

// Release ends this holder's lease now, so that another instance can take
// the table at once instead of waiting for the expiry. A lease that is no
// longer ours is left alone.
func (m *Manager) Release(ctx context.Context, b storage.Bucket, name string) error {
	cur, err := m.Read(ctx, b, name)
	if err != nil {
		return err
	}
	if cur.Holder != m.holder || !cur.Live(m.clock.Now()) {
		return nil
	}
	_, _, err = m.write(ctx, b, name, cur, m.clock.Now())
	return err
}

func (m *Manager) write(ctx context.Context, b storage.Bucket, name string, cur State, expires time.Time) (State, bool, error) {
	next := State{Holder: m.holder, Epoch: cur.Epoch + 1, Expires: expires}
	data, err := encodeProto(&pb.Lease{Holder: next.Holder, Epoch: next.Epoch, ExpiresUnixMicros: expires.UnixMicro()})
	if err != nil {
		return State{}, false, err
	}
	key := Key(name, next.Epoch)
	// A put whose outcome is unknown is read back: the record holds our
	// bytes only if our put landed.
	switch out, perr := storage.PutNext(ctx, b, key, data, storage.ReadBack{Timeout: m.ttl}); out {
	case storage.PutLanded:
	case storage.PutLost:
		// Someone else moved first; whoever wrote that epoch decides.
		got, err := m.Read(ctx, b, name)
		if err != nil {
			return State{}, false, err
		}
		return got, got.Holder == m.holder && got.Live(m.clock.Now()), nil
	case storage.PutAbsent:
		// It did not land: the newest record says who holds the lease.
		got, err := m.Read(ctx, b, name)
		if err != nil {
			return State{}, false, fmt.Errorf("write lease %s: %w", name, perr)
		}
		return got, false, nil
	default:
		return State{}, false, fmt.Errorf("write lease %s: %w", name, perr)
	}
	// Confirm that our record is the newest. A slow instance that read an
	// old record could otherwise write an epoch whose key an older cleanup
	// had freed, and believe it holds the lease behind a newer record. The
	// listing alone confirms it: a newest key of our epoch is the record our
	// put-if-absent created (a record is deleted only once two newer ones
	// exist). Otherwise the newest record says who holds the lease.
	epoch, found, err := newestEpoch(ctx, b, name)
	if err != nil {
		return State{}, false, fmt.Errorf("list lease %s: %w", name, err)
	}
	if !found || epoch != next.Epoch {
		got, err := m.Read(ctx, b, name)
		if err != nil {
			return State{}, false, err
		}
		if got.Epoch != next.Epoch || got.Holder != m.holder {
			_ = b.Delete(ctx, key) // our record is history already
			return got, got.Holder == m.holder && got.Live(m.clock.Now()), nil
		}
	}
	// Keep the two newest records (the newest decides; the one before makes
	// a put-if-absent from a reader one epoch behind collide). Older ones
	// are history. Best effort: a leftover record is a few bytes.
	if cur.Epoch > 1 {
		_ = b.Delete(ctx, Key(name, cur.Epoch-1))
	}
	return next, next.Live(m.clock.Now()), nil
}
