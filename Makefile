# The two commands a newcomer needs: `make run` and `make test`. Everything else is a step of those.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PACKAGES := proto server_common quorum broker metadata_log client spark mirror cli
TYPECHECK_TREE := build/typecheck/pykraft

.PHONY: run test venv proto proto-check lint typecheck-tree unit integration bench clean \
	chaos chaos-tools kafka-tools kafka-fuzz codec-python bench-peers

# Cython sources: a change to one rebuilds the extensions (pip install compiles them).
CYTHON_SOURCES := $(shell find $(PACKAGES) -name '*.pyx' -o -name '*.pxi' -o -name '*.pxd')

# Creates .venv and installs pykraft (editable) with its development tools.
$(STAMP): pyproject.toml setup.py $(CYTHON_SOURCES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

venv: $(STAMP)

# Starts a local cluster (3 controllers, 3 brokers; `pykraft dev up`) with a demo topic; Ctrl-C stops it.
# `make run SPARK_EXAMPLE=1` also runs the Spark pipeline examples/windowed_counts.py against it.
run: $(STAMP)
	$(BIN)/python deploy/local_cluster.py$(if $(SPARK_EXAMPLE), --spark-example)

# The whole suite: generated code fresh, lint and types clean, then every test; then the tests
# of the compiled hot loops' users again on their pure-Python twins (PYKRAFT_NO_EXTENSIONS=1).
test: proto-check lint chaos-tools kafka-tools
	$(BIN)/python -m pytest -q
	$(MAKE) codec-python

# The codecs', partitioner's, consumer's, producer's and snapshot loader's tests with the compiled
# extensions switched off.
CODEC_TESTS := tests/unit/proto tests/unit/client/test_partitioner.py \
	tests/unit/client/test_consumer.py tests/unit/client/test_consumer_records_extension.py \
	tests/unit/client/test_producer.py tests/unit/client/test_producer_idempotence.py \
	tests/unit/client/test_accumulator.py \
	tests/unit/client/test_consumer_arrow.py tests/unit/spark/test_read_range.py \
	tests/unit/client/test_open_batches_extension.py tests/unit/client/test_producer_in_flight.py \
	tests/unit/client/test_send_path_extension.py tests/unit/metadata_log/test_codec.py \
	tests/unit/metadata_log/test_image_loader.py tests/unit/metadata_log/test_partition_records.py
codec-python: $(STAMP)
	PYKRAFT_NO_EXTENSIONS=1 $(BIN)/python -m pytest -q $(CODEC_TESTS)

# The Debian package the chaos suite's network partitions need (iproute2: `ip netns`, routes),
# installed only when missing and only as root; elsewhere partitions are skipped, with the reason.
chaos-tools:
	@if command -v ip >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2; \
	else echo "chaos-tools: no iproute2 and cannot install it: partition faults will be skipped"; fi

# kcat (Debian package), an unchanged Kafka client tests/integration/test_kcat.py drives; installed
# only when missing and only as root, like chaos-tools; elsewhere that test is skipped, with the reason.
kafka-tools:
	@if command -v kcat >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat; \
	else echo "kafka-tools: no kcat and cannot install it: the kcat tests will be skipped"; fi

# Long Jepsen-style runs (tests/chaos/): `make chaos SECONDS=600 SEEDS=3`; PYKRAFT_SEED=N replays
# from seed N. Run it under `flock /tmp/pykraft-cluster.lock` where clusters share the machine.
SECONDS ?= 600
SEEDS ?= 1
chaos: $(STAMP) chaos-tools
	$(BIN)/python -m tests.chaos.runner --seconds $(SECONDS) --seeds $(SEEDS)

# Long runs of the Kafka protocol fuzzer (tests/fuzz/kafka_wire, whose short run is part of
# `make test`): `make kafka-fuzz EXAMPLES=20 SEEDS=5` runs it with EXAMPLES times its examples for
# SEEDS seeds from PYKRAFT_SEED (or a random one); each run prints its seed, PYKRAFT_SEED=N replays
# it. It starts a cluster: run it under `flock /tmp/pykraft-cluster.lock` where clusters share the
# machine.
EXAMPLES ?= 20
kafka-fuzz: $(STAMP)
	@first=$${PYKRAFT_SEED:-$$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}; \
	for seed in $$(seq $$first $$((first + $(SEEDS) - 1))); do \
		PYKRAFT_SEED=$$seed PYKRAFT_KAFKA_FUZZ_EXAMPLES=$(EXAMPLES) \
			$(BIN)/python -m pytest -q -p no:cacheprovider tests/fuzz/kafka_wire || exit 1; \
	done

unit: $(STAMP)
	$(BIN)/python -m pytest -q -m 'not integration'

integration: $(STAMP)
	$(BIN)/python -m pytest -q -m integration

proto: $(STAMP)
	$(BIN)/python tools/gen_proto.py

proto-check: $(STAMP)
	$(BIN)/python tools/gen_proto.py --check

# mypy cannot follow setuptools' editable import hook, so it reads the packages through a tree of
# links named the way they are imported (pykraft.<folder>).
typecheck-tree:
	mkdir -p $(TYPECHECK_TREE)
	for p in $(PACKAGES); do ln -sfn ../../../$$p $(TYPECHECK_TREE)/$$p; done

lint: $(STAMP) typecheck-tree
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy $(foreach p,$(PACKAGES),-p pykraft.$(p))
	$(BIN)/mypy tests bench tools deploy examples

# Benchmarks print their figures (noisy machine: compare ratios taken in one run).
bench: $(STAMP)
	$(BIN)/python bench/metadata_quorum.py
	$(BIN)/python bench/partition_log.py
	$(BIN)/python bench/record_batch_codec.py
	$(BIN)/python bench/kafka_data_path.py --mib 32
	$(BIN)/python bench/kafka_fetch_sendfile.py --mib 64
	$(BIN)/python bench/cluster.py --records 200000
	$(BIN)/python bench/idle_partitions.py --records 300000 --runs 1
	$(BIN)/python bench/follower_fetch_latency.py
	$(BIN)/python bench/latency.py --seconds 5
	$(BIN)/python bench/broker_scale.py
	$(BIN)/python bench/broker_restart.py --partitions 3000
	$(BIN)/python bench/log_open_close.py
	$(BIN)/python bench/client.py --records 200000
	$(BIN)/python bench/producer_pipelining.py --records 200000
	$(BIN)/python bench/groups.py --records 200000
	$(BIN)/python bench/spark.py --records 200000
	$(BIN)/python bench/spark_kafka.py --records 200000
	$(BIN)/python bench/kafka_compare.py --records 200000
	$(BIN)/python bench/mirror_throughput.py --records 200000

# The peers bench/client.py runs beside pykraft (../shared/bench/peers/README.md): redis-server,
# nats-server and rabbitmq-server (Debian packages) and a venv /tmp/peers/venv with their Python
# clients. The servers are installed only when missing and only as root, like chaos-tools;
# bench/client.py skips a peer that is missing, saying so.
PEERS_VENV := /tmp/peers/venv
PEER_SERVERS := redis-server nats-server rabbitmq-server
bench-peers:
	@missing=; for s in $(PEER_SERVERS); do [ -x /usr/bin/$$s ] || [ -x /usr/sbin/$$s ] \
		|| missing=1; done; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends redis-tools $(PEER_SERVERS); \
	else echo "bench-peers: cannot install $(PEER_SERVERS) (not root, or no apt-get)"; fi
	test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet 'redis[hiredis]' nats-py rstream

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache
