// A test driver of Kafka's Java client (kafka-clients) with transactional.id, for the compatibility checks: the
// same run against Apache Kafka and against insync. Compiled at set-up against the assembled release's jars
// (chaos/kafka_tools.py).
//
//   java TxnDriver BOOTSTRAP TOPIC
//
// AdminClient creates TOPIC (3 partitions, RF 3, min.insync.replicas=2). A producer with a transactional.id
// commits a transaction over every partition, aborts one, and commits a last one; a second producer with the same
// transactional.id then fences the first, whose next transaction fails. A read_committed consumer must read the
// committed records only, and a read_uncommitted one every record. Every finding is one line "key=value" on
// stdout; the exit code is 0 only when every finding is as Kafka's semantics say. Then a consume-transform-produce
// loop reads TOPIC in a group and writes TOPIC-out, committing its input offsets in each transaction (KIP-447).
// The finalized transaction.version is printed: at 2 the producer runs transactions v2 (KIP-890), its partitions
// added by its produce requests and its epoch bumped by every commit or abort.
import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class TxnDriver {
    static final int PER_TRANSACTION = 30;
    static final long READ_MS = 30_000;
    static final List<String> SEND_FAILED = Collections.synchronizedList(new ArrayList<>());

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        String transactionVersion;
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            NewTopic created = new NewTopic(topic, 3, (short) 3).configs(Map.of("min.insync.replicas", "2"));
            admin.createTopics(List.of(created)).all().get(30, TimeUnit.SECONDS);
            // The producer runs transactions v2 (KIP-890) when the brokers finalize transaction.version 2.
            FinalizedVersionRange finalized = admin.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS)
                .finalizedFeatures().get("transaction.version");
            transactionVersion = finalized == null ? "none" : String.valueOf(finalized.maxVersionLevel());
        }
        Set<String> committed = new HashSet<>(), all = new HashSet<>();
        Producer<String, String> first = producer(bootstrap);
        first.initTransactions();
        transaction(first, topic, "c", PER_TRANSACTION, committed, all, true);
        transaction(first, topic, "a", PER_TRANSACTION, committed, all, false);
        transaction(first, topic, "l", 3, committed, all, true);
        String fenced = fence(bootstrap, first, topic);
        Set<String> readCommitted = read(bootstrap, topic, "read_committed", committed.size());
        Set<String> readUncommitted = read(bootstrap, topic, "read_uncommitted", all.size());
        int transformed = consumeTransformProduce(bootstrap, topic, committed.size());
        Set<String> output = read(bootstrap, topic + "-out", "read_committed", committed.size());
        System.out.println("transaction_version=" + transactionVersion);
        System.out.println("fenced=" + fenced);
        System.out.println("ctp_transformed=" + transformed);
        System.out.println("ctp_output_exact=" + output.equals(upper(committed)));
        System.out.println("read_committed=" + readCommitted.size());
        System.out.println("read_committed_exact=" + readCommitted.equals(committed));
        System.out.println("read_uncommitted=" + readUncommitted.size());
        System.out.println("read_uncommitted_exact=" + readUncommitted.equals(all));
        // On a failure, what was missing or extra, for the test's message.
        printDifference("read_committed", readCommitted, committed);
        printDifference("read_uncommitted", readUncommitted, all);
        if (!SEND_FAILED.isEmpty()) System.out.println("send_failed=" + SEND_FAILED);
        boolean ok = SEND_FAILED.isEmpty() && readCommitted.equals(committed) && readUncommitted.equals(all) && !fenced.equals("none")
            && transformed == committed.size() && output.equals(upper(committed));
        System.out.println("ok=" + ok);
        System.exit(ok ? 0 : 1);
    }

    static void printDifference(String name, Set<String> read, Set<String> expected) {
        Set<String> missing = new TreeSet<>(expected), extra = new TreeSet<>(read);
        missing.removeAll(read);
        extra.removeAll(expected);
        if (!missing.isEmpty()) System.out.println(name + "_missing=" + missing);
        if (!extra.isEmpty()) System.out.println(name + "_extra=" + extra);
    }

    static Set<String> upper(Set<String> values) {
        Set<String> out = new HashSet<>();
        for (String v : values) out.add(v.toUpperCase());
        return out;
    }

    /** A read_committed consumer of a group reads TOPIC; each poll's records go upper-cased to TOPIC-out in a
     *  transaction that also commits the consumer's positions (sendOffsetsToTransaction, KIP-447). Returns how
     *  many records went through once every partition's committed offset is its end. */
    static int consumeTransformProduce(String bootstrap, String topic, int expected) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            NewTopic out = new NewTopic(topic + "-out", 3, (short) 3).configs(Map.of("min.insync.replicas", "2"));
            admin.createTopics(List.of(out)).all().get(30, TimeUnit.SECONDS);
        }
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", "java-ctp");
        c.put("isolation.level", "read_committed");
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "earliest");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        int transformed = 0;
        long deadline = System.currentTimeMillis() + READ_MS;
        try (Consumer<String, String> consumer = new KafkaConsumer<>(c);
             Producer<String, String> producer = producer(bootstrap, "java-ctp-txn")) {
            producer.initTransactions();
            consumer.subscribe(List.of(topic));
            while (transformed < expected && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                if (records.isEmpty()) continue;
                producer.beginTransaction();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(topic + "-out", r.partition(), r.key(), r.value().toUpperCase()));
                }
                Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
                for (TopicPartition tp : records.partitions()) {
                    positions.put(tp, new OffsetAndMetadata(consumer.position(tp)));
                }
                producer.sendOffsetsToTransaction(positions, consumer.groupMetadata());
                producer.commitTransaction();
                transformed += records.count();
            }
        }
        return transformed;
    }

    static Producer<String, String> producer(String bootstrap) {
        return producer(bootstrap, "java-txn");
    }

    static Producer<String, String> producer(String bootstrap, String transactionalId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", transactionalId);
        p.put("max.block.ms", "60000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static void transaction(Producer<String, String> producer, String topic, String prefix, int count,
                            Set<String> committed, Set<String> all, boolean commit) throws Exception {
        producer.beginTransaction();
        List<String> values = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String value = prefix + "-" + i;
            producer.send(new ProducerRecord<>(topic, i % 3, "k", value), (metadata, error) -> {
                if (error != null) SEND_FAILED.add(value + ": " + error);
            });
            values.add(value);
        }
        producer.flush();
        if (commit) producer.commitTransaction(); else producer.abortTransaction();
        all.addAll(values);
        if (commit) committed.addAll(values);
    }

    /** A second producer with the same id fences the first: the first's next transaction fails; its class. */
    static String fence(String bootstrap, Producer<String, String> zombie, String topic) {
        try (Producer<String, String> current = producer(bootstrap)) {
            current.initTransactions();
            try {
                zombie.beginTransaction();
                zombie.send(new ProducerRecord<>(topic, 0, "k", "zombie")).get(60, TimeUnit.SECONDS);
                zombie.commitTransaction();
                return "none";
            } catch (Exception e) {
                Throwable cause = e.getCause() != null && !(e instanceof org.apache.kafka.common.KafkaException)
                    ? e.getCause() : e;
                return cause.getClass().getSimpleName();
            } finally {
                zombie.close(Duration.ofSeconds(5));
            }
        }
    }

    static Set<String> read(String bootstrap, String topic, String isolation, int expected) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("isolation.level", isolation);
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        Set<String> values = new HashSet<>();
        try (Consumer<String, String> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> partitions = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1),
                                                      new TopicPartition(topic, 2));
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long deadline = System.currentTimeMillis() + READ_MS, extra = Long.MAX_VALUE;
            while (System.currentTimeMillis() < Math.min(deadline, extra)) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) values.add(r.value());
                if (values.size() >= expected && extra == Long.MAX_VALUE) extra = System.currentTimeMillis() + 2_000;
            }
        }
        return values;
    }
}
