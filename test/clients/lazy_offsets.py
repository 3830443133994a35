#!/usr/bin/env python3
"""What a Python client reports as the offset of a produce acknowledged without one.

Usage: lazy_offsets.py --client confluent|kafka-python --bootstrap HOST:PORT --topic TOPIC [--count N]

Produces --count messages (idempotent where the client supports it, acks=all) and prints
"acked N with-offset K min A max B none M": K acknowledgements carried an offset of 0 or more,
A and B are the smallest and largest offset reported (-1 if none was a number), and M were
reported as None (confluent-kafka's "no offset"). Runnel answers produce to a runnel.sequencing=lazy topic with base offset -1 (Kafka's
"no offset"); this shows what each client makes of it. Exits 0 if every message was
acknowledged, else prints why to stderr and exits 1.
"""

import argparse
import sys


def fail(msg):
    print("lazy_offsets: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def confluent(args):
    from confluent_kafka import Producer

    offsets, errors = [], []

    def report(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            offsets.append(msg.offset())

    p = Producer({"bootstrap.servers": args.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    for i in range(args.count):
        p.produce(args.topic, key=str(i), value="p/%d" % i, on_delivery=report)
        p.poll(0)
    if p.flush(60) != 0:
        fail("messages still in flight after 60 s")
    return offsets, errors


def kafka_python(args):
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=args.bootstrap, acks="all", linger_ms=5)
    futures = [p.send(args.topic, key=str(i).encode(), value=("p/%d" % i).encode()) for i in range(args.count)]
    offsets, errors = [], []
    for f in futures:
        try:
            offsets.append(f.get(timeout=60).offset)
        except Exception as e:  # noqa: BLE001 - any failure is reported
            errors.append(repr(e))
    p.close()
    return offsets, errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", required=True, choices=["confluent", "kafka-python"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--count", type=int, default=200)
    args = ap.parse_args()
    offsets, errors = (confluent if args.client == "confluent" else kafka_python)(args)
    if errors:
        fail("%d errors, first: %s" % (len(errors), errors[0]))
    if len(offsets) != args.count:
        fail("%d of %d acknowledged" % (len(offsets), args.count))
    numbers = [o for o in offsets if o is not None]
    print("acked %d with-offset %d min %d max %d none %d" % (len(offsets), sum(1 for o in numbers if o >= 0),
                                                             min(numbers, default=-1), max(numbers, default=-1),
                                                             len(offsets) - len(numbers)))


if __name__ == "__main__":
    main()
