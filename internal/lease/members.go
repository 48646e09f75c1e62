package lease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/storage"
)

// MembersDir holds one heartbeat per live instance.
const MembersDir = LeasesDir + "_members/"

// Members publishes this instance's heartbeat and lists the live
// instances, so that instances can split the tables evenly (Assign) rather
// than the first to start taking them all. The heartbeat is the only
// record an idle instance writes: which instance serves a table follows
// from the live set, so idle tables cost no lease write (see the
// scheduler's lease loop).
type Members struct {
	b      storage.Bucket
	holder string
	ttl    time.Duration
	clock  clock.Clock

	mu     sync.Mutex
	tables string
}

type heartbeat struct {
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
	// Tables fingerprints the table list the instance serves (Fingerprint).
	// Instances split the tables only with those that see the same list:
	// a table assigned to an instance that does not know it would be
	// served by no one. Empty (an older build): taken to match.
	Tables string `json:"tables,omitempty"`
}

// Fingerprint identifies a table list independently of its order: the
// first 16 hex digits of a SHA-256 over the sorted, distinct keys.
func Fingerprint(keys []string) string {
	ks := slices.Clone(keys)
	slices.Sort(ks)
	ks = slices.Compact(ks)
	h := sha256.New()
	for _, k := range ks {
		h.Write([]byte(k))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// SetTables records the fingerprint of this instance's table list, which
// the next heartbeats publish and Live compares the others' with.
func (m *Members) SetTables(fingerprint string) {
	m.mu.Lock()
	m.tables = fingerprint
	m.mu.Unlock()
}

func (m *Members) fingerprint() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tables
}

// NewMembers checks its arguments; it does no I/O.
func NewMembers(b storage.Bucket, holder string, ttl time.Duration, clk clock.Clock) (*Members, error) {
	if b == nil || clk == nil {
		return nil, fmt.Errorf("lease members: nil bucket or clock")
	}
	if err := ValidateHolder(holder); err != nil {
		return nil, fmt.Errorf("lease members: %w", err)
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("lease members: ttl must be positive")
	}
	return &Members{b: b, holder: holder, ttl: ttl, clock: clk}, nil
}

func (m *Members) key(holder string) string { return MembersDir + holder + ".json" }

// Heartbeat (re)writes this instance's record with a fresh expiry.
func (m *Members) Heartbeat(ctx context.Context) error {
	data, _ := json.Marshal(heartbeat{Holder: m.holder, Expires: m.clock.Now().Add(m.ttl).UTC(), Tables: m.fingerprint()})
	if err := m.b.Put(ctx, m.key(m.holder), data); err != nil {
		return fmt.Errorf("publish heartbeat: %w", err)
	}
	return nil
}

// Leave removes this instance's record, so that the others rebalance at
// once on a clean shutdown.
func (m *Members) Leave(ctx context.Context) error {
	if err := m.b.Delete(ctx, m.key(m.holder)); err != nil && !storage.IsNotFound(err) {
		return fmt.Errorf("remove heartbeat: %w", err)
	}
	return nil
}

// Live lists the holders with an unexpired heartbeat, this one included,
// sorted: those whose table list matches this instance's (SetTables), when
// both published one. Records expired for ten TTLs are removed. It costs
// one listing and one read per instance, whatever the number of tables.
func (m *Members) Live(ctx context.Context) ([]string, error) {
	var keys []string
	if err := m.b.List(ctx, MembersDir, func(a storage.Attrs) error {
		if strings.HasSuffix(a.Key, ".json") {
			keys = append(keys, a.Key)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	now := m.clock.Now()
	mine := m.fingerprint()
	live := []string{m.holder}
	for _, k := range keys {
		data, err := m.b.Get(ctx, k)
		if storage.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read member %s: %w", k, err)
		}
		var hb heartbeat
		if json.Unmarshal(data, &hb) != nil || hb.Holder == "" {
			continue
		}
		switch {
		case now.Before(hb.Expires):
			if mine == "" || hb.Tables == "" || hb.Tables == mine {
				live = append(live, hb.Holder)
			}
		case now.Sub(hb.Expires) > 10*m.ttl:
			_ = m.b.Delete(ctx, k) // a long-dead instance
		}
	}
	slices.Sort(live)
	return slices.Compact(live), nil
}

// Assign maps each table to one member: rendezvous hashing with bounded
// load. Tables are taken in sorted order and each goes to the member that
// ranks it highest among those still below ceil(tables/members), so every
// member gets an even share and a change of membership moves few tables.
// Instances that see the same tables and members compute the same map.
func Assign(tables, members []string) map[string]string {
	out := make(map[string]string, len(tables))
	if len(members) == 0 {
		return out
	}
	ts := slices.Clone(tables)
	slices.Sort(ts)
	ts = slices.Compact(ts)
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	limit := (len(ts) + len(ms) - 1) / len(ms)
	load := make(map[string]int, len(ms))
	for _, t := range ts {
		best, bestScore := "", uint64(0)
		for _, m := range ms {
			if load[m] >= limit {
				continue
			}
			if s := score(t, m); best == "" || s > bestScore {
				best, bestScore = m, s
			}
		}
		out[t] = best
		load[best]++
	}
	return out
}

func score(table, member string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(table))
	h.Write([]byte{0})
	h.Write([]byte(member))
	// fnv alone mixes the last bytes poorly; finish with splitmix64.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
