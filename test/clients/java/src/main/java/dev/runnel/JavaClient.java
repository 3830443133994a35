package dev.runnel;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
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
 *     every ack; prints "acked N".
 * consume BOOTSTRAP TOPIC GROUP PROTOCOL WANT
 *     a group consumer (group.protocol=classic or consumer, i.e. KIP-848) subscribes, reads
 *     until it has WANT records (or 60 s pass), committing synchronously after each poll exactly
 *     the records it took, then closes (leaving the group); prints "PARTITION OFFSET VALUE" per
 *     record.
 * </pre>
 *
 * Exits 0 on success, 1 with the reason on stderr otherwise.
 */
public final class JavaClient {
  public static void main(String[] args) throws Exception {
    switch (args.length > 0 ? args[0] : "") {
      case "produce" -> produce(args[1], args[2], Integer.parseInt(args[3]));
      case "consume" -> consume(args[1], args[2], args[3], args[4], Integer.parseInt(args[5]));
      default -> fail("usage: produce BOOTSTRAP TOPIC N | consume BOOTSTRAP TOPIC GROUP PROTOCOL WANT");
    }
  }

  private static void fail(String why) {
    System.err.println("JavaClient: FAIL: " + why);
    System.exit(1);
  }

  private static void produce(String bootstrap, String topic, int n) throws Exception {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
      List<Future<RecordMetadata>> acks = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        acks.add(producer.send(new ProducerRecord<>(topic, Integer.toString(i), "j/" + i)));
      }
      for (Future<RecordMetadata> f : acks) {
        f.get();
      }
    }
    System.out.println("acked " + n);
  }

  private static void consume(String bootstrap, String topic, String group, String protocol, int want) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
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
}
