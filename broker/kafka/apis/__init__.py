"""The Kafka APIs a broker serves, one module per family, each exporting `APIS`."""
