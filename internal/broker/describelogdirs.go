package broker

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/topics"
)

func init() { register(kmsg.DescribeLogDirs, 0, 4, handleDescribeLogDirs) }

// handleDescribeLogDirs describes the node's one log dir: the size of each requested partition
// (every partition if Topics is null). Partitions the node does not have are left out, as Kafka.
func handleDescribeLogDirs(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	b := r.conn.b
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = b.topics.Dir()
	if abs, err := filepath.Abs(dir.Dir); err == nil {
		dir.Dir = abs
	}
	dir.TotalBytes, dir.UsableBytes = -1, -1 // UNKNOWN_VOLUME_BYTES, unless statfs answers
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir.Dir, &fs); err == nil {
		dir.TotalBytes = int64(fs.Blocks) * int64(fs.Bsize)
		dir.UsableBytes = int64(fs.Bavail) * int64(fs.Bsize)
	}
	describe := func(t *topics.Topic, parts []int32, all bool) {
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = t.Name
		add := func(p *topics.Partition) {
			if !p.Hosted() {
				return
			}
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition, dp.Size = p.Index, p.Log.Size()
			dt.Partitions = append(dt.Partitions, dp)
		}
		if all {
			for _, p := range t.Partitions {
				add(p)
			}
		} else {
			for _, i := range parts {
				if i >= 0 && int(i) < len(t.Partitions) {
					add(t.Partitions[i])
				}
			}
		}
		if len(dt.Partitions) > 0 {
			dir.Topics = append(dir.Topics, dt)
		}
	}
	if req.Topics == nil {
		for _, t := range b.topics.List() {
			describe(t, nil, true)
		}
	} else {
		for _, rt := range req.Topics {
			if t, ok := b.topics.Get(rt.Topic); ok {
				describe(t, rt.Partitions, false)
			}
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return reply{resp: resp}
}
