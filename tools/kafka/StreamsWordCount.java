// A Kafka Streams word count (kafka-streams of the release) for the compatibility checks: the same application run
// against Apache Kafka and against insync. Compiled at set-up against the assembled release's jars and its Streams
// jars (chaos/kafka_dist.py with_streams, chaos/kafka_tools.py).
//
//   java StreamsWordCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR
//
// Reads lines from INPUT, splits them into lower-case words, re-keys each word by itself (the "words" repartition
// topic), counts per word in the RocksDB store "counts" (its changelog topic compacted, created by Streams) and
// writes every new count to OUTPUT, with processing.guarantee=exactly_once_v2. The record cache is off, so each
// word read is one update of its count downstream: read_committed, a word's counts on OUTPUT are 1, 2, ... n.
// Runs until standard input closes, then closes the application; prints "key=value" lines on stdout as it goes
// (state changes, replaced stream threads) and exits 0 when it closed in time.
import java.io.InputStream;
import java.time.Duration;
import java.util.*;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.*;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.*;

public class StreamsWordCount {
    static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(60);

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: StreamsWordCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR");
            System.exit(2);
        }
        String bootstrap = args[0], applicationId = args[1], input = args[2], output = args[3], stateDir = args[4];
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        // Internal topics on every broker, so one broker down leaves each of them writable at min.insync.replicas=2.
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "3");
        props.put(StreamsConfig.topicPrefix("min.insync.replicas"), "2");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);

        KafkaStreams streams = new KafkaStreams(topology(input, output), props);
        streams.setStateListener((now, before) -> say("state", before + "->" + now));
        // A stream thread that dies on an error the client does not retry is replaced, as an application that
        // must keep running would configure; each replacement is reported.
        streams.setUncaughtExceptionHandler(e -> {
            say("thread_replaced", e.getClass().getSimpleName() + ": " + e.getMessage());
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();
        drain(System.in);
        boolean closed = streams.close(CLOSE_TIMEOUT);
        say("closed", Boolean.toString(closed));
        System.exit(closed ? 0 : 1);
    }

    static Topology topology(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts"))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    /** Reads until end of input: the test closes our standard input to stop the application. */
    static void drain(InputStream in) throws Exception {
        byte[] buffer = new byte[256];
        while (in.read(buffer) >= 0) {
        }
    }

    static synchronized void say(String key, String value) {
        System.out.println(key + "=" + value.replace('\n', ' '));
        System.out.flush();
    }
}
