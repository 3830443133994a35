#!/usr/bin/env python3
"""Transactions with confluent-kafka (librdkafka): a transactional producer and read_committed
and read_uncommitted consumers.

Usage: confluent_txn.py --bootstrap HOST:PORT --topic TOPIC [--transactions N] [--per-txn M]

The producer (transactional.id set; idempotence and acks=all follow) runs N transactions of M
messages each over the topic's partitions, committing all but every third, which it aborts.
A read_committed consumer, assigned every partition from the beginning, must read exactly the
committed messages, each once; a read_uncommitted one must see every message written.
Exits 0 on success; otherwise prints what went wrong to stderr and exits 1.
"""

import argparse
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition


def fail(msg):
    print("confluent_txn: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def read_all(bootstrap, topic, partitions, isolation, want, timeout):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "confluent-txn-" + isolation,
                  "enable.auto.commit": False, "isolation.level": isolation})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = []
    deadline = time.time() + timeout
    idle_until = None
    while time.time() < deadline:
        m = c.poll(0.2)
        if m is None:
            if len(got) >= want:
                if idle_until is None:
                    idle_until = time.time() + 1.0  # anything past want would be a bug: wait for it
                elif time.time() > idle_until:
                    break
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                continue
            fail("%s consumer: %s" % (isolation, m.error()))
        got.append(m.value().decode())
    c.close()
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--transactions", type=int, default=12)
    ap.add_argument("--per-txn", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()

    errors, delivered = [], []
    p = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": "confluent-txn",
                  "transaction.timeout.ms": 20000})
    p.init_transactions(a.timeout)
    committed = []
    for t in range(a.transactions):
        p.begin_transaction()
        batch = []
        for i in range(a.per_txn):
            v = "t%d-%d" % (t, i)
            p.produce(a.topic, value=v, partition=i % a.partitions,
                      on_delivery=lambda err, msg: errors.append((msg.value().decode(), str(err))) if err
                      else delivered.append(msg.value().decode()))
            batch.append(v)
        if t % 3 == 2:
            p.flush(a.timeout)  # the messages reach the log, then the transaction aborts
            p.abort_transaction(a.timeout)
        else:
            p.commit_transaction(a.timeout)
            committed.extend(batch)
    # An abort purges the messages not yet sent: their delivery reports carry _PURGE_QUEUE or
    # _PURGE_INFLIGHT. A committed message must have been delivered.
    bad = [e for e in errors if e[0] in set(committed)]
    if bad:
        fail("delivery errors of committed messages: %s" % bad[:5])

    got = read_all(a.bootstrap, a.topic, a.partitions, "read_committed", len(committed), a.timeout)
    if sorted(got) != sorted(committed):
        missing = set(committed) - set(got)
        extra = [v for v in got if v not in set(committed)]
        fail("read_committed read %d messages (%d missing, %d aborted or extra, %d duplicates); want the %d committed"
             % (len(got), len(missing), len(extra), len(got) - len(set(got)), len(committed)))
    # read_uncommitted sees everything written: the committed messages and those of aborted
    # transactions that were delivered before the abort (an abort purges the rest unsent).
    every = read_all(a.bootstrap, a.topic, a.partitions, "read_uncommitted", len(delivered), a.timeout)
    if sorted(every) != sorted(delivered):
        fail("read_uncommitted read %d messages; want the %d delivered" % (len(every), len(delivered)))
    print("committed %d messages in %d transactions (%d delivered in all); read_committed read exactly them"
          % (len(committed), a.transactions, len(delivered)))


if __name__ == "__main__":
    main()
