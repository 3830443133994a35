#!/usr/bin/env python3
"""Consume with a confluent-kafka (librdkafka) group consumer and commit what was consumed.

Usage: confluent_group.py --bootstrap HOST:PORT --topic TOPIC --group GROUP --want N [--timeout S]

Subscribes to TOPIC in GROUP (classic protocol, librdkafka's default range/roundrobin
assignors), reads until it has N messages or the timeout passes, committing each message
synchronously right after reading it, then closes (LeaveGroup). Prints one line per message:
"partition offset value". Exits 0 if it read N messages, else prints why to stderr and exits 1.
"""

import argparse
import sys
import time

from confluent_kafka import Consumer, KafkaError


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--want", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()

    errors = []
    c = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 10000,
        "error_cb": lambda err: errors.append(str(err)),
    })
    c.subscribe([args.topic])
    got = []
    deadline = time.time() + args.timeout
    while len(got) < args.want and time.time() < deadline:
        msg = c.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() != KafkaError._PARTITION_EOF:
                errors.append("consume: %s" % msg.error())
            continue
        got.append("%d %d %s" % (msg.partition(), msg.offset(), msg.value().decode()))
        c.commit(message=msg, asynchronous=False)
    c.close()
    for line in got:
        print(line)
    if len(got) < args.want:
        print("confluent_group: FAIL: read %d of %d messages; errors: %s" % (len(got), args.want, errors), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
