"""`pykraft dev`: a local cluster of controller and broker processes on 127.0.0.1 (its plan
and `cluster.json` in `cluster.py`, the processes in `processes.py`, the commands in
`commands.py`)."""
