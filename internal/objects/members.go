package objects

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runnel-dev/runnel/internal/objstore"
)

// Service discovery through the object store (docs/object-topics.md §9.5). Every process with
// an object store announces itself under members/ every AnnounceInterval, and every
// RipcordAnnounceInterval while it is in Ripcord mode. A process in Ripcord mode lists the
// announcements, so Metadata names the processes that take writes now instead of the ones the
// last metadata image knew (which may be the very ones that are down). An announcement's key
// carries all it says (one LIST is a full view, no GET per member), and its age is the store's
// own modification time, so the processes' clocks do not matter.

// Member is one process's announcement.
type Member struct {
	Node  int32  `json:"node"`
	Host  string `json:"host"`
	Port  int32  `json:"port"`
	Rack  string `json:"rack,omitempty"`
	Agent bool   `json:"agent,omitempty"`
	// Ripcording: in Ripcord mode when it announced (takes writes without the controller).
	Ripcording bool `json:"ripcording,omitempty"`
	// Listeners are its Kafka listeners' advertised addresses by name ("host:port", or ":port"
	// on Host); Host and Port are the first one's. An announcement without them names only
	// Host and Port.
	Listeners map[string]string `json:"listeners,omitempty"`
}

// Endpoint is the member's advertised address on the named listener; ok is false when it has
// no such listener.
func (m Member) Endpoint(listener string) (host string, port int32, ok bool) {
	if len(m.Listeners) == 0 {
		return m.Host, m.Port, true
	}
	addr, ok := m.Listeners[listener]
	if !ok {
		return "", 0, false
	}
	h, p, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(p)
	if err != nil || perr != nil || n <= 0 || n > 65535 {
		return "", 0, false
	}
	if h == "" {
		h = m.Host
	}
	return h, int32(n), true
}

// maxMemberSegment bounds the encoded part of an announcement's key: it is one path component
// in a file:// store, whose file systems take names of up to 255 bytes.
const maxMemberSegment = 255

// Discovery timing: an announcement every AnnounceInterval (RipcordAnnounceInterval in Ripcord
// mode); a Ripcord announcement older than RipcordTTL is a process that stopped or lost the
// store; announcements older than MemberForget are deleted (a crash leaves one behind).
const (
	AnnounceInterval        = 10 * time.Second
	RipcordAnnounceInterval = 2 * time.Second
	RipcordTTL              = 6 * time.Second
	MemberForget            = time.Hour
)

// MemberPrefix is where processes announce themselves.
const MemberPrefix = "members/"

// MemberKey is the key of a process's announcement: members/<node>/<base64url of its JSON>.
func MemberKey(m Member) string {
	b, _ := json.Marshal(m)
	return fmt.Sprintf("%s%d/%s", MemberPrefix, m.Node, base64.RawURLEncoding.EncodeToString(b))
}

// ParseMemberKey reads an announcement's key.
func ParseMemberKey(key string) (Member, bool) {
	rest, ok := strings.CutPrefix(key, MemberPrefix)
	if !ok {
		return Member{}, false
	}
	_, enc, ok := strings.Cut(rest, "/")
	if !ok {
		return Member{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	var m Member
	if err != nil || json.Unmarshal(b, &m) != nil || m.Host == "" || m.Port <= 0 || m.Port > 65535 {
		return Member{}, false
	}
	return m, MemberKey(m) == key
}

// Directory announces this process and, while it is in Ripcord mode, lists the others.
type Directory struct {
	store      objstore.Store
	self       Member
	ripcording func() bool
	logger     *slog.Logger

	mu      sync.Mutex
	members []Member // the last list of processes in Ripcord mode (self included), in node order
}

// NewDirectory returns a directory announcing self; ripcording reports whether this process is
// in Ripcord mode now (nil: never).
func NewDirectory(store objstore.Store, self Member, ripcording func() bool, logger *slog.Logger) *Directory {
	if ripcording == nil {
		ripcording = func() bool { return false }
	}
	if logger == nil {
		logger = slog.Default()
	}
	if len(self.Listeners) > 0 {
		compact := make(map[string]string, len(self.Listeners))
		for name, addr := range self.Listeners { // ":port" for the listeners on Host
			if h, p, err := net.SplitHostPort(addr); err == nil && h == self.Host {
				addr = ":" + p
			}
			compact[name] = addr
		}
		self.Listeners = compact
	}
	if k := MemberKey(self); len(k)-strings.LastIndexByte(k, '/')-1 > maxMemberSegment {
		logger.Warn("objects: this process's listeners make its announcement key too long for an object store; announcing the first listener only",
			"key_bytes", len(k), "listeners", len(self.Listeners))
		self.Listeners = nil
	}
	return &Directory{store: store, self: self, ripcording: ripcording, logger: logger}
}

// Run announces the process until ctx ends, then withdraws the announcement. In Ripcord mode it
// announces more often and lists the announcements every RipcordAnnounceInterval.
func (d *Directory) Run(ctx context.Context) {
	var key string // the announcement in the store
	var announced, listed time.Time
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		me := d.self
		me.Ripcording = d.ripcording()
		every := AnnounceInterval
		if me.Ripcording {
			every = RipcordAnnounceInterval
		}
		if k := MemberKey(me); k != key || time.Since(announced) >= every {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := d.store.Put(pctx, k, nil); err != nil {
				if ctx.Err() == nil {
					d.logger.Warn("objects: announcing this process in the object store", "key", k, "err", err)
				}
			} else {
				if key != "" && key != k {
					d.store.Delete(pctx, key)
				}
				key, announced = k, time.Now()
			}
			cancel()
		}
		if me.Ripcording && time.Since(listed) >= RipcordAnnounceInterval {
			d.Refresh(ctx)
			listed = time.Now()
		} else if !me.Ripcording && !listed.IsZero() { // out of Ripcord mode: the next outage lists afresh
			d.mu.Lock()
			d.members, listed = nil, time.Time{}
			d.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			if key != "" {
				dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				d.store.Delete(dctx, key) // a clean stop leaves at once; a crash ages out
				cancel()
			}
			return
		case <-t.C:
		}
	}
}

// Refresh lists the announcements now. A failed listing keeps the last list (availability
// first).
func (d *Directory) Refresh(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	objs, err := d.store.List(lctx, MemberPrefix, "", 0)
	cancel()
	if err != nil {
		d.logger.Warn("objects: listing the processes announced in the object store; keeping the last list", "err", err)
		return err
	}
	live := RipcordMembers(objs, d.self, newest(objs))
	d.mu.Lock()
	d.members = live
	d.mu.Unlock()
	return nil
}

// Members returns the processes in Ripcord mode by the last listing, this one included.
func (d *Directory) Members() []Member {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.members == nil {
		return []Member{d.self}
	}
	return d.members
}

// newest is the latest modification time of a listing: "now" by the store's clock (a process
// in Ripcord mode lists right after announcing itself).
func newest(objs []objstore.Object) time.Time {
	var t time.Time
	for _, o := range objs {
		if o.Modified.After(t) {
			t = o.Modified
		}
	}
	return t
}

// RipcordMembers picks the announcements in Ripcord mode made within RipcordTTL of now (the
// store's clock), plus self, in node order.
func RipcordMembers(objs []objstore.Object, self Member, now time.Time) []Member {
	byNode := map[int32]Member{self.Node: self}
	for _, o := range objs {
		m, ok := ParseMemberKey(o.Key)
		if !ok || !m.Ripcording || m.Node == self.Node || now.Sub(o.Modified) > RipcordTTL {
			continue
		}
		byNode[m.Node] = m
	}
	out := make([]Member, 0, len(byNode))
	for _, m := range byNode {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// Rendezvous picks the candidate that hashes highest with key (rendezvous hashing: when a
// candidate joins or leaves, only the keys it wins or won move); -1 if there is none. Object
// partitions' Metadata leaders and the slow path's runs are spread over processes with it.
// It allocates nothing: Metadata calls it for every object partition.
func Rendezvous(key []byte, candidates []int32) int32 {
	best, bestH := int32(-1), uint64(0)
	var buf [16]byte
	for _, n := range candidates {
		v := mix(fnv1a(fnv1a(fnvOffset, key), strconv.AppendInt(append(buf[:0], '/'), int64(n), 10)))
		if best < 0 || v > bestH {
			best, bestH = n, v
		}
	}
	return best
}

// FNV-1a, 64 bits (hash/fnv's, without its allocation per use).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// mix spreads FNV's last bytes over the whole word (splitmix64's finalizer): keys that differ
// only in a candidate's last digit otherwise compare by a few low bits, and the shares skew
// (one node of four got 12% of the keys).
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

func fnv1a(h uint64, b []byte) uint64 {
	for _, c := range b {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}
