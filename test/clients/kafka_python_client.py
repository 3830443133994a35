#!/usr/bin/env python3
"""kafka-python against Runnel: an idempotent producer, group consumers, transactions.

Usage:
  kafka_python_client.py produce BOOTSTRAP TOPIC N
      an idempotent producer (enable_idempotence, acks=all) sends values "n/0".."n/N-1";
      prints "acked N".
  kafka_python_client.py consume BOOTSTRAP TOPIC GROUP WANT [read_committed]
      a group consumer reads until it has WANT records or 60 s pass, committing the offset
      after each record it takes, then closes (leaving the group); prints
      "PARTITION OFFSET VALUE" per record.
  kafka_python_client.py txn BOOTSTRAP TOPIC T
      a transactional producer runs T transactions of 10 values "t/<i>/<j>" each, aborting
      every third (i % 3 == 1) and committing the others; prints "committed C of N".
If the environment variable RUNNEL_CLIENT_CONFIG_JSON holds a JSON object, its members
(security_protocol, sasl_mechanism, sasl_kerberos_service_name, ...) are added to every
client's arguments.
Exits 0 on success, else prints why to stderr and exits 1.
"""

import json
import os
import sys
import time


def extra():
    return json.loads(os.environ.get("RUNNEL_CLIENT_CONFIG_JSON") or "{}")


def fail(msg):
    print("kafka_python_client: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def produce(bootstrap, topic, n):
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=5, **extra())
    futures = [p.send(topic, key=str(i).encode(), value=("n/%d" % i).encode()) for i in range(n)]
    p.flush(60)
    for f in futures:
        f.get(timeout=60)  # raises the record's error, if any
    p.close()
    print("acked %d" % n)


def consume(bootstrap, topic, group, want, isolation):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, isolation_level=isolation, session_timeout_ms=10000, **extra())
    got = []
    deadline = time.time() + 60
    while len(got) < want and time.time() < deadline:
        for tp, records in c.poll(timeout_ms=500).items():
            for r in records:
                if len(got) >= want:
                    break
                got.append("%d %d %s" % (r.partition, r.offset, r.value.decode()))
                c.commit({TopicPartition(tp.topic, tp.partition): OffsetAndMetadata(r.offset + 1, "", -1)})
    c.close()
    for line in got:
        print(line)
    if len(got) < want:
        fail("read %d of %d records" % (len(got), want))


def txn(bootstrap, topic, transactions):
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kafka-python-txn-" + topic)
    p.init_transactions()
    committed = 0
    for i in range(transactions):
        p.begin_transaction()
        for j in range(10):
            p.send(topic, value=("t/%d/%d" % (i, j)).encode())
        p.flush(60)
        if i % 3 == 1:
            p.abort_transaction()
        else:
            p.commit_transaction()
            committed += 10
    p.close()
    print("committed %d of %d" % (committed, transactions * 10))


def main():
    if len(sys.argv) < 5:
        fail("usage: produce|consume|txn BOOTSTRAP TOPIC ...")
    cmd, bootstrap, topic = sys.argv[1:4]
    if cmd == "produce":
        produce(bootstrap, topic, int(sys.argv[4]))
    elif cmd == "consume":
        isolation = sys.argv[6] if len(sys.argv) > 6 else "read_uncommitted"
        consume(bootstrap, topic, sys.argv[4], int(sys.argv[5]), isolation)
    elif cmd == "txn":
        txn(bootstrap, topic, int(sys.argv[4]))
    else:
        fail("unknown command " + cmd)


if __name__ == "__main__":
    main()
