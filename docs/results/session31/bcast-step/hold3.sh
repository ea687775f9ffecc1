#!/bin/bash
# The A B B A of the brief's bench compare again after the fix of the fused read's empty read
# (A3 B3 B4 A4, both rate pairs), with --reps-other 2: --reps sets only allreduce's
# repetitions, so the brief's command ran broadcast and reduce_scatter once a run in hold.sh.
RUNS="A3 B3 B4 A4" CMP_EXTRA="--reps-other 2 " exec "$(dirname "$(readlink -f "$0")")/hold.sh" compare
