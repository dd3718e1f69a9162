// A test driver of Kafka's Java client (kafka-clients) for the compatibility checks: the same run against Apache
// Kafka and against insync. Compiled at set-up against the assembled release's jars (chaos/kafka_tools.py).
//
//   java ClientDriver BOOTSTRAP TOPIC RECORDS GROUP
//
// AdminClient creates TOPIC (3 partitions, RF 3, min.insync.replicas=2) and reads it back; a producer at its
// defaults (acks=all, idempotence on) and a consumer of GROUP with the classic protocol run at the same time;
// the consumer commits what it read, and a second consumer of the group then finds nothing left. Every finding
// is one line "key=value" on stdout; the exit code is 0 only when every record was acknowledged once and read
// once, in order within its partition.
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.*;

public class ClientDriver {
    static final long DEADLINE_MS = 120_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[3];
        int records = Integer.parseInt(args[2]);
        boolean ok = admin(bootstrap, topic);
        ExecutorService pool = Executors.newFixedThreadPool(2);
        Future<Integer> produced = pool.submit(() -> produce(bootstrap, topic, records));
        Future<Boolean> consumed = pool.submit(() -> consume(bootstrap, topic, group, records));
        int acked = produced.get(DEADLINE_MS, TimeUnit.MILLISECONDS);
        boolean read = consumed.get(DEADLINE_MS, TimeUnit.MILLISECONDS);
        pool.shutdown();
        int left = leftOver(bootstrap, topic, group);
        System.out.println("acknowledged=" + acked);
        System.out.println("left_after_commit=" + left);
        ok &= acked == records && read && left == 0;
        System.out.println("ok=" + ok);
        System.exit(ok ? 0 : 1);
    }

    static Properties common(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        return p;
    }

    static boolean admin(String bootstrap, String topic) throws Exception {
        try (Admin admin = Admin.create(common(bootstrap))) {
            NewTopic created = new NewTopic(topic, 3, (short) 3).configs(Map.of("min.insync.replicas", "2"));
            admin.createTopics(List.of(created)).all().get(30, TimeUnit.SECONDS);
            TopicDescription description = settled(admin, topic);
            boolean full = description.partitions().stream().allMatch(p -> p.isr().size() == 3 && p.leader() != null);
            Config config = admin.describeConfigs(List.of(new ConfigResource(ConfigResource.Type.TOPIC, topic)))
                .all().get().values().iterator().next();
            String minIsr = config.get("min.insync.replicas").value();
            int brokers = admin.describeCluster().nodes().get().size();
            boolean listed = admin.listTopics().names().get().contains(topic);
            System.out.println("admin_partitions=" + description.partitions().size());
            System.out.println("admin_isr_full=" + full);
            System.out.println("admin_min_isr=" + minIsr);
            System.out.println("admin_brokers=" + brokers);
            System.out.println("admin_listed=" + listed);
            try {
                admin.createTopics(List.of(created)).all().get(30, TimeUnit.SECONDS);
                System.out.println("admin_create_again=created");
                return false;
            } catch (ExecutionException e) {
                System.out.println("admin_create_again=" + e.getCause().getClass().getSimpleName());
            }
            return description.partitions().size() == 3 && full && "2".equals(minIsr) && brokers == 3 && listed;
        }
    }

    // CreateTopics returns once the controller has committed the topic; a broker learns of it from its metadata
    // a moment later (Kafka's AdminClient documents this), so the description is read until every partition has
    // its leader and full ISR, or the last one read is returned after 30 s.
    static TopicDescription settled(Admin admin, String topic) throws Exception {
        long deadline = System.currentTimeMillis() + 30_000;
        while (true) {
            try {
                TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                boolean full = description.partitions().stream().allMatch(p -> p.isr().size() == 3 && p.leader() != null);
                if (full || System.currentTimeMillis() > deadline) return description;
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException) || System.currentTimeMillis() > deadline) throw e;
            }
            Thread.sleep(100);
        }
    }

    static int produce(String bootstrap, String topic, int records) throws Exception {
        Properties p = common(bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        AtomicInteger acked = new AtomicInteger(), failed = new AtomicInteger();
        try (Producer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, "k" + (i % 97), Integer.toString(i)), (meta, error) -> {
                    if (error == null) acked.incrementAndGet(); else failed.incrementAndGet();
                });
            }
            producer.flush();
        }
        System.out.println("produce_failed=" + failed.get());
        return acked.get();
    }

    static Properties consumerProps(String bootstrap, String group) {
        Properties p = common(bootstrap);
        p.put("group.id", group);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return p;
    }

    static boolean consume(String bootstrap, String topic, String group, int records) {
        Set<String> values = new HashSet<>();
        Map<Integer, Long> lastOffset = new HashMap<>();
        boolean ordered = true;
        int duplicates = 0;
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        try (Consumer<String, String> consumer = new KafkaConsumer<>(consumerProps(bootstrap, group))) {
            consumer.subscribe(List.of(topic));
            while (values.size() < records && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    Long last = lastOffset.put(r.partition(), r.offset());
                    ordered &= last == null || last < r.offset();
                    if (!values.add(r.value())) duplicates++;
                }
                consumer.commitSync();
            }
        }
        System.out.println("consumed=" + values.size());
        System.out.println("consume_duplicates=" + duplicates);
        System.out.println("consume_ordered=" + ordered);
        return values.size() == records && duplicates == 0 && ordered;
    }

    static int leftOver(String bootstrap, String topic, String group) {
        int left = 0;
        try (Consumer<String, String> consumer = new KafkaConsumer<>(consumerProps(bootstrap, group))) {
            consumer.subscribe(List.of(topic));
            long until = System.currentTimeMillis() + 8_000;
            while (System.currentTimeMillis() < until) left += consumer.poll(Duration.ofMillis(500)).count();
        }
        return left;
    }
}
