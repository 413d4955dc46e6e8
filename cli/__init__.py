"""The `pykraft` command line: Kafka's admin tools, console producer and consumer, perf tools
and a local development cluster, built on `pykraft.client` (no library module imports this
package).

The console script is `pykraft.cli.main:main`; subcommands of other packages (`pykraft
controller ...`, `pykraft broker ...`) plug in through the `pykraft.commands` entry-point
group, so `cli` imports no server package.
"""
