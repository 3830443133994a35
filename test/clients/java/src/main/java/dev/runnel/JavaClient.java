package dev.runnel;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Apache Kafka Java client against Runnel, with the client's defaults unless noted.
 *
 * <pre>
 * produce BOOTSTRAP TOPIC N
 *     an idempotent producer (the default since Kafka 3.0: enable.idempotence=true, acks=all,
 *     5 requests in flight) sends values "j/0".."j/N-1" keyed by their number and waits for
 *     every ack; prints "acked N with-offset K min A max B": how many acks had an offset
 *     (RecordMetadata.hasOffset()), and the smallest and largest offset reported.
 * consume BOOTSTRAP TOPIC GROUP PROTOCOL WANT [INSTANCE_ID [RACK]]
 *     a group consumer (group.protocol=classic or consumer, i.e. KIP-848) subscribes, reads
 *     until it has WANT records (or 60 s pass), committing synchronously after each poll exactly
 *     the records it took, then closes (leaving the group; a static member, with INSTANCE_ID as
 *     group.instance.id, leaves for a while; "" for none); RACK sets client.rack; prints
 *     "PARTITION OFFSET VALUE" per record.
 * member BOOTSTRAP TOPIC GROUP PROTOCOL STOPFILE
 *     a group consumer (group.protocol=classic, with the default assignors, or consumer) that
 *     reads until the file STOPFILE exists, committing synchronously after each poll and when
 *     partitions are revoked, then closes (leaving the group); prints "PARTITION OFFSET VALUE"
 *     per record and "error ..." for each failed commit.
 * txn-etl BOOTSTRAP IN OUT GROUP TXNID WANT ABORT_PERCENT SECONDS
 *     consume-transform-produce with exactly-once: a read_committed group consumer of IN and a
 *     transactional producer copying each record to OUT, with the consumer's offsets committed
 *     in the same transaction (sendOffsetsToTransaction); ABORT_PERCENT of the transactions are
 *     aborted on purpose (the consumer then goes back to the committed offsets). Errors (a broker
 *     killed under it) abort the transaction, or recreate producer and consumer when fatal. Runs
 *     until WANT input records were committed, nothing was left to read for 60 s, or SECONDS pass;
 *     prints "committed N aborted M failed F" (N counts commits the client saw succeed).
 * share-member BOOTSTRAP TOPIC GROUP STOPFILE
 *     a share group consumer (KafkaShareConsumer, KIP-932, share.acknowledgement.mode=explicit)
 *     that reads until the file STOPFILE exists; it releases every record whose value starts
 *     with "poison" (so it comes back until its delivery limit archives it) and accepts the
 *     others, committing the acknowledgements after each poll (commitSync); prints
 *     "PARTITION OFFSET VALUE DELIVERY_COUNT" per record and "error ..." for a failed commit.
 * </pre>
 *
 * If the environment variable RUNNEL_CLIENT_CONFIG names a properties file, its properties
 * (security.protocol, sasl.*, ssl.*) are added to every client's.
 *
 * Exits 0 on success, 1 with the reason on stderr otherwise.
 */
public final class JavaClient {
  public static void main(String[] args) throws Exception {
    switch (args.length > 0 ? args[0] : "") {
      case "produce" -> produce(args[1], args[2], Integer.parseInt(args[3]));
      case "consume" -> consume(args[1], args[2], args[3], args[4], Integer.parseInt(args[5]),
          args.length > 6 && !args[6].isEmpty() ? args[6] : null, args.length > 7 ? args[7] : null);
      case "member" -> member(args[1], args[2], args[3], args[4], args[5]);
      case "share-member" -> shareMember(args[1], args[2], args[3], args[4]);
      case "txn-etl" -> txnEtl(args[1], args[2], args[3], args[4], args[5], Integer.parseInt(args[6]),
          Integer.parseInt(args[7]), Integer.parseInt(args[8]));
      default -> fail("usage: produce BOOTSTRAP TOPIC N | consume BOOTSTRAP TOPIC GROUP PROTOCOL WANT [INSTANCE_ID [RACK]]"
          + " | member BOOTSTRAP TOPIC GROUP PROTOCOL STOPFILE | share-member BOOTSTRAP TOPIC GROUP STOPFILE"
          + " | txn-etl BOOTSTRAP IN OUT GROUP TXNID WANT ABORT_PERCENT SECONDS");
    }
  }

  /** The properties every client starts from: RUNNEL_CLIENT_CONFIG's, if set. */
  private static Properties base() {
    Properties p = new Properties();
    String file = System.getenv("RUNNEL_CLIENT_CONFIG");
    if (file != null && !file.isEmpty()) {
      try (java.io.FileReader r = new java.io.FileReader(file)) {
        p.load(r);
      } catch (java.io.IOException e) {
        fail("reading RUNNEL_CLIENT_CONFIG " + file + ": " + e);
      }
    }
    return p;
  }

  private static void fail(String why) {
    System.err.println("JavaClient: FAIL: " + why);
    System.exit(1);
  }

  private static void produce(String bootstrap, String topic, int n) throws Exception {
    Properties p = base();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
      List<Future<RecordMetadata>> acks = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        acks.add(producer.send(new ProducerRecord<>(topic, Integer.toString(i), "j/" + i)));
      }
      int withOffset = 0;
      long min = Long.MAX_VALUE, max = Long.MIN_VALUE;
      for (Future<RecordMetadata> f : acks) {
        RecordMetadata md = f.get();
        if (md.hasOffset()) {
          withOffset++;
        }
        min = Math.min(min, md.offset());
        max = Math.max(max, md.offset());
      }
      System.out.println("acked " + n + " with-offset " + withOffset + " min " + min + " max " + max);
    }
  }

  private static void shareMember(String bootstrap, String topic, String group, String stopFile) {
    Properties p = base();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(p)) {
      consumer.subscribe(List.of(topic));
      while (!new java.io.File(stopFile).exists()) {
        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
        for (ConsumerRecord<String, String> r : records) {
          System.out.println(r.partition() + " " + r.offset() + " " + r.value() + " " + r.deliveryCount().orElse((short) -1));
          consumer.acknowledge(r, r.value().startsWith("poison") ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
        }
        if (!records.isEmpty()) {
          for (var e : consumer.commitSync().entrySet()) {
            if (e.getValue().isPresent()) {
              System.out.println("error " + e.getKey() + " " + e.getValue().get());
            }
          }
        }
      }
    }
  }

  private static void consume(String bootstrap, String topic, String group, String protocol, int want,
      String instanceId, String rack) {
    Properties p = groupConsumer(bootstrap, group, protocol);
    if (instanceId != null) {
      p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
    }
    if (rack != null) {
      p.put(ConsumerConfig.CLIENT_RACK_CONFIG, rack);
    }
    List<String> got = new ArrayList<>();
    long deadline = System.currentTimeMillis() + 60_000;
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
      consumer.subscribe(List.of(topic));
      while (got.size() < want && System.currentTimeMillis() < deadline) {
        // Commit exactly what was taken: records polled past WANT are left for the next member.
        Map<TopicPartition, OffsetAndMetadata> taken = new HashMap<>();
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
          if (got.size() < want) {
            got.add(r.partition() + " " + r.offset() + " " + r.value());
            taken.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
          }
        }
        if (!taken.isEmpty()) {
          consumer.commitSync(taken);
        }
      }
    }
    got.forEach(System.out::println);
    if (got.size() < want) {
      fail("read " + got.size() + " of " + want + " records");
    }
  }

  /**
   * The properties of the group consumers of consume and member: manual commits, reading from the
   * start, 50 records per poll.
   */
  private static Properties groupConsumer(String bootstrap, String group, String protocol) {
    Properties p = base();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    return p;
  }

  private static void member(String bootstrap, String topic, String group, String protocol, String stopFile) {
    Properties p = groupConsumer(bootstrap, group, protocol);
    if (protocol.equals("classic")) {
      p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
      p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
    }
    Map<TopicPartition, OffsetAndMetadata> taken = new HashMap<>();
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
      consumer.subscribe(List.of(topic), new org.apache.kafka.clients.consumer.ConsumerRebalanceListener() {
        @Override
        public void onPartitionsRevoked(java.util.Collection<TopicPartition> partitions) {
          commit(consumer, taken);
        }

        @Override
        public void onPartitionsAssigned(java.util.Collection<TopicPartition> partitions) {}
      });
      while (!new java.io.File(stopFile).exists()) {
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
          System.out.println(r.partition() + " " + r.offset() + " " + r.value());
          taken.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
        }
        commit(consumer, taken);
      }
      commit(consumer, taken);
    }
  }

  /** commit commits and forgets the offsets taken; a failure is printed, not thrown. */
  private static void commit(KafkaConsumer<String, String> consumer, Map<TopicPartition, OffsetAndMetadata> taken) {
    if (taken.isEmpty()) {
      return;
    }
    try {
      consumer.commitSync(taken);
    } catch (Exception e) {
      System.out.println("error " + e);
    }
    taken.clear();
  }

  private static KafkaConsumer<String, String> etlConsumer(String bootstrap, String in, String group) {
    Properties p = base();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "40");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    KafkaConsumer<String, String> c = new KafkaConsumer<>(p);
    c.subscribe(List.of(in));
    return c;
  }

  private static KafkaProducer<String, String> etlProducer(String bootstrap, String txnId) {
    Properties p = base();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
    p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "10000");
    p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
    p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    KafkaProducer<String, String> prod = new KafkaProducer<>(p);
    prod.initTransactions();
    return prod;
  }

  /** rewind moves the consumer back to its group's committed offsets (the start if none). */
  private static void rewind(KafkaConsumer<String, String> consumer) {
    var assigned = consumer.assignment();
    if (assigned.isEmpty()) {
      return;
    }
    Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned);
    for (TopicPartition tp : assigned) {
      OffsetAndMetadata o = committed.get(tp);
      if (o == null) {
        consumer.seekToBeginning(List.of(tp));
      } else {
        consumer.seek(tp, o.offset());
      }
    }
  }

  private static void txnEtl(String bootstrap, String in, String out, String group, String txnId, int want,
      int abortPercent, int seconds) {
    long deadline = System.currentTimeMillis() + seconds * 1000L;
    java.util.Random rnd = new java.util.Random(42);
    int committed = 0, aborted = 0, failed = 0;
    long lastRecords = System.currentTimeMillis();
    KafkaProducer<String, String> producer = null;
    KafkaConsumer<String, String> consumer = null;
    while (committed < want && System.currentTimeMillis() < deadline) {
      try {
        if (producer == null) {
          producer = etlProducer(bootstrap, txnId);
          consumer = etlConsumer(bootstrap, in, group);
        }
        var records = consumer.poll(Duration.ofMillis(200));
        if (records.isEmpty()) {
          // A commit that failed on the client's side may have succeeded: the count can stay
          // below WANT with nothing left to read. Idle for 60 s after progress: done (a killed
          // broker can cost the consumer a group session timeout, 45 s by default).
          if (committed > 0 && System.currentTimeMillis() - lastRecords > 60_000) {
            break;
          }
          continue;
        }
        lastRecords = System.currentTimeMillis();
        producer.beginTransaction();
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
        for (ConsumerRecord<String, String> r : records) {
          producer.send(new ProducerRecord<>(out, r.key(), r.value()));
          next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
        }
        producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
        if (rnd.nextInt(100) < abortPercent) {
          producer.abortTransaction();
          aborted++;
          rewind(consumer);
          continue;
        }
        producer.commitTransaction();
        committed += records.count();
      } catch (org.apache.kafka.common.errors.ProducerFencedException
          | org.apache.kafka.common.errors.InvalidProducerEpochException
          | org.apache.kafka.common.errors.OutOfOrderSequenceException
          | org.apache.kafka.common.errors.UnsupportedVersionException
          | org.apache.kafka.common.errors.AuthorizationException
          | IllegalStateException e) {
        failed++;
        System.err.println("JavaClient: fatal, recreating: " + e);
        closeQuietly(producer, consumer);
        producer = null;
        consumer = null;
      } catch (org.apache.kafka.common.KafkaException e) {
        failed++;
        System.err.println("JavaClient: aborting after: " + e);
        try {
          producer.abortTransaction();
          rewind(consumer);
        } catch (Exception again) {
          System.err.println("JavaClient: abort failed, recreating: " + again);
          closeQuietly(producer, consumer);
          producer = null;
          consumer = null;
        }
      }
    }
    closeQuietly(producer, consumer);
    System.out.println("committed " + committed + " aborted " + aborted + " failed " + failed);
    if (committed == 0) {
      fail("nothing committed in " + seconds + " s");
    }
  }

  private static void closeQuietly(KafkaProducer<String, String> producer, KafkaConsumer<String, String> consumer) {
    try {
      if (producer != null) {
        producer.close(Duration.ofSeconds(5));
      }
    } catch (Exception e) {
      System.err.println("JavaClient: closing the producer: " + e);
    }
    try {
      if (consumer != null) {
        consumer.close(Duration.ofSeconds(5));
      }
    } catch (Exception e) {
      System.err.println("JavaClient: closing the consumer: " + e);
    }
  }
}
