"""`python -m pykraft.broker run ...` is `pykraft broker run ...`."""

from pykraft.broker.cli import broker

broker()
