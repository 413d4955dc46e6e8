"""The Kafka protocol listener: unchanged Kafka clients (librdkafka, the Java client,
kafka-python, aiokafka, kcat, Spark's connector) talk to a pykraft broker through it, beside the
gRPC listener. Messages are kio's entities, generated from Kafka's JSON message schemas; each API
lives in a module of its own under `apis/` and calls the same broker code as the gRPC services.
"""
