#!/usr/bin/env python3
"""Describe consumer groups with confluent-kafka's (librdkafka's) AdminClient.

Usage: confluent_describe_groups.py --bootstrap HOST:PORT GROUP...

Prints one line per group: "GROUP STATE TYPE MEMBERS ASSIGNED", where ASSIGNED is the number of
partitions assigned over all members and TYPE the group type librdkafka reports. Exits 1 with
the error on stderr if a group cannot be described.
"""

import argparse
import sys

from confluent_kafka.admin import AdminClient


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("groups", nargs="+")
    args = ap.parse_args()
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    futures = admin.describe_consumer_groups(args.groups, request_timeout=20)
    failed = False
    for group, fut in futures.items():
        try:
            d = fut.result(timeout=30)
        except Exception as e:  # a KafkaException with the broker's error
            print("confluent_describe_groups: %s: %s" % (group, e), file=sys.stderr)
            failed = True
            continue
        assigned = sum(len(m.assignment.topic_partitions) for m in d.members if m.assignment)
        group_type = getattr(d, "type", None)
        print("%s %s %s %d %d" % (group, d.state.name, group_type.name if group_type is not None else "-", len(d.members), assigned))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
