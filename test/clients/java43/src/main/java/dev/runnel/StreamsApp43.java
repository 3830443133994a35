package dev.runnel;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.StreamsMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * A Kafka Streams 4.3.1 application for Runnel's tests:
 *
 * <pre>
 * BOOTSTRAP APP_ID IN OUT GUARANTEE GROUP_PROTOCOL THREADS STATE_DIR STOPFILE [APPLICATION_SERVER]
 * </pre>
 *
 * reads topic IN (string keys "GROUP/ANYTHING", values decimal integers), re-keys each record by
 * the part of its key before the first '/' (a repartition topic), keeps per new key the sum and
 * the count of the values it saw in a persistent store (a compacted changelog topic), and
 * writes every update as "SUM:COUNT" to topic OUT. The record cache is off, so each input
 * record makes exactly one update: under exactly_once_v2 the committed updates of a key carry
 * the counts 1, 2, 3, ... with no gap and no repeat, whatever failed. GUARANTEE is
 * processing.guarantee (exactly_once_v2 or at_least_once), GROUP_PROTOCOL is group.protocol
 * (classic or streams), THREADS is num.stream.threads. Runs until the file STOPFILE exists, then
 * closes and prints "closed". Prints "state OLD NEW" on each state change and "error ..." for an
 * uncaught exception (the client then shuts down, and the process exits with status 2). With
 * APPLICATION_SERVER (host:port, Interactive Queries' application.server), it prints, whenever
 * it changes while RUNNING, the metadata of every instance the group knows: "meta HOST:PORT
 * TOPIC-PARTITIONS..." lines (sorted) and then "meta end".
 */
public final class StreamsApp43 {
  public static void main(String[] args) throws Exception {
    if (args.length != 9 && args.length != 10) {
      System.err.println("usage: BOOTSTRAP APP_ID IN OUT GUARANTEE GROUP_PROTOCOL THREADS STATE_DIR STOPFILE [APPLICATION_SERVER]");
      System.exit(1);
    }
    Properties p = new Properties();
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[4]);
    p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, args[5]);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, args[6]);
    p.put(StreamsConfig.STATE_DIR_CONFIG, args[7]);
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
    // A killed instance leaves the group after 10 s, not the default 45 s.
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10000);
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
    p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    Path stop = Path.of(args[8]);
    if (args.length == 10) {
      p.put(StreamsConfig.APPLICATION_SERVER_CONFIG, args[9]);
    }

    StreamsBuilder b = new StreamsBuilder();
    b.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
        .groupBy((k, v) -> k.substring(0, Math.max(0, k.indexOf('/'))),
            Grouped.with("regroup", Serdes.String(), Serdes.String()))
        .aggregate(() -> "0:0", (k, v, agg) -> {
          int i = agg.indexOf(':');
          long sum = Long.parseLong(agg.substring(0, i)) + Long.parseLong(v.trim());
          long count = Long.parseLong(agg.substring(i + 1)) + 1;
          return sum + ":" + count;
        }, Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("totals")
            .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()))
        .toStream()
        .to(args[3], Produced.with(Serdes.String(), Serdes.String()));

    KafkaStreams streams = new KafkaStreams(b.build(), p);
    streams.setStateListener((now, before) -> {
      System.out.println("state " + before + " " + now);
      System.out.flush();
    });
    streams.setUncaughtExceptionHandler(e -> {
      System.out.println("error " + e);
      e.printStackTrace(System.out);
      System.out.flush();
      return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    streams.start();
    String lastMeta = "";
    while (!Files.exists(stop)) {
      KafkaStreams.State s = streams.state();
      if (s == KafkaStreams.State.ERROR || s == KafkaStreams.State.NOT_RUNNING) {
        System.out.flush();
        System.exit(2);
      }
      if (args.length == 10 && s == KafkaStreams.State.RUNNING) {
        List<String> lines = new ArrayList<>();
        for (StreamsMetadata m : streams.metadataForAllStreamsClients()) {
          List<String> tps = new ArrayList<>();
          for (TopicPartition tp : m.topicPartitions()) {
            tps.add(tp.topic() + "-" + tp.partition());
          }
          Collections.sort(tps);
          lines.add("meta " + m.host() + ":" + m.port() + " " + String.join(" ", tps));
        }
        Collections.sort(lines);
        String meta = String.join("\n", lines);
        if (!meta.equals(lastMeta)) {
          lastMeta = meta;
          System.out.println(meta + "\nmeta end");
          System.out.flush();
        }
      }
      Thread.sleep(100);
    }
    streams.close(Duration.ofSeconds(30));
    System.out.println("closed");
    System.out.flush();
  }
}
