# The README's two commands: `make demo` and `make test`. Both set up what is missing first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# librdkafka's own test suite (`make compat`): the source tree @confluentinc/kafka-javascript ships on npm, built once
# per version outside the repo (tools/compat/build.sh).
COMPAT_VERSION := 1.10.1

.PHONY: setup test test-slow test-long demo bench lint clean compat compat-kafka-runs kafka kafka-streams spark-kafka-jars quix-venv

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@missing=""; command -v java >/dev/null 2>&1 || missing="$$missing default-jre-headless"; \
	command -v kcat >/dev/null 2>&1 || missing="$$missing kcat"; \
	test -f /usr/share/java/zookeeper.jar || missing="$$missing zookeeper"; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	command -v nft >/dev/null 2>&1 || missing="$$missing nftables"; \
	command -v iptables-legacy-restore >/dev/null 2>&1 || missing="$$missing iptables"; \
	command -v fusermount3 >/dev/null 2>&1 || missing="$$missing fuse3"; \
	command -v cc >/dev/null 2>&1 || missing="$$missing gcc libc6-dev"; \
	if [ -n "$$missing" ]; then echo "installing with apt:$$missing (Java for Spark, kcat for client tests, ZooKeeper for metadata.store=zookeeper, iproute2 and nftables for network partitions, iptables for latency where the kernel has no netem, fuse3 for the slow disk under a Kafka broker, gcc for the clock-step library)"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; fi
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[spark,test,dev]'
	@touch $(STAMP)

# Four workers on the CI machine's two cores: most tests wait on clusters or on Spark rather than compute. Each test
# file is one unit of work (a module's shared cluster stays in one process) and the Spark tests are one unit, beside
# the rest (tests/conftest.py). The long real-process scenarios are marked slow.
test: setup
	$(PY) -m pytest -n 4 --dist loadfile --ignore=tests/kafka_ref -m "not slow"

# The long real-process scenarios (campaigns, the seeds on real processes, the demo): minutes of both cores each, two
# at a time. CI runs them after make test and make compat.
test-slow: setup
	$(PY) -m pytest -n 2 --dist loadfile --ignore=tests/kafka_ref -m "slow and not long"

# Beyond CI's 45 minutes, run by hand: 10,000 partitions on real processes, the analysis on a Spark standalone
# cluster against local[*]. Their parts run in CI: 10,000 partitions in the simulator, the analysis on local[*].
test-long: setup
	$(PY) -m pytest -n 2 --dist loadfile --ignore=tests/kafka_ref -m long

# Spark's own Kafka connector and its jars, for `make compat` (tests/kafka_ref/test_spark_kafka_connector.py): fetched
# once with Maven into a cache outside the repository (insync/spark/connector_jars.py).
spark-kafka-jars: setup
	@command -v mvn >/dev/null 2>&1 || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q maven; }
	$(PY) -m insync.spark.connector_jars >/dev/null

# Apache Kafka from Maven Central (4.1, the newest 4.x, 3.9), once, into ~/.cache/insync/kafka: the reference
# that `make compat` runs insync beside. insync itself never needs it.
kafka: setup
	@command -v mvn >/dev/null 2>&1 || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q maven; }
	@command -v javac >/dev/null 2>&1 || { echo "installing a JDK with apt (javac, for Kafka's Java client driver)"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q default-jdk-headless; }
	@java -version 2>&1 | grep -qE 'version "(1[7-9]|[2-9][0-9])' || { echo "Kafka 4 needs Java 17 or later: $$(java -version 2>&1 | head -1)"; exit 1; }
	$(PY) tools/kafka/assemble.py

# Kafka Streams of the 4.1 release (kafka-streams and RocksDB), beside that release's jars in the same cache, for the
# Streams word count of tests/kafka_ref/test_kafka_streams_eos.py (chaos/kafka_dist.py with_streams).
kafka-streams: kafka
	$(PY) tools/kafka/assemble.py --streams 4.1

# quix-streams (a Python stream processor, tests/kafka_ref/test_quix_streams.py) in a venv of its own outside the
# repository: it pins a confluent-kafka older than insync's.
QUIX_VENV := $(or $(INSYNC_CACHE),$(HOME)/.cache/insync)/quix-venv
QUIX_VERSION := 3.28.1
quix-venv:
	@test -x $(QUIX_VENV)/bin/python && $(QUIX_VENV)/bin/python -c "import quixstreams; assert quixstreams.__version__ == '$(QUIX_VERSION)'" 2>/dev/null || \
		{ $(PYTHON) -m venv $(QUIX_VENV) && $(QUIX_VENV)/bin/pip install -q "quixstreams==$(QUIX_VERSION)"; }

# tests/kafka_ref on two workers, a test file each: its tests mostly wait on JVMs and clusters. librdkafka's suite
# runs beside them, its output printed after theirs: it waits on timeouts and rebalances (a tenth of the two cores).
compat: setup kafka kafka-streams spark-kafka-jars quix-venv
	@tests_dir=$$(tools/compat/build.sh $(COMPAT_VERSION)) || exit 1; \
	suite_log=$$(mktemp); \
	$(PY) tools/compat/run_librdkafka_tests.py "$$tests_dir" >"$$suite_log" 2>&1 & suite=$$!; \
	$(PY) -m pytest -n 2 --dist loadfile tests/kafka_ref; ref=$$?; \
	wait $$suite; suite_rc=$$?; echo "librdkafka's test suite against insync:"; cat "$$suite_log"; rm -f "$$suite_log"; \
	echo "make compat: tests/kafka_ref exit $$ref, librdkafka's suite exit $$suite_rc"; \
	[ $$ref -eq 0 ] && [ $$suite_rc -eq 0 ]

# All eight live Kafka runs analysed to their truth (make compat runs none: their recorded logs are analysed in
# make test), and Kafka under insync's clock steps: half an hour of both cores.
compat-kafka-runs: setup kafka
	INSYNC_KAFKA_RUNS=all $(PY) -m pytest -n 2 tests/kafka_ref/test_kafka_log_truth_live.py \
		tests/kafka_ref/test_clock_steps_on_kafka.py

demo: setup
	$(VENV)/bin/insync demo

bench: setup
	$(VENV)/bin/insync bench storage

lint: setup
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache
