// Package bench drives any Kafka-compatible cluster with an open-loop workload and measures
// produce and end-to-end latency without hiding coordinated omission. `runnel bench` is its
// command line; docs/bench.md is the user's guide.
//
// # Measurement
//
// Each producer owns a Schedule: its i-th record's intended send time is start + i/rate. The
// producer waits until that time (it never sends early), stamps the time into the record and
// hands the record to its franz-go client with one Produce call. It never waits for an ack
// before the next record. If it falls behind (Produce blocks because max_buffered_records are
// in flight, or the goroutine was not scheduled), the schedule does not move: the backlog is
// sent at once, each record still stamped with the time it should have gone out at, so the
// delay appears as latency and not as a quietly lower rate.
//
//	send lag         = Produce call      - intended send time  (the harness's own delay)
//	produce latency  = ack callback      - intended send time
//	e2e latency      = consumer receipt  - intended send time  (PollFetches returned it)
//
// At rate 0 (maximum rate) there is no schedule: the intended time is the Produce call, and
// latency includes the wait in the client's buffer, which the loop keeps full.
//
// # Record value
//
// Every value is record_size bytes:
//
//	0          8                                 record_size
//	+----------+---------------------------------+
//	| intended | filler                          |
//	+----------+---------------------------------+
//
//	intended  the intended send time, Unix nanoseconds, big-endian int64 (wall clock: producers
//	          and consumers run in one process)
//	filler    random bytes, fixed per producer, so compression sees incompressible data
//
// Keys: none (nil; franz-go's default sticky uniform-bytes partitioner), random (16 random
// bytes, murmur2-hashed like the Java client), round-robin (record i of the run goes to
// partition i mod partitions, with the partition number as a 4-byte key).
//
// # Windows and histograms
//
// A run is warm-up, then the measured window of length duration, then a drain. Only records
// whose intended send time is in the window are counted in the final latencies and throughput;
// all of them show in the per-second progress. Latencies go into HDR histograms in microseconds
// from 1 µs to 60 s with 3 significant digits; a larger value is recorded as 60 s and counted
// as clamped. Each producer and each consumer has its own Recorder; the result merges them.
//
// # Linger
//
// kgo.ProducerLinger is per partition: a partition's buffer that holds one unfilled batch waits
// up to the linger from when its batch started before it asks for a produce request. The
// bench always sets it from the workload (franz-go v1.22 would default to 10 ms) and puts no
// batcher of its own in front of the client, so the producer-side delay is at most one linger.
//
// # Ownership
//
// Run owns every client, goroutine and topic it makes and releases them before it returns.
// A Result's histograms belong to it; Histograms returns them for reading only.
package bench
