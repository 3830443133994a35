package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// The checkpoint file ("checkpoint" in the partition directory) holds what is not derivable from
// the segments, replaced atomically (write "checkpoint.tmp", sync, rename, sync the directory):
//
//	offset size field
//	 0      4   magic "RNCP"
//	 4      8   log start offset (advanced by DeleteRecords or retention)
//	12      8   first dirty offset: compaction has cleaned everything below it
//	20      4   CRC-32C of bytes 0..19
const (
	checkpointName = "checkpoint"
	checkpointSize = 24
)

type checkpoint struct {
	logStart   int64
	firstDirty int64
}

func (c checkpoint) encode() []byte {
	b := make([]byte, 0, checkpointSize)
	b = append(b, "RNCP"...)
	b = binary.BigEndian.AppendUint64(b, uint64(c.logStart))
	b = binary.BigEndian.AppendUint64(b, uint64(c.firstDirty))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

var errBadCheckpoint = errors.New("logstore: checkpoint file is invalid")

func decodeCheckpoint(b []byte) (checkpoint, error) {
	if len(b) != checkpointSize || string(b[:4]) != "RNCP" || crc32.Checksum(b[:20], castagnoli) != binary.BigEndian.Uint32(b[20:]) {
		return checkpoint{}, errBadCheckpoint
	}
	return checkpoint{logStart: int64(binary.BigEndian.Uint64(b[4:])), firstDirty: int64(binary.BigEndian.Uint64(b[12:]))}, nil
}

func writeCheckpoint(fs vfs.FS, dir string, c checkpoint) error {
	return vfs.WriteFileAtomic(fs, dir, checkpointName, c.encode())
}

// readCheckpoint returns the checkpoint, or ok=false if it is missing. A checkpoint that does not
// decode is errBadCheckpoint (replaced atomically, it is never torn: the disk damaged it). Any
// other error reading it is returned too: taken for a missing file, it made records that
// DeleteRecords or retention had removed readable again.
func readCheckpoint(fs vfs.FS, dir string) (checkpoint, bool, error) {
	b, err := vfs.ReadFile(fs, dir+"/"+checkpointName)
	if errors.Is(err, vfs.ErrNotExist) {
		return checkpoint{}, false, nil
	}
	if err != nil {
		return checkpoint{}, false, fmt.Errorf("logstore: reading the checkpoint: %w", err)
	}
	c, err := decodeCheckpoint(b)
	return c, err == nil, err
}
