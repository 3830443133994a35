package dev.runnel;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A share consumer of kafka-clients 4.3.1 (ShareFetch v2: share.acquire.mode, RENEW):
 *
 * <pre>
 * BOOTSTRAP TOPIC GROUP ACQUIRE_MODE MAX_POLL_RECORDS RENEWS STOPFILE
 *     reads until the file STOPFILE exists, with share.acknowledgement.mode=explicit and the
 *     given share.acquire.mode and max.poll.records; prints "poll N" for each poll that returned
 *     N records, and "rec PARTITION OFFSET VALUE DELIVERY_COUNT RENEWED" for each record it is
 *     given (RENEWED: how often this consumer renewed it before). A record whose value starts
 *     with "slow/" is worked on for 400 ms and renewed (AcknowledgeType.RENEW), RENEWS times,
 *     before it is accepted; the others are accepted. Acknowledgements are committed after each
 *     poll (commitSync); "error ..." for a failed one.
 * </pre>
 */
public final class ShareClient43 {
  public static void main(String[] args) throws Exception {
    if (args.length != 7) {
      System.err.println("usage: BOOTSTRAP TOPIC GROUP ACQUIRE_MODE MAX_POLL_RECORDS RENEWS STOPFILE");
      System.exit(1);
    }
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
    p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
    p.put(ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG, args[3]);
    p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, args[4]);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    int renews = Integer.parseInt(args[5]);
    Path stop = Path.of(args[6]);
    Map<String, Integer> renewed = new HashMap<>();
    try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(p)) {
      consumer.subscribe(List.of(args[1]));
      while (!Files.exists(stop)) {
        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
        if (records.isEmpty()) {
          continue;
        }
        System.out.println("poll " + records.count());
        for (ConsumerRecord<String, String> r : records) {
          String key = r.partition() + "/" + r.offset();
          int n = renewed.getOrDefault(key, 0);
          System.out.println("rec " + r.partition() + " " + r.offset() + " " + r.value() + " "
              + r.deliveryCount().orElse((short) -1) + " " + n);
          if (r.value().startsWith("slow/") && n < renews) {
            Thread.sleep(400);
            consumer.acknowledge(r, AcknowledgeType.RENEW);
            renewed.put(key, n + 1);
          } else {
            consumer.acknowledge(r, AcknowledgeType.ACCEPT);
          }
        }
        try {
          consumer.commitSync();
        } catch (Exception e) {
          System.out.println("error " + e);
        }
        System.out.flush();
      }
    }
  }
}
