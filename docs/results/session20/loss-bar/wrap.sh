#!/bin/bash
# one nezha host per rank, as in the lab (4 hosts x 1 rank)
export NEZHA_HOST_ID=h$RANK
exec /work/main/.venv/bin/python "$@"
