"""`python -m pykraft.quorum run ...` is `pykraft controller run ...`."""

from pykraft.quorum.cli import controller

controller()
