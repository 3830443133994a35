#!/usr/bin/env python3
"""Produce messages with confluent-kafka (librdkafka) and consume them back, without a group.

Usage: confluent_roundtrip.py --bootstrap HOST:PORT --topic TOPIC [--count N] [--codecs none,gzip,...]
                              [-X key=value ...]

-X adds a librdkafka property to producer and consumer (security.protocol, sasl.*, ssl.*).

For every codec, a producer (compression.type=codec, acks=all, no idempotence) writes --count
messages to partition 0 of the topic. Then a Consumer, assigned partition 0 from the beginning
(no subscribe, no commits: consumer groups are not served yet), reads until it has every message
or the timeout passes, and checks count, order, keys, values and headers.
Exits 0 on success; otherwise prints what went wrong to stderr and exits 1.
"""

import argparse
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition


def fail(msg):
    print("confluent_roundtrip: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--codecs", default="none,gzip,snappy,lz4,zstd")
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("-X", action="append", default=[], help="key=value librdkafka property")
    args = ap.parse_args()
    extra = dict(kv.split("=", 1) for kv in args.X)

    errors = []

    def on_error(err):
        errors.append("client error: %s" % err)

    expected = []
    for codec in args.codecs.split(","):
        delivered = []

        def on_delivery(err, msg, codec=codec):
            if err is not None:
                errors.append("delivery (%s): %s" % (codec, err))
            else:
                delivered.append(msg.offset())

        p = Producer({
            "bootstrap.servers": args.bootstrap,
            "compression.type": codec,
            "acks": "all",
            "enable.idempotence": False,
            "linger.ms": 5,
            "error_cb": on_error,
            **extra,
        })
        for i in range(args.count):
            key = ("%s-%06d" % (codec, i)).encode()
            value = ("value %s %06d " % (codec, i) + "x" * 64).encode()
            headers = [("codec", codec.encode()), ("i", str(i).encode())]
            p.produce(args.topic, key=key, value=value, headers=headers, partition=0, on_delivery=on_delivery)
            expected.append((key, value, headers))
            p.poll(0)
        left = p.flush(args.timeout)
        if left:
            fail("%d messages (%s) still undelivered after %.0fs; errors: %s" % (left, codec, args.timeout, errors))
        if errors:
            fail("producing with %s: %s" % (codec, "; ".join(errors[:5])))
        if len(delivered) != args.count:
            fail("%s: %d delivery reports, want %d" % (codec, len(delivered), args.count))
        print("produced %d messages with compression %s" % (args.count, codec))

    c = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": "confluent-roundtrip",  # required by the client; unused: we assign, never commit
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "error_cb": on_error,
        **extra,
    })
    c.assign([TopicPartition(args.topic, 0, OFFSET_BEGINNING)])
    got = []
    eof = False
    deadline = time.time() + args.timeout
    while time.time() < deadline and not (eof and len(got) >= len(expected)):
        if len(got) >= len(expected):  # all here: the end-of-partition event is due at once
            deadline = min(deadline, time.time() + 5)
        msg = c.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                eof = True
                continue
            fail("consume: %s" % msg.error())
        eof = False
        got.append((msg.key(), msg.value(), msg.headers() or [], msg.offset()))
    c.close()
    if errors:
        fail("; ".join(errors[:5]))
    if len(got) != len(expected):
        fail("consumed %d messages, want %d (reached end of partition: %s)" % (len(got), len(expected), eof))
    for i, ((key, value, headers), (gkey, gvalue, gheaders, offset)) in enumerate(zip(expected, got)):
        if offset != i:
            fail("message %d has offset %d" % (i, offset))
        if (gkey, gvalue, [(k, bytes(v)) for k, v in gheaders]) != (key, value, headers):
            fail("message %d = %r %r %r; want %r %r %r" % (i, gkey, gvalue, gheaders, key, value, headers))
    if not eof:
        fail("all %d messages consumed but the end of the partition was never reported" % len(got))
    print("consumed %d messages back in order; end of partition reported" % len(got))


if __name__ == "__main__":
    main()
