package replica

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/transport"
)

// Transport frame kinds of replication.
const (
	KindAppend      transport.Kind = 10
	KindAppendAck   transport.Kind = 11
	KindFollow      transport.Kind = 12
	KindFollowReply transport.Kind = 13
)

// Frames (all integers big endian; a partition ref is topic id [16]byte | i32 partition; an
// array is an i32 count and its elements; bytes are i32 length and the bytes):
//
//	Append      [ref | i32 epoch | i64 prevEnd | i64 hw | i64 logStart | i64 epochStart | bytes batches]
//	AppendAck   [ref | i32 epoch | i8 status | i64 appended | i64 durable]
//	Follow      ref | i32 epoch | i32 seq | i64 logEnd | i64 logStart | [i32 epoch | i64 start]
//	FollowReply ref | i32 epoch | i32 seq | i8 status | i64 truncateTo | i32 commonEpoch | bool reset
//	            | i64 epochStart | i64 leaderLogStart
//
// A follower numbers its Follows and applies only the reply to its latest: a reply to an older
// one was computed from a shorter log, and truncating to it would cut acknowledged batches.

// Ack and follow statuses.
const (
	StatusOK       int8 = 0
	StatusMismatch int8 = 1 // the append did not start at the follower's log end: join again
	StatusStale    int8 = 2 // the receiver is not in that epoch with that role
	StatusFailed   int8 = 3 // the receiver's log failed (poisoned)
	StatusUnknown  int8 = 4 // the receiver hosts no such partition
)

// Append carries one partition's batches from its leader.
type Append struct {
	Ref        controller.PartitionRef
	Epoch      int32
	PrevEnd    int64 // the follower's log end the batches start at
	HW         int64
	LogStart   int64
	EpochStart int64
	Batches    []byte // whole batches; may be empty
}

// AppendAck is a follower's answer to appends (and its later durability news).
type AppendAck struct {
	Ref      controller.PartitionRef
	Epoch    int32
	Status   int8
	Appended int64
	Durable  int64
}

// Follow is a follower joining its leader's epoch.
type Follow struct {
	Ref      controller.PartitionRef
	Epoch    int32
	Seq      int32
	LogEnd   int64
	LogStart int64
	Epochs   []EpochEntry
}

// FollowReply is the leader's answer to Follow.
type FollowReply struct {
	Ref            controller.PartitionRef
	Epoch          int32
	Seq            int32
	Status         int8
	TruncateTo     int64
	CommonEpoch    int32
	Reset          bool
	EpochStart     int64
	LeaderLogStart int64
}

// ErrMalformed is returned for a frame that does not decode.
var ErrMalformed = errors.New("replica: malformed frame")

func appendRef(b []byte, r controller.PartitionRef) []byte {
	b = kbin.AppendUuid(b, r.Topic)
	return kbin.AppendInt32(b, r.Partition)
}

func readRef(r *kbin.Reader) controller.PartitionRef {
	return controller.PartitionRef{Topic: r.Uuid(), Partition: r.Int32()}
}

// AppendAppends encodes appends as one frame body.
func AppendAppends(dst []byte, as []Append) []byte {
	dst = kbin.AppendInt32(dst, int32(len(as)))
	for i := range as {
		a := &as[i]
		dst = appendRef(dst, a.Ref)
		dst = kbin.AppendInt32(dst, a.Epoch)
		dst = kbin.AppendInt64(dst, a.PrevEnd)
		dst = kbin.AppendInt64(dst, a.HW)
		dst = kbin.AppendInt64(dst, a.LogStart)
		dst = kbin.AppendInt64(dst, a.EpochStart)
		dst = kbin.AppendBytes(dst, a.Batches)
	}
	return dst
}

// ParseAppends decodes an Append frame. The batches alias b.
func ParseAppends(b []byte) ([]Append, error) {
	r := kbin.Reader{Src: b}
	n := r.Int32()
	if n < 0 || int(n) > len(b)/44 {
		return nil, fmt.Errorf("%w: %d appends in %d bytes", ErrMalformed, n, len(b))
	}
	out := make([]Append, 0, n)
	for range n {
		a := Append{Ref: readRef(&r), Epoch: r.Int32(), PrevEnd: r.Int64(), HW: r.Int64(), LogStart: r.Int64(),
			EpochStart: r.Int64(), Batches: r.Bytes()}
		out = append(out, a)
	}
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return out, nil
}

// AppendAcks encodes acks as one frame body.
func AppendAcks(dst []byte, as []AppendAck) []byte {
	dst = kbin.AppendInt32(dst, int32(len(as)))
	for _, a := range as {
		dst = appendRef(dst, a.Ref)
		dst = kbin.AppendInt32(dst, a.Epoch)
		dst = kbin.AppendInt8(dst, a.Status)
		dst = kbin.AppendInt64(dst, a.Appended)
		dst = kbin.AppendInt64(dst, a.Durable)
	}
	return dst
}

// ParseAcks decodes an AppendAck frame.
func ParseAcks(b []byte) ([]AppendAck, error) {
	r := kbin.Reader{Src: b}
	n := r.Int32()
	if n < 0 || int(n) > len(b)/41 {
		return nil, fmt.Errorf("%w: %d acks in %d bytes", ErrMalformed, n, len(b))
	}
	out := make([]AppendAck, 0, n)
	for range n {
		out = append(out, AppendAck{Ref: readRef(&r), Epoch: r.Int32(), Status: r.Int8(), Appended: r.Int64(), Durable: r.Int64()})
	}
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return out, nil
}

// AppendFollow encodes a Follow frame body.
func AppendFollow(dst []byte, f *Follow) []byte {
	dst = appendRef(dst, f.Ref)
	dst = kbin.AppendInt32(dst, f.Epoch)
	dst = kbin.AppendInt32(dst, f.Seq)
	dst = kbin.AppendInt64(dst, f.LogEnd)
	dst = kbin.AppendInt64(dst, f.LogStart)
	dst = kbin.AppendInt32(dst, int32(len(f.Epochs)))
	for _, e := range f.Epochs {
		dst = kbin.AppendInt32(dst, e.Epoch)
		dst = kbin.AppendInt64(dst, e.Start)
	}
	return dst
}

// ParseFollow decodes a Follow frame.
func ParseFollow(b []byte) (*Follow, error) {
	r := kbin.Reader{Src: b}
	f := &Follow{Ref: readRef(&r), Epoch: r.Int32(), Seq: r.Int32(), LogEnd: r.Int64(), LogStart: r.Int64()}
	n := r.Int32()
	if n < 0 || int(n) > len(b)/12 {
		return nil, fmt.Errorf("%w: %d epochs in %d bytes", ErrMalformed, n, len(b))
	}
	for range n {
		f.Epochs = append(f.Epochs, EpochEntry{r.Int32(), r.Int64()})
	}
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return f, nil
}

// AppendFollowReply encodes a FollowReply frame body.
func AppendFollowReply(dst []byte, f *FollowReply) []byte {
	dst = appendRef(dst, f.Ref)
	dst = kbin.AppendInt32(dst, f.Epoch)
	dst = kbin.AppendInt32(dst, f.Seq)
	dst = kbin.AppendInt8(dst, f.Status)
	dst = kbin.AppendInt64(dst, f.TruncateTo)
	dst = kbin.AppendInt32(dst, f.CommonEpoch)
	dst = kbin.AppendBool(dst, f.Reset)
	dst = kbin.AppendInt64(dst, f.EpochStart)
	return kbin.AppendInt64(dst, f.LeaderLogStart)
}

// ParseFollowReply decodes a FollowReply frame.
func ParseFollowReply(b []byte) (*FollowReply, error) {
	r := kbin.Reader{Src: b}
	f := &FollowReply{Ref: readRef(&r), Epoch: r.Int32(), Seq: r.Int32(), Status: r.Int8(), TruncateTo: r.Int64(), CommonEpoch: r.Int32(),
		Reset: r.Bool(), EpochStart: r.Int64(), LeaderLogStart: r.Int64()}
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return f, nil
}
